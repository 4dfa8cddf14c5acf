package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors. Each maps to the Kafka error code a broker answers with;
// see ErrorCode. Returned errors wrap a sentinel with detail, so compare with
// errors.Is.
var (
	// ErrNoBatch: the records hold no whole batch. Kafka: INVALID_RECORD.
	ErrNoBatch = errors.New("recordbatch: records hold no whole record batch")
	// ErrMultipleBatches: more than one batch where Produce v3+ allows
	// exactly one per partition. Kafka: INVALID_RECORD.
	ErrMultipleBatches = errors.New("recordbatch: produce records hold more than one record batch")
	// ErrTruncated: the bytes end inside a batch. Kafka: CORRUPT_MESSAGE.
	ErrTruncated = errors.New("recordbatch: truncated record batch")
	// ErrBatchLength: the batchLength field is impossible (below the
	// header's size, or disagreeing with the bytes given). Kafka:
	// CORRUPT_MESSAGE.
	ErrBatchLength = errors.New("recordbatch: invalid batch length")
	// ErrMagic: a magic byte Kafka never defined. Kafka: CORRUPT_MESSAGE.
	ErrMagic = errors.New("recordbatch: invalid magic")
	// ErrOldMagic: a magic 0 or 1 message set, which Produce v3+ refuses.
	// Kafka: INVALID_RECORD.
	ErrOldMagic = errors.New("recordbatch: produce requests must use record batch magic 2")
	// ErrCRC: the stored CRC-32C does not match the bytes. Kafka:
	// CORRUPT_MESSAGE (retriable: the bytes may have been damaged in
	// flight).
	ErrCRC = errors.New("recordbatch: CRC-32C mismatch")
	// ErrTooLarge: the batch exceeds max.message.bytes. Kafka:
	// MESSAGE_TOO_LARGE.
	ErrTooLarge = errors.New("recordbatch: record batch larger than max.message.bytes")
	// ErrCompression: a codec Kafka does not define (attribute values
	// 5-7), or zstd on Produce before v7. Kafka: UNSUPPORTED_COMPRESSION_TYPE
	// for zstd; for an undefined codec Kafka fails with an internal error,
	// and Strand answers UNSUPPORTED_COMPRESSION_TYPE, which tells the
	// client what is wrong and is not retried.
	ErrCompression = errors.New("recordbatch: unsupported compression codec")
	// ErrBaseOffset: a client batch whose baseOffset is not 0. Kafka:
	// INVALID_RECORD.
	ErrBaseOffset = errors.New("recordbatch: client batch baseOffset must be 0")
	// ErrRecordCount: numRecords and lastOffsetDelta disagree or are not
	// positive. Kafka: INVALID_RECORD.
	ErrRecordCount = errors.New("recordbatch: invalid record count or offset range")
	// ErrControlBatch: a client tried to write a control batch. Kafka:
	// INVALID_RECORD.
	ErrControlBatch = errors.New("recordbatch: clients may not write control batches")
	// ErrSequence: an idempotent batch with a negative base sequence, or a
	// transactional batch with no producer id. Kafka: INVALID_RECORD.
	ErrSequence = errors.New("recordbatch: invalid producer id or sequence")
	// ErrTimestampType: a client batch claiming LogAppendTime. Kafka:
	// INVALID_TIMESTAMP.
	ErrTimestampType = errors.New("recordbatch: producers may not set the LogAppendTime timestamp type")
	// ErrRecords: the records of an uncompressed batch do not frame into
	// exactly numRecords well-formed records. Kafka: INVALID_RECORD.
	ErrRecords = errors.New("recordbatch: malformed records")
)

// errorCodes maps each sentinel to its Kafka error. Order does not matter:
// a returned error wraps exactly one sentinel, except Split's ErrNoBatch,
// which also wraps ErrTruncated and is listed first so it wins.
var errorCodes = []struct {
	err  error
	kerr *kerr.Error
}{
	{ErrNoBatch, kerr.InvalidRecord},
	{ErrMultipleBatches, kerr.InvalidRecord},
	{ErrTruncated, kerr.CorruptMessage},
	{ErrBatchLength, kerr.CorruptMessage},
	{ErrMagic, kerr.CorruptMessage},
	{ErrOldMagic, kerr.InvalidRecord},
	{ErrCRC, kerr.CorruptMessage},
	{ErrTooLarge, kerr.MessageTooLarge},
	{ErrCompression, kerr.UnsupportedCompressionType},
	{ErrBaseOffset, kerr.InvalidRecord},
	{ErrRecordCount, kerr.InvalidRecord},
	{ErrControlBatch, kerr.InvalidRecord},
	{ErrSequence, kerr.InvalidRecord},
	{ErrTimestampType, kerr.InvalidTimestamp},
	{ErrRecords, kerr.InvalidRecord},
}

// ErrorCode maps an error from this package to the Kafka error code a broker
// puts in the partition's produce response: 0 for nil, the code of a wrapped
// *kerr.Error as is, and UNKNOWN_SERVER_ERROR (-1) for anything else.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.kerr.Code
		}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

func isTruncated(err error) bool { return errors.Is(err, ErrTruncated) }

// ValidateProduce checks one partition's records from a Produce request of
// version produceVersion (3 or later: magic 2 only) the way Kafka's
// ProduceRequest.validateRecords and log append do, and returns the single
// batch they must hold. The batch aliases records.
//
// Kafka allows exactly one batch per partition in Produce v3+
// (ErrMultipleBatches otherwise) and zstd only from v7 (ErrCompression).
func ValidateProduce(records []byte, produceVersion int16, maxMessageBytes int) ([]byte, Header, error) {
	batch, rest, err := Next(records)
	if err != nil {
		if isTruncated(err) || len(records) == 0 {
			return nil, Header{}, fmt.Errorf("%w: %w", ErrNoBatch, err)
		}
		return nil, Header{}, err
	}
	if err := checkMagic(int8(batch[offMagic])); err != nil {
		return nil, Header{}, err
	}
	if len(rest) > 0 {
		// Kafka only asks whether a second whole batch follows; a partial
		// one it drops. Strand refuses either (see Split).
		if _, _, err := Next(rest); err != nil {
			return nil, Header{}, fmt.Errorf("after the first batch: %w", err)
		}
		return nil, Header{}, ErrMultipleBatches
	}
	h, err := Validate(batch, maxMessageBytes)
	if err != nil {
		return nil, Header{}, err
	}
	if produceVersion < 7 && h.Compression() == CompressionZstd {
		return nil, Header{}, fmt.Errorf("%w: zstd needs produce v7+, request is v%d", ErrCompression, produceVersion)
	}
	return batch, h, nil
}

// Validate checks one whole client-produced batch before it is stored, in
// the order Kafka's broker does (UnifiedLog.analyzeAndValidateRecords, then
// LogValidator.validateBatch), and returns its header. maxMessageBytes is the
// topic's max.message.bytes, compared with the whole batch size as Kafka
// does; zero or less disables that check.
//
// Beyond the header, Validate walks the records of an uncompressed batch to
// check they frame into exactly numRecords records, as Kafka's record
// iterator does. It does not decompress: Strand keeps the client's bytes as
// they are, so a compressed batch's records are first decoded by consumers,
// and per-record checks that need them (keys on compacted topics,
// message.timestamp.*.max.ms) are not made here.
//
// Validate does not modify batch and does not allocate unless it fails.
func Validate(batch []byte, maxMessageBytes int) (Header, error) {
	if len(batch) <= offMagic {
		return Header{}, fmt.Errorf("%w: %d bytes", ErrTruncated, len(batch))
	}
	if err := checkMagic(int8(batch[offMagic])); err != nil {
		return Header{}, err
	}
	if len(batch) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, below the %d-byte header", ErrBatchLength, len(batch), HeaderSize)
	}
	h := parseHeader(batch)
	if int64(h.Length)+LogOverhead != int64(len(batch)) {
		if int64(h.Length)+LogOverhead > int64(len(batch)) {
			return h, fmt.Errorf("%w: batchLength %d, %d bytes given", ErrTruncated, h.Length, len(batch))
		}
		return h, fmt.Errorf("%w: batchLength %d, %d bytes given", ErrBatchLength, h.Length, len(batch))
	}
	if h.BaseOffset != 0 {
		return h, fmt.Errorf("%w: it is %d", ErrBaseOffset, h.BaseOffset)
	}
	if maxMessageBytes > 0 && len(batch) > maxMessageBytes {
		return h, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(batch), maxMessageBytes)
	}
	if crc := crc32.Checksum(batch[offAttributes:], castagnoli); crc != h.CRC {
		return h, fmt.Errorf("%w: stored %#08x, computed %#08x", ErrCRC, h.CRC, crc)
	}
	if c := h.Compression(); c > CompressionZstd {
		return h, fmt.Errorf("%w: codec %d", ErrCompression, c)
	}
	if h.LastOffsetDelta < 0 || h.NumRecords <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.NumRecords) {
		return h, fmt.Errorf("%w: numRecords %d, lastOffsetDelta %d", ErrRecordCount, h.NumRecords, h.LastOffsetDelta)
	}
	if h.IsControl() {
		return h, ErrControlBatch
	}
	if h.HasProducerID() && h.BaseSequence < 0 {
		return h, fmt.Errorf("%w: sequence %d with producer id %d", ErrSequence, h.BaseSequence, h.ProducerID)
	}
	// Not a Kafka check: Kafka would store such a batch and leave it out
	// of transaction state. Strand's apply keys transactions by producer
	// id, so it refuses the batch rather than store one no marker can end.
	if h.IsTransactional() && !h.HasProducerID() {
		return h, fmt.Errorf("%w: transactional batch without a producer id", ErrSequence)
	}
	if h.TimestampType() == LogAppendTime {
		return h, ErrTimestampType
	}
	if h.Compression() == CompressionNone {
		if err := checkRecords(batch[HeaderSize:], h.NumRecords); err != nil {
			return h, err
		}
	}
	return h, nil
}

// CheckCRC verifies a stored batch's CRC-32C without the client-origin
// checks of Validate (a stored batch may carry LogAppendTime, for one).
func CheckCRC(batch []byte) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	if h.Size() != len(batch) {
		return fmt.Errorf("%w: batchLength %d, %d bytes given", ErrBatchLength, h.Length, len(batch))
	}
	if crc := crc32.Checksum(batch[offAttributes:], castagnoli); crc != h.CRC {
		return fmt.Errorf("%w: stored %#08x, computed %#08x", ErrCRC, h.CRC, crc)
	}
	return nil
}

// checkRecords checks that recs frames into exactly n v2 records and nothing
// else, the framing Kafka's DefaultRecord.readFrom enforces:
//
//	length varint, then length bytes of:
//	attributes int8, timestampDelta varlong, offsetDelta varint,
//	keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
//	headerCount varint, headerCount × (keyLength varint >= 0, key,
//	valueLength varint (-1 = null), value)
//
// Varints are zigzag, as in encoding/binary. It does not allocate.
func checkRecords(recs []byte, n int32) error {
	for i := int32(0); i < n; i++ {
		length, m := binary.Varint(recs)
		if m <= 0 || length < 0 || length > int64(len(recs)-m) {
			return fmt.Errorf("%w: record %d of %d: bad length", ErrRecords, i, n)
		}
		body := recs[m : m+int(length)]
		recs = recs[m+int(length):]
		if err := checkRecordBody(body); err != nil {
			return fmt.Errorf("%w: record %d of %d: %s", ErrRecords, i, n, err)
		}
	}
	if len(recs) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrRecords, len(recs), n)
	}
	return nil
}

// recordError is a static reason, so the hot path's error wrapping needs no
// formatting of its own.
type recordError string

func (e recordError) Error() string { return string(e) }

func checkRecordBody(b []byte) error {
	if len(b) < 1 {
		return recordError("no attributes")
	}
	b = b[1:]
	var ok bool
	if _, b, ok = varint(b, math.MinInt64, math.MaxInt64); !ok { // timestampDelta
		return recordError("bad timestamp delta")
	}
	if _, b, ok = varint(b, math.MinInt32, math.MaxInt32); !ok { // offsetDelta
		return recordError("bad offset delta")
	}
	if b, ok = skipBytes(b, -1); !ok { // key
		return recordError("bad key")
	}
	if b, ok = skipBytes(b, -1); !ok { // value
		return recordError("bad value")
	}
	headers, b, ok := varint(b, 0, math.MaxInt32)
	if !ok {
		return recordError("bad header count")
	}
	for ; headers > 0; headers-- {
		if b, ok = skipBytes(b, 0); !ok { // header keys are never null
			return recordError("bad header key")
		}
		if b, ok = skipBytes(b, -1); !ok {
			return recordError("bad header value")
		}
	}
	if len(b) != 0 {
		return recordError("bytes left after the headers")
	}
	return nil
}

// varint reads one zigzag varint within [lo, hi].
func varint(b []byte, lo, hi int64) (int64, []byte, bool) {
	v, m := binary.Varint(b)
	if m <= 0 || v < lo || v > hi {
		return 0, b, false
	}
	return v, b[m:], true
}

// skipBytes skips a varint length-prefixed field whose length may be as low
// as minLen (-1 for nullable fields).
func skipBytes(b []byte, minLen int64) ([]byte, bool) {
	n, b, ok := varint(b, minLen, math.MaxInt32)
	if !ok || n > int64(len(b)) {
		return b, false
	}
	if n < 0 {
		return b, true
	}
	return b[n:], true
}
