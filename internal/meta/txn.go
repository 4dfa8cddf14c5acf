package meta

// Transactions: the transaction coordinator's state, kept in the
// replicated database so that any agent can serve any transactional id,
// and the per-partition facts read_committed needs (open transactions for
// the last stable offset, the aborted-transaction index).
//
// Kafka ends a transaction in two phases (PrepareCommit, then markers
// written to every partition by the coordinator, then CompleteCommit)
// because its partitions live on different brokers. Here one apply sees
// every partition, so EndTxn is one command: it writes every marker,
// moves the transaction's offsets into its groups and completes the
// transaction atomically. No transaction is ever half-ended, and there is
// no marker queue to recover after a crash.

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Key prefixes of transaction state (tabled in the package doc).
const (
	// prefixTxn holds a transactional id's coordinator state.
	prefixTxn byte = 0x12
	// prefixOpenTxn starts (topic id, partition, producer id): a
	// transaction that added the partition and has not ended.
	prefixOpenTxn byte = 0x13
	// prefixAbortedTxn starts (topic id, partition, marker offset): the
	// aborted-transaction index of a partition.
	prefixAbortedTxn byte = 0x14
	// prefixTxnOffset starts (group id length, group id, topic id,
	// partition): an offset committed in a transaction that has not ended.
	prefixTxnOffset byte = 0x15
)

// Limits of transactions (part of what apply means, like apply's others).
const (
	// MaxTxnTimeoutMs is Kafka's transaction.max.timeout.ms default: a
	// longer transaction.timeout.ms is INVALID_TRANSACTION_TIMEOUT.
	MaxTxnTimeoutMs = 15 * 60 * 1000
	// TxnIDExpirationMs is transactional.id.expiration.ms: the state of
	// a transactional id that has not begun a transaction for this long,
	// by the log clock, is deleted by TxnSweep.
	TxnIDExpirationMs = 7 * 24 * 60 * 60 * 1000
	// maxTxnPartitions caps the partitions one transaction may add, and
	// so the markers one EndTxn writes.
	maxTxnPartitions = 1 << 16
	// maxTxnGroups caps the groups one transaction may add.
	maxTxnGroups = 1024
	// maxTxnIDBytes is the longest transactional id (an int16-length
	// string on the wire).
	maxTxnIDBytes = math.MaxInt16
	// MaxTxnSweepIDs caps the transactional ids one TxnSweep names.
	MaxTxnSweepIDs = 1024
)

// TxnStatus is a transactional id's state, as DescribeTransactions and
// ListTransactions name it.
type TxnStatus uint8

const (
	TxnEmpty TxnStatus = iota
	TxnOngoing
	TxnCompleteCommit
	TxnCompleteAbort
)

// String is Kafka's name of the state.
func (s TxnStatus) String() string {
	switch s {
	case TxnEmpty:
		return "Empty"
	case TxnOngoing:
		return "Ongoing"
	case TxnCompleteCommit:
		return "CompleteCommit"
	case TxnCompleteAbort:
		return "CompleteAbort"
	}
	return "Unknown"
}

// TxnState is the coordinator state of one transactional id.
type TxnState struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// PrevEpoch is the epoch before the last bump (-1 if none) and
	// PrevBy what bumped it. See InitTransactionalProducer.
	PrevEpoch int16
	PrevBy    BumpReason
	// PrevProducerID is the producer id PrevEpoch belonged to: an EndTxn
	// that exhausted the epoch moved the id to a new producer id.
	PrevProducerID int64
	TimeoutMs      int32
	Status         TxnStatus
	// Seq counts the transactions this id has begun. EndTxn names the
	// one it ends, so a delayed EndTxn cannot end a later transaction.
	Seq int64
	// StartMs is the log clock when the current transaction began;
	// UpdatedMs when the state last changed.
	StartMs   int64
	UpdatedMs int64
	// Partitions and Groups are what the current (or last) transaction
	// added, sorted.
	Partitions []TxnPartition
	Groups     []string
}

// BumpReason says what bumped a transactional producer's epoch last.
type BumpReason uint8

const (
	// BumpByInit: an InitProducerId that named no current epoch (a new
	// producer instance); it fenced whoever held PrevEpoch.
	BumpByInit BumpReason = iota
	// BumpByRequest: an InitProducerId naming PrevEpoch (KIP-360); a
	// repeat of it is answered with the current epoch.
	BumpByRequest
	// BumpByTimeout: the cluster aborted a timed-out transaction
	// (KIP-588); the producer holding PrevEpoch may re-initialize.
	BumpByTimeout
	// BumpByEndTxn: an EndTxn v5 ended the transaction of PrevEpoch
	// (KIP-890 part 2); a repeat of it is answered with the current
	// epoch.
	BumpByEndTxn
)

// TxnPartition is a partition in a transaction.
type TxnPartition struct {
	TopicID   TopicID
	Partition int32
}

func comparePartitions(x, y TxnPartition) int {
	if c := bytes.Compare(x.TopicID[:], y.TopicID[:]); c != 0 {
		return c
	}
	return int(x.Partition) - int(y.Partition)
}

func (s *TxnState) encode(b []byte) []byte {
	b = append(b, recordV1)
	b = appendVarint(b, s.ProducerID)
	b = appendVarint(b, int64(s.ProducerEpoch))
	b = appendVarint(b, int64(s.PrevEpoch))
	b = appendUvarint(b, uint64(s.PrevBy))
	b = appendVarint(b, s.PrevProducerID)
	b = appendVarint(b, int64(s.TimeoutMs))
	b = appendUvarint(b, uint64(s.Status))
	b = appendVarint(b, s.Seq)
	b = appendVarint(b, s.StartMs)
	b = appendVarint(b, s.UpdatedMs)
	b = appendUvarint(b, uint64(len(s.Partitions)))
	for _, p := range s.Partitions {
		b = append(b, p.TopicID[:]...)
		b = appendVarint(b, int64(p.Partition))
	}
	return appendStringList(b, s.Groups)
}

func decodeTxnState(id string, v []byte) (TxnState, error) {
	r := recordReader(v)
	s := TxnState{TransactionalID: id}
	s.ProducerID = r.varint()
	s.ProducerEpoch = r.int16()
	s.PrevEpoch = r.int16()
	s.PrevBy = BumpReason(r.uvarint())
	s.PrevProducerID = r.varint()
	s.TimeoutMs = r.int32()
	s.Status = TxnStatus(r.uvarint())
	s.Seq = r.varint()
	s.StartMs = r.varint()
	s.UpdatedMs = r.varint()
	n := r.count(17)
	if n > 0 {
		s.Partitions = make([]TxnPartition, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		r.fixed(s.Partitions[i].TopicID[:])
		s.Partitions[i].Partition = r.int32()
	}
	s.Groups = r.stringList()
	if s.Status > TxnCompleteAbort || s.PrevBy > BumpByEndTxn {
		r.fail(errTooMany)
	}
	if err := r.done(); err != nil {
		return TxnState{}, corrupt("transaction state", err)
	}
	return s, nil
}

func txnKey(id string) []byte { return append([]byte{prefixTxn}, id...) }

func openTxnKey(dst []byte, id TopicID, partition int32, producerID int64) []byte {
	dst = append(dst, prefixOpenTxn)
	dst = append(dst, id[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(partition))
	return binary.BigEndian.AppendUint64(dst, uint64(producerID))
}

func partitionSpan(p byte, id TopicID, partition int32) (start, end []byte) {
	start = appendPartitionPrefix(make([]byte, 0, 1+16+4), p, id, partition)
	return start, keySuccessor(start)
}

func abortedTxnKey(id TopicID, partition int32, markerOffset int64) []byte {
	k := append([]byte{prefixAbortedTxn}, id[:]...)
	k = binary.BigEndian.AppendUint32(k, uint32(partition))
	return binary.BigEndian.AppendUint64(k, uint64(markerOffset))
}

func txnOffsetGroupPrefix(group string) []byte {
	k := []byte{prefixTxnOffset}
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

// txnOffsetKey keeps one pending offset per producer, as Kafka does: two
// transactions committing the same group's partition do not overwrite
// each other, and each commit or abort settles only its own.
func txnOffsetKey(group string, id TopicID, partition int32, producerID int64) []byte {
	k := txnOffsetPartitionPrefix(group, id, partition)
	return binary.BigEndian.AppendUint64(k, uint64(producerID))
}

func txnOffsetPartitionPrefix(group string, id TopicID, partition int32) []byte {
	k := append(txnOffsetGroupPrefix(group), id[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

// openTxn is the value under openTxnKey.
type openTxn struct {
	Epoch int16
	// FirstOffset is the offset of the transaction's first batch in the
	// partition, -1 until one is written.
	FirstOffset int64
}

func (o openTxn) encode(b []byte) []byte {
	b = append(b, recordV1)
	b = appendVarint(b, int64(o.Epoch))
	return appendVarint(b, o.FirstOffset)
}

func decodeOpenTxn(v []byte) (openTxn, error) {
	r := recordReader(v)
	var o openTxn
	o.Epoch = r.int16()
	o.FirstOffset = r.varint()
	if err := r.done(); err != nil {
		return openTxn{}, corrupt("open transaction", err)
	}
	return o, nil
}

// pendingTxnOffset is the value under txnOffsetKey.
type pendingTxnOffset struct {
	ProducerID int64
	Offset     CommittedOffset
}

func (p *pendingTxnOffset) encode(b []byte) []byte {
	b = append(b, recordV1)
	b = appendVarint(b, p.ProducerID)
	b = appendVarint(b, p.Offset.Offset)
	b = appendVarint(b, int64(p.Offset.LeaderEpoch))
	b = appendString(b, p.Offset.Metadata)
	return appendVarint(b, p.Offset.CommitTimestamp)
}

func decodePendingTxnOffset(id TopicID, partition int32, v []byte) (pendingTxnOffset, error) {
	r := recordReader(v)
	p := pendingTxnOffset{Offset: CommittedOffset{TopicID: id, Partition: partition, ExpireTimestamp: -1}}
	p.ProducerID = r.varint()
	p.Offset.Offset = r.varint()
	p.Offset.LeaderEpoch = r.int32()
	p.Offset.Metadata = r.string()
	p.Offset.CommitTimestamp = r.varint()
	if err := r.done(); err != nil {
		return pendingTxnOffset{}, corrupt("pending transactional offset", err)
	}
	return p, nil
}
