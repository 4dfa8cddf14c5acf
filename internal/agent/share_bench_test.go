package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// benchShareRecords is how many records one round consumes.
const benchShareRecords = 20000

// benchShareRounds names each round's topic and group.
var benchShareRounds atomic.Int64

// BenchmarkShareVsClassic measures records/s a group consumes from one
// agent (a 4-partition topic, records of 100 bytes): share groups of 1
// and 4 consumers accepting every record, against a classic group
// committing. Every share acquisition and acknowledgement is a write to
// the metadata log; a classic group's fetches are not.
//
//	go test ./internal/agent -run '^$' -bench BenchmarkShareVsClassic -benchtime 1x
func BenchmarkShareVsClassic(b *testing.B) {
	dir := b.TempDir()
	a := startBench(b, agent.Config{DataDir: filepath.Join(dir, "a"), KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		NoConsole: true, ShareConfigs: earliestShares{}})
	defer stopAgent(b, a)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 100)
	for _, mode := range []struct {
		name      string
		consumers int
		share     bool
	}{{"share-1", 1, true}, {"share-4", 4, true}, {"classic-1", 1, false}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				topic := fmt.Sprintf("bench-%s-%d", mode.name, benchShareRounds.Add(1))
				if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, topic); err != nil {
					b.Fatal(err)
				}
				var rs []*kgo.Record
				for j := range benchShareRecords {
					rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(j % 4), Value: value})
				}
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					b.Fatal(err)
				}
				var got atomic.Int64
				done := make(chan struct{})
				var once sync.Once
				var first atomic.Int64 // unix ns of the first record: joining is not throughput
				b.ResetTimer()
				start := time.Now()
				for range mode.consumers {
					opts := []kgo.Opt{kgo.SeedBrokers(a.KafkaAddr()), kgo.ConsumeTopics(topic)}
					if mode.share {
						opts = append(opts, kgo.ShareGroup(topic))
					} else {
						opts = append(opts, kgo.ConsumerGroup(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
					}
					ccl, err := kgo.NewClient(opts...)
					if err != nil {
						b.Fatal(err)
					}
					go func() {
						defer ccl.Close()
						for got.Load() < benchShareRecords {
							pctx, cancel := context.WithTimeout(ctx, time.Second)
							fs := ccl.PollFetches(pctx)
							cancel()
							n := 0
							fs.EachRecord(func(r *kgo.Record) {
								first.CompareAndSwap(0, time.Now().UnixNano())
								if mode.share {
									r.Ack(kgo.AckAccept)
								}
								n++
							})
							if !mode.share && n > 0 {
								_ = ccl.CommitUncommittedOffsets(ctx)
							}
							if got.Add(int64(n)) >= benchShareRecords {
								once.Do(func() { close(done) })
							}
						}
					}()
				}
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					b.Fatalf("consumed %d of %d records in 2 minutes", got.Load(), benchShareRecords)
				}
				if mode.share {
					// Acknowledged means the acks applied: every share
					// partition's start offset at its high watermark.
					for !allAcknowledged(a, topic, topic) {
						time.Sleep(time.Millisecond)
					}
				}
				el := time.Since(time.Unix(0, first.Load()))
				b.StopTimer()
				b.ReportMetric(time.Since(start).Seconds(), "s-with-join")
				b.ReportMetric(float64(benchShareRecords)/el.Seconds(), "records/s")
			}
		})
	}
}

// allAcknowledged reports whether every partition of topic has its
// share-partition start offset at its high watermark in a's copy.
func allAcknowledged(a *agent.Agent, group, topic string) bool {
	v := a.Replica().View()
	defer v.Close()
	tp, _, _ := v.Topic(topic)
	for p := range int32(4) {
		st, ok, err := v.ShareState(group, tp.ID, p)
		ps, _, _ := v.Partition(tp.ID, p)
		if err != nil || !ok || st.StartOffset != ps.HighWatermark() {
			return false
		}
	}
	return true
}
