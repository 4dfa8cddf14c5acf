package cleaner

import (
	"fmt"
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// BenchmarkRound measures a whole round over batches in memory: Index
// over every batch, then Filter over every batch, with 100 keys updated
// 20 times (so most records go), 10 records of 100-byte values per
// batch, for each codec. Bytes are the input batches'.
func BenchmarkRound(b *testing.B) {
	for _, codec := range []recordbatch.Compression{recordbatch.CompressionNone, recordbatch.CompressionLZ4, recordbatch.CompressionZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			var batches [][]byte
			var size int64
			value := make([]byte, 100)
			for i := range 200 {
				s := spec{base: int64(i) * 10, codec: codec}
				for j := range 10 {
					s.recs = append(s.recs, rec{fmt.Appendf(nil, "key-%03d", (i*10+j)%100), value})
				}
				bt := build(b, s)
				batches = append(batches, bt)
				size += int64(len(bt))
			}
			b.SetBytes(size)
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				m := NewOffsetMap(1 << 20)
				for _, bt := range batches {
					if _, err := Index(m, bt, Aborted{}); err != nil {
						b.Fatal(err)
					}
				}
				f := &Filter{Map: m, End: m.Latest() + 1}
				out = out[:0]
				for _, bt := range batches {
					var err error
					if out, _, err = f.Batch(out, bt); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
