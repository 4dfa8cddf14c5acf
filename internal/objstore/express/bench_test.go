package express_test

import (
	"context"
	"github.com/strandkafka/strand/internal/objstore/express"
	"testing"
)

// BenchmarkPutExpress is the tier's write path on memory buckets: one
// 1 MiB flush to two of three zones per op, so what it measures is the
// tier's own CPU and allocations (the buckets' copies of the object
// included), not a store's latency.
//
//	go test -run '^$' -bench PutExpress -benchmem ./internal/objstore/express/
func BenchmarkPutExpress(b *testing.B) {
	tr := newTier(b, 3, 0, nil)
	obj := make([]byte, 1<<20)
	ctx := context.Background()
	b.SetBytes(int64(len(obj)))
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		seq++
		res, err := tr.x.PutExpress(ctx, dataKey(seq), obj, expressOpts)
		if err != nil {
			b.Fatal(err)
		}
		<-res.Settled
		// Keep the buckets small: the benchmark is the write, not memory.
		if err := tr.x.Delete(ctx, res.Key); err != nil {
			b.Fatal(err)
		}
	}
}

var expressOpts = express.PutOptions{}
