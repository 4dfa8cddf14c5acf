package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/partwatch"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/replica"
)

// The data path as Produce and Fetch see it: narrow interfaces over
// internal/produce and internal/fetch, held in Deps, so a test can wire a
// fault-injecting pipeline or reader.

// Appender takes the record batches Produce accepted. *produce.Pipeline
// implements it.
type Appender interface {
	// Submit buffers batches for one flush and returns without waiting
	// for the commit; calls are committed in the order Submit returned.
	// It copies the batches' Data.
	Submit(ctx context.Context, batches []produce.Batch) (*produce.Ack, error)
}

var _ Appender = (*produce.Pipeline)(nil)

// Fetcher reads committed record batches, those with offsets below upTo
// (fetch.NoBound: all); read_committed passes the last stable offset.
// *fetch.Reader implements it.
type Fetcher interface {
	ReadUpTo(ctx context.Context, view *meta.View, topicID meta.TopicID, partition int32, offset int64, maxBytes int32, upTo int64) (fetch.FetchResult, error)
}

var _ Fetcher = (*fetch.Reader)(nil)

// AnswerRecycler is a Fetcher's optional power: Recycle takes back the
// Records of a FetchResult once the Fetch answer holding them is
// written, to copy later answers into. *fetch.Reader implements it.
type AnswerRecycler interface {
	Recycle(records []byte)
}

var _ AnswerRecycler = (*fetch.Reader)(nil)

// Notifier wakes long-polling Fetches on the partitions they read.
// *replica.Replica implements it: Watch registers a watch that apply
// notifies after each batch that changes one of the partitions, and
// with all of them on a halt (which its Err method then reports) and on
// Close (package partwatch).
type Notifier interface {
	Watch(parts []meta.PartitionRef) *partwatch.Watch
}

var _ Notifier = (*replica.Replica)(nil)

// producer returns Deps.Produce, or ErrMissingDeps.
func (d *Deps) producer() (Appender, error) {
	if d == nil || d.Produce == nil {
		return nil, ErrMissingDeps
	}
	return d.Produce, nil
}

// fetcher returns Deps.Fetch, or ErrMissingDeps.
func (d *Deps) fetcher() (Fetcher, error) {
	if d == nil || d.Fetch == nil {
		return nil, ErrMissingDeps
	}
	return d.Fetch, nil
}

// notifier returns Deps.Changes, else Deps.Meta when it is a Notifier (a
// *replica.Replica is), else ErrMissingDeps.
func (d *Deps) notifier() (Notifier, error) {
	if d == nil {
		return nil, ErrMissingDeps
	}
	if d.Changes != nil {
		return d.Changes, nil
	}
	if n, ok := d.Meta.(Notifier); ok {
		return n, nil
	}
	return nil, ErrMissingDeps
}

// produceErrCode maps a failed Submit or Ack.Wait to the partition error
// a producer can act on. Every one of them is retriable: the batches were
// not acknowledged, and may or may not be committed (see produce.ErrCommit).
func produceErrCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, produce.ErrUpload):
		return kerr.KafkaStorageError
	case errors.Is(err, produce.ErrCommit),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	case errors.Is(err, produce.ErrClosed):
		// This agent is stopping: NOT_LEADER_OR_FOLLOWER makes the
		// client refresh metadata and go to another agent.
		return kerr.NotLeaderForPartition
	case errors.Is(err, produce.ErrInvalidBatch):
		// Validation passed, so the pipeline disagrees with it about the
		// bytes: the same answer Kafka gives for bytes it cannot read.
		return kerr.CorruptMessage
	case errors.Is(err, produce.ErrTooLarge):
		return kerr.MessageTooLarge
	}
	return kerr.UnknownServerError
}

// fetchErrCode maps a failed Read to the partition error of a Fetch, as
// Kafka maps a failing log read:
//   - damaged bytes (a CRC-32C mismatch, batches that do not frame or
//     disagree with the index) are CORRUPT_MESSAGE, Kafka's answer for
//     a CorruptRecordException met reading a log (ReplicaManager's
//     readFromLog, Errors.forException). librdkafka hands it to the
//     application (kcat prints it) and the Java consumer throws it from
//     poll; kgo retries it quietly, as a retriable error, unless the
//     client keeps retriable fetch errors.
//   - a missing object is UNKNOWN_SERVER_ERROR, what Kafka's tiered
//     storage answers when a remote segment is gone (its
//     RemoteResourceNotFoundException maps to no API error). Not
//     KAFKA_STORAGE_ERROR: kgo strips that one and librdkafka takes it
//     as "leader moved" and refreshes metadata, so a consumer would
//     retry forever with nothing to show; this one kgo returns in
//     Fetches.Errors and librdkafka hands to the application.
//   - a store that cannot be read now is KAFKA_STORAGE_ERROR: clients
//     retry it quietly, which is right for a transient fault.
func fetchErrCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, fetch.ErrCorrupt):
		return kerr.CorruptMessage
	case errors.Is(err, fetch.ErrMissing):
		return kerr.UnknownServerError
	}
	return kerr.KafkaStorageError
}

// isDamage reports a read error the fetch path already logged, once per
// object (fetch.DamageLog), so a fetch that fails on it logs nothing.
func isDamage(err error) bool {
	return errors.Is(err, fetch.ErrCorrupt) || errors.Is(err, fetch.ErrMissing)
}

// warn logs a local fault met while answering r.
func (r *Request) warn(msg string, args ...any) {
	if r.Conn == nil || r.Conn.srv == nil {
		return
	}
	r.Conn.srv.log.Warn(msg, append([]any{"conn", r.Conn.id, "key", r.Key, "version", r.Version}, args...)...)
}

// untilDrain returns ctx, also canceled once the server starts shutting
// down, so a long poll ends and is answered instead of holding up a
// graceful Shutdown for its whole MaxWait.
func (r *Request) untilDrain(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if r.Conn == nil || r.Conn.srv == nil {
		return ctx, cancel
	}
	drain := r.Conn.srv.drain
	go func() {
		select {
		case <-drain:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
