// Package produce owns an agent's write path from validated record batches
// to committed offsets: it buffers the batches of every partition and
// connection, cuts them into multi-partition data objects (one per flush),
// uploads the objects to the object store, and commits them through the
// shared log with CommitObject commands, answering each caller with the
// base offsets that apply assigned.
//
// # Flush policy
//
// A flush is cut from the open buffer when it holds data, an upload slot
// is free, and one of these holds:
//
//   - no upload is running: light load pays only the storage floor;
//   - the buffer reached FlushBytes (or MaxFlushBatches);
//   - FlushInterval passed since the buffer's first batch arrived: the
//     interval bounds the wait behind a running upload, it is not a tick;
//   - the pipeline is closing.
//
// With MaxPutsPerSec set, flushes are also paced: cuts keep to a
// schedule of one every 1/MaxPutsPerSec (stretched to leave room for
// hedges), and none is cut before its turn unless it is full (or holds
// PacedCutBytes) or the pipeline is closing. At high ingest objects then grow instead of the
// PUT rate. A flush whose first batch arrives after its turn has come
// waits FlushInterval for the calls arriving with it, then goes: under
// load producers' requests come in bursts, each freed by a commit, and
// cut at the first, the rest would wait a whole spacing. A cut that came
// late does not move the schedule unless the pipeline was idle for a
// spacing, so the flushes that follow keep their size.
//
// What arrives while uploads run joins the next flush (group commit).
// Uploads of different flushes run concurrently, up to
// MaxConcurrentUploads, but one committer proposes them in the order they
// were cut, taking every flush whose upload has ended as one ProposeBatch,
// so one log entry carries several objects and a producer's batches keep
// their order.
//
// # Failures
//
// An upload is retried with the same key and bytes (a lost reply is
// harmless), a bounded number of times, and may be hedged with a second
// attempt under a new key (hedge.go): the first to succeed is committed,
// so a flush commits once whichever wins; if it still fails, the calls in
// that flush fail with ErrUpload and nothing of it is committed. Later
// flushes still commit: their callers were acknowledged nothing earlier,
// and a producer that got the error retries, which Kafka allows for
// producers without idempotence. For idempotent producers apply's
// sequence checks refuse the gap (OUT_OF_ORDER_SEQUENCE_NUMBER), and a
// retry of a batch that did commit gets its first offsets back.
// A failed or ambiguous proposal fails its calls with ErrCommit; with
// replica.ErrAmbiguous the commit may still apply, exactly once, and never
// after a later flush's commit. The pipeline does not propose a commit
// again: the replica already retried its append.
//
// # Time
//
// Config.Clock times the flush interval, the waits between upload tries
// (package retry) and the metrics; the per-attempt upload timeout stays
// on the wall clock.
package produce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/segment"
)

// Sentinel errors.
var (
	// ErrClosed: the pipeline is closed or closing.
	ErrClosed = errors.New("produce: pipeline closed")
	// ErrInvalidBatch: a Batch's Data is not whole v2 record batches, or
	// its Records or BatchCount disagree with them. Nothing was buffered.
	ErrInvalidBatch = errors.New("produce: invalid batch")
	// ErrTooLarge: one call holds more batches or bytes than a flush can.
	ErrTooLarge = errors.New("produce: call too large for one flush")
	// ErrUpload: the data object could not be written; nothing of it was
	// committed. Retriable (KAFKA_STORAGE_ERROR).
	ErrUpload = errors.New("produce: data object upload failed")
	// ErrCommit: proposing the CommitObject failed. When the cause is
	// replica.ErrAmbiguous or a closed replica, the batches may still be
	// committed. Retriable (REQUEST_TIMED_OUT).
	ErrCommit = errors.New("produce: commit failed")
)

// Defaults for Config.
const (
	// DefaultFlushInterval bounds how long a batch waits behind a running
	// upload before its own upload starts. It adds to latency only when an
	// upload is running, so it trades little: against a store with tens
	// to hundreds of ms per PUT, MaxConcurrentUploads / PUT latency bounds
	// the object rate long before 1/FlushInterval does, and against a fast
	// store uploads end before the interval and the idle rule cuts
	// sooner. 5 ms keeps the added wait small next to any real store's
	// floor.
	DefaultFlushInterval = 5 * time.Millisecond
	// DefaultFlushBytes cuts a flush at 4 MiB of batch data: large enough
	// that PUT cost per byte is low, small enough that one object uploads
	// in well under a second.
	DefaultFlushBytes = 4 << 20
	// DefaultMaxBufferedBytes bounds the batch bytes accepted but not yet
	// committed: the open buffer, uploads and commits in flight.
	DefaultMaxBufferedBytes = 64 << 20
	// DefaultMaxConcurrentUploads bounds uploads in flight.
	DefaultMaxConcurrentUploads = 4
	// DefaultMaxFlushBatches bounds the batches in one flush, and so the
	// size of its CommitObject: at most maxCommitBatchBytes each, 4096
	// batches take at most 324 KiB of a 1 MiB log entry.
	DefaultMaxFlushBatches = 4096
	// DefaultMaxCommitBytes bounds the estimated size of the commands of
	// one ProposeBatch; it must not exceed the replica's MaxEntryBytes.
	DefaultMaxCommitBytes = replica.DefaultMaxEntryBytes - 16<<10
	// DefaultUploadAttempts bounds the tries of one upload.
	DefaultUploadAttempts = 5
	// DefaultUploadTimeout bounds one upload attempt.
	DefaultUploadTimeout = 30 * time.Second
)

const (
	// maxCommitObjects bounds the objects in one ProposeBatch, well under
	// meta's default MaxEntryCommands.
	maxCommitObjects = 256
	// maxCommitBatchBytes bounds one encoded CommitBatch: a 16-byte topic
	// id and ten varints of at most 5 (int32), 3 (int16) or 10 (int64)
	// bytes.
	maxCommitBatchBytes = 16 + 5 + 10 + 10 + 5 + 5 + 10 + 10 + 10 + 3 + 5
	// commitOverheadBytes bounds a command's envelope and everything in a
	// CommitObject but its key and batches.
	commitOverheadBytes = 64
	uploadBackoffMin    = 10 * time.Millisecond
	uploadBackoffMax    = time.Second
	// maxFlushObjectBytes bounds one object below the format's limit.
	maxFlushObjectBytes = segment.MaxObjectBytes / 2
	// maxFreeWriters bounds the segment writers kept for reuse.
	maxFreeWriters = 4
)

// ObjectCache receives each data object after its upload, so fetches of
// fresh data need no GET. fetch.Cache implements it.
type ObjectCache interface {
	// PutObject takes ownership of data: the pipeline never touches it
	// again.
	PutObject(key string, data []byte)
}

// Observer receives metrics. Calls come from the pipeline's goroutines,
// outside its locks, and must not block.
type Observer interface {
	// FlushCut: a flush was cut holding batchBytes of batch data in
	// batches batches, from calls calls.
	FlushCut(batchBytes, batches, calls int)
	// UploadDone: an object upload ended after attempts tries, and the
	// flush is ready for the committer.
	UploadDone(objectBytes, attempts int, d time.Duration, err error)
	// CommitDone: one ProposeBatch of objects ended.
	CommitDone(objects int, d time.Duration, err error)
	// FlushDone: a flush ended, committed or failed; d runs from its
	// first batch's arrival, the longest any caller in it waited.
	FlushDone(batchBytes int, d time.Duration, err error)
}

// Proposer is what the pipeline needs of the metadata replica: to
// propose its CommitObject commands and learn their results. It reads
// no View: apply's results carry every offset the callers are answered
// with. *replica.Replica implements it, metatest.DB in memory.
type Proposer interface {
	// ProposeBatch proposes cmds in one log entry and returns their
	// results once applied locally. replica.ErrTooLarge means nothing was
	// appended; after replica.ErrAmbiguous, replica.ErrClosed or a
	// context error the commands may still apply. It keeps nothing of
	// cmds once it returns: the pipeline reuses the slice.
	ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error)
}

var _ Proposer = (*replica.Replica)(nil)

// PacedLinger is the producer linger to give clients of an agent whose
// flushes are paced by a budget of putsPerSec (Config.MaxPutsPerSec):
// two fifths of the flush spacing (1.1/putsPerSec seconds, with room for
// the default hedges), at most 50 ms. An idempotent Kafka producer keeps
// at most five produce requests in flight per broker, and each is held
// until the paced flush it joined is uploaded and committed: with a
// short linger the five leave in the first milliseconds of a spacing and
// later records wait in the client for a whole extra flush, with a long
// one every record waits the linger. TestPacedUploadsSimulated
// (paced_sim_test.go) measured the rule on the s3-standard profile at 10
// MB/s: produce p99 268 ms at 10 PUT/s (318 ms with a fifth of the
// spacing) and 453 ms at 4 (450 ms). At 50 MB/s uploads take longer and
// a longer linger does better (about 110 ms at 4 PUT/s).
func PacedLinger(putsPerSec float64) time.Duration {
	return min(time.Duration(0.4*1.1/putsPerSec*float64(time.Second)), 50*time.Millisecond)
}

// Config configures a Pipeline.
type Config struct {
	// Store receives the data objects.
	Store objstore.Store
	// Express, when set, takes the data objects instead of Store: each
	// is written to two zones of the low-latency tier (package express)
	// and committed under the key naming them. Store must then be that
	// same tier (it reads and deletes what Express wrote). Hedging
	// (HedgePercentile) writes the third zone instead of a second key,
	// and MaxPutsPerSec counts PUTs per zone bucket.
	Express *express.Store
	// Replica proposes the commits and answers with their results.
	Replica Proposer
	// AgentID names this process incarnation in object keys, e.g. the
	// writer id and the replica's incarnation. Keys are
	// segment.ObjectKey(AgentID, n, KeyTime()) with n counting from 1,
	// so AgentID must never repeat across restarts: an object key is
	// written once.
	AgentID string
	// KeyTime is the time (unix ms) a new object's key carries. Apply
	// refuses to commit an object whose key time has fallen below the
	// garbage collector's orphan horizon (log clock minus grace), so it
	// must not run behind the log clock: the agent gives the later of
	// its clock and its replica's log clock. Default: Clock.
	KeyTime func() int64

	FlushInterval        time.Duration
	FlushBytes           int
	MaxFlushBatches      int
	MaxBufferedBytes     int
	MaxConcurrentUploads int
	MaxCommitBytes       int
	UploadAttempts       int
	UploadTimeout        time.Duration

	// HedgePercentile, if above 0, hedges an upload still running at
	// that quantile (below 1) of this pipeline's recent upload times, no
	// sooner than HedgeMinDelay: a second attempt writes the same bytes
	// under a new key, and the first to succeed is committed (hedge.go).
	// HedgeMaxRatio caps hedges as a fraction of uploads (default
	// DefaultHedgeMaxRatio when hedging). Zero values: no hedging, no
	// floor.
	HedgePercentile float64
	HedgeMaxRatio   float64
	HedgeMinDelay   time.Duration
	// MaxPutsPerSec, if above 0, is the operator's budget of data object
	// PUTs a second (hedges included; retries of failed PUTs not): flushes
	// are cut on a schedule (1+HedgeMaxRatio)/MaxPutsPerSec apart, so
	// objects grow with ingest instead of the PUT rate; a flush whose
	// turn has come goes FlushInterval after its first batch. Only a full
	// flush (MaxFlushBatches, the object size bound, PacedCutBytes) or
	// Close cuts sooner.
	MaxPutsPerSec float64
	// PacedCutBytes, if above 0, cuts a paced flush once it holds this
	// many bytes of batches, before its turn: an object every
	// 1/MaxPutsPerSec or per PacedCutBytes, whichever comes first. The
	// budget then bounds PUTs at low ingest and the object size at high
	// ingest, where a hard budget would grow objects (and each one's
	// upload time, at a store's per-stream rate) without end.
	PacedCutBytes int

	// Cache, if set, gets every uploaded object.
	Cache ObjectCache
	// Clock times the flush interval, the waits between upload tries
	// and the metrics. Default clock.Real.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Observer, if set, receives metrics.
	Observer Observer
}

func (c *Config) setDefaults() {
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.FlushBytes == 0 {
		c.FlushBytes = DefaultFlushBytes
	}
	if c.MaxFlushBatches == 0 {
		c.MaxFlushBatches = DefaultMaxFlushBatches
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = max(DefaultMaxBufferedBytes, c.FlushBytes)
	}
	if c.MaxConcurrentUploads == 0 {
		c.MaxConcurrentUploads = DefaultMaxConcurrentUploads
	}
	if c.MaxCommitBytes == 0 {
		c.MaxCommitBytes = DefaultMaxCommitBytes
	}
	if c.UploadAttempts == 0 {
		c.UploadAttempts = DefaultUploadAttempts
	}
	if c.UploadTimeout == 0 {
		c.UploadTimeout = DefaultUploadTimeout
	}
	if c.HedgePercentile > 0 && c.HedgeMaxRatio == 0 {
		c.HedgeMaxRatio = DefaultHedgeMaxRatio
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.KeyTime == nil {
		clk := c.Clock
		c.KeyTime = func() int64 { return clk.Now().UnixMilli() }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("produce: Config.Store is nil")
	case c.Replica == nil:
		return errors.New("produce: Config.Replica is nil")
	case c.AgentID == "":
		return errors.New("produce: Config.AgentID is empty")
	case c.FlushInterval < 0:
		return errors.New("produce: Config.FlushInterval is negative")
	case c.FlushBytes < 1:
		return errors.New("produce: Config.FlushBytes must be positive")
	case c.PacedCutBytes < 0:
		return errors.New("produce: Config.PacedCutBytes must not be negative")
	case c.MaxFlushBatches < 1:
		return errors.New("produce: Config.MaxFlushBatches must be positive")
	case c.MaxBufferedBytes < 1:
		return errors.New("produce: Config.MaxBufferedBytes must be positive")
	case c.MaxConcurrentUploads < 1:
		return errors.New("produce: Config.MaxConcurrentUploads must be positive")
	case c.MaxCommitBytes < commitOverheadBytes+len(c.AgentID)+64+c.MaxFlushBatches*maxCommitBatchBytes:
		return fmt.Errorf("produce: Config.MaxCommitBytes %d cannot hold a flush of %d batches", c.MaxCommitBytes, c.MaxFlushBatches)
	case c.UploadAttempts < 1:
		return errors.New("produce: Config.UploadAttempts must be positive")
	case c.UploadTimeout < 0:
		return errors.New("produce: Config.UploadTimeout is negative")
	case c.HedgePercentile < 0 || c.HedgePercentile >= 1:
		return fmt.Errorf("produce: Config.HedgePercentile %v must be at least 0 and below 1", c.HedgePercentile)
	case c.HedgeMaxRatio < 0 || c.HedgeMaxRatio > 1:
		return fmt.Errorf("produce: Config.HedgeMaxRatio %v must be between 0 and 1", c.HedgeMaxRatio)
	case c.HedgeMinDelay < 0:
		return errors.New("produce: Config.HedgeMinDelay is negative")
	case c.MaxPutsPerSec < 0:
		return errors.New("produce: Config.MaxPutsPerSec is negative")
	}
	return nil
}

// Batch is one partition's share of a produce call: one or more whole,
// validated v2 record batches, back to back, in the order they must get
// offsets.
type Batch struct {
	TopicID   meta.TopicID
	Partition int32
	// Data is copied before Submit returns; the caller may reuse it.
	Data []byte
	// Records is the number of offsets Data takes and BatchCount the
	// number of record batches in it; Submit checks both against Data.
	// The rest is stored in the offset index as given (BatchFrom fills
	// every field from Data).
	Records        int32
	BatchCount     int32
	FirstTimestamp int64
	MaxTimestamp   int64
	ProducerID     int64
	ProducerEpoch  int16
	BaseSequence   int32
	// Transactional is the first batch's transactional attribute: apply
	// accepts the batch only into an ongoing transaction.
	Transactional bool
}

// BatchFrom builds a Batch whose fields are read from data's batch
// headers: the least first and greatest max timestamp, and the first
// batch's producer fields.
func BatchFrom(topicID meta.TopicID, partition int32, data []byte) (Batch, error) {
	b := Batch{TopicID: topicID, Partition: partition, Data: data}
	for rest, i := data, 0; len(rest) > 0; i++ {
		entry, next, err := recordbatch.Next(rest)
		if err != nil {
			return Batch{}, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		h, err := recordbatch.ParseHeader(entry)
		if err != nil {
			return Batch{}, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		if i == 0 {
			b.FirstTimestamp, b.MaxTimestamp = h.FirstTimestamp, h.MaxTimestamp
			b.ProducerID, b.ProducerEpoch, b.BaseSequence = h.ProducerID, h.ProducerEpoch, h.BaseSequence
			b.Transactional = h.IsTransactional()
		}
		b.FirstTimestamp = min(b.FirstTimestamp, h.FirstTimestamp)
		b.MaxTimestamp = max(b.MaxTimestamp, h.MaxTimestamp)
		b.Records += h.NumRecords
		b.BatchCount++
		rest = next
	}
	return b, nil
}

// check verifies that Data frames into whole v2 batches whose offsets and
// count match Records and BatchCount: apply assigns offsets from Records
// and the fetch path patches base offsets by walking the batches, so the
// two must agree.
func (b *Batch) check() error {
	if len(b.Data) == 0 {
		return fmt.Errorf("%w: partition %d: no data", ErrInvalidBatch, b.Partition)
	}
	var records, batches int64
	for rest := b.Data; len(rest) > 0; {
		entry, next, err := recordbatch.Next(rest)
		if err != nil {
			return fmt.Errorf("%w: partition %d: %w", ErrInvalidBatch, b.Partition, err)
		}
		h, err := recordbatch.ParseHeader(entry)
		if err != nil {
			return fmt.Errorf("%w: partition %d: %w", ErrInvalidBatch, b.Partition, err)
		}
		if h.NumRecords <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.NumRecords) {
			return fmt.Errorf("%w: partition %d: numRecords %d, lastOffsetDelta %d", ErrInvalidBatch, b.Partition, h.NumRecords, h.LastOffsetDelta)
		}
		records += int64(h.NumRecords)
		batches++
		rest = next
	}
	if records != int64(b.Records) || batches != int64(b.BatchCount) {
		return fmt.Errorf("%w: partition %d: data holds %d records in %d batches, Batch says %d in %d",
			ErrInvalidBatch, b.Partition, records, batches, b.Records, b.BatchCount)
	}
	return nil
}
