package produce_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// BenchmarkProduce: each op is one Produce call of one batch of 16 records
// of 1 KiB, to one of 8 partitions, from N concurrent producers.
//
//	go test -run '^$' -bench BenchmarkProduce -benchtime 2s ./internal/produce/
func BenchmarkProduce(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) (objstore.Store, sharedlog.Log)
	}{
		{"mem", func(b *testing.B) (objstore.Store, sharedlog.Log) { return memobj.New(), memlog.New() }},
		{"file", func(b *testing.B) (objstore.Store, sharedlog.Log) {
			dir := b.TempDir()
			s, err := fileobj.Open(filepath.Join(dir, "objects"))
			if err != nil {
				b.Fatal(err)
			}
			l, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			return s, l
		}},
	}
	for _, be := range backends {
		for _, producers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/producers=%d", be.name, producers), func(b *testing.B) {
				const partitions = 8
				store, log := be.open(b)
				counting := objstore.WithCounters(store)
				r := openReplica(b, log, "bench")
				topic := createTopic(b, r, "t", partitions)
				p, err := produce.New(produce.Config{
					Store: counting, Replica: r, AgentID: fmt.Sprintf("bench-%d", r.Incarnation()), Logger: quietLogger(),
				})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { p.Close(testCtx(b)) })

				batches := make([]produce.Batch, 64)
				for i := range batches {
					data := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024, Seed: uint64(i)})
					if batches[i], err = produce.BatchFrom(topic, int32(i%partitions), data); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(len(batches[0].Data)))
				b.ReportAllocs()
				ctx := testCtx(b)
				before := counting.Snapshot()
				applied := r.NextToApply()
				b.ResetTimer()

				var next atomic.Int64
				var wg sync.WaitGroup
				for range producers {
					wg.Go(func() {
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							res, err := p.Produce(ctx, batches[i%int64(len(batches)):][:1])
							if err != nil || res[0].Code != 0 {
								b.Errorf("Produce: %v, %+v", err, res)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				puts := counting.Snapshot().Sub(before).Op(objstore.OpPut).Requests
				b.ReportMetric(float64(b.N)/float64(max(puts, 1)), "calls/object")
				b.ReportMetric(float64(b.N)/float64(max(r.NextToApply()-applied, 1)), "calls/entry")
			})
		}
	}
}
