package segment_test

import (
	"fmt"
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/segment"
)

// flushBytes is the object size the benchmarks cut at, a plausible
// flush.bytes.
const flushBytes = 8 << 20

// BenchmarkWriterAdd adds batches of 1 KiB records round-robin over 64
// partitions, finishing and resetting the Writer at flushBytes as the
// flusher does, so footer encoding and buffer reuse are in the numbers.
func BenchmarkWriterAdd(b *testing.B) {
	for _, records := range []int{1, 16} {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			batch := batchtest.Build(b, batchtest.Options{Records: records, ValueBytes: 1024})
			w := segment.NewWriter()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if w.DataLen() >= flushBytes {
					w.Finish()
					w.Reset()
				}
				if _, err := w.Add(topic(1), int32(i%64), batch); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkWriterOutgrown builds objects twice the size their Writer
// started with, as the produce pipeline's new writers (sized from
// recent objects) get when load rises: each op is one whole object, so
// the regrowth and recopying of the buffer is in the numbers.
func BenchmarkWriterOutgrown(b *testing.B) {
	batch := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024})
	b.SetBytes(2 * flushBytes)
	b.ReportAllocs()
	for b.Loop() {
		w := segment.NewWriterSize(flushBytes)
		for i := 0; w.DataLen() < 2*flushBytes; i++ {
			if _, err := w.Add(topic(1), int32(i%64), batch); err != nil {
				b.Fatal(err)
			}
		}
		w.Finish()
	}
}

// benchObject is a finished flushBytes object of 16-record, 1 KiB-record
// batches over 64 partitions.
func benchObject(b *testing.B) []byte {
	batch := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024})
	w := segment.NewWriter()
	for i := 0; w.DataLen() < flushBytes; i++ {
		if _, err := w.Add(topic(1), int32(i%64), batch); err != nil {
			b.Fatal(err)
		}
	}
	return w.Finish()
}

func BenchmarkReadFooterFromTail(b *testing.B) {
	obj := benchObject(b)
	tail := obj[len(obj)-segment.DefaultTailBytes:]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := segment.ReadFooterFromTail(tail, int64(len(obj))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	obj := benchObject(b)
	b.SetBytes(int64(len(obj)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := segment.Verify(obj); err != nil {
			b.Fatal(err)
		}
	}
}
