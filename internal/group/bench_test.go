package group

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// countingLog counts appends.
type countingLog struct {
	sharedlog.Log
	appends atomic.Int64
}

func (l *countingLog) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	l.appends.Add(1)
	return l.Log.Append(ctx, entry)
}

func (l *countingLog) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	return l.Log.(sharedlog.TailWaiter).WaitTail(ctx, after)
}

// BenchmarkOffsetCommit commits offsets from concurrent standalone
// consumers, one group each, and reports how many log entries a commit
// costs: meta's proposer cuts one entry from every commit queued while
// the previous append is in flight.
func BenchmarkOffsetCommit(b *testing.B) {
	for _, backend := range []string{"memlog", "filelog"} {
		for _, groups := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/groups=%d", backend, groups), func(b *testing.B) {
				var base sharedlog.Log
				if backend == "memlog" {
					base = memlog.New()
				} else {
					fl, err := filelog.Open(b.TempDir(), filelog.Options{Logger: quiet})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { fl.Close() })
					base = fl
				}
				log := &countingLog{Log: base}
				ctx := context.Background()
				rep, err := replica.Open(ctx, replica.Config{Dir: b.TempDir(), Log: log, WriterID: "w", Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rep.Close() })
				cfg := testConfig()
				cfg.Meta = rep
				c, err := New(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				if res, err := rep.Propose(ctx, meta.CreateTopic{Name: "t", Partitions: 1}); err != nil || res.Code != 0 {
					b.Fatal(err, res)
				}
				var next atomic.Int64
				b.SetParallelism(max(1, groups/2))
				before := log.appends.Load()
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					group := fmt.Sprintf("g-%d", next.Add(1))
					req := commitReq(group, "", -1, "t", 0, 0)
					for off := int64(1); pb.Next(); off++ {
						req.Topics[0].Partitions[0].Offset = off
						if code := c.OffsetCommit(ctx, req)(ctx)[0]; code != 0 {
							b.Errorf("commit: %d", code)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(log.appends.Load()-before)/float64(b.N), "entries/commit")
			})
		}
	}
}
