package meta

import (
	"encoding/base64"
	"errors"
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

	// Feature levels (features.go).
	TypeFinalizeFeatures CommandType = 20
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
	// version is the newest encoding this build writes, at the highest
	// metadata level.
	version() uint16
	appendPayload(b []byte) []byte
}

// olderWriter is a command whose table row writes an older version at a
// lower metadata level: appendPayloadAt writes version v.
type olderWriter interface {
	appendPayloadAt(b []byte, v uint16) []byte
}

// levelRaiser is a command that raises the metadata level itself
// (FinalizeFeatures): it is written at the level it raises to.
type levelRaiser interface {
	raisesTo() int16
}

// buildBound is a command that can hold what this build cannot honour
// although it decodes it: a finalized feature level outside this build's
// range. DecodeCommand refuses it as it refuses a version it does not
// know, so a copy of this build halts before it, and a proposer of this
// build cannot write it.
type buildBound interface {
	beyondBuild() error
}

// TopicID is a topic's Kafka UUID. Apply derives it from the log, so every
// replica assigns the same one; it is never all zeros.
type TopicID [16]byte

// String formats the id the way Kafka tools print a UUID.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is unset. No topic has the zero id.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// EncodeCommand wraps c in its envelope at the newest version this build
// writes. Tests and tools use it; a proposer writing to a shared log
// uses EncodeCommandAt.
func EncodeCommand(c Command) RawCommand {
	return RawCommand{Type: c.Type(), Version: c.version(), Payload: c.appendPayload(nil)}
}

// ErrNotAtLevel: a command this build writes only from a higher metadata
// level than the log's.
var ErrNotAtLevel = errors.New("meta: command not written at this metadata level")

// EncodeCommandAt wraps c in its envelope at the highest version that
// the finalized strand.metadata.version, level, lets this build write
// (the table's writtenFrom), so that every agent the level admits reads
// it. A command that raises the level itself is written at the level it
// raises to: its proposer checked that every live agent supports that.
func EncodeCommandAt(c Command, level int16) (RawCommand, error) {
	s := specOf(c.Type())
	if s == nil {
		return RawCommand{}, fmt.Errorf("%w: %v", ErrUnknownCommand, c.Type())
	}
	if r, ok := c.(levelRaiser); ok {
		level = max(level, r.raisesTo())
	}
	v, ok := s.writeVersion(level)
	if !ok {
		return RawCommand{}, fmt.Errorf("%w: %s needs a higher %s than %d", ErrNotAtLevel, s.name, FeatureMetadata, level)
	}
	if v == c.version() {
		return RawCommand{Type: c.Type(), Version: v, Payload: c.appendPayload(nil)}, nil
	}
	o, ok := c.(olderWriter)
	if !ok {
		return RawCommand{}, fmt.Errorf("meta: %s writes version %d at level %d but has no encoder for it", s.name, v, level)
	}
	return RawCommand{Type: c.Type(), Version: v, Payload: o.appendPayloadAt(nil, v)}, nil
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
	if b, ok := c.(buildBound); ok {
		if err := b.beyondBuild(); err != nil {
			return nil, fmt.Errorf("%v version %d: %w", rc.Type, rc.Version, err)
		}
	}
	return c, nil
}
