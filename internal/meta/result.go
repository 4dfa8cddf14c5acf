package meta

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/acl"
)

// Result is what applying one command produced. It is a pure function of
// the state and the command, so every replica computes the same one; the
// proposer reads it from its own copy.
type Result struct {
	// Code is a Kafka error code (kerr), 0 for success. Message says
	// more for a human.
	Code    int16
	Message string
	// TopicID is set by CreateTopic and DeleteTopic.
	TopicID TopicID
	// Batches is set by CommitObject, one per CommitBatch in order, and
	// by DeleteRecords, one per partition in order (Code and
	// LogStartOffset).
	Batches []BatchResult
	// Codes is set by OffsetCommit, OffsetDelete, CreateACLs and DeleteACLs: a Kafka error code
	// per offset or partition, in order.
	Codes []int16
	// DeletedACLs is set by DeleteACLs: per filter, the bindings it
	// deleted.
	DeletedACLs [][]acl.Binding
	// ProducerID and ProducerEpoch are set by AllocateProducerID.
	ProducerID    int64
	ProducerEpoch int16
	// Offsets names every committed offset the command stored or
	// deleted, and Groups every group whose state it stored or deleted
	// (offset_notes.go), in apply order.
	Offsets []OffsetRef
	Groups  []string
	// SchemaID and SchemaVersion are set by RegisterSchema,
	// SchemaVersions by DeleteSchemas; SchemaError is Confluent's error
	// code of a schema command's refusal (schemas.go).
	SchemaID       int32
	SchemaVersion  int32
	SchemaVersions []int32
	SchemaError    int32
	// RelationID is set by CreateRelation (the existing relation's
	// under IfNotExists), RelationIDs by DropRelation (what it dropped,
	// dependents first), RelationSkipped by both (names IF [NOT] EXISTS
	// skipped); SQLState is PostgreSQL's SQLSTATE of a catalog
	// command's refusal, or of the notice a skip gives (sql.go).
	RelationID      uint64
	RelationIDs     []uint64
	RelationSkipped []string
	SQLState        string
	// ConnectorCreated is set by a PutConnector that created the
	// connector, ConnectorGeneration by every connector command that
	// found it (its generation after apply); ConnectorError is the HTTP
	// status Connect answers a connector command's refusal with
	// (connect.go).
	ConnectorCreated    bool
	ConnectorGeneration uint64
	ConnectorError      int32
	// ShareGrants is set by ShareAcquire: the ranges acquired, with
	// their delivery counts. ShareArchived counts the records a share
	// command archived, ShareLockTimeouts the acquired records whose
	// lock it found expired, ShareReleased the records ShareRelease made
	// available again, ShareDeleted the states ShareStateDelete deleted;
	// ShareStartOffset is the share partition's SPSO after apply
	// (share_state.go).
	ShareGrants       []ShareGrant
	ShareArchived     int64
	ShareLockTimeouts int64
	ShareReleased     int64
	ShareDeleted      int
	ShareStartOffset  int64
}

// BatchResult is the outcome of one CommitBatch.
type BatchResult struct {
	Code int16
	// BaseOffset is the offset of the batch's first record.
	BaseOffset int64
	// LogStartOffset is the partition's log start offset after apply.
	LogStartOffset int64
}

// Err returns the command's Kafka error, or nil.
func (r Result) Err() error {
	if r.Code == 0 {
		return nil
	}
	if r.Message == "" {
		return kerr.ErrorForCode(r.Code)
	}
	return fmt.Errorf("%w: %s", kerr.ErrorForCode(r.Code), r.Message)
}

func failed(e *kerr.Error, format string, args ...any) Result {
	return Result{Code: e.Code, Message: fmt.Sprintf(format, args...)}
}
