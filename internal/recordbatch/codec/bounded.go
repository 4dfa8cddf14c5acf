package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// Decompression is bounded before it allocates, not after: a batch small
// enough for max.message.bytes can claim gigabytes (kgo's default
// decompressor allows 2 GiB), and a produce request to a compacted
// topic decompresses what a client sent. The codecs are kgo's libraries,
// read the way kgo reads them (snappy raw or in xerial framing, as the
// Java producer writes it); each stops at MaxRecordsBytes.

// MaxRecordsBytes bounds the decompressed records of one batch: far
// above any batch a producer sends under max.message.bytes at a sane
// compression ratio, and the memory one batch may cost.
const MaxRecordsBytes = 256 << 20

// errTooLarge: the records decompress past the bound.
var errTooLarge = errors.New("decompressed records exceed the bound")

var zstdDecoders = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(MaxRecordsBytes))
	return d
}}

// xerialPrefix starts snappy in the Java producer's xerial framing;
// eight bytes of version follow, then chunks of a big-endian length and
// a raw snappy block.
var xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// decompress returns src decompressed with c, at most max bytes
// (MaxRecordsBytes but in tests).
func decompress(c recordbatch.Compression, src []byte, max int) ([]byte, error) {
	switch c {
	case recordbatch.CompressionGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return readBounded(r, max)
	case recordbatch.CompressionLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(src)), max)
	case recordbatch.CompressionZstd:
		var d *zstd.Decoder
		if max == MaxRecordsBytes {
			d = zstdDecoders.Get().(*zstd.Decoder)
			defer zstdDecoders.Put(d)
		} else {
			var err error
			if d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(max))); err != nil {
				return nil, err
			}
			defer d.Close()
		}
		out, err := d.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, errTooLarge
		}
		return out, err
	case recordbatch.CompressionSnappy:
		if len(src) >= 16 && bytes.HasPrefix(src, xerialPrefix) {
			return xerial(src[16:], max)
		}
		if n, err := s2.DecodedLen(src); err != nil {
			return nil, err
		} else if n > max {
			return nil, errTooLarge
		}
		return s2.Decode(nil, src)
	}
	return nil, fmt.Errorf("codec %d", c)
}

// readBounded reads r to its end, failing past max bytes.
func readBounded(r io.Reader, max int) ([]byte, error) {
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if n > int64(max) {
		return nil, errTooLarge
	}
	return out.Bytes(), nil
}

// xerial decodes xerial-framed snappy chunks, checking the decoded
// lengths they claim before it allocates.
func xerial(src []byte, max int) ([]byte, error) {
	bad := errors.New("malformed xerial snappy framing")
	total := 0
	for rest := src; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, bad
		}
		size := int(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if size > len(rest) {
			return nil, bad
		}
		n, err := s2.DecodedLen(rest[:size])
		if err != nil {
			return nil, err
		}
		if total += n; total > max {
			return nil, errTooLarge
		}
		rest = rest[size:]
	}
	out := make([]byte, 0, total)
	for rest := src; len(rest) > 0; {
		size := int(binary.BigEndian.Uint32(rest))
		block, err := s2.Decode(out[len(out):cap(out)], rest[4:4+size])
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(block)]
		rest = rest[4+size:]
	}
	return out, nil
}

// ErrTooLarge is Decompress's error for a payload that decompresses past
// its bound.
var ErrTooLarge = errTooLarge

// Decompress returns src decompressed with c, failing past max bytes
// (ErrTooLarge):
// for payloads other than record batches that clients compress with
// Kafka's codecs (KIP-714 telemetry pushes).
func Decompress(c recordbatch.Compression, src []byte, max int) ([]byte, error) {
	if c == recordbatch.CompressionNone {
		if len(src) > max {
			return nil, errTooLarge
		}
		return src, nil
	}
	return decompress(c, src, max)
}
