package agent_test

import (
	"context"
	"crypto/x509/pkix"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// BenchmarkProduceByListener produces 1 KiB records through one agent's
// PLAINTEXT and SSL (mTLS) listeners in one run, so their MB/s compare
// TLS's cost on the produce path with everything else equal. An op is
// one record; a producer keeps up to 10,000 in flight.
//
//	go test ./internal/agent -run '^$' -bench ProduceByListener -benchtime 200000x -count 5
func BenchmarkProduceByListener(b *testing.B) {
	ca := certstest.NewCA(b, "ca")
	server := ca.Server(b, "server")
	client := ca.Client(b, "client", pkix.Name{CommonName: "bench"})
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir:     b.TempDir(),
		Listeners:   "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		TLSCertFile: server.CertFile, TLSKeyFile: server.KeyFile,
		TLSClientCAFile: ca.CertFile, TLSClientAuth: "required",
		SnapshotInterval: agent.SnapshotsOff,
	}, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer stopAgent(b, a)
	tlsCfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: ca.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile})
	if err != nil {
		b.Fatal(err)
	}
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
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"PLAINTEXT", nil},
		{"SSL", []kgo.Opt{kgo.DialTLSConfig(tlsCfg)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			opts := append([]kgo.Opt{kgo.SeedBrokers(a.ListenerAddr(tc.name)), kgo.DefaultProduceTopic(topic),
				kgo.MaxBufferedRecords(10_000), kgo.ProducerLinger(0)}, tc.opts...)
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
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
		})
	}
}
