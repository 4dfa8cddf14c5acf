package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Decoding records is needed in two places only: a compacted topic's
// produce path, which must refuse records without a key as Kafka does,
// and the key compactor, which reads keys and rewrites batches. The
// fetch path never decodes. Compression is package codec's: this package
// stays free of codec libraries (the metadata state machine imports it).

// Record is one decoded v2 record. Key, Value and Headers alias the
// records' bytes.
type Record struct {
	// Offset and Timestamp are absolute: the batch's base offset and
	// first timestamp plus the record's deltas.
	Offset    int64
	Timestamp int64
	// Key and Value are nil when null; a record with a nil Value is a
	// tombstone.
	Key, Value []byte
	// Headers is the encoded header count and headers, as they are.
	Headers []byte
}

// DeleteHorizon reports the delete horizon the log cleaner stored in a
// batch (KIP-534: attribute bit 6, the horizon in firstTimestamp).
func (h Header) DeleteHorizon() (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.FirstTimestamp, true
}

// attrDeleteHorizon is attribute bit 6: firstTimestamp holds the delete
// horizon (KIP-534), not the first record's timestamp.
const attrDeleteHorizon = 0x40

// EachRecord decodes the n records of raw (a batch's records section,
// decompressed) and calls fn with each, stopping at fn's first error.
// Records alias raw.
func EachRecord(raw []byte, h Header, fn func(i int, r Record) error) error {
	for i := 0; i < int(h.NumRecords); i++ {
		length, m := binary.Varint(raw)
		if m <= 0 || length < 0 || length > int64(len(raw)-m) {
			return fmt.Errorf("%w: record %d of %d: bad length", ErrRecords, i, h.NumRecords)
		}
		r, err := decodeRecord(raw[m:m+int(length)], h)
		if err != nil {
			return fmt.Errorf("%w: record %d of %d: %s", ErrRecords, i, h.NumRecords, err)
		}
		raw = raw[m+int(length):]
		if err := fn(i, r); err != nil {
			return err
		}
	}
	if len(raw) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrRecords, len(raw), h.NumRecords)
	}
	return nil
}

func decodeRecord(b []byte, h Header) (Record, error) {
	if err := checkRecordBody(b); err != nil {
		return Record{}, err
	}
	b = b[1:] // attributes: unused in v2
	tsDelta, b, _ := varint(b, math.MinInt64, math.MaxInt64)
	offDelta, b, _ := varint(b, math.MinInt32, math.MaxInt32)
	var r Record
	r.Key, b = readBytes(b)
	r.Value, b = readBytes(b)
	r.Headers = b
	r.Offset = h.BaseOffset + offDelta
	r.Timestamp = h.FirstTimestamp + tsDelta
	if h.TimestampType() == LogAppendTime {
		r.Timestamp = h.MaxTimestamp
	}
	return r, nil
}

// readBytes reads a nullable length-prefixed field checkRecordBody
// already checked.
func readBytes(b []byte) ([]byte, []byte) {
	n, m := binary.Varint(b)
	b = b[m:]
	if n < 0 {
		return nil, b
	}
	return b[:n:n], b[n:]
}

// AppendRecord appends r encoded as a v2 record of a batch whose base
// offset is baseOffset and first timestamp baseTimestamp.
func AppendRecord(dst []byte, r Record, baseOffset, baseTimestamp int64) []byte {
	var body [3 * binary.MaxVarintLen64]byte
	n := 1 // attributes 0
	n += binary.PutVarint(body[n:], r.Timestamp-baseTimestamp)
	n += binary.PutVarint(body[n:], r.Offset-baseOffset)
	size := n + varintLen(int64(fieldLen(r.Key))) + len(r.Key) + varintLen(int64(fieldLen(r.Value))) + len(r.Value) + len(r.Headers)
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, body[:n]...)
	dst = binary.AppendVarint(dst, int64(fieldLen(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendVarint(dst, int64(fieldLen(r.Value)))
	dst = append(dst, r.Value...)
	return append(dst, r.Headers...)
}

func fieldLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

func varintLen(v int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], v)
}

// BatchSpec is the header of a batch being built by AppendBatch.
type BatchSpec struct {
	BaseOffset           int64
	LastOffsetDelta      int32
	PartitionLeaderEpoch int32
	// Compression is the codec the records given to AppendBatch are
	// already compressed with.
	Compression   Compression
	TimestampType TimestampType
	Transactional bool
	// DeleteHorizon, if set (HasDeleteHorizon), is stored as KIP-534
	// does: attribute bit 6, and the horizon as the first timestamp.
	HasDeleteHorizon bool
	DeleteHorizon    int64
	FirstTimestamp   int64
	MaxTimestamp     int64
	ProducerID       int64
	ProducerEpoch    int16
	BaseSequence     int32
	NumRecords       int32
}

// AppendBatch appends a whole v2 batch with header s and the records
// section records, already compressed with s.Compression (package
// codec compresses), computing the CRC. It does not allocate beyond
// dst's growth.
func AppendBatch(dst []byte, s BatchSpec, records []byte) []byte {
	codec := s.Compression
	attrs := int16(codec)
	if s.TimestampType == LogAppendTime {
		attrs |= attrLogAppendTime
	}
	if s.Transactional {
		attrs |= attrTransactional
	}
	first := s.FirstTimestamp
	if s.HasDeleteHorizon {
		attrs |= attrDeleteHorizon
		first = s.DeleteHorizon
	}
	start := len(dst)
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(s.BaseOffset))
	dst = be.AppendUint32(dst, uint32(HeaderSize-LogOverhead+len(records)))
	dst = be.AppendUint32(dst, uint32(s.PartitionLeaderEpoch))
	dst = append(dst, 2)
	dst = be.AppendUint32(dst, 0) // CRC, below
	dst = be.AppendUint16(dst, uint16(attrs))
	dst = be.AppendUint32(dst, uint32(s.LastOffsetDelta))
	dst = be.AppendUint64(dst, uint64(first))
	dst = be.AppendUint64(dst, uint64(s.MaxTimestamp))
	dst = be.AppendUint64(dst, uint64(s.ProducerID))
	dst = be.AppendUint16(dst, uint16(s.ProducerEpoch))
	dst = be.AppendUint32(dst, uint32(s.BaseSequence))
	dst = be.AppendUint32(dst, uint32(s.NumRecords))
	dst = append(dst, records...)
	batch := dst[start:]
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
	return dst
}
