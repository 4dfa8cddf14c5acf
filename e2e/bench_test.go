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
