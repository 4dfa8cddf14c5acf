package meta

// CommitObject: a data object's batches get their offsets. This is the
// produce path's one command, so its apply is the hot one: partition
// states go through the Applier's cache, and index keys and values are
// built in reused buffers.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxObjectKeyBytes bounds a committed object key (part of what apply
// means, like apply's other limits).
const maxObjectKeyBytes = 1024

// CommitObject records a data object holding record batches of many
// partitions. Apply gives each batch the next offsets of its partition in
// log order and writes one offset index entry per batch.
// Result: Batches, one per batch in order. A batch of a missing topic or
// partition gets UNKNOWN_TOPIC_OR_PARTITION and the others still commit;
// an object key committed before gets DUPLICATE_RESOURCE for every batch.
// An idempotent batch may get INVALID_PRODUCER_EPOCH,
// OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_RECORD, or, as a duplicate, the
// base offset it got the first time and no new offsets.
type CommitObject struct {
	ObjectKey  string
	ObjectSize int64
	Batches    []CommitBatch
}

// CommitBatch is a byte range of an object holding record batches of one
// partition.
type CommitBatch struct {
	TopicID   TopicID
	Partition int32
	// Position and Length are the byte range in the object.
	Position int64
	Length   int64
	// Records is the number of offsets the range takes; BatchCount is
	// the number of Kafka record batches in it.
	Records        int32
	BatchCount     int32
	FirstTimestamp int64
	MaxTimestamp   int64
	// Producer fields are stored in the index; with ProducerID >= 0
	// apply checks them for idempotence (producer.go): the range holds
	// sequences BaseSequence to BaseSequence+Records-1.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Transactional batches must belong to an ongoing transaction that
	// added the partition (txn.go); their range counts towards the
	// partition's last stable offset until the transaction ends.
	Transactional bool
}

func (CommitObject) Type() CommandType { return TypeCommitObject }
func (CommitObject) version() uint16   { return 2 }

// minCommitBatchBytes is the smallest encoded CommitBatch: the id, ten
// one-byte varints and (version 2) the transactional flag.
const (
	minCommitBatchBytesV1 = 16 + 10
	minCommitBatchBytes   = minCommitBatchBytesV1 + 1
)

func (c CommitObject) appendPayload(b []byte) []byte {
	b = appendString(b, c.ObjectKey)
	b = appendVarint(b, c.ObjectSize)
	b = appendUvarint(b, uint64(len(c.Batches)))
	for i := range c.Batches {
		cb := &c.Batches[i]
		b = append(b, cb.TopicID[:]...)
		b = appendVarint(b, int64(cb.Partition))
		b = appendVarint(b, cb.Position)
		b = appendVarint(b, cb.Length)
		b = appendVarint(b, int64(cb.Records))
		b = appendVarint(b, int64(cb.BatchCount))
		b = appendVarint(b, cb.FirstTimestamp)
		b = appendVarint(b, cb.MaxTimestamp)
		b = appendVarint(b, cb.ProducerID)
		b = appendVarint(b, int64(cb.ProducerEpoch))
		b = appendVarint(b, int64(cb.BaseSequence))
		b = appendBool(b, cb.Transactional)
	}
	return b
}

func decodeCommitObjectV1(p []byte) (CommitObject, error) { return decodeCommitObject(p, 1) }
func decodeCommitObjectV2(p []byte) (CommitObject, error) { return decodeCommitObject(p, 2) }

// decodeCommitObject decodes version 1 (no Transactional flag) and 2.
func decodeCommitObject(p []byte, version uint16) (CommitObject, error) {
	r := &reader{b: p}
	var co CommitObject
	co.ObjectKey = r.string()
	co.ObjectSize = r.varint()
	minBytes := minCommitBatchBytes
	if version < 2 {
		minBytes = minCommitBatchBytesV1
	}
	n := r.count(minBytes)
	if n > 0 {
		co.Batches = make([]CommitBatch, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		cb := &co.Batches[i]
		r.fixed(cb.TopicID[:])
		cb.Partition = r.int32()
		cb.Position = r.varint()
		cb.Length = r.varint()
		cb.Records = r.int32()
		cb.BatchCount = r.int32()
		cb.FirstTimestamp = r.varint()
		cb.MaxTimestamp = r.varint()
		cb.ProducerID = r.varint()
		cb.ProducerEpoch = r.int16()
		cb.BaseSequence = r.int32()
		if version >= 2 {
			cb.Transactional = r.bool()
		}
	}
	return co, r.done()
}

func (a *Applier) commitObject(c CommitObject) (Result, error) {
	res := Result{Batches: make([]BatchResult, len(c.Batches))}
	fail := func(e *kerr.Error, format string, args ...any) Result {
		r := failed(e, format, args...)
		r.Batches = res.Batches
		for i := range r.Batches {
			r.Batches[i] = BatchResult{Code: e.Code}
		}
		return r
	}
	if c.ObjectKey == "" || len(c.ObjectKey) > maxObjectKeyBytes || c.ObjectSize < 0 {
		return fail(kerr.InvalidRequest, "invalid object key or size"), nil
	}
	okey := objectKey(c.ObjectKey)
	if _, ok, err := a.get(okey); err != nil || ok {
		return fail(kerr.DuplicateResource, "object %q committed before", c.ObjectKey), err
	}
	for i := range c.Batches {
		cb := &c.Batches[i]
		br := &res.Batches[i]
		if !validCommitBatch(cb, c.ObjectSize) {
			br.Code = kerr.InvalidRequest.Code
			continue
		}
		cp, err := a.part(partRef{cb.TopicID, cb.Partition})
		if err != nil {
			return Result{}, err
		}
		if !cp.exists {
			br.Code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		if cp.st.NextOffset > math.MaxInt64-int64(cb.Records) {
			br.Code = kerr.InvalidRequest.Code
			continue
		}
		txn, done, err := a.checkTxnBatch(cb, br)
		if err != nil {
			return Result{}, err
		}
		if done {
			continue
		}
		producer, done, err := a.checkProducer(cb, cp, br)
		if err != nil {
			return Result{}, err
		}
		if done {
			continue
		}
		br.BaseOffset = cp.st.NextOffset
		br.LogStartOffset = cp.st.LogStartOffset
		cp.st.NextOffset += int64(cb.Records)
		cp.dirty = true
		a.keyBuf = indexKey(a.keyBuf[:0], cb.TopicID, cb.Partition, br.BaseOffset)
		var attrs uint64
		if cb.Transactional {
			attrs = indexAttrTransactional
		}
		a.valBuf = encodeIndexValueAttrs(a.valBuf[:0], c.ObjectKey, cb, attrs)
		if err := a.b.Set(a.keyBuf, a.valBuf); err != nil {
			return Result{}, err
		}
		if err := a.recordProducer(producer, br.BaseOffset); err != nil {
			return Result{}, err
		}
		if err := a.recordTxnFirst(txn, br.BaseOffset); err != nil {
			return Result{}, err
		}
	}
	rec := objectRecord{Size: c.ObjectSize, CommittedAt: a.clock, Batches: int32(len(c.Batches))}
	if err := a.b.Set(okey, rec.encode()); err != nil {
		return Result{}, err
	}
	return res, nil
}

func validCommitBatch(cb *CommitBatch, objectSize int64) bool {
	return cb.Partition >= 0 && cb.Records > 0 && cb.BatchCount > 0 &&
		cb.Position >= 0 && cb.Length > 0 && cb.Length <= objectSize-cb.Position
}
