package cleaner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/retention"
	"github.com/strandkafka/strand/internal/segment"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// Defaults for Config.
const (
	// DefaultMapBytes is Kafka's log.cleaner.dedupe.buffer.size (128
	// MiB, shared by its cleaner threads; one round at a time here).
	DefaultMapBytes = 128 << 20
	// DefaultTargetBytes is the batch bytes of one new object, and of
	// the entries one swap replaces.
	DefaultTargetBytes = 16 << 20
	// DefaultInterval is Kafka's log.cleaner.backoff.ms: the pause
	// between passes over the owned compacted partitions.
	DefaultInterval = 15 * time.Second
	// maxChunkEntries bounds the old entries of one swap, below
	// meta.MaxSwapEntries.
	maxChunkEntries = 1000
)

// Meta is what the cleaner needs of the metadata replica.
type Meta interface {
	meta.Viewer
	Propose(ctx context.Context, c meta.Command) (meta.Result, error)
}

// Config configures a Cleaner.
type Config struct {
	Store objstore.Store
	Meta  Meta
	// Placement says which partitions this agent cleans: those whose
	// retention it proposes (retention.OwnerKey).
	Placement placement.Ring
	// AgentID names this process incarnation in object keys; it must
	// never repeat across restarts. CleanTag is appended.
	AgentID string
	// MapBytes bounds the offset map (log.cleaner.dedupe.buffer.size).
	MapBytes int64
	// TargetBytes bounds a new object and a swap's old entries.
	TargetBytes int64
	Interval    time.Duration
	Metrics     *Metrics
	Clock       clock.Clock
	Logger      *slog.Logger
}

// Cleaner runs cleaning rounds on the compacted partitions its agent
// owns. Safe for concurrent use; rounds run one at a time.
type Cleaner struct {
	cfg  Config
	loop *clock.Loop

	mu struct {
		sync.Mutex
		seq uint64
	}
	// round serializes rounds: one offset map's memory at a time.
	round sync.Mutex
}

// New returns a Cleaner; Start starts its passes.
func New(cfg Config) (*Cleaner, error) {
	if cfg.Store == nil || cfg.Meta == nil || cfg.AgentID == "" {
		return nil, errors.New("cleaner: Store, Meta and AgentID are required")
	}
	if cfg.MapBytes <= 0 {
		cfg.MapBytes = DefaultMapBytes
	}
	if cfg.TargetBytes <= 0 {
		cfg.TargetBytes = DefaultTargetBytes
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Cleaner{cfg: cfg}, nil
}

// Start runs a pass every Interval (or its dynamic value, dynamic.go)
// until Close.
func (c *Cleaner) Start() {
	c.loop = clock.EveryVar(c.cfg.Clock, c.interval, func(ctx context.Context) {
		if _, err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("cleaning pass failed", "err", err)
		}
	})
}

// Close stops the passes and waits for the one under way.
func (c *Cleaner) Close() { c.loop.Stop() }

// RoundStats is what rounds did.
type RoundStats struct {
	Rounds, Swaps, Lost int
	Filter              Stats
	BytesWritten        int64
}

// Pass runs a round on every owned compacted partition that is due, and
// updates the max dirty ratio gauge. A partition whose round fails (a
// damaged object, a map too small for one batch) is logged and passed
// over, so it does not hold up the others; Pass returns the first such
// error.
func (c *Cleaner) Pass(ctx context.Context) (RoundStats, error) {
	var st RoundStats
	v := c.cfg.Meta.View()
	f, err := v.Features()
	if err != nil || f.MetadataLevel() < meta.MetadataLevel4 {
		v.Close()
		return st, err
	}
	topics, err := v.Topics()
	v.Close()
	if err != nil {
		return st, err
	}
	maxRatio := 0.0
	var first error
	for _, t := range topics {
		if !meta.CompactPolicy(t.Configs) {
			continue
		}
		for p := range t.Partitions {
			if !c.cfg.Placement.Owns(retention.OwnerKey(t.ID, p)) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return st, err
			}
			plan, err := c.Clean(ctx, t, p, &st)
			if err != nil {
				if ctx.Err() != nil {
					return st, ctx.Err()
				}
				c.cfg.Logger.Warn("cleaning round failed", "topic", t.Name, "partition", p, "err", err)
				first = cmp.Or(first, err)
			}
			maxRatio = max(maxRatio, plan.Ratio)
		}
	}
	c.cfg.Metrics.maxDirty.Set(maxRatio)
	return st, first
}

// PlanPartition plans a partition from view v at log clock now.
func PlanPartition(v *meta.View, t meta.Topic, partition int32, now int64) (Plan, error) {
	st, ok, err := v.Partition(t.ID, partition)
	if err != nil || !ok {
		return Plan{}, err
	}
	lso, err := v.LastStableOffset(t.ID, partition, st.HighWatermark())
	if err != nil {
		return Plan{}, err
	}
	it, err := v.Seek(t.ID, partition, st.LogStartOffset)
	if err != nil {
		return Plan{}, err
	}
	defer it.Close()
	p := PlanOf(func(yield func(meta.IndexEntry) bool) {
		for it.Next() && yield(it.Entry()) {
		}
	}, st.LogStartOffset, lso, topicconfig.Effective(t.Configs), now)
	return p, it.Err()
}

// now is the log clock. Not this agent's clock, even when it is ahead
// of an idle log's: what a round drops by time (tombstones past
// delete.retention.ms, transaction markers) is gone from the data it
// writes, and apply cannot check that, so a clock running ahead would
// drop them early. On an idle log this only waits a lease renewal
// longer.
func (c *Cleaner) now(v *meta.View) (int64, error) { return v.LogClock() }

// Clean runs one round on a partition if one is due, and returns the
// plan it judged by.
func (c *Cleaner) Clean(ctx context.Context, t meta.Topic, partition int32, st *RoundStats) (Plan, error) {
	c.round.Lock()
	defer c.round.Unlock()
	v := c.cfg.Meta.View()
	now, err := c.now(v)
	if err != nil {
		v.Close()
		return Plan{}, err
	}
	plan, err := PlanPartition(v, t, partition, now)
	if err != nil || !plan.Due {
		v.Close()
		return plan, err
	}
	cfg := topicconfig.Effective(t.Configs)
	txns, err := v.AbortedTxns(t.ID, partition, plan.LogStart, plan.FirstUncleanable, 0)
	if err != nil {
		v.Close()
		return plan, err
	}
	aborted := make([]AbortedTxn, len(txns))
	for i, x := range txns {
		aborted[i] = AbortedTxn{ProducerID: x.ProducerID, FirstOffset: x.FirstOffset, LastOffset: x.LastOffset}
	}
	lastOffsets, err := v.ProducerLastOffsets(t.ID, partition, now)
	mapBytes := c.mapBytes(v)
	v.Close()
	if err != nil {
		return plan, err
	}
	m := NewOffsetMap(mapBytes)
	ab := NewAborted(aborted)
	end, err := c.index(ctx, t.ID, partition, plan, m, ab)
	if err != nil {
		return plan, err
	}
	if end <= plan.FirstDirty {
		return plan, fmt.Errorf("cleaner: %s/%d at %d: %w", t.Name, partition, plan.FirstDirty, ErrMapTooSmall)
	}
	// Strand's idempotence reads producer state from the metadata
	// database, not the log; the header of an active producer's last
	// batch is kept all the same, as Kafka keeps it, so the log shows
	// every active producer's last sequence.
	f := &Filter{Map: m, Now: now, DeleteRetentionMs: cfg.DeleteRetentionMs, Aborted: ab, End: end,
		LastDataOffset: func(pid int64) (int64, bool) { off, ok := lastOffsets[pid]; return off, ok }}
	st.Rounds++
	c.cfg.Metrics.rounds.Inc()
	for from := plan.LogStart; from < end; {
		next, lost, err := c.chunk(ctx, t, partition, from, end, f, st)
		if err != nil || lost {
			c.account(f, st)
			return plan, err
		}
		from = next
	}
	c.account(f, st)
	c.cfg.Logger.Debug("cleaned", "topic", t.Name, "partition", partition, "end", end, "ratio", plan.Ratio)
	return plan, nil
}

func (c *Cleaner) account(f *Filter, st *RoundStats) {
	m := c.cfg.Metrics
	m.read.Add(float64(f.Stats.BytesRead))
	m.recordsDropped.Add(float64(f.Stats.RecordsRead - f.Stats.RecordsKept))
	st.Filter.BatchesRead += f.Stats.BatchesRead
	st.Filter.RecordsRead += f.Stats.RecordsRead
	st.Filter.BytesRead += f.Stats.BytesRead
	st.Filter.BatchesKept += f.Stats.BatchesKept
	st.Filter.RecordsKept += f.Stats.RecordsKept
	st.Filter.BytesKept += f.Stats.BytesKept
	st.Filter.TombstonesDropped += f.Stats.TombstonesDropped
	st.Filter.AbortedDropped += f.Stats.AbortedDropped
	st.Filter.Rewritten += f.Stats.Rewritten
	st.Filter.Emptied += f.Stats.Emptied
	f.Stats = Stats{}
}

// index maps the dirty entries from plan.FirstDirty, and returns the
// round's end: the end of the last entry mapped whole (an entry
// boundary, so every entry a round replaces was read whole). It reads
// the index indexEntriesPerView entries at a time from a fresh View, so
// a long read of objects holds no View open.
func (c *Cleaner) index(ctx context.Context, id meta.TopicID, partition int32, plan Plan, m *OffsetMap, ab Aborted) (int64, error) {
	end := plan.FirstDirty
	for {
		entries, err := c.entries(id, partition, end, plan.FirstUncleanable, indexEntriesPerView)
		if err != nil || len(entries) == 0 {
			return end, err
		}
		for i := range entries {
			e := &entries[i]
			if !e.Control {
				batches, err := c.readEntry(ctx, e)
				if err != nil {
					return 0, err
				}
				for _, b := range batches {
					full, err := Index(m, b, ab)
					if errors.Is(err, ErrMapTooSmall) || full {
						return end, nil
					}
					if err != nil {
						return 0, err
					}
				}
			}
			end = e.BaseOffset + int64(e.Records)
		}
	}
}

// indexEntriesPerView bounds the entries index reads from one View.
const indexEntriesPerView = 256

// entries returns up to n index entries of a partition from offset
// from that end at or below upTo, read from a fresh View.
func (c *Cleaner) entries(id meta.TopicID, partition int32, from, upTo int64, n int) ([]meta.IndexEntry, error) {
	v := c.cfg.Meta.View()
	defer v.Close()
	it, err := v.Seek(id, partition, from)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []meta.IndexEntry
	for len(out) < n && it.Next() {
		e := it.Entry()
		if e.BaseOffset+int64(e.Records) > upTo {
			break
		}
		out = append(out, e)
	}
	return out, it.Err()
}

// readEntry reads one data entry's batches, each with its real base
// offset written into it.
func (c *Cleaner) readEntry(ctx context.Context, e *meta.IndexEntry) ([][]byte, error) {
	data, err := c.cfg.Store.Get(ctx, e.ObjectKey, e.Position, e.Length)
	if err != nil {
		return nil, fmt.Errorf("cleaner: read %s: %w", e.ObjectKey, err)
	}
	batches, err := recordbatch.Split(data)
	if err != nil {
		return nil, fmt.Errorf("cleaner: %s at %d: %w", e.ObjectKey, e.Position, err)
	}
	base := e.BaseOffset
	for _, b := range batches {
		if err := recordbatch.CheckCRC(b); err != nil {
			return nil, fmt.Errorf("cleaner: %s at %d: %w", e.ObjectKey, e.Position, err)
		}
		h, _ := recordbatch.ParseHeader(b)
		if e.OwnOffsets {
			base = h.BaseOffset
		}
		recordbatch.SetBaseOffset(b, base)
		base += int64(h.LastOffsetDelta) + 1
	}
	if int32(len(batches)) != e.BatchCount || base > e.BaseOffset+int64(e.Records) {
		return nil, fmt.Errorf("cleaner: %s at %d: batches disagree with the index", e.ObjectKey, e.Position)
	}
	return batches, nil
}

// chunk cleans the entries from offset from (below end, up to the
// target bytes), writes what stays into one new object and swaps it in.
// next is where the next chunk starts; lost reports a lost swap, which
// ends the round.
func (c *Cleaner) chunk(ctx context.Context, t meta.Topic, partition int32, from, end int64, f *Filter, st *RoundStats) (next int64, lost bool, err error) {
	old, err := c.entries(t.ID, partition, from, end, maxChunkEntries)
	if err != nil || len(old) == 0 {
		return end, false, err
	}
	var bytes int64
	for i, e := range old {
		if i > 0 && bytes+e.Length > c.cfg.TargetBytes {
			old = old[:i]
			break
		}
		bytes += e.Length
	}
	next = old[len(old)-1].BaseOffset + int64(old[len(old)-1].Records)

	c.mu.Lock()
	c.mu.seq++
	// The key time is at least the log clock the round began at (f.Now),
	// so a clock behind the log's does not give the object a key the
	// garbage collector's orphan horizon already passed.
	key := segment.ObjectKey(c.cfg.AgentID+CleanTag, c.mu.seq, max(f.Now, c.cfg.Clock.Now().UnixMilli()))
	c.mu.Unlock()
	w := segment.NewWriterSize(int(bytes) + segment.HeaderSize + segment.EntrySize + segment.TrailerSize)
	var entries []meta.IndexEntry
	var cur *meta.IndexEntry
	for i := range old {
		e := &old[i]
		if e.Control {
			entries = append(entries, *e)
			cur = nil
			continue
		}
		batches, err := c.readEntry(ctx, e)
		if err != nil {
			return 0, false, err
		}
		for _, b := range batches {
			out, _, err := f.Batch(nil, b)
			if err != nil {
				return 0, false, fmt.Errorf("cleaner: %s/%d: %w", t.Name, partition, err)
			}
			if len(out) == 0 {
				continue
			}
			if cur, err = addBatch(w, t.ID, partition, key, out, cur, &entries); err != nil {
				return 0, false, err
			}
		}
	}
	swap := meta.SwapIndex{TopicID: t.ID, Partition: partition, Old: old, New: entries}
	if len(w.Chunks()) > 0 {
		obj := w.Finish()
		if err := c.cfg.Store.PutIfAbsent(ctx, key, obj); err != nil {
			return 0, false, fmt.Errorf("cleaner: upload %s: %w", key, err)
		}
		swap.Objects = []meta.SwapObject{{Key: key, Size: int64(len(obj))}}
		st.BytesWritten += int64(len(obj))
		c.cfg.Metrics.written.Add(float64(len(obj)))
	}
	res, err := c.cfg.Meta.Propose(ctx, swap)
	switch {
	case err != nil:
		c.cfg.Metrics.swaps.WithLabelValues("failed").Inc()
		return 0, false, fmt.Errorf("cleaner: swap %s/%d at %d: %w", t.Name, partition, from, err)
	case meta.SwapLost(res):
		st.Lost++
		c.cfg.Metrics.swaps.WithLabelValues("lost").Inc()
		return 0, true, nil
	case res.Code != 0:
		c.cfg.Metrics.swaps.WithLabelValues("failed").Inc()
		return 0, false, fmt.Errorf("cleaner: swap %s/%d at %d: %w", t.Name, partition, from, res.Err())
	}
	st.Swaps++
	c.cfg.Metrics.swaps.WithLabelValues("done").Inc()
	return next, false, nil
}

// addBatch writes one kept batch into w and adds it to the entry being
// built (cur), or starts one after a marker. The entry carries its own
// offsets when batches leave gaps.
func addBatch(w *segment.Writer, id meta.TopicID, partition int32, key string, batch []byte, cur *meta.IndexEntry, entries *[]meta.IndexEntry) (*meta.IndexEntry, error) {
	ref, err := w.Add(id, partition, batch)
	if err != nil {
		return nil, fmt.Errorf("cleaner: build %s: %w", key, err)
	}
	h, _ := recordbatch.ParseHeader(batch)
	first := h.FirstTimestamp
	if _, ok := h.DeleteHorizon(); ok || first < 0 {
		first = h.MaxTimestamp
	}
	if cur == nil {
		*entries = append(*entries, meta.IndexEntry{BaseOffset: h.BaseOffset, ObjectKey: key, Position: ref.Offset,
			FirstTimestamp: first, MaxTimestamp: h.MaxTimestamp, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
		cur = &(*entries)[len(*entries)-1]
	} else if h.BaseOffset != cur.BaseOffset+int64(cur.Records) {
		cur.OwnOffsets = true
	}
	cur.Length += ref.Length
	cur.BatchCount++
	cur.Records = int32(h.LastOffset() + 1 - cur.BaseOffset)
	cur.FirstTimestamp = min(cur.FirstTimestamp, first)
	cur.MaxTimestamp = max(cur.MaxTimestamp, h.MaxTimestamp)
	cur.Transactional = cur.Transactional || h.IsTransactional()
	return cur, nil
}
