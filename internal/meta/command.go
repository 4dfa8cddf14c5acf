package meta

import (
	"encoding/base64"
	"fmt"
)

// CommandType names a command in its envelope. Values are part of the log
// format: never reuse or renumber one.
type CommandType uint16

const (
	TypeCreateTopic      CommandType = 1
	TypeDeleteTopic      CommandType = 2
	TypeCreatePartitions CommandType = 3
	TypeAlterConfigs     CommandType = 4
	TypeCommitObject     CommandType = 5
	TypeOffsetCommit     CommandType = 6
	TypeGroupState       CommandType = 7
	TypeDeleteGroup      CommandType = 8
	TypeOffsetDelete     CommandType = 9
	TypeExpireOffsets    CommandType = 10
	TypeDeleteRecords    CommandType = 11
	TypeAgentHeartbeat   CommandType = 12

	// Idempotent producers (producer.go).
	TypeAllocateProducerID CommandType = 13

	// Transactions (txn.go).
	TypeInitTransactionalProducer CommandType = 14
	TypeAddPartitionsToTxn        CommandType = 15
	TypeAddOffsetsToTxn           CommandType = 16
	TypeTxnOffsetCommit           CommandType = 17
	TypeEndTxn                    CommandType = 18
	TypeTxnSweep                  CommandType = 19
)

func (t CommandType) String() string {
	switch t {
	case TypeCreateTopic:
		return "CreateTopic"
	case TypeDeleteTopic:
		return "DeleteTopic"
	case TypeCreatePartitions:
		return "CreatePartitions"
	case TypeAlterConfigs:
		return "AlterConfigs"
	case TypeCommitObject:
		return "CommitObject"
	case TypeOffsetCommit:
		return "OffsetCommit"
	case TypeGroupState:
		return "GroupState"
	case TypeDeleteGroup:
		return "DeleteGroup"
	case TypeOffsetDelete:
		return "OffsetDelete"
	case TypeExpireOffsets:
		return "ExpireOffsets"
	case TypeDeleteRecords:
		return "DeleteRecords"
	case TypeAgentHeartbeat:
		return "AgentHeartbeat"
	case TypeAllocateProducerID:
		return "AllocateProducerID"
	case TypeInitTransactionalProducer:
		return "InitTransactionalProducer"
	case TypeAddPartitionsToTxn:
		return "AddPartitionsToTxn"
	case TypeAddOffsetsToTxn:
		return "AddOffsetsToTxn"
	case TypeTxnOffsetCommit:
		return "TxnOffsetCommit"
	case TypeEndTxn:
		return "EndTxn"
	case TypeTxnSweep:
		return "TxnSweep"
	}
	return fmt.Sprintf("CommandType(%d)", uint16(t))
}

// Command is a mutation of the metadata. The set is closed: each command
// type has an encoder and a decoder per version here, and apply knows what
// each version means. A new field means a new version; the old decoder
// stays until no log or snapshot can hold the old version.
type Command interface {
	Type() CommandType
	// version is the encoding this build writes.
	version() uint16
	appendPayload(b []byte) []byte
}

// TopicID is a topic's Kafka UUID. Apply derives it from the log, so every
// replica assigns the same one; it is never all zeros.
type TopicID [16]byte

// String formats the id the way Kafka tools print a UUID.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is unset. No topic has the zero id.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// CreateTopic creates a topic with Partitions empty partitions.
// Result: TopicID, or TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
// INVALID_PARTITIONS, INVALID_CONFIG.
type CreateTopic struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// DeleteTopic deletes a topic, its partitions, its offset index and every
// group's committed offsets of it. It names the topic by ID when ID is
// set, else by Name.
// Result: TopicID of the deleted topic, or UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION.
type DeleteTopic struct {
	Name string
	ID   TopicID
}

// CreatePartitions grows a topic to NewTotal partitions.
// Result: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS.
type CreatePartitions struct {
	Name     string
	NewTotal int32
}

// AlterConfigs changes a topic's configs. Incremental applies Set and
// Delete to the current configs; otherwise the configs become exactly Set
// and Delete must be empty. Apply stores any key and value: which keys
// and values are valid is the Kafka layer's business.
// Result: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (a key in both Set
// and Delete, or Delete without Incremental), INVALID_CONFIG.
type AlterConfigs struct {
	Name        string
	Set         map[string]string
	Delete      []string
	Incremental bool
}

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

func (CreateTopic) Type() CommandType      { return TypeCreateTopic }
func (DeleteTopic) Type() CommandType      { return TypeDeleteTopic }
func (CreatePartitions) Type() CommandType { return TypeCreatePartitions }
func (AlterConfigs) Type() CommandType     { return TypeAlterConfigs }
func (CommitObject) Type() CommandType     { return TypeCommitObject }

func (CreateTopic) version() uint16      { return 1 }
func (DeleteTopic) version() uint16      { return 1 }
func (CreatePartitions) version() uint16 { return 1 }
func (AlterConfigs) version() uint16     { return 1 }
func (CommitObject) version() uint16     { return 2 }

func (c CreateTopic) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	b = appendVarint(b, int64(c.Partitions))
	return appendStringMap(b, c.Configs)
}

func (c DeleteTopic) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	return append(b, c.ID[:]...)
}

func (c CreatePartitions) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	return appendVarint(b, int64(c.NewTotal))
}

func (c AlterConfigs) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	b = appendStringMap(b, c.Set)
	b = appendStringList(b, c.Delete)
	return appendBool(b, c.Incremental)
}

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

// EncodeCommand wraps c in its envelope.
func EncodeCommand(c Command) RawCommand {
	return RawCommand{Type: c.Type(), Version: c.version(), Payload: c.appendPayload(nil)}
}

// DecodeCommand decodes a command envelope. Strings are copied; nothing
// aliases rc.Payload. A type or version this build does not know is
// ErrUnknownCommand.
func DecodeCommand(rc RawCommand) (Command, error) {
	r := &reader{b: rc.Payload}
	var c Command
	switch {
	case rc.Type == TypeCreateTopic && rc.Version == 1:
		var ct CreateTopic
		ct.Name = r.string()
		ct.Partitions = r.int32()
		ct.Configs = r.stringMap()
		c = ct
	case rc.Type == TypeDeleteTopic && rc.Version == 1:
		var dt DeleteTopic
		dt.Name = r.string()
		r.fixed(dt.ID[:])
		c = dt
	case rc.Type == TypeCreatePartitions && rc.Version == 1:
		var cp CreatePartitions
		cp.Name = r.string()
		cp.NewTotal = r.int32()
		c = cp
	case rc.Type == TypeAlterConfigs && rc.Version == 1:
		var ac AlterConfigs
		ac.Name = r.string()
		ac.Set = r.stringMap()
		ac.Delete = r.stringList()
		ac.Incremental = r.bool()
		c = ac
	case rc.Type == TypeCommitObject && (rc.Version == 1 || rc.Version == 2):
		c = decodeCommitObject(r, rc.Version)
	case rc.Type == TypeDeleteRecords && rc.Version == 1:
		c = decodeDeleteRecordsV1(r)
	case rc.Type == TypeAgentHeartbeat && rc.Version == 1:
		c = decodeAgentHeartbeatV1(r)
	case rc.Type == TypeAgentHeartbeat && rc.Version == 2:
		c = decodeAgentHeartbeatV2(r)
	case rc.Type == TypeAllocateProducerID && rc.Version == 1:
		c = decodeAllocateProducerIDV1(r)
	default:
		var ok bool
		if c, ok = decodeGroupCommand(rc, r); ok {
			break
		}
		if c, ok = decodeTxnCommand(rc, r); ok {
			break
		}
		return nil, fmt.Errorf("%w: %v version %d", ErrUnknownCommand, rc.Type, rc.Version)
	}
	if err := r.done(); err != nil {
		return nil, corrupt(rc.Type.String(), err)
	}
	return c, nil
}

// decodeCommitObject decodes version 1 (no Transactional flag) and 2.
func decodeCommitObject(r *reader, version uint16) CommitObject {
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
	return co
}
