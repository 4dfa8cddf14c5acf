// Package recordbatch owns Strand's handling of Kafka v2 record batches on
// the produce and fetch paths: splitting a Produce request's records into
// batches, validating a batch the way a Kafka broker does before it is
// stored, patching the few header fields a broker rewrites (base offset,
// partition leader epoch, LogAppendTime), and synthesizing the
// transaction-marker control batches the fetch path serves.
//
// Strand stores the client's batch bytes verbatim (compression included), so
// this package reads the fixed 61-byte header by hand rather than decoding
// whole batches with kmsg: nothing on the hot path allocates. Decoding records
// (and decompressing) is left to the consumer, as in Kafka.
//
// # Record batch v2 layout (all integers big-endian)
//
//	offset  size  field
//	     0     8  baseOffset            assigned by the broker; outside the CRC
//	     8     4  batchLength           bytes after this field (total size - 12)
//	    12     4  partitionLeaderEpoch  set by the broker; outside the CRC
//	    16     1  magic                 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes [21, end)
//	    21     2  attributes            see below; covered by the CRC from here on
//	    23     4  lastOffsetDelta       numRecords - 1 for a client batch
//	    27     8  firstTimestamp
//	    35     8  maxTimestamp          the append time under LogAppendTime
//	    43     8  producerId            -1 when not idempotent
//	    51     2  producerEpoch
//	    53     4  baseSequence          -1 when not idempotent
//	    57     4  numRecords
//	    61     -  records               possibly compressed
//
// The attributes bits:
//
//	bits 0-2  compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
//	bit  3    timestamp type: 0 CreateTime, 1 LogAppendTime
//	bit  4    transactional
//	bit  5    control (transaction markers)
//	bit  6    has delete horizon (log cleaner only)
//
// Magic 0 and 1 message sets share the first 17 bytes' shape (offset, size,
// then a CRC where v2 has the leader epoch, then magic at byte 16), which is
// how a batch walker can step over any of them and then refuse the old ones.
package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Byte offsets and sizes of the v2 header fields; see the package doc.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// HeaderSize is the size of the fixed v2 batch header; records follow.
	HeaderSize = 61
	// LogOverhead is the baseOffset and batchLength prefix every message
	// set entry of every magic starts with: batchLength counts the bytes
	// after it.
	LogOverhead = 12
	// minLengthV2 is the smallest batchLength a v2 batch can have: a header
	// with no records.
	minLengthV2 = HeaderSize - LogOverhead
	// minLengthLegacy is Kafka's smallest v0 message (crc, magic,
	// attributes, key and value lengths), the least a v0/v1 entry's size
	// field may claim before the entry is refused as corrupt.
	minLengthLegacy = 14
)

// Attribute bits.
const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// castagnoli is the CRC-32C table; the standard library uses the SSE4.2 /
// ARMv8 CRC instructions for it when the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is the codec in the low three attribute bits.
type Compression int8

// The codecs Kafka defines. Values 5-7 are refused by Validate.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// TimestampType is the meaning of a batch's timestamps (attribute bit 3).
type TimestampType int8

const (
	// CreateTime timestamps were set by the producer.
	CreateTime TimestampType = 0
	// LogAppendTime timestamps were set by the broker: every record's
	// timestamp is the batch's MaxTimestamp.
	LogAppendTime TimestampType = 1
)

// Header is the decoded fixed part of a v2 record batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after this field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the batch's total size in bytes, the 12-byte prefix included.
func (h Header) Size() int { return int(h.Length) + LogOverhead }

// Compression reports the batch's codec.
func (h Header) Compression() Compression { return Compression(h.Attributes & attrCompressionMask) }

// TimestampType reports whether timestamps are CreateTime or LogAppendTime.
func (h Header) TimestampType() TimestampType {
	if h.Attributes&attrLogAppendTime != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports the transactional attribute.
func (h Header) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports the control attribute (transaction markers).
func (h Header) IsControl() bool { return h.Attributes&attrControl != 0 }

// HasProducerID reports whether the batch is idempotent (Kafka's
// RecordBatch.hasProducerId: a producer id of -1 means none).
func (h Header) HasProducerID() bool { return h.ProducerID >= 0 }

// LastOffset is the offset of the batch's last record, given its BaseOffset.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// ParseHeader decodes the 61-byte header at the start of b. It checks only
// that the header is there and is magic 2; it does not check the CRC or that
// b holds the whole batch (Validate and CheckCRC do).
func ParseHeader(b []byte) (Header, error) {
	if len(b) <= offMagic {
		return Header{}, fmt.Errorf("%w: %d bytes, need %d for the header", ErrTruncated, len(b), HeaderSize)
	}
	if err := checkMagic(int8(b[offMagic])); err != nil {
		return Header{}, err
	}
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, need %d for the header", ErrTruncated, len(b), HeaderSize)
	}
	return parseHeader(b), nil
}

// parseHeader decodes a header known to be at least HeaderSize bytes.
func parseHeader(b []byte) Header {
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		Length:               int32(be.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[offNumRecords:])),
	}
}

// checkMagic sorts a magic byte the way Kafka does: 0 and 1 are real but
// refused for Produce v3+ (INVALID_RECORD), anything else is corruption.
func checkMagic(magic int8) error {
	switch magic {
	case 2:
		return nil
	case 0, 1:
		return fmt.Errorf("%w: magic %d", ErrOldMagic, magic)
	}
	return fmt.Errorf("%w: magic %d", ErrMagic, magic)
}

// Next returns the first whole message-set entry of b (a v2 batch, or a v0/v1
// message, told apart by the magic byte) and the bytes after it. It reads
// only the size and magic, never trusts a size beyond len(b), and does not
// allocate; Validate decides whether the entry is acceptable.
//
// Errors: ErrTruncated when b ends inside the entry, ErrBatchLength when the
// size field is below the minimum for its magic, ErrMagic for a magic Kafka
// never defined.
func Next(b []byte) (entry, rest []byte, err error) {
	if len(b) < LogOverhead {
		return nil, b, fmt.Errorf("%w: %d bytes left, need %d for a batch prefix", ErrTruncated, len(b), LogOverhead)
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	if length < minLengthLegacy {
		return nil, b, fmt.Errorf("%w: %d", ErrBatchLength, length)
	}
	if len(b) <= offMagic {
		return nil, b, fmt.Errorf("%w: %d bytes left, need %d to read the magic", ErrTruncated, len(b), offMagic+1)
	}
	switch magic := int8(b[offMagic]); magic {
	case 0, 1:
	case 2:
		if length < minLengthV2 {
			return nil, b, fmt.Errorf("%w: %d is below the v2 minimum %d", ErrBatchLength, length, minLengthV2)
		}
	default:
		return nil, b, fmt.Errorf("%w: magic %d", ErrMagic, magic)
	}
	// int64 arithmetic: length is at most MaxInt32, so this cannot wrap.
	total := int64(length) + LogOverhead
	if total > int64(len(b)) {
		return nil, b, fmt.Errorf("%w: batch claims %d bytes, %d left", ErrTruncated, total, len(b))
	}
	return b[:total:total], b[total:], nil
}

// Split walks a Produce request's records (or a stored chunk of back-to-back
// batches) into whole entries, which alias records. Every byte must belong to
// a whole entry.
//
// Kafka's produce path reports records holding no whole batch as
// INVALID_RECORD ("must have at least one record batch"); Split returns
// ErrNoBatch there. Kafka silently drops a partial batch after whole ones;
// Split refuses it with ErrTruncated (CORRUPT_MESSAGE), because no client
// sends one and acknowledging bytes Strand did not store would hide the bug.
func Split(records []byte) ([][]byte, error) {
	return AppendSplit(nil, records)
}

// AppendSplit is Split appending to dst, so a caller can reuse one slice
// across requests. On error it returns dst unchanged.
func AppendSplit(dst [][]byte, records []byte) ([][]byte, error) {
	// Count first so the result is allocated once and its size is bounded
	// by what the input really holds, not by anything the input claims.
	n, err := count(records)
	if err != nil {
		return dst, err
	}
	dst = growBatches(dst, n)
	for rest := records; len(rest) > 0; {
		var entry []byte
		entry, rest, _ = Next(rest) // count already walked this exact path
		dst = append(dst, entry)
	}
	return dst, nil
}

// count walks records and reports how many whole entries it holds.
func count(records []byte) (int, error) {
	if len(records) == 0 {
		return 0, fmt.Errorf("%w: empty records", ErrNoBatch)
	}
	n := 0
	for rest := records; len(rest) > 0; n++ {
		var err error
		if _, rest, err = Next(rest); err != nil {
			if n == 0 && isTruncated(err) {
				return 0, fmt.Errorf("%w: %w", ErrNoBatch, err)
			}
			return 0, fmt.Errorf("batch %d at byte %d: %w", n, len(records)-len(rest), err)
		}
	}
	return n, nil
}

func growBatches(dst [][]byte, n int) [][]byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	grown := make([][]byte, len(dst), len(dst)+n)
	copy(grown, dst)
	return grown
}
