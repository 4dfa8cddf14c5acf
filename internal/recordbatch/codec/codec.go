// Package codec owns the compression of record batches' records, with
// franz-go's codecs (the code a franz-go client runs): decompressing a
// batch's records to read them, and compressing records to build a
// batch. It is apart from package recordbatch so that the metadata state
// machine, which imports recordbatch, depends on no codec library.
package codec

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// compressors are kgo's, made once: each keeps pools of codec state (a
// zstd encoder is costly to make) and is safe for concurrent use, as a
// client's is.
var compressors = func() (m [recordbatch.CompressionZstd + 1]func() kgo.Compressor) {
	for c := range m {
		m[c] = sync.OnceValue(func() kgo.Compressor {
			cc, err := kgo.DefaultCompressor(kgoCodec(recordbatch.Compression(c)))
			if err != nil {
				return nil
			}
			return cc
		})
	}
	return m
}()

// RecordsOf returns the records section of a whole batch with header h,
// decompressed with the batch's codec, at most MaxRecordsBytes (bounded
// before it allocates: bounded.go); past it, or for records that do not
// decompress, the error wraps recordbatch.ErrRecords.
func RecordsOf(batch []byte, h recordbatch.Header) ([]byte, error) {
	raw := batch[recordbatch.HeaderSize:]
	c := h.Compression()
	if c == recordbatch.CompressionNone {
		return raw, nil
	}
	if c > recordbatch.CompressionZstd {
		return nil, fmt.Errorf("%w: codec %d", recordbatch.ErrCompression, c)
	}
	out, err := decompress(c, raw, MaxRecordsBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: decompressing %s: %v", recordbatch.ErrRecords, c, err)
	}
	return out, nil
}

// AppendBatch appends the batch of header s holding the encoded records
// (uncompressed), compressed with s.Compression.
func AppendBatch(dst []byte, s recordbatch.BatchSpec, records []byte) ([]byte, error) {
	if s.Compression != recordbatch.CompressionNone && len(records) > 0 {
		c := compressors[min(s.Compression, recordbatch.CompressionZstd)]()
		if c == nil || s.Compression > recordbatch.CompressionZstd {
			return nil, fmt.Errorf("codec: no compressor for %s", s.Compression)
		}
		out, used := c.Compress(new(bytes.Buffer), records)
		s.Compression, records = recordbatch.Compression(used), out
	}
	return recordbatch.AppendBatch(dst, s, records), nil
}

func kgoCodec(c recordbatch.Compression) kgo.CompressionCodec {
	switch c {
	case recordbatch.CompressionGzip:
		return kgo.GzipCompression()
	case recordbatch.CompressionSnappy:
		return kgo.SnappyCompression()
	case recordbatch.CompressionLZ4:
		return kgo.Lz4Compression()
	case recordbatch.CompressionZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}
