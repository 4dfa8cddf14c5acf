package recordbatch_test

import (
	"bytes"
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// BenchmarkValidate measures the produce-path check of a 16-record batch of
// 1 KiB values (about 16 KiB, a typical linger-filled batch).
func BenchmarkValidate(b *testing.B) {
	for _, c := range []recordbatch.Compression{recordbatch.CompressionNone, recordbatch.CompressionLZ4, recordbatch.CompressionZstd} {
		b.Run(c.String(), func(b *testing.B) {
			batch := batchtest.Build(b, batchtest.Options{Records: 16, KeyBytes: 16, ValueBytes: 1024, Compression: c})
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := recordbatch.Validate(batch, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSplit(b *testing.B) {
	one := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024})
	records := bytes.Repeat(one, 8)
	dst := make([][]byte, 0, 8)
	b.SetBytes(int64(len(records)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = recordbatch.AppendSplit(dst[:0], records); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSetLogAppendTime(b *testing.B) {
	batch := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024})
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	ts := int64(0)
	for b.Loop() {
		ts++ // a new time each round, so the CRC is recomputed every time
		recordbatch.SetLogAppendTime(batch, ts)
	}
}

func BenchmarkAppendControlBatch(b *testing.B) {
	buf := make([]byte, 0, recordbatch.ControlBatchSize)
	b.ReportAllocs()
	for b.Loop() {
		buf = recordbatch.AppendControlBatch(buf[:0], 1, 0, true, 100, 1_700_000_000_000, 0)
	}
}
