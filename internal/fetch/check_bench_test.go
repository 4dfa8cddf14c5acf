package fetch

import (
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// BenchmarkCheckBatches is the cost the read path adds to every byte it
// reads from the store: checkBatches over 1 MiB of the 16-record,
// 1 KiB-record batches BenchmarkFetch reads.
//
//	go test -run '^$' -bench BenchmarkCheckBatches ./internal/fetch/
func BenchmarkCheckBatches(b *testing.B) {
	var data []byte
	for i := 0; len(data) < 1<<20; i++ {
		data = append(data, batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024, Seed: uint64(i)})...)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkBatches(data); err != nil {
			b.Fatal(err)
		}
	}
}
