package meta

import (
	"encoding/base64"
	"fmt"
)

// CommandType names a command in its envelope. Values are part of the log
// format: never reuse or renumber one. What each type is (its name, the
// versions this build decodes, its apply) is its row in commandTable.
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

// String is the command's name from the table.
func (t CommandType) String() string {
	if s := specOf(t); s != nil {
		return s.name
	}
	return fmt.Sprintf("CommandType(%d)", uint16(t))
}

// Command is a mutation of the metadata. The set is closed: each command
// type encodes itself (appendPayload, at the version it reports), and its
// row in commandTable holds a decoder per version this build reads and
// the apply that knows what each version means. A new field means a new
// version; the old decoder stays until no log or snapshot can hold the
// old version.
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

// EncodeCommand wraps c in its envelope.
func EncodeCommand(c Command) RawCommand {
	return RawCommand{Type: c.Type(), Version: c.version(), Payload: c.appendPayload(nil)}
}

// DecodeCommand decodes a command envelope. Strings are copied; nothing
// aliases rc.Payload. A type or version this build does not know is
// ErrUnknownCommand.
func DecodeCommand(rc RawCommand) (Command, error) {
	s := specOf(rc.Type)
	if s == nil {
		return nil, fmt.Errorf("%w: %v version %d", ErrUnknownCommand, rc.Type, rc.Version)
	}
	decode := s.decoder(rc.Version)
	if decode == nil {
		return nil, fmt.Errorf("%w: %v version %d", ErrUnknownCommand, rc.Type, rc.Version)
	}
	c, err := decode(rc.Payload)
	if err != nil {
		return nil, corrupt(s.name, err)
	}
	return c, nil
}
