//go:build unix

package agent_test

import (
	"context"
	"crypto/rand"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// BenchmarkProduceByListener produces 1 KiB records through one agent's
// PLAINTEXT and SSL (mTLS) listeners in one run, so their MB/s compare
// TLS's cost on the produce path with everything else equal. The
// listeners take turns, STRAND_BENCH_ROUNDS rounds of each (default 1;
// Go names the repeats #01, #02, ...), so a drift of the machine or of
// the agent's state does not favour one; the log is in memory, so TLS
// is not hidden behind its fsyncs (the objects go to files, kept out of
// memory). An op is one
// record (random bytes, sent uncompressed); a producer keeps up to
// 10,000 in flight.
//
//	STRAND_BENCH_ROUNDS=6 go test ./internal/agent -run '^$' -bench ProduceByListener -benchtime 200000x
func BenchmarkProduceByListener(b *testing.B) {
	pki := newTestPKI(b)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a := startListenersAgent(b, pki, true)
	tlsCfg := pki.clientTLS(b, true)
	const topic, recordBytes = "bench-listeners", 1 << 10
	adm, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	adm.Close()
	value := make([]byte, recordBytes)
	rand.Read(value)
	rounds := benchRounds(b)
	type listener struct {
		name string
		opts []kgo.Opt
	}
	var turns []listener
	for range rounds {
		turns = append(turns, listener{"PLAINTEXT", nil}, listener{"SSL", []kgo.Opt{kgo.DialTLSConfig(tlsCfg)}})
	}
	for _, tc := range turns {
		b.Run(tc.name, func(b *testing.B) {
			opts := append([]kgo.Opt{kgo.SeedBrokers(a.ListenerAddr(tc.name)), kgo.DefaultProduceTopic(topic),
				kgo.MaxBufferedRecords(10_000), kgo.ProducerLinger(0),
				// Uncompressed, so every byte crosses TLS.
				kgo.ProducerBatchCompression(kgo.NoCompression())}, tc.opts...)
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			// Connected and warmed before timing.
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(recordBytes)
			b.ReportAllocs()
			var failed atomic.Pointer[error]
			cpu0 := processCPU(b)
			b.ResetTimer()
			// Not b.Loop: the time must include the Flush, which waits
			// for every acknowledgement.
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.CompareAndSwap(nil, &err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			// CPU time, the agent's and the client's, is what TLS costs
			// whatever else the machine runs; wall time is not.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
		})
	}
}

// processCPU is the user and system CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFetchByListener reads one topic of 1 KiB records (random,
// uncompressed, in batches of about 100) from the start through one
// agent's PLAINTEXT and SSL listeners, taking turns as
// BenchmarkProduceByListener does. An op is one read of the whole topic
// by a new consumer.
//
//	STRAND_BENCH_ROUNDS=4 go test ./internal/agent -run '^$' -bench FetchByListener -benchtime 3x
func BenchmarkFetchByListener(b *testing.B) {
	pki := newTestPKI(b)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a := startListenersAgent(b, pki, false)
	tlsCfg := pki.clientTLS(b, false)
	const topic, recordBytes, records = "bench-fetch", 1 << 10, 50_000
	pcl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(100*recordBytes+1024))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kadm.NewClient(pcl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	rs := make([]*kgo.Record, records)
	for i := range rs {
		v := make([]byte, recordBytes)
		rand.Read(v)
		rs[i] = &kgo.Record{Value: v}
	}
	if err := pcl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	pcl.Close()

	rounds := benchRounds(b)
	for range rounds {
		for _, tc := range []struct {
			name string
			opts []kgo.Opt
		}{{"PLAINTEXT", nil}, {"SSL", []kgo.Opt{kgo.DialTLSConfig(tlsCfg)}}} {
			b.Run(tc.name, func(b *testing.B) {
				b.SetBytes(records * recordBytes)
				cpu0 := processCPU(b)
				for range b.N {
					cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.ListenerAddr(tc.name)),
						kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})}, tc.opts...)...)
					if err != nil {
						b.Fatal(err)
					}
					for got := 0; got < records; {
						fs := cl.PollFetches(ctx)
						if err := fs.Err0(); err != nil {
							b.Fatal(err)
						}
						got += fs.NumRecords()
					}
					cl.Close()
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// startListenersAgent starts an agent with a PLAINTEXT and an SSL
// listener (requiring client certificates when mTLS), its log in
// memory, stopped when the benchmark ends.
func startListenersAgent(b *testing.B, pki testPKI, mTLS bool) *agent.Agent {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, pki.serve(agent.Config{
		DataDir:          b.TempDir(),
		Listeners:        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		SnapshotInterval: agent.SnapshotsOff,
		Log:              "mem://" + b.Name(),
	}, mTLS), quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stopAgent(b, a) })
	return a
}

// benchRounds is STRAND_BENCH_ROUNDS, default 1.
func benchRounds(b *testing.B) int {
	s := os.Getenv("STRAND_BENCH_ROUNDS")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("STRAND_BENCH_ROUNDS=%q: want a positive number", s)
	}
	return n
}
