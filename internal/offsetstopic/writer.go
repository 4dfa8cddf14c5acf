// Package offsetstopic owns the records of __consumer_offsets: every
// committed offset and classic group state, in Kafka's schemas, so that
// tools which read the topic (Burrow, kafka-consumer-groups' formatter,
// kcat) see what Kafka would show them.
//
// # A derived view
//
// The committed offsets in the replicated metadata database are the
// truth; OffsetFetch reads them there. The records are derived: apply
// names, in each command's Result, the offsets and groups it stored or
// deleted (meta.OffsetRef); the agent that proposed the command hands
// those results to its Writer (replica.Config.Applied), which reads the
// current value of each from its copy and writes it through the agent's
// own produce path, like any record: a committed offset as an
// OffsetCommitKey v1 / OffsetCommitValue v3 record, a classic group's
// state as GroupMetadataKey v2 / GroupMetadataValue v1 (v3 with static
// members: records.go says why), and a deleted one (OffsetDelete,
// DeleteGroups, expiry, a deleted topic; a KIP-848 group's state, which
// Kafka keeps in other record types) as a tombstone, in the partition
// Kafka's group coordinator uses for the group (PartitionFor). Offsets
// committed in a transaction are named by the EndTxn that commits them,
// so they appear then, and never after an abort.
//
// Because each write reads the value current when it runs, writes are
// idempotent and may coalesce: several changes of one key waiting
// together give one record, a retry rewrites the newest value, and the
// last record of a key this agent writes holds the value its copy had
// after the last change it noted. Two agents write the same key when a
// group's coordinator moves, or when another agent ends a transaction
// holding the group's offsets or deletes a topic it has offsets of;
// their records may then interleave until the next change of the key.
//
// # Failures
//
// The commit's reply never waits for its record: OffsetCommit answers
// once the commit applied, and the record follows within a produce
// flush. A failed write is retried Attempts times with backoff, each
// try re-reading the values; then its records are counted lost
// (strand_consumer_offsets_records_lost_total{reason="write_failed"})
// and logged. At most MaxPending keys wait; a change past that is
// counted lost (reason="queue_full") rather than blocking apply. A lost
// record is not re-sent on its own: the next change of the same key
// (a consumer's next commit) writes the current value again, and so
// does the agent's next start. Close writes what is pending, bounded by
// its context (the agent gives it 5 s of its shutdown), so a graceful
// stop with a working produce path loses nothing; a crash loses the
// records of changes applied but not yet written, and Resync, which the
// agent runs at start for the groups it coordinates, writes the current
// value of each of their keys again (resync.go says what it misses).
package offsetstopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/retry"
)

// Topic is the topic the records go to.
const Topic = "__consumer_offsets"

// Defaults for Config.
const (
	// DefaultMaxPending bounds the keys waiting to be written: a
	// quarter of a million keys take some tens of MiB at most.
	DefaultMaxPending = 1 << 18
	// DefaultMaxKeysPerWrite bounds the keys one write reads and
	// produces.
	DefaultMaxKeysPerWrite = 4096
	// DefaultAttempts bounds the tries of one write.
	DefaultAttempts = 5
	// DefaultAttemptTimeout bounds one try: a produce flush, upload and
	// commit.
	DefaultAttemptTimeout = 30 * time.Second
)

const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
	// maxProduceBytes bounds the batch bytes of one produce call, well
	// under a flush's bound.
	maxProduceBytes = 1 << 20
)

// Producer writes record batches through the agent's produce path.
// *produce.Pipeline implements it.
type Producer interface {
	Produce(ctx context.Context, batches []produce.Batch) ([]meta.BatchResult, error)
}

var _ Producer = (*produce.Pipeline)(nil)

// Source gives views of the agent's metadata copy.
type Source interface {
	View() *meta.View
}

// Config configures a Writer.
type Config struct {
	Meta     Source
	Producer Producer
	// MaxPending, MaxKeysPerWrite, Attempts and AttemptTimeout default
	// to the constants above.
	MaxPending      int
	MaxKeysPerWrite int
	Attempts        int
	AttemptTimeout  time.Duration
	// Metrics may be nil.
	Metrics *Metrics
	Clock   clock.Clock
	Logger  *slog.Logger
}

// key is one record key waiting to be written: a committed offset, or a
// group's state (isGroup).
type key struct {
	group     string
	topic     string
	partition int32
	isGroup   bool
}

// Writer writes the records of the changes it is told of, one write at
// a time, in the order it was told.
type Writer struct {
	cfg    Config
	m      *Metrics
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}
	// wg tracks Resync's goroutines.
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		closed  bool
		pending map[key]struct{}
		order   []key
		// noted counts the Note calls that added keys; written is the
		// noted count whose keys have all been written (or lost).
		noted, written uint64
		// progress is closed when written moves.
		progress chan struct{}
	}
}

// New starts a Writer.
func New(cfg Config) (*Writer, error) {
	if cfg.Meta == nil || cfg.Producer == nil {
		return nil, errors.New("offsetstopic: Config.Meta and Config.Producer are required")
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxKeysPerWrite <= 0 {
		cfg.MaxKeysPerWrite = DefaultMaxKeysPerWrite
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Writer{cfg: cfg, m: cfg.Metrics, log: cfg.Logger, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if w.m == nil {
		w.m = NewMetrics()
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.mu.pending = make(map[key]struct{})
	w.mu.progress = make(chan struct{})
	go w.run()
	return w, nil
}

// Note takes the results of commands this agent proposed and queues the
// offsets and groups they changed. It never blocks: past MaxPending
// keys, changes are counted lost.
func (w *Writer) Note(results []meta.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return
	}
	added := false
	for i := range results {
		for _, o := range results[i].Offsets {
			added = w.addLocked(key{group: o.Group, topic: o.Topic, partition: o.Partition}) || added
		}
		for _, g := range results[i].Groups {
			added = w.addLocked(key{group: g, isGroup: true}) || added
		}
	}
	if !added {
		return
	}
	w.mu.noted++
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Writer) addLocked(k key) bool {
	if _, ok := w.mu.pending[k]; ok {
		return false // the write reads the newest value anyway
	}
	if len(w.mu.pending) >= w.cfg.MaxPending {
		w.m.lost.WithLabelValues(reasonQueueFull).Inc()
		return false
	}
	w.mu.pending[k] = struct{}{}
	w.mu.order = append(w.mu.order, k)
	return true
}

// Sync waits until the records of every change noted before the call
// are written or counted lost.
func (w *Writer) Sync(ctx context.Context) error {
	w.mu.Lock()
	target := w.mu.noted
	for w.mu.written < target {
		progress := w.mu.progress
		w.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.done:
			return errors.New("offsetstopic: writer closed")
		}
		w.mu.Lock()
	}
	w.mu.Unlock()
	return nil
}

// Close writes what is pending, as far as ctx allows, and stops. Notes
// after Close are ignored.
func (w *Writer) Close(ctx context.Context) error {
	err := w.Sync(ctx)
	w.mu.Lock()
	w.mu.closed = true
	w.mu.Unlock()
	w.cancel()
	<-w.done
	w.wg.Wait()
	return err
}

func (w *Writer) run() {
	defer close(w.done)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.kick:
		}
		for {
			keys, upTo, ok := w.take()
			if !ok {
				break
			}
			w.write(keys)
			w.finish(upTo)
		}
	}
}

// take removes up to MaxKeysPerWrite keys from the queue. upTo is the
// noted count the write completes when it empties the queue, else 0.
func (w *Writer) take() (keys []key, upTo uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mu.order) == 0 {
		return nil, 0, false
	}
	n := min(len(w.mu.order), w.cfg.MaxKeysPerWrite)
	keys = slices.Clone(w.mu.order[:n])
	w.mu.order = slices.Delete(w.mu.order, 0, n)
	for _, k := range keys {
		delete(w.mu.pending, k)
	}
	if len(w.mu.order) == 0 {
		upTo = w.mu.noted
		w.mu.order = nil // let a burst's backing array go
	}
	return keys, upTo, true
}

func (w *Writer) finish(upTo uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if upTo > w.mu.written {
		w.mu.written = upTo
		close(w.mu.progress)
		w.mu.progress = make(chan struct{})
	}
}

// write writes keys' records, retrying a bounded number of times.
func (w *Writer) write(keys []key) {
	loop := retry.Policy{Attempts: w.cfg.Attempts, Min: retryMin, Max: retryMax}.Start(w.ctx, w.cfg.Clock)
	var err error
	for loop.Next() {
		if err = w.writeOnce(keys); err == nil {
			w.m.written.Add(float64(len(keys)))
			return
		}
		w.m.writeFailures.Inc()
		w.log.Warn("writing __consumer_offsets records failed", "keys", len(keys), "attempt", loop.Attempt(), "err", err)
	}
	w.m.lost.WithLabelValues(reasonWriteFailed).Add(float64(len(keys)))
	w.log.Error("gave up writing __consumer_offsets records; the metadata database still holds the offsets, the next change of each key writes it again",
		"keys", len(keys), "err", err)
}

// writeOnce reads the current value of each key from one view and
// produces the records, a batch per partition.
func (w *Writer) writeOnce(keys []key) error {
	v := w.cfg.Meta.View()
	defer v.Close()
	t, ok, err := v.Topic(Topic)
	if err != nil {
		return err
	}
	if !ok || t.Partitions <= 0 {
		return fmt.Errorf("topic %s does not exist", Topic)
	}
	now := w.cfg.Clock.Now().UnixMilli()
	records := make(map[int32][]recordbatch.Record)
	topics := make(map[string]meta.Topic)
	for _, k := range keys {
		r := recordbatch.Record{Timestamp: now, Headers: noHeaders}
		if k.isGroup {
			r.Key = groupKey(k.group)
			g, ok, err := v.Group(k.group)
			if err != nil {
				return err
			}
			// A KIP-848 group's state is in record types of its own
			// in Kafka; its classic record, if any, is gone.
			if ok && g.Kind == meta.GroupClassic {
				r.Value = groupValue(&g)
			}
		} else {
			ref := meta.OffsetRef{Group: k.group, Topic: k.topic, Partition: k.partition}
			r.Key = offsetKey(ref)
			tp, seen := topics[k.topic]
			if !seen {
				if tp, _, err = v.Topic(k.topic); err != nil {
					return err
				}
				topics[k.topic] = tp
			}
			if !tp.ID.IsZero() {
				o, ok, err := v.CommittedOffset(k.group, tp.ID, k.partition)
				if err != nil {
					return err
				}
				if ok {
					r.Value = offsetValue(&o)
				}
			}
		}
		p := PartitionFor(k.group, t.Partitions)
		records[p] = append(records[p], r)
	}

	var batches []produce.Batch
	size := 0
	for _, p := range sortedPartitions(records) {
		data := encodeBatch(records[p], now)
		b, err := produce.BatchFrom(t.ID, p, data)
		if err != nil {
			return err
		}
		if size > 0 && size+len(data) > maxProduceBytes {
			if err := w.produce(batches); err != nil {
				return err
			}
			batches, size = batches[:0], 0
		}
		batches = append(batches, b)
		size += len(data)
	}
	return w.produce(batches)
}

func (w *Writer) produce(batches []produce.Batch) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.AttemptTimeout)
	defer cancel()
	res, err := w.cfg.Producer.Produce(ctx, batches)
	if err != nil {
		return err
	}
	for i, r := range res {
		if r.Code != 0 {
			return fmt.Errorf("partition %d: %w", batches[i].Partition, kerr.ErrorForCode(r.Code))
		}
	}
	return nil
}

// noHeaders is a record's encoded header count of zero.
var noHeaders = []byte{0}

func sortedPartitions(m map[int32][]recordbatch.Record) []int32 {
	ps := make([]int32, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// encodeBatch builds one uncompressed v2 batch of rs, offsets from 0, as
// a producer without idempotence would send it.
func encodeBatch(rs []recordbatch.Record, now int64) []byte {
	var body []byte
	for i := range rs {
		rs[i].Offset = int64(i)
		body = recordbatch.AppendRecord(body, rs[i], 0, now)
	}
	return recordbatch.AppendBatch(nil, recordbatch.BatchSpec{
		LastOffsetDelta:      int32(len(rs) - 1),
		PartitionLeaderEpoch: -1,
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		NumRecords:           int32(len(rs)),
	}, body)
}
