package meta

import (
	"encoding/binary"
	"fmt"
)

// Key prefixes. Values are part of the on-disk and snapshot format. The
// layout is tabled in the package doc.
const (
	prefixTopicName byte = 0x01
	prefixTopicID   byte = 0x02
	prefixPartition byte = 0x03
	prefixIndex     byte = 0x04
	prefixObject    byte = 0x05
	prefixWriter    byte = 0x06
	prefixClock     byte = 0x07
	prefixApplied   byte = 0x08
	// Consumer groups (group_store.go).
	prefixGroup       byte = 0x09
	prefixGroupOffset byte = 0x0A
	prefixTopicGroup  byte = 0x0B
	// Agents and the cluster id (agents.go).
	prefixAgent     byte = 0x0C
	prefixClusterID byte = 0x0D
	// prefixLocal starts keys that belong to this copy only. They are not
	// replicated state, so the digest skips them, and a snapshot restore
	// should drop them.
	prefixLocal byte = 0xFF
)

// recordV1 leads every stored value, so a later build can change a record
// and still read snapshots written before.
const recordV1 = 1

var (
	keyClock   = []byte{prefixClock}
	keyApplied = []byte{prefixApplied}
	// replicatedEnd bounds the replicated key space for the digest.
	replicatedEnd = []byte{prefixLocal}
)

func topicNameKey(name string) []byte { return appendTopicNameKey(nil, name) }

// appendTopicNameKey, like every append*Key, builds a key into a buffer
// the caller reuses: keys passed through the Batch interface escape, so
// a fresh one per call on the apply path would be a heap allocation
// each.
func appendTopicNameKey(dst []byte, name string) []byte {
	dst = append(dst, prefixTopicName)
	return append(dst, name...)
}

func topicIDKey(id TopicID) []byte {
	return append([]byte{prefixTopicID}, id[:]...)
}

func partitionKey(id TopicID, partition int32) []byte {
	return appendPartitionKey(make([]byte, 0, 1+16+4), id, partition)
}

func appendPartitionKey(dst []byte, id TopicID, partition int32) []byte {
	return appendPartitionPrefix(dst, prefixPartition, id, partition)
}

// appendPartitionPrefix appends p, the topic id and the partition: the
// whole key of one-per-partition records (state, storage numbers), and
// the start of every per-partition key range (index, open and aborted
// transactions, producer states).
func appendPartitionPrefix(dst []byte, p byte, id TopicID, partition int32) []byte {
	dst = append(dst, p)
	dst = append(dst, id[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// topicSpan returns the bounds of prefix p's keys of one topic.
func topicSpan(p byte, id TopicID) (start, end []byte) {
	start = append([]byte{p}, id[:]...)
	return start, keySuccessor(start)
}

// indexKey sorts by (topic, partition, base offset): a partition's index is
// one contiguous range in offset order. Partition and offset are never
// negative, so big-endian unsigned bytes sort them.
func indexKey(dst []byte, id TopicID, partition int32, baseOffset int64) []byte {
	dst = appendPartitionPrefix(dst, prefixIndex, id, partition)
	return binary.BigEndian.AppendUint64(dst, uint64(baseOffset))
}

// indexSpan bounds one partition's index entries.
func indexSpan(id TopicID, partition int32) (start, end []byte) {
	return partitionSpan(prefixIndex, id, partition)
}

func indexKeyOffset(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[len(k)-8:]))
}

func objectKey(key string) []byte {
	return append([]byte{prefixObject}, key...)
}

func writerKey(id string) []byte { return appendWriterKey(nil, id) }

func appendWriterKey(dst []byte, id string) []byte {
	dst = append(dst, prefixWriter)
	return append(dst, id...)
}

// localIncarnationKey holds the last incarnation this copy used for a
// writer id. See chooseIncarnation.
func localIncarnationKey(writerID string) []byte {
	return append([]byte{prefixLocal, 'i'}, writerID...)
}

// keySuccessor returns the smallest key greater than every key with prefix
// k. k must not be all 0xff.
func keySuccessor(k []byte) []byte {
	end := append([]byte(nil), k...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	panic("meta: no successor of an all-0xff key")
}

// Topic is a topic's metadata, stored under its name.
type Topic struct {
	ID         TopicID
	Name       string
	Partitions int32
	// CreatedAt is the log clock (unix ms) when the topic was created.
	CreatedAt int64
	Configs   map[string]string
}

func (t *Topic) encode() []byte {
	b := []byte{recordV1}
	b = append(b, t.ID[:]...)
	b = appendString(b, t.Name)
	b = appendVarint(b, int64(t.Partitions))
	b = appendVarint(b, t.CreatedAt)
	return appendStringMap(b, t.Configs)
}

func decodeTopic(v []byte) (Topic, error) {
	r := recordReader(v)
	var t Topic
	r.fixed(t.ID[:])
	t.Name = r.string()
	t.Partitions = r.int32()
	t.CreatedAt = r.varint()
	t.Configs = r.stringMap()
	if err := r.done(); err != nil {
		return Topic{}, corrupt("topic record", err)
	}
	return t, nil
}

// PartitionState is the offset range of one partition.
type PartitionState struct {
	// LogStartOffset is the first offset a consumer can read.
	LogStartOffset int64
	// NextOffset is the offset apply gives the next record, which is
	// also the high watermark: committed means readable.
	NextOffset int64
}

// HighWatermark is NextOffset: every committed record is readable.
func (p PartitionState) HighWatermark() int64 { return p.NextOffset }

func (p PartitionState) encode(b []byte) []byte {
	b = append(b, recordV1)
	b = appendVarint(b, p.NextOffset)
	return appendVarint(b, p.LogStartOffset)
}

func decodePartitionState(v []byte) (PartitionState, error) {
	r := recordReader(v)
	var p PartitionState
	p.NextOffset = r.varint()
	p.LogStartOffset = r.varint()
	if err := r.done(); err != nil {
		return PartitionState{}, corrupt("partition state", err)
	}
	return p, nil
}

// IndexEntry points a partition's offsets [BaseOffset, BaseOffset+Records)
// at a byte range of a data object.
type IndexEntry struct {
	BaseOffset     int64
	ObjectKey      string
	Position       int64
	Length         int64
	Records        int32
	BatchCount     int32
	FirstTimestamp int64
	MaxTimestamp   int64
	ProducerID     int64
	ProducerEpoch  int16
	BaseSequence   int32
	// Transactional: the batches are a transaction's. Control: the entry
	// is a transaction marker, not object bytes (ObjectKey is empty);
	// the fetch path synthesizes its control batch, a commit marker when
	// Commit, else an abort marker.
	Transactional bool
	Control       bool
	Commit        bool
	// OwnOffsets (metadata level 4, compacted topics): the batches in
	// the object carry the offsets apply gave them, and may leave some
	// out; Records is then the span of offsets the entry covers, not a
	// count of records in it. Only SwapIndex writes it (compact.go).
	OwnOffsets bool
}

// Index entry attribute bits, stored after the other fields only when
// some are set, so entries written before transactions existed decode
// unchanged.
const (
	indexAttrTransactional = 1 << 0
	indexAttrControl       = 1 << 1
	indexAttrCommit        = 1 << 2
	indexAttrOwnOffsets    = 1 << 3
	indexAttrMask          = indexAttrTransactional | indexAttrControl | indexAttrCommit | indexAttrOwnOffsets
)

// LastOffset is the offset of the entry's last record.
func (e IndexEntry) LastOffset() int64 { return e.BaseOffset + int64(e.Records) - 1 }

// encodeIndexValueAttrs stores cb as an index value with attribute bits;
// the base offset lives in the key.
func encodeIndexValueAttrs(b []byte, objKey string, cb *CommitBatch, attrs uint64) []byte {
	b = append(b, recordV1)
	b = appendString(b, objKey)
	b = appendVarint(b, cb.Position)
	b = appendVarint(b, cb.Length)
	b = appendVarint(b, int64(cb.Records))
	b = appendVarint(b, int64(cb.BatchCount))
	b = appendVarint(b, cb.FirstTimestamp)
	b = appendVarint(b, cb.MaxTimestamp)
	b = appendVarint(b, cb.ProducerID)
	b = appendVarint(b, int64(cb.ProducerEpoch))
	b = appendVarint(b, int64(cb.BaseSequence))
	if attrs != 0 {
		b = appendUvarint(b, attrs)
	}
	return b
}

func decodeIndexEntry(k, v []byte) (IndexEntry, error) {
	r := recordReader(v)
	e := IndexEntry{BaseOffset: indexKeyOffset(k)}
	e.ObjectKey = r.string()
	r.indexFields(&e)
	if r.err == nil && len(r.b) > 0 {
		attrs := r.uvarint()
		if attrs == 0 || attrs&^indexAttrMask != 0 {
			r.fail(errTooMany)
		}
		e.setAttrs(attrs)
	}
	if err := r.done(); err != nil {
		return IndexEntry{}, corrupt("index entry", err)
	}
	return e, nil
}

// indexFields reads an index entry's fields after its object key, up to
// its attributes: as index values (encodeIndexValueAttrs) and SwapIndex
// (appendIndexFields) store them.
func (r *reader) indexFields(e *IndexEntry) {
	e.Position = r.varint()
	e.Length = r.varint()
	e.Records = r.int32()
	e.BatchCount = r.int32()
	e.FirstTimestamp = r.varint()
	e.MaxTimestamp = r.varint()
	e.ProducerID = r.varint()
	e.ProducerEpoch = r.int16()
	e.BaseSequence = r.int32()
}

// appendIndexFields writes what indexFields reads.
func appendIndexFields(b []byte, e *IndexEntry) []byte {
	b = appendVarint(b, e.Position)
	b = appendVarint(b, e.Length)
	b = appendVarint(b, int64(e.Records))
	b = appendVarint(b, int64(e.BatchCount))
	b = appendVarint(b, e.FirstTimestamp)
	b = appendVarint(b, e.MaxTimestamp)
	b = appendVarint(b, e.ProducerID)
	b = appendVarint(b, int64(e.ProducerEpoch))
	return appendVarint(b, int64(e.BaseSequence))
}

// objectRecord is the value under objectKey: the object was committed, so a
// second commit of it is refused, and a later garbage collector knows its
// size and age.
type objectRecord struct {
	Size        int64
	CommittedAt int64 // log clock, unix ms
	Batches     int32
}

func (o objectRecord) encode() []byte {
	b := []byte{recordV1}
	b = appendVarint(b, o.Size)
	b = appendVarint(b, o.CommittedAt)
	return appendVarint(b, int64(o.Batches))
}

// writerState is the dedupe state of one writer: the newest incarnation
// seen and the last sequence applied in it.
type writerState struct {
	Incarnation uint64
	LastSeq     uint64
}

func (w writerState) encode() []byte {
	b := []byte{recordV1}
	b = appendUvarint(b, w.Incarnation)
	return appendUvarint(b, w.LastSeq)
}

func decodeWriterState(v []byte) (writerState, error) {
	r := recordReader(v)
	var w writerState
	w.Incarnation = r.uvarint()
	w.LastSeq = r.uvarint()
	if err := r.done(); err != nil {
		return writerState{}, corrupt("writer state", err)
	}
	return w, nil
}

func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(what string, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, what, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// recordReader checks the record version byte and returns a reader past it.
// It returns a value so that decoding a record (an index entry on every
// fetch) allocates nothing for the reader.
func recordReader(v []byte) reader {
	r := reader{b: v}
	if len(v) == 0 {
		r.fail(errShort)
		return r
	}
	if v[0] != recordV1 {
		r.fail(fmt.Errorf("record version %d", v[0]))
		return r
	}
	r.b = v[1:]
	return r
}

// LastIncarnation returns the newest incarnation writerID is known to
// have used in the state r reads: in the replicated dedupe state, or as
// recorded locally by this copy (LocalIncarnation); found is false if
// neither holds one. A driver picks an incarnation above it, since
// sequence numbers restart with each incarnation.
func LastIncarnation(r Reader, writerID string) (last uint64, found bool, err error) {
	v, ok, err := r.Get(writerKey(writerID))
	if err != nil {
		return 0, false, err
	}
	if ok {
		ws, err := decodeWriterState(v)
		if err != nil {
			return 0, false, err
		}
		last, found = ws.Incarnation, true
	}
	v, ok, err = r.Get(localIncarnationKey(writerID))
	if err != nil {
		return 0, false, err
	}
	if ok {
		inc, err := decodeUint64("local incarnation", v)
		if err != nil {
			return 0, false, err
		}
		last, found = max(last, inc), true
	}
	return last, found, nil
}

// LocalIncarnation returns the key and value that record inc as the
// newest incarnation this copy used for writerID. The key is local (see
// LocalSpan).
func LocalIncarnation(writerID string, inc uint64) (key, value []byte) {
	return localIncarnationKey(writerID), encodeUint64(inc)
}

// LocalSpan bounds the keys that belong to one copy only: they describe
// its directory, not the replicated state, so the digest skips them and
// a restored snapshot drops them. end is nil: they run to the end of the
// key space.
func LocalSpan() (start, end []byte) { return replicatedEnd, nil }
