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
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/recordbatch"
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
	start = append([]byte{p}, id[:]...)
	start = binary.BigEndian.AppendUint32(start, uint32(partition))
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

// InitTransactionalProducer is InitProducerId with a transactional id.
//
// The first call for an id allocates a producer id, epoch 0. Later calls
// bump the epoch, which fences every older producer instance of the id;
// an ongoing transaction is aborted first (its markers carry the new
// epoch). ProducerID/ProducerEpoch >= 0 (InitProducerId v3+, KIP-360)
// name the caller's current id and epoch: they must be the stored ones,
// or the ones before a bump the cluster made when the transaction timed
// out (KIP-588), else PRODUCER_FENCED; a repeat of the request that made
// the current epoch (its reply was lost) gets the current epoch again. An
// exhausted epoch moves the id to a new producer id.
// Result: ProducerID, ProducerEpoch; or INVALID_TRANSACTION_TIMEOUT,
// PRODUCER_FENCED, INVALID_REQUEST.
type InitTransactionalProducer struct {
	TransactionalID string
	TimeoutMs       int32
	ProducerID      int64
	ProducerEpoch   int16
}

// AddPartitionsToTxn adds partitions, by topic name, to the producer's
// transaction, beginning one if none is ongoing.
// Result: Codes, one per partition (UNKNOWN_TOPIC_OR_PARTITION); or Code
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, INVALID_TXN_STATE,
// TRANSACTIONAL_ID_NOT_FOUND (in Codes too).
type AddPartitionsToTxn struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
}

// AddOffsetsToTxn adds a consumer group to the producer's transaction, so
// TxnOffsetCommit may commit its offsets in it.
// Result: the codes of AddPartitionsToTxn.
type AddOffsetsToTxn struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Group           string
}

// TxnOffsetCommit stores offsets of a group that become committed when the
// transaction commits and vanish when it aborts. The group must have been
// added with AddOffsetsToTxn (KIP-890's defence: nothing joins a
// transaction implicitly).
// Result: Codes per offset; Code INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED, INVALID_TXN_STATE, ILLEGAL_GENERATION.
type TxnOffsetCommit struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Group           string
	// Generation is what the group coordinator validated the member
	// against; -1 when the request carried none.
	Generation int32
	Offsets    []OffsetCommitPartition
}

// EndTxn commits or aborts the producer's transaction: it writes a marker
// into every partition the transaction added, records aborted ranges,
// and moves the transaction's offsets into their groups, in one apply.
// Seq >= 0 names the transaction the caller saw ongoing (TxnState.Seq);
// an EndTxn for an earlier transaction never ends a later one
// (KAFKA-17754). Repeating the EndTxn that completed the transaction
// succeeds again.
//
// BumpEpoch (EndTxn v5, KIP-890 part 2) also bumps the producer's epoch:
// the markers carry the new one, which the result returns, so every
// request of the ended transaction is fenced from then on — a delayed
// EndTxn, produce or offset commit arriving at any agent, however late.
// An exhausted epoch moves the id to a new producer id. A repeat naming
// the previous epoch, after the transaction ended the same way, gets the
// current pair again. With BumpEpoch, aborting when no transaction is
// ongoing is allowed (a client whose every produce failed): it only
// bumps the epoch.
// Result: ProducerID, ProducerEpoch (the producer's pair afterwards); or
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, INVALID_TXN_STATE.
type EndTxn struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	Seq             int64
	BumpEpoch       bool
}

// TxnSweep re-checks the named transactional ids against the log clock:
// a transaction ongoing for longer than its timeout is aborted with the
// epoch bumped (fencing its producer, KIP-588), and the state of an id
// idle for TxnIDExpirationMs is deleted. Agents propose it for the ids a
// View reports (TimedOutTxns); a sweep that finds nothing due changes
// nothing, so several agents may propose it for the same id.
// Result: INVALID_REQUEST for too many ids.
type TxnSweep struct {
	TransactionalIDs []string
}

func (InitTransactionalProducer) Type() CommandType { return TypeInitTransactionalProducer }
func (AddPartitionsToTxn) Type() CommandType        { return TypeAddPartitionsToTxn }
func (AddOffsetsToTxn) Type() CommandType           { return TypeAddOffsetsToTxn }
func (TxnOffsetCommit) Type() CommandType           { return TypeTxnOffsetCommit }
func (EndTxn) Type() CommandType                    { return TypeEndTxn }
func (TxnSweep) Type() CommandType                  { return TypeTxnSweep }

func (InitTransactionalProducer) version() uint16 { return 1 }
func (AddPartitionsToTxn) version() uint16        { return 1 }
func (AddOffsetsToTxn) version() uint16           { return 1 }
func (TxnOffsetCommit) version() uint16           { return 1 }
func (EndTxn) version() uint16                    { return 2 }
func (TxnSweep) version() uint16                  { return 1 }

func appendTxnProducer(b []byte, id string, pid int64, epoch int16) []byte {
	b = appendString(b, id)
	b = appendVarint(b, pid)
	return appendVarint(b, int64(epoch))
}

func (c InitTransactionalProducer) appendPayload(b []byte) []byte {
	b = appendTxnProducer(b, c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	return appendVarint(b, int64(c.TimeoutMs))
}

func (c AddPartitionsToTxn) appendPayload(b []byte) []byte {
	b = appendTxnProducer(b, c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	b = appendUvarint(b, uint64(len(c.Partitions)))
	for _, p := range c.Partitions {
		b = appendString(b, p.Topic)
		b = appendVarint(b, int64(p.Partition))
	}
	return b
}

func (c AddOffsetsToTxn) appendPayload(b []byte) []byte {
	b = appendTxnProducer(b, c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	return appendString(b, c.Group)
}

func (c TxnOffsetCommit) appendPayload(b []byte) []byte {
	b = appendTxnProducer(b, c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	b = appendString(b, c.Group)
	b = appendVarint(b, int64(c.Generation))
	return appendOffsetCommitPartitions(b, c.Offsets)
}

func (c EndTxn) appendPayload(b []byte) []byte {
	b = appendTxnProducer(b, c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	b = appendBool(b, c.Commit)
	b = appendVarint(b, c.Seq)
	return appendBool(b, c.BumpEpoch)
}

func (c TxnSweep) appendPayload(b []byte) []byte {
	return appendStringList(b, c.TransactionalIDs)
}

func (r *reader) txnProducer() (string, int64, int16) {
	return r.string(), r.varint(), r.int16()
}

// decodeTxnCommand decodes the transaction commands; ok is false for
// other types.
func decodeTxnCommand(rc RawCommand, r *reader) (Command, bool) {
	if rc.Type == TypeEndTxn && rc.Version == 2 {
		var c EndTxn
		c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
		c.Commit = r.bool()
		c.Seq = r.varint()
		c.BumpEpoch = r.bool()
		return c, true
	}
	if rc.Version != 1 {
		return nil, false
	}
	switch rc.Type {
	case TypeInitTransactionalProducer:
		var c InitTransactionalProducer
		c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
		c.TimeoutMs = r.int32()
		return c, true
	case TypeAddPartitionsToTxn:
		var c AddPartitionsToTxn
		c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
		n := r.count(2)
		if n > 0 {
			c.Partitions = make([]TopicPartition, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			c.Partitions[i] = TopicPartition{Topic: r.string(), Partition: r.int32()}
		}
		return c, true
	case TypeAddOffsetsToTxn:
		var c AddOffsetsToTxn
		c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
		c.Group = r.string()
		return c, true
	case TypeTxnOffsetCommit:
		var c TxnOffsetCommit
		c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
		c.Group = r.string()
		c.Generation = r.int32()
		c.Offsets = r.offsetCommitPartitions()
		return c, true
	case TypeEndTxn:
		var c EndTxn
		c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
		c.Commit = r.bool()
		c.Seq = r.varint()
		return c, true
	case TypeTxnSweep:
		return TxnSweep{TransactionalIDs: r.stringList()}, true
	}
	return nil, false
}

// applyTxnCommand applies a transaction command; ok is false for others.
func (a *applier) applyTxnCommand(c Command) (res Result, ok bool, err error) {
	switch c := c.(type) {
	case InitTransactionalProducer:
		res, err = a.initTxnProducer(c)
	case AddPartitionsToTxn:
		res, err = a.addPartitionsToTxn(c)
	case AddOffsetsToTxn:
		res, err = a.addOffsetsToTxn(c)
	case TxnOffsetCommit:
		res, err = a.txnOffsetCommit(c)
	case EndTxn:
		res, err = a.endTxn(c)
	case TxnSweep:
		res, err = a.txnSweep(c)
	default:
		return Result{}, false, nil
	}
	return res, true, err
}

func (a *applier) txn(id string) (TxnState, bool, error) {
	v, ok, err := a.get(txnKey(id))
	if err != nil || !ok {
		return TxnState{}, false, err
	}
	s, err := decodeTxnState(id, v)
	return s, err == nil, err
}

func (a *applier) putTxn(s *TxnState) error {
	s.UpdatedMs = a.clock
	a.valBuf = s.encode(a.valBuf[:0])
	return a.b.Set(txnKey(s.TransactionalID), a.valBuf, nil)
}

// nextProducerID takes a producer id from the 0x10 counter.
func (a *applier) nextProducerID() (int64, bool, error) {
	var next int64
	v, ok, err := a.get(keyProducerNextID)
	if err != nil {
		return 0, false, err
	}
	if ok {
		r := recordReader(v)
		next = r.varint()
		if err := r.done(); err != nil {
			return 0, false, corrupt("next producer id", err)
		}
	}
	if next == math.MaxInt64 {
		return 0, false, nil
	}
	b := appendVarint([]byte{recordV1}, next+1)
	return next, true, a.b.Set(keyProducerNextID, b, nil)
}

func (a *applier) initTxnProducer(c InitTransactionalProducer) (Result, error) {
	if c.TransactionalID == "" || len(c.TransactionalID) > maxTxnIDBytes {
		return failed(kerr.InvalidRequest, "invalid transactional id"), nil
	}
	if c.TimeoutMs <= 0 || c.TimeoutMs > MaxTxnTimeoutMs {
		return failed(kerr.InvalidTransactionTimeout, "transaction timeout %d ms is not in (0, %d]", c.TimeoutMs, MaxTxnTimeoutMs), nil
	}
	s, exists, err := a.txn(c.TransactionalID)
	if err != nil {
		return Result{}, err
	}
	newID := func() (Result, bool, error) {
		id, ok, err := a.nextProducerID()
		if err != nil || !ok {
			return failed(kerr.UnknownServerError, "producer ids exhausted"), false, err
		}
		s.ProducerID, s.ProducerEpoch, s.PrevEpoch, s.PrevBy, s.PrevProducerID = id, 0, -1, BumpByInit, -1
		return Result{}, true, nil
	}
	switch {
	case !exists:
		s = TxnState{TransactionalID: c.TransactionalID}
		if res, ok, err := newID(); !ok {
			return res, err
		}
	case c.ProducerID >= 0 && c.ProducerID != s.ProducerID:
		return failed(kerr.ProducerFenced, "producer id %d is not the current one of %q", c.ProducerID, c.TransactionalID), nil
	case c.ProducerID >= 0 && c.ProducerEpoch == s.PrevEpoch && s.PrevBy != BumpByInit && s.Status != TxnOngoing:
		// A retry of the request that made the current epoch, or the
		// producer whose transaction timed out (KIP-588): the current
		// epoch already fences PrevEpoch everywhere, and bumping again
		// would fence a retry of this very request (as Kafka answers
		// a request naming lastProducerEpoch).
		return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil
	case c.ProducerID >= 0 && c.ProducerEpoch != s.ProducerEpoch && !(s.PrevBy == BumpByTimeout && c.ProducerEpoch == s.PrevEpoch):
		return failed(kerr.ProducerFenced, "epoch %d of producer %d is not current (%d)", c.ProducerEpoch, c.ProducerID, s.ProducerEpoch), nil
	default:
		prev := s.ProducerEpoch
		if s.ProducerEpoch >= maxBumpableEpoch {
			if s.Status == TxnOngoing {
				if err := a.completeTxn(&s, false); err != nil {
					return Result{}, err
				}
			}
			if res, ok, err := newID(); !ok {
				return res, err
			}
		} else {
			s.ProducerEpoch++
			s.PrevEpoch, s.PrevBy, s.PrevProducerID = prev, BumpByInit, s.ProducerID
			if c.ProducerID >= 0 {
				s.PrevBy = BumpByRequest
			}
			if s.Status == TxnOngoing {
				// Abort with the new epoch, so the markers fence the
				// old producer in every partition.
				if err := a.completeTxn(&s, false); err != nil {
					return Result{}, err
				}
			}
		}
	}
	s.TimeoutMs = c.TimeoutMs
	s.Status = TxnEmpty
	if err := a.putTxn(&s); err != nil {
		return Result{}, err
	}
	return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil
}

// txnForProducer loads a transactional id's state and checks the caller's
// producer id and epoch against it.
func (a *applier) txnForProducer(id string, pid int64, epoch int16) (TxnState, Result, bool, error) {
	s, ok, err := a.txn(id)
	if err != nil {
		return TxnState{}, Result{}, false, err
	}
	if res := CheckTxnProducer(s, ok, id, pid, epoch); res.Code != 0 {
		return s, res, false, nil
	}
	return s, Result{}, true, nil
}

// CheckTxnProducer is the rule every transaction command applies to its
// caller's producer id and epoch against the transactional id's state s
// (found false: no state), as a failed Result or a zero one. Readers of
// a View (a verify-only AddPartitionsToTxn) answer by the same rule.
func CheckTxnProducer(s TxnState, found bool, id string, pid int64, epoch int16) Result {
	switch {
	case !found:
		return failed(kerr.TransactionalIDNotFound, "no transactional id %q", id)
	case s.ProducerID != pid:
		return failed(kerr.InvalidProducerIDMapping, "producer id %d is not %q's (%d)", pid, id, s.ProducerID)
	case s.ProducerEpoch != epoch:
		return failed(kerr.ProducerFenced, "epoch %d is not %q's current epoch %d", epoch, id, s.ProducerEpoch)
	}
	return Result{}
}

// beginIfIdle starts a transaction in s if none is ongoing.
func (a *applier) beginIfIdle(s *TxnState) {
	if s.Status == TxnOngoing {
		return
	}
	s.Status = TxnOngoing
	s.Seq++
	s.StartMs = a.clock
	s.Partitions, s.Groups = nil, nil
}

func (a *applier) addPartitionsToTxn(c AddPartitionsToTxn) (Result, error) {
	n := len(c.Partitions)
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return withCodes(res, n), err
	}
	added := 0
	if s.Status == TxnOngoing {
		added = len(s.Partitions)
	}
	if added+n > maxTxnPartitions {
		return withCodes(failed(kerr.InvalidRequest, "more than %d partitions in one transaction", maxTxnPartitions), n), nil
	}
	a.beginIfIdle(&s)
	res = Result{Codes: make([]int16, n)}
	topics := topicLookup{a: a}
	for i, p := range c.Partitions {
		t, ok, err := topics.get(p.Topic)
		if err != nil {
			return Result{}, err
		}
		if !ok || p.Partition < 0 || p.Partition >= t.Partitions {
			res.Codes[i] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		tp := TxnPartition{TopicID: t.ID, Partition: p.Partition}
		j, found := slices.BinarySearchFunc(s.Partitions, tp, comparePartitions)
		if found {
			continue
		}
		s.Partitions = slices.Insert(s.Partitions, j, tp)
		a.keyBuf = openTxnKey(a.keyBuf[:0], t.ID, p.Partition, s.ProducerID)
		a.valBuf = openTxn{Epoch: s.ProducerEpoch, FirstOffset: -1}.encode(a.valBuf[:0])
		if err := a.b.Set(a.keyBuf, a.valBuf, nil); err != nil {
			return Result{}, err
		}
	}
	return res, a.putTxn(&s)
}

func withCodes(r Result, n int) Result {
	r.Codes = make([]int16, n)
	for i := range r.Codes {
		r.Codes[i] = r.Code
	}
	return r
}

func (a *applier) addOffsetsToTxn(c AddOffsetsToTxn) (Result, error) {
	if c.Group == "" || len(c.Group) > maxGroupIDBytes {
		return failed(kerr.InvalidGroupID, "invalid group id"), nil
	}
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return res, err
	}
	a.beginIfIdle(&s)
	if j, found := slices.BinarySearch(s.Groups, c.Group); !found {
		if len(s.Groups) >= maxTxnGroups {
			return failed(kerr.InvalidRequest, "more than %d groups in one transaction", maxTxnGroups), nil
		}
		s.Groups = slices.Insert(s.Groups, j, c.Group)
	}
	return Result{}, a.putTxn(&s)
}

func (a *applier) txnOffsetCommit(c TxnOffsetCommit) (Result, error) {
	n := len(c.Offsets)
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return withCodes(res, n), err
	}
	if _, found := slices.BinarySearch(s.Groups, c.Group); s.Status != TxnOngoing || !found {
		return failAll(n, kerr.InvalidTxnState, "group %q is not in an ongoing transaction of %q", c.Group, c.TransactionalID), nil
	}
	g, exists, err := a.group(c.Group)
	if err != nil {
		return Result{}, err
	}
	if exists && c.Generation >= 0 && g.Generation > c.Generation {
		return failAll(n, kerr.IllegalGeneration, "group %q is at generation %d, commit from %d", c.Group, g.Generation, c.Generation), nil
	}
	res = Result{Codes: make([]int16, n)}
	topics := topicLookup{a: a}
	for i := range c.Offsets {
		id, co, code, err := topics.offset(&c.Offsets[i], -1)
		if err != nil {
			return Result{}, err
		}
		if res.Codes[i] = code; code != 0 {
			continue
		}
		p := pendingTxnOffset{ProducerID: s.ProducerID, Offset: co}
		a.valBuf = p.encode(a.valBuf[:0])
		if err := a.b.Set(txnOffsetKey(c.Group, id, co.Partition, s.ProducerID), a.valBuf, nil); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (a *applier) endTxn(c EndTxn) (Result, error) {
	if c.BumpEpoch {
		if s, ok, err := a.txn(c.TransactionalID); err != nil {
			return Result{}, err
		} else if ok && s.PrevBy == BumpByEndTxn && c.ProducerID == s.PrevProducerID && c.ProducerEpoch == s.PrevEpoch &&
			(c.Commit && s.Status == TxnCompleteCommit || !c.Commit && s.Status == TxnCompleteAbort) {
			// A retry of the EndTxn that bumped to the current pair.
			return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil
		}
	}
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return res, err
	}
	if c.Seq >= 0 && c.Seq != s.Seq {
		return failed(kerr.InvalidTxnState, "EndTxn names transaction %d of %q, which is at %d", c.Seq, c.TransactionalID, s.Seq), nil
	}
	ongoing := s.Status == TxnOngoing
	switch {
	case ongoing:
	case c.BumpEpoch && !c.Commit:
		// Nothing to abort: only the epoch moves on.
	case !c.BumpEpoch && (s.Status == TxnCompleteCommit && c.Commit || s.Status == TxnCompleteAbort && !c.Commit):
		return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil // a retry of the EndTxn that ended it
	default:
		return failed(kerr.InvalidTxnState, "%q is %v, cannot %s", c.TransactionalID, s.Status, map[bool]string{true: "commit", false: "abort"}[c.Commit]), nil
	}
	if c.BumpEpoch {
		prevID, prev := s.ProducerID, s.ProducerEpoch
		if s.ProducerEpoch < maxBumpableEpoch {
			s.ProducerEpoch++
		}
		if ongoing {
			if err := a.completeTxn(&s, c.Commit); err != nil {
				return Result{}, err
			}
		}
		if s.ProducerEpoch == prev {
			// Exhausted: the markers carry the last epoch of the old
			// id, the producer goes on with a new one.
			id, ok, err := a.nextProducerID()
			if err != nil || !ok {
				return failed(kerr.UnknownServerError, "producer ids exhausted"), err
			}
			s.ProducerID, s.ProducerEpoch = id, 0
		}
		s.PrevProducerID, s.PrevEpoch, s.PrevBy = prevID, prev, BumpByEndTxn
		s.Status = TxnCompleteAbort
		if c.Commit {
			s.Status = TxnCompleteCommit
		}
	} else if err := a.completeTxn(&s, c.Commit); err != nil {
		return Result{}, err
	}
	return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, a.putTxn(&s)
}

// completeTxn ends s's ongoing transaction: a marker with s's current
// epoch in every partition it added, its aborted ranges recorded, its
// offsets committed or dropped. The caller stores s.
func (a *applier) completeTxn(s *TxnState, commit bool) error {
	for _, tp := range s.Partitions {
		if err := a.writeMarker(s, tp, commit); err != nil {
			return err
		}
	}
	for _, g := range s.Groups {
		if err := a.settleTxnOffsets(g, s.ProducerID, commit); err != nil {
			return err
		}
	}
	s.Status = TxnCompleteAbort
	if commit {
		s.Status = TxnCompleteCommit
	}
	return nil
}

func (a *applier) writeMarker(s *TxnState, tp TxnPartition, commit bool) error {
	okey := openTxnKey(nil, tp.TopicID, tp.Partition, s.ProducerID)
	v, open, err := a.get(okey)
	if err != nil {
		return err
	}
	first := int64(-1)
	if open {
		o, err := decodeOpenTxn(v)
		if err != nil {
			return err
		}
		first = o.FirstOffset
		if err := a.b.Delete(okey, nil); err != nil {
			return err
		}
	}
	cp, err := a.part(partRef{tp.TopicID, tp.Partition})
	if err != nil {
		return err
	}
	if !cp.exists {
		return nil // the topic was deleted during the transaction
	}
	off := cp.st.NextOffset
	cp.st.NextOffset++
	cp.dirty = true
	mb := CommitBatch{
		TopicID: tp.TopicID, Partition: tp.Partition,
		Length: recordbatch.ControlBatchSize, Records: 1, BatchCount: 1,
		FirstTimestamp: a.clock, MaxTimestamp: a.clock,
		ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch, BaseSequence: -1,
		Transactional: true,
	}
	attrs := uint64(indexAttrTransactional | indexAttrControl)
	if commit {
		attrs |= indexAttrCommit
	}
	a.keyBuf = indexKey(a.keyBuf[:0], tp.TopicID, tp.Partition, off)
	a.valBuf = encodeIndexValueAttrs(a.valBuf[:0], "", &mb, attrs)
	if err := a.b.Set(a.keyBuf, a.valBuf, nil); err != nil {
		return err
	}
	if !commit && first >= 0 {
		v := appendVarint(appendVarint([]byte{recordV1}, s.ProducerID), first)
		if err := a.b.Set(abortedTxnKey(tp.TopicID, tp.Partition, off), v, nil); err != nil {
			return err
		}
	}
	return a.fenceProducer(tp, s.ProducerID, s.ProducerEpoch)
}

// fenceProducer raises the partition's producer state to epoch, as a
// marker does in Kafka: batches of an older epoch are then refused.
func (a *applier) fenceProducer(tp TxnPartition, pid int64, epoch int16) error {
	key := producerStateKey(nil, tp.TopicID, tp.Partition, pid)
	v, ok, err := a.get(key)
	if err != nil {
		return err
	}
	st := producerState{Epoch: epoch}
	if ok {
		if st, err = decodeProducerState(v); err != nil {
			return err
		}
		if st.Epoch < epoch {
			st = producerState{Epoch: epoch}
		}
	}
	st.LastWriteMs = a.clock
	a.valBuf = st.encode(a.valBuf[:0])
	return a.b.Set(key, a.valBuf, nil)
}

// settleTxnOffsets commits (or drops) a producer's pending offsets of one
// group.
func (a *applier) settleTxnOffsets(group string, pid int64, commit bool) error {
	start, end := spanOf(txnOffsetGroupPrefix(group))
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return err
	}
	type pending struct {
		key []byte
		p   pendingTxnOffset
	}
	var mine []pending
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+28 {
			continue
		}
		var id TopicID
		copy(id[:], k[len(start):])
		part := int32(binary.BigEndian.Uint32(k[len(start)+16:]))
		p, err := decodePendingTxnOffset(id, part, it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if p.ProducerID == pid {
			mine = append(mine, pending{bytes.Clone(k), p})
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	if err := it.Close(); err != nil {
		return err
	}
	stored := false
	for _, m := range mine {
		if err := a.b.Delete(m.key, nil); err != nil {
			return err
		}
		if !commit {
			continue
		}
		o := m.p.Offset
		if _, ok, err := a.topicByID(o.TopicID); err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		if err := a.storeOffset(group, o.TopicID, &o); err != nil {
			return err
		}
		stored = true
	}
	if stored {
		if _, exists, err := a.group(group); err != nil {
			return err
		} else if !exists {
			g := Group{Name: group, Kind: GroupClassic, StateTimestamp: a.clock}
			return a.putGroup(&g)
		}
	}
	return nil
}

func (a *applier) topicByID(id TopicID) (Topic, bool, error) {
	name, ok, err := a.get(topicIDKey(id))
	if err != nil || !ok {
		return Topic{}, false, err
	}
	return a.topic(string(name))
}

func (a *applier) txnSweep(c TxnSweep) (Result, error) {
	if len(c.TransactionalIDs) > MaxTxnSweepIDs {
		return failed(kerr.InvalidRequest, "more than %d transactional ids", MaxTxnSweepIDs), nil
	}
	for _, id := range c.TransactionalIDs {
		s, ok, err := a.txn(id)
		if err != nil {
			return Result{}, err
		}
		switch {
		case !ok:
		case txnTimedOut(&s, a.clock):
			// KIP-588: abort with a bumped epoch, so the producer's
			// next request is fenced and it re-initializes.
			prev := s.ProducerEpoch
			if s.ProducerEpoch < maxBumpableEpoch {
				s.ProducerEpoch++
				s.PrevEpoch, s.PrevBy, s.PrevProducerID = prev, BumpByTimeout, s.ProducerID
			}
			if err := a.completeTxn(&s, false); err != nil {
				return Result{}, err
			}
			if err := a.putTxn(&s); err != nil {
				return Result{}, err
			}
		case txnIDExpired(&s, a.clock):
			if err := a.b.Delete(txnKey(id), nil); err != nil {
				return Result{}, err
			}
		}
	}
	return Result{}, nil
}

func txnTimedOut(s *TxnState, now int64) bool {
	return s.Status == TxnOngoing && now-s.StartMs >= int64(s.TimeoutMs)
}

func txnIDExpired(s *TxnState, now int64) bool {
	return s.Status != TxnOngoing && now-s.UpdatedMs >= TxnIDExpirationMs
}

// checkTxnBatch applies KIP-890's first defence to a transactional batch:
// it is accepted only into a partition its producer's ongoing transaction
// added, in that transaction's epoch. A batch from a fenced epoch is
// INVALID_PRODUCER_EPOCH (the producer recovers by re-initializing); one
// outside any transaction is INVALID_TXN_STATE.
func (a *applier) checkTxnBatch(cb *CommitBatch, br *BatchResult) (*pendingOpen, bool, error) {
	if !cb.Transactional {
		return nil, false, nil
	}
	if cb.ProducerID < 0 {
		br.Code = kerr.InvalidRecord.Code
		return nil, true, nil
	}
	key := openTxnKey(nil, cb.TopicID, cb.Partition, cb.ProducerID)
	v, ok, err := a.get(key)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		br.Code = kerr.InvalidTxnState.Code
		pv, pok, err := a.get(producerStateKey(nil, cb.TopicID, cb.Partition, cb.ProducerID))
		if err != nil {
			return nil, false, err
		}
		if pok {
			if st, err := decodeProducerState(pv); err == nil && st.Epoch > cb.ProducerEpoch {
				br.Code = kerr.InvalidProducerEpoch.Code
			}
		}
		return nil, true, nil
	}
	o, err := decodeOpenTxn(v)
	if err != nil {
		return nil, false, err
	}
	switch {
	case cb.ProducerEpoch < o.Epoch:
		br.Code = kerr.InvalidProducerEpoch.Code
		return nil, true, nil
	case cb.ProducerEpoch > o.Epoch:
		br.Code = kerr.InvalidTxnState.Code
		return nil, true, nil
	}
	if o.FirstOffset >= 0 {
		return nil, false, nil
	}
	return &pendingOpen{key: key, open: o}, false, nil
}

// pendingOpen is an open transaction whose first offset in the partition
// the batch being applied sets.
type pendingOpen struct {
	key  []byte
	open openTxn
}

func (a *applier) recordTxnFirst(p *pendingOpen, baseOffset int64) error {
	if p == nil {
		return nil
	}
	p.open.FirstOffset = baseOffset
	a.valBuf = p.open.encode(a.valBuf[:0])
	return a.b.Set(p.key, a.valBuf, nil)
}

// View side.

// Txn returns a transactional id's state.
func (v *View) Txn(id string) (TxnState, bool, error) {
	val, ok, err := v.get(txnKey(id))
	if err != nil || !ok {
		return TxnState{}, false, err
	}
	s, err := decodeTxnState(id, val)
	return s, err == nil, err
}

// Txns returns every transactional id's state, sorted by id.
func (v *View) Txns() ([]TxnState, error) {
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTxn}, UpperBound: []byte{prefixTxn + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []TxnState
	for ok := it.First(); ok; ok = it.Next() {
		s, err := decodeTxnState(string(it.Key()[1:]), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, it.Error()
}

// TxnsDue returns the transactional ids a TxnSweep would act on at log
// clock now: timed out or expired.
func (v *View) TxnsDue(now int64) ([]string, error) {
	all, err := v.Txns()
	if err != nil {
		return nil, err
	}
	var due []string
	for i := range all {
		if txnTimedOut(&all[i], now) || txnIDExpired(&all[i], now) {
			due = append(due, all[i].TransactionalID)
		}
	}
	return due, nil
}

// OpenTxn is an ongoing transaction in one partition.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	// FirstOffset is its first record's offset, -1 before it wrote one.
	FirstOffset int64
}

// OpenTxns returns the transactions ongoing in a partition, by producer
// id.
func (v *View) OpenTxns(id TopicID, partition int32) ([]OpenTxn, error) {
	start, end := partitionSpan(prefixOpenTxn, id, partition)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []OpenTxn
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+8 {
			continue
		}
		o, err := decodeOpenTxn(it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, OpenTxn{ProducerID: int64(binary.BigEndian.Uint64(k[len(start):])), ProducerEpoch: o.Epoch, FirstOffset: o.FirstOffset})
	}
	return out, it.Error()
}

// LastStableOffset is the partition's last stable offset: the first
// offset of its oldest ongoing transaction, or the high watermark. A
// read_committed consumer reads no further.
func (v *View) LastStableOffset(id TopicID, partition int32, highWatermark int64) (int64, error) {
	open, err := v.OpenTxns(id, partition)
	if err != nil {
		return 0, err
	}
	lso := highWatermark
	for _, o := range open {
		if o.FirstOffset >= 0 {
			lso = min(lso, o.FirstOffset)
		}
	}
	return lso, nil
}

// AbortedTxn is one aborted transaction's range start in a partition, as
// Fetch's AbortedTransactions lists it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	// LastOffset is the offset of its abort marker.
	LastOffset int64
}

// AbortedTxns returns the aborted transactions of a partition that
// overlap [from, to): their marker is at or after from and their first
// offset is before to. At most limit are returned (0: no limit), in
// marker order.
func (v *View) AbortedTxns(id TopicID, partition int32, from, to int64, limit int) ([]AbortedTxn, error) {
	_, end := partitionSpan(prefixAbortedTxn, id, partition)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: abortedTxnKey(id, partition, max(from, 0)), UpperBound: end})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []AbortedTxn
	for ok := it.First(); ok && (limit <= 0 || len(out) < limit); ok = it.Next() {
		k := it.Key()
		r := recordReader(it.Value())
		t := AbortedTxn{ProducerID: r.varint(), FirstOffset: r.varint(), LastOffset: int64(binary.BigEndian.Uint64(k[len(k)-8:]))}
		if err := r.done(); err != nil {
			return nil, corrupt("aborted transaction", err)
		}
		if t.FirstOffset < to {
			out = append(out, t)
		}
	}
	return out, it.Error()
}

// ProducerInfo is a producer's state in one partition, as
// DescribeProducers reports it.
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the last sequence written, -1 if none.
	LastSequence int32
	// LastTimestamp is the log clock of its last write.
	LastTimestamp int64
	// CurrentTxnStartOffset is the first offset of its ongoing
	// transaction in the partition, -1 if none.
	CurrentTxnStartOffset int64
}

// Producers returns the producers with state in a partition, by id.
func (v *View) Producers(id TopicID, partition int32) ([]ProducerInfo, error) {
	start, end := partitionSpan(prefixProducerState, id, partition)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	open, err := v.OpenTxns(id, partition)
	if err != nil {
		return nil, err
	}
	var out []ProducerInfo
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+8 {
			continue
		}
		st, err := decodeProducerState(it.Value())
		if err != nil {
			return nil, err
		}
		pi := ProducerInfo{ProducerID: int64(binary.BigEndian.Uint64(k[len(start):])), ProducerEpoch: st.Epoch, LastSequence: -1, LastTimestamp: st.LastWriteMs, CurrentTxnStartOffset: -1}
		if n := len(st.Batches); n > 0 {
			pi.LastSequence = st.Batches[n-1].LastSeq
		}
		for _, o := range open {
			if o.ProducerID == pi.ProducerID {
				pi.CurrentTxnStartOffset = o.FirstOffset
			}
		}
		out = append(out, pi)
	}
	return out, it.Error()
}

// HasPendingTxnOffset reports whether an ongoing transaction has committed
// an offset of the group's partition (OffsetFetch's require_stable).
func (v *View) HasPendingTxnOffset(group string, id TopicID, partition int32) (bool, error) {
	start, end := spanOf(txnOffsetPartitionPrefix(group, id, partition))
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return false, err
	}
	defer it.Close()
	return it.First(), it.Error()
}
