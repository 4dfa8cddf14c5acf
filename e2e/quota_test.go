package e2e

import (
	"context"
	"crypto/rand"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestQuotaHoldsProducer measures issue 14's quota acceptance on one
// embedded agent (file object store, file log): a producer with a
// producer_byte_rate quota of 1 MiB/s that sends as fast as its client
// lets it, and beside it a light producer without a quota (one 1 KiB
// record every 10 ms, acks=all). It prints the greedy producer's
// acknowledged rate against the quota, measured after Kafka's start-up
// burst (an empty history allows 10 windows of quota at once), and the
// light producer's latency alone and beside it. It asserts only that
// the run worked; the numbers are the measurement. STRAND_QUOTA_BENCH=off
// runs the same without the quota, for comparison:
//
//	STRAND_QUOTA_BENCH=1 go test -count=1 -v -run TestQuotaHoldsProducer ./e2e/
func TestQuotaHoldsProducer(t *testing.T) {
	mode := os.Getenv("STRAND_QUOTA_BENCH")
	if mode == "" {
		t.Skip("an 80 s measurement; set STRAND_QUOTA_BENCH=1 (or off, for no quota)")
	}
	const (
		quota       = 1 << 20
		recordBytes = 16 << 10
		topic       = "quota"
		baseline    = 5 * time.Second
		warmup      = 15 * time.Second
		measured    = 60 * time.Second
	)
	a := startAgent(t, agent.Config{})
	createTopic(t, a.KafkaAddr(), topic, 4)
	adm := kadm.NewClient(newClient(t, a.KafkaAddr()))
	ctx := context.Background()
	if mode != "off" {
		name := "greedy"
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}},
		}})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	light := newClient(t, a.KafkaAddr(), kgo.ClientID("light"), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var mu sync.Mutex
	var alone, beside []time.Duration
	greedyOn := atomic.Bool{}
	stop := make(chan struct{})
	lightDone := make(chan error, 1)
	go func() {
		v := make([]byte, 1<<10)
		for {
			select {
			case <-stop:
				lightDone <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
			on := greedyOn.Load()
			start := time.Now()
			if err := light.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
				lightDone <- err
				return
			}
			d := time.Since(start)
			mu.Lock()
			if on {
				beside = append(beside, d)
			} else {
				alone = append(alone, d)
			}
			mu.Unlock()
		}
	}()
	time.Sleep(baseline)

	greedy := newClient(t, a.KafkaAddr(), kgo.ClientID("greedy"), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedBytes(32<<20),
		// Requests of at most 4 x 128 KiB: a measurement over a minute
		// ends within one request of a throttle's end.
		kgo.ProducerBatchMaxBytes(128<<10))
	pool := make([]byte, 1<<20+recordBytes)
	rand.Read(pool)
	var acked atomic.Int64
	var failed atomic.Int64
	greedyOn.Store(true)
	start := time.Now()
	var from, to int64
	var fromAt, toAt time.Time
	for i := 0; ; i++ {
		el := time.Since(start)
		if fromAt.IsZero() && el >= warmup {
			fromAt, from = time.Now(), acked.Load()
		}
		if el >= warmup+measured {
			toAt, to = time.Now(), acked.Load()
			break
		}
		off := (i * recordBytes) % (1 << 20)
		greedy.Produce(ctx, &kgo.Record{Value: pool[off : off+recordBytes]}, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			acked.Add(int64(len(r.Value)))
		})
	}
	close(stop)
	if err := <-lightDone; err != nil {
		t.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d greedy records failed", n)
	}
	rate := float64(to-from) / toAt.Sub(fromAt).Seconds()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(alone)
	slices.Sort(beside)
	pct := func(ds []time.Duration, p int) time.Duration { return ds[len(ds)*p/100] }
	t.Logf("greedy producer (quota %s): %.0f B/s acknowledged over %v after a %v warm-up, %.1f%% of %d B/s",
		mode, rate, measured, warmup, 100*rate/quota, quota)
	t.Logf("light producer alone:  p50 %v p99 %v (%d records)", pct(alone, 50), pct(alone, 99), len(alone))
	t.Logf("light producer beside: p50 %v p99 %v (%d records)", pct(beside, 50), pct(beside, 99), len(beside))
	if len(alone) == 0 || len(beside) == 0 || to == from {
		t.Fatal("the run measured nothing")
	}
}

// TestQuotaHoldsConsumer is the fetch side: a consumer with a
// consumer_byte_rate quota of 2 MiB/s reading a topic that holds far
// more, measured after the start-up burst like the producer above:
//
//	STRAND_QUOTA_BENCH=1 go test -count=1 -v -run TestQuotaHoldsConsumer ./e2e/
func TestQuotaHoldsConsumer(t *testing.T) {
	mode := os.Getenv("STRAND_QUOTA_BENCH")
	if mode == "" {
		t.Skip("a 60 s measurement; set STRAND_QUOTA_BENCH=1 (or off, for no quota)")
	}
	const (
		quota       = 2 << 20
		recordBytes = 16 << 10
		topicBytes  = 256 << 20
		topic       = "quota-read"
		warmup      = 15 * time.Second
		measured    = 40 * time.Second
	)
	a := startAgent(t, agent.Config{})
	createTopic(t, a.KafkaAddr(), topic, 4)
	ctx := context.Background()
	prod := newClient(t, a.KafkaAddr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	pool := make([]byte, 1<<20+recordBytes)
	rand.Read(pool)
	for i := 0; i < topicBytes/recordBytes; i++ {
		off := (i * recordBytes) % (1 << 20)
		prod.Produce(ctx, &kgo.Record{Value: pool[off : off+recordBytes]}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if mode != "off" {
		adm := kadm.NewClient(newClient(t, a.KafkaAddr()))
		name := "reader"
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: quota}},
		}})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reader := newClient(t, a.KafkaAddr(), kgo.ClientID("reader"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	start := time.Now()
	var read, from int64
	var fromAt time.Time
	for {
		el := time.Since(start)
		if fromAt.IsZero() && el >= warmup {
			fromAt, from = time.Now(), read
		}
		if el >= warmup+measured || read >= topicBytes {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := reader.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if fe.Err != context.DeadlineExceeded {
				t.Fatalf("fetch: %v", fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { read += int64(len(r.Value)) })
	}
	if fromAt.IsZero() || read >= topicBytes {
		t.Fatalf("read the whole topic (%d bytes) within %v: nothing measured", read, time.Since(start))
	}
	rate := float64(read-from) / time.Since(fromAt).Seconds()
	t.Logf("consumer (quota %s): %.0f B/s read over %v after a %v warm-up, %.1f%% of %d B/s",
		mode, rate, measured, warmup, 100*rate/quota, quota)
}
