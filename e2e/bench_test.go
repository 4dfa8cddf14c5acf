package e2e

import (
	"context"
	"crypto/rand"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// BenchmarkProduce1KiB is the first measurement of issue 3: one agent
// (in-process, file object store and file log in a temp dir, default
// flush settings), 1 KiB records from a franz-go producer with acks=all
// and its default linger, into 4 partitions. MB/s comes from SetBytes;
// p50-ms and p99-ms are per-record produce latency, from the Produce call
// to its promise, so they include the time a record waits in the
// client's buffer (at most kgo's default 10,000 records) behind the
// records before it: this is latency under full load, not at idle.
//
// Idempotence is off: the agent does not serve InitProducerID yet.
//
//	go test -run '^$' -bench Produce1KiB -benchtime 200000x ./e2e/
func BenchmarkProduce1KiB(b *testing.B) {
	const (
		recordBytes = 1 << 10
		partitions  = 4
		topic       = "bench"
	)
	a := startAgent(b, agent.Config{})
	createTopic(b, a.KafkaAddr(), topic, partitions)
	cl := newClient(b, a.KafkaAddr(),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		// kgo compresses with snappy by default; measure the bytes as
		// sent, like a producer with compression.type=none.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	// Each record gets its own slice of a random pool, so neither a
	// codec nor the page cache sees one value repeated.
	const poolBytes = 64 << 20
	pool := make([]byte, poolBytes+recordBytes)
	rand.Read(pool)
	valueAt := func(i int) []byte {
		off := (i * recordBytes) % poolBytes
		return pool[off : off+recordBytes]
	}
	value := valueAt(0)
	ctx := context.Background()

	// Load metadata and open the connection before timing.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}

	latencies := make([]time.Duration, b.N)
	var failed atomic.Int64
	var firstErr atomic.Value
	b.SetBytes(recordBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: valueAt(i)}, func(_ *kgo.Record, err error) {
			latencies[i] = time.Since(start)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d records failed, first: %v", n, b.N, firstErr.Load())
	}
	// Every record took an offset: the numbers measure real commits.
	var stored int64
	for _, end := range endOffsets(b, a.KafkaAddr(), topic) {
		stored += end
	}
	if want := int64(b.N) + 1; stored != want {
		b.Fatalf("%d records stored, want %d", stored, want)
	}
	slices.Sort(latencies)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(latencies[len(latencies)/2]), "p50-ms")
	b.ReportMetric(ms(latencies[len(latencies)*99/100]), "p99-ms")
}

// BenchmarkTxnCommit measures whole transactions on one embedded agent
// (file log, file objects): per op, BeginTransaction, 10 records of 1 KiB
// over 2 partitions with ProduceSync, and EndTransaction(commit), so one
// op is the latency a transactional producer sees per transaction:
// produce (flush and commit through the log) plus the EndTxn that writes
// the markers. txn-p50-ms and txn-p99-ms are per transaction.
//
//	go test -run '^$' -bench TxnCommit -benchtime 300x ./e2e/
func BenchmarkTxnCommit(b *testing.B) {
	const (
		records     = 10
		recordBytes = 1 << 10
		topic       = "txn-bench"
	)
	a := startAgent(b, agent.Config{})
	createTopic(b, a.KafkaAddr(), topic, 2)
	cl := newClient(b, a.KafkaAddr(),
		kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID("bench"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	value := make([]byte, recordBytes)
	rand.Read(value)
	ctx := context.Background()
	batch := make([]*kgo.Record, records)
	txn := func() {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for i := range batch {
			batch[i] = &kgo.Record{Value: value}
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	txn() // metadata, producer id and connections before timing

	latencies := make([]time.Duration, b.N)
	b.SetBytes(records * recordBytes)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		txn()
		latencies[i] = time.Since(start)
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "txn-p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "txn-p99-ms")
}
