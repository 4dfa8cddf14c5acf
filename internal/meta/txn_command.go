package meta

// Transaction commands: their types and codec (txn.go has the state they
// change, txn_apply.go their apply).

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

func decodeInitTransactionalProducerV1(p []byte) (InitTransactionalProducer, error) {
	r := &reader{b: p}
	var c InitTransactionalProducer
	c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
	c.TimeoutMs = r.int32()
	return c, r.done()
}

func decodeAddPartitionsToTxnV1(p []byte) (AddPartitionsToTxn, error) {
	r := &reader{b: p}
	var c AddPartitionsToTxn
	c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
	n := r.count(minTopicPartitionBytes)
	if n > 0 {
		c.Partitions = make([]TopicPartition, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		c.Partitions[i] = TopicPartition{Topic: r.string(), Partition: r.int32()}
	}
	return c, r.done()
}

func decodeAddOffsetsToTxnV1(p []byte) (AddOffsetsToTxn, error) {
	r := &reader{b: p}
	var c AddOffsetsToTxn
	c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
	c.Group = r.string()
	return c, r.done()
}

func decodeTxnOffsetCommitV1(p []byte) (TxnOffsetCommit, error) {
	r := &reader{b: p}
	var c TxnOffsetCommit
	c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
	c.Group = r.string()
	c.Generation = r.int32()
	c.Offsets = r.offsetCommitPartitions()
	return c, r.done()
}

// readEndTxnV1 reads version 1's fields, which had no BumpEpoch.
func readEndTxnV1(r *reader) EndTxn {
	var c EndTxn
	c.TransactionalID, c.ProducerID, c.ProducerEpoch = r.txnProducer()
	c.Commit = r.bool()
	c.Seq = r.varint()
	return c
}

func decodeEndTxnV1(p []byte) (EndTxn, error) {
	r := &reader{b: p}
	c := readEndTxnV1(r)
	return c, r.done()
}

func decodeEndTxnV2(p []byte) (EndTxn, error) {
	r := &reader{b: p}
	c := readEndTxnV1(r)
	c.BumpEpoch = r.bool()
	return c, r.done()
}

func decodeTxnSweepV1(p []byte) (TxnSweep, error) {
	r := &reader{b: p}
	c := TxnSweep{TransactionalIDs: r.stringList()}
	return c, r.done()
}
