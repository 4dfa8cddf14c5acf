package compact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/retention"
	"github.com/strandkafka/strand/internal/segment"
)

// Defaults for Config.
const (
	// DefaultTargetBytes is --compaction-target-bytes: the batch bytes
	// of one new object. 16 MiB makes a cold read of a partition a few
	// large GETs while one run stays small in memory.
	DefaultTargetBytes = 16 << 20
	// DefaultMinAge is how old (by its key time) a level-0 entry must be
	// before it is compacted: the newest data is read by consumers that
	// keep up, from the cache, and recompacting it early buys nothing.
	DefaultMinAge = time.Minute
	// DefaultMaxLag is how old a partition's oldest level-0 entry may
	// grow before a run shorter than the target is compacted anyway: a
	// slow partition gets one object per MaxLag instead of one per
	// flush.
	DefaultMaxLag = 10 * time.Minute
	// DefaultExpressMaxLag moves a tier object's entries a minute after
	// its write: with the gc's delete delay (a minute) the zones hold a
	// flush for two to three minutes, at S3 Express One Zone's storage
	// price a rounding error next to its PUTs (package cost).
	DefaultExpressMaxLag = time.Minute
	// DefaultInterval is the pause between passes over the owned
	// partitions.
	DefaultInterval = 10 * time.Second
	// DefaultEntryBytes bounds the batch bytes of one new index entry.
	// A fetch reads whole entries, and one that stops inside an entry
	// (its maxBytes reached) makes the next fetch read that entry again
	// (the cache holds the first read's range, which does not cover the
	// next one's): a consumer fetching 1 MiB (max.partition.fetch.bytes)
	// from 1 MiB entries read 1.9x the bytes it got. 256 KiB bounds
	// that to a quarter, and costs no GETs: the entries a fetch plans
	// in one object are read with one (fetch coalesces neighbours).
	DefaultEntryBytes = 256 << 10
	// maxRunEntries bounds the index entries one swap replaces: with
	// each from another level-0 object (its key written once in the
	// command), a swap of 1000 is about 100 KB, a quarter of the
	// smallest log backend's entry limit.
	maxRunEntries = 1000
	// maxRunsPerPass bounds the runs of one partition a pass compacts,
	// so a partition written faster than it is compacted does not keep
	// a pass from the others.
	maxRunsPerPass = 8
	// readConcurrency bounds the GETs of one run in flight.
	readConcurrency = 8
	// keyTag ends the writer part of a compacted object's key: what
	// tells a compacted object from a level-0 one (Compacted).
	keyTag = "~c"
)

// Meta is what the compactor needs of the metadata replica.
type Meta interface {
	meta.Viewer
	Propose(ctx context.Context, c meta.Command) (meta.Result, error)
}

// Config configures a Compactor.
type Config struct {
	Store objstore.Store
	Meta  Meta
	// Placement says which partitions this agent compacts: those whose
	// retention it proposes (retention.OwnerKey).
	Placement placement.Ring
	// AgentID names this process incarnation in object keys, as
	// produce.Config.AgentID does; it must never repeat across
	// restarts. The compactor adds keyTag.
	AgentID string
	// KeyTime is the time (unix ms) a new object's key carries: at
	// least the writer's view of the log clock (segment.ObjectKey).
	KeyTime func() int64
	// TargetBytes is --compaction-target-bytes. A run's bytes are held
	// twice while it is compacted (read, then the new object), one run
	// at a time: the compactor's memory is about 2 x TargetBytes.
	TargetBytes int64
	// EntryBytes bounds a new index entry's bytes (0:
	// DefaultEntryBytes); a batch larger than it is an entry alone.
	EntryBytes int64
	// MinAge and MaxLag: see DefaultMinAge and DefaultMaxLag.
	MinAge, MaxLag time.Duration
	// ExpressMaxLag is MaxLag (and the most MinAge may be) for entries
	// in objects of the low-latency tier (express.IsKey): zone storage
	// costs several times the regional, and the tier holds a flush only
	// until compaction moves it (0: DefaultExpressMaxLag).
	ExpressMaxLag time.Duration
	// MaxBytesPerSec is --compaction-max-bytes-per-sec: the bytes read
	// per second at most; 0 leaves the pace to the work due (pace.go).
	MaxBytesPerSec int64
	// Interval is the time from the start of one pass to the start of
	// the next; a pass spreads its work over most of it (pace.go).
	Interval time.Duration
	// Unpaced turns the spreading off: a pass goes as fast as
	// MaxBytesPerSec allows (0: as fast as it can). For tests and
	// benchmarks that run passes on a fake clock.
	Unpaced bool
	// RewriterFor picks a topic's Rewriter; nil, or a nil answer, is
	// Identity.
	RewriterFor func(meta.Topic) Rewriter
	// Metrics counts what the compactor did; nil counts nothing.
	Metrics *Metrics
	Clock   clock.Clock
	Logger  *slog.Logger
}

func (c *Config) setDefaults() {
	if c.TargetBytes == 0 {
		c.TargetBytes = DefaultTargetBytes
	}
	if c.EntryBytes == 0 {
		c.EntryBytes = DefaultEntryBytes
	}
	if c.MinAge == 0 {
		c.MinAge = DefaultMinAge
	}
	if c.MaxLag == 0 {
		c.MaxLag = DefaultMaxLag
	}
	if c.ExpressMaxLag == 0 {
		c.ExpressMaxLag = DefaultExpressMaxLag
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.KeyTime == nil {
		clk := c.Clock
		c.KeyTime = func() int64 { return clk.Now().UnixMilli() }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Store == nil || c.Meta == nil:
		return errors.New("compact: Config.Store and Config.Meta are required")
	case c.AgentID == "":
		return errors.New("compact: Config.AgentID is empty")
	case c.TargetBytes < 1 || c.TargetBytes > segment.MaxObjectBytes/2:
		return fmt.Errorf("compact: target bytes %d out of range", c.TargetBytes)
	case c.EntryBytes < 1:
		return fmt.Errorf("compact: entry bytes %d out of range", c.EntryBytes)
	case c.MinAge < 0 || c.MaxLag < 0 || c.ExpressMaxLag < 0 || c.MaxBytesPerSec < 0 || c.Interval < 0:
		return errors.New("compact: negative age, lag, rate or interval")
	}
	return nil
}

// Compactor compacts the level-0 entries of the partitions its agent
// owns. Safe for concurrent use.
type Compactor struct {
	cfg  Config
	loop *clock.Loop
	pace *pacer

	mu struct {
		sync.Mutex
		// seq numbers the object keys of this incarnation.
		seq uint64
		// waitLogged: the "waits for level 4" line was logged.
		waitLogged bool
		// skip is, per partition, an offset below which the index
		// holds no level-0 entry: a plan starts there instead of at
		// the log start, so a partition of millions of compacted
		// entries is not walked every pass. It only moves forward:
		// entries become level 0 only when committed, at the end.
		skip map[partKey]int64
	}
}

// New returns a Compactor; Start starts its passes.
func New(cfg Config) (*Compactor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Compactor{cfg: cfg, pace: newPacer(cfg.MaxBytesPerSec, paceBurstBytes, cfg.Clock)}
	c.mu.skip = map[partKey]int64{}
	return c, nil
}

// Start runs a pass every Interval until Close: the next starts an
// Interval after the one before started (at once if that one took
// longer), so what a pass finds due is an interval's worth.
func (c *Compactor) Start() {
	c.loop = clock.AtRate(c.cfg.Clock, c.cfg.Interval, func(ctx context.Context) {
		if _, err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("compaction pass failed", "err", err)
		}
	})
}

// Close stops the passes and waits for the one under way.
func (c *Compactor) Close() { c.loop.Stop() }

// PassStats is what one pass did.
type PassStats struct {
	// Swaps applied, and lost to a race.
	Swaps, Lost int
	// BytesRead and BytesWritten are batch bytes.
	BytesRead, BytesWritten int64
	// Pace is the pass's read pace in bytes per second (pace.go); 0
	// when unpaced.
	Pace int64
}

// Compacted reports whether a data object key names a compactor's
// output (a per-partition object) rather than a level-0 flush.
func Compacted(key string) bool {
	agent, _, _, err := segment.ParseObjectKey(key)
	return err == nil && strings.HasSuffix(agent, keyTag)
}

// Pass compacts every due run of the partitions this agent owns, one
// run at a time.
func (c *Compactor) Pass(ctx context.Context) (PassStats, error) {
	var st PassStats
	targets, err := c.owned()
	if err != nil || len(targets) == 0 {
		return st, err
	}
	c.pruneSkips(targets)
	budget, err := c.setPace(targets, &st)
	if err != nil {
		return st, err
	}
	var lag time.Duration
	var errs []error
	for i, t := range targets {
		var spent int64
		for runs := 0; ; runs++ {
			if runs == maxRunsPerPass {
				break // the others' turn; the next pass goes on
			}
			if err := ctx.Err(); err != nil {
				return st, err
			}
			r, oldest, err := c.plan(t.topic, t.partition)
			if err != nil {
				return st, err
			}
			if r == nil {
				lag = max(lag, oldest)
				break
			}
			if budget != nil && spent >= budget[i] {
				// Due since the pass began: the next pass's work,
				// at the pace that one sets. Else a pass paced for
				// less than ingest would never end.
				lag = max(lag, oldest)
				break
			}
			spent += r.bytes
			done, err := c.compact(ctx, r, &st)
			if err != nil {
				// One partition's failure (a damaged object, a
				// refused swap) must not hold up the others: the
				// next pass tries it again.
				if ctx.Err() != nil {
					return st, err
				}
				errs = append(errs, err)
				lag = max(lag, oldest)
				break
			}
			if !done {
				break // lost: the next pass plans from a newer View
			}
		}
	}
	c.cfg.Metrics.lag.Set(lag.Seconds())
	return st, errors.Join(errs...)
}

type target struct {
	topic     meta.Topic
	partition int32
}

// partKey names a partition in Compactor.mu.skip; a topic created again
// under its name has another id.
type partKey struct {
	id        meta.TopicID
	partition int32
}

// pruneSkips forgets the partitions no longer owned (or deleted), so
// the map stays as large as what this agent owns.
func (c *Compactor) pruneSkips(targets []target) {
	keep := make(map[partKey]int64, len(targets))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range targets {
		pk := partKey{t.topic.ID, t.partition}
		if off, ok := c.mu.skip[pk]; ok {
			keep[pk] = off
		}
	}
	c.mu.skip = keep
}

// owned lists the partitions this agent compacts; none below metadata
// level 4, which SwapIndex needs.
func (c *Compactor) owned() ([]target, error) {
	v := c.cfg.Meta.View()
	defer v.Close()
	f, err := v.Features()
	if err != nil {
		return nil, err
	}
	if f.MetadataLevel() < meta.MetadataLevel4 {
		c.mu.Lock()
		if !c.mu.waitLogged {
			c.mu.waitLogged = true
			c.cfg.Logger.Info("compaction waits for strand.metadata.version 4 (strand features upgrade)", "level", f.MetadataLevel())
		}
		c.mu.Unlock()
		return nil, nil
	}
	topics, err := v.Topics()
	if err != nil {
		return nil, err
	}
	var out []target
	for _, t := range topics {
		for p := range t.Partitions {
			if c.cfg.Placement.Owns(retention.OwnerKey(t.ID, p)) {
				out = append(out, target{t, p})
			}
		}
	}
	return out, nil
}

// run is one planned swap: the old entries and their bytes.
type run struct {
	topic     meta.Topic
	partition int32
	old       []meta.IndexEntry
	bytes     int64
}

// plan finds the partition's first due run of level-0 entries: from the
// first level-0 entry starting at or after the log start, entries that are
// level-0 data old enough or markers, up to the target bytes or
// maxRunEntries. It is due when full, or when its first entry is older
// than MaxLag. nil when none is; oldest is then the age of the oldest
// level-0 entry left.
func (c *Compactor) plan(t meta.Topic, partition int32) (*run, time.Duration, error) {
	v := c.cfg.Meta.View()
	defer v.Close()
	st, ok, err := v.Partition(t.ID, partition)
	if err != nil || !ok {
		return nil, 0, err
	}
	pk := partKey{t.ID, partition}
	c.mu.Lock()
	from := max(st.LogStartOffset, c.mu.skip[pk])
	c.mu.Unlock()
	it, err := v.Seek(t.ID, partition, from)
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	// skipTo is the end of the entries passed before the run's first:
	// none of them is level 0.
	skipTo := from
	defer func() {
		c.mu.Lock()
		c.mu.skip[pk] = max(c.mu.skip[pk], skipTo)
		c.mu.Unlock()
	}()
	now := c.cfg.Clock.Now().UnixMilli()
	minAge, maxLag := c.cfg.MinAge.Milliseconds(), c.cfg.MaxLag.Milliseconds()
	xLag := c.cfg.ExpressMaxLag.Milliseconds()
	r := &run{topic: t, partition: partition}
	var oldest int64 = -1 // key time of the run's first data entry
	// xOldest is the key time of the run's first tier entry: a run
	// holding one is due at ExpressMaxLag.
	var xOldest int64 = -1
	full := false
	for it.Next() {
		e := it.Entry()
		if e.BaseOffset < st.LogStartOffset {
			// It straddles the log start: its new entries could end
			// below it, which apply refuses. Retention takes it.
			continue
		}
		if e.Control {
			if len(r.old) == 0 {
				skipTo = e.BaseOffset + int64(e.Records)
				continue
			}
			r.old = append(r.old, e)
			if len(r.old) >= maxRunEntries {
				full = true
				break
			}
			continue
		}
		if Compacted(e.ObjectKey) {
			if len(r.old) > 0 {
				break
			}
			skipTo = e.BaseOffset + int64(e.Records)
			continue
		}
		kt, timed := meta.ObjectKeyTime(e.ObjectKey)
		if !timed {
			kt = 0 // a key without a time: old enough
		}
		tier := express.IsKey(e.ObjectKey)
		if now-kt < minAge && (!tier || now-kt < min(minAge, xLag)) {
			break
		}
		if len(r.old) > 0 && r.bytes+e.Length > c.cfg.TargetBytes {
			full = true
			break
		}
		if oldest < 0 {
			oldest = kt
		}
		if tier && xOldest < 0 {
			xOldest = kt
		}
		r.old = append(r.old, e)
		r.bytes += e.Length
		if len(r.old) >= maxRunEntries || r.bytes >= c.cfg.TargetBytes {
			full = true
			break
		}
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	// Trailing markers wait for the data after them.
	for len(r.old) > 0 && r.old[len(r.old)-1].Control {
		r.old = r.old[:len(r.old)-1]
	}
	if oldest < 0 {
		return nil, 0, nil
	}
	age := time.Duration(now-oldest) * time.Millisecond
	if !full && now-oldest < maxLag && (xOldest < 0 || now-xOldest < xLag) {
		return nil, age, nil
	}
	return r, age, nil
}

// compact reads, rewrites, writes and swaps one run. done is false when
// the swap lost.
func (c *Compactor) compact(ctx context.Context, r *run, st *PassStats) (done bool, err error) {
	m := c.cfg.Metrics
	in, err := c.read(ctx, r)
	if err != nil {
		return false, err
	}
	st.BytesRead += r.bytes
	m.read.Add(float64(r.bytes))
	first, last := r.old[0].BaseOffset, r.old[len(r.old)-1].LastOffset()
	rw := Rewriter(Identity{})
	if c.cfg.RewriterFor != nil {
		if x := c.cfg.RewriterFor(r.topic); x != nil {
			rw = x
		}
	}
	out, err := rw.Rewrite(ctx, Run{Topic: r.topic, Partition: r.partition, First: first, Last: last}, in)
	if err != nil {
		return false, fmt.Errorf("compact: rewrite %s/%d at %d: %w", r.topic.Name, r.partition, first, err)
	}
	c.mu.Lock()
	c.mu.seq++
	key := segment.ObjectKey(c.cfg.AgentID+keyTag, c.mu.seq, c.cfg.KeyTime())
	c.mu.Unlock()
	obj, entries, err := build(r, key, out, c.cfg.EntryBytes)
	if err != nil {
		return false, err
	}
	swap := meta.SwapIndex{TopicID: r.topic.ID, Partition: r.partition, Old: r.old, New: entries}
	if obj != nil {
		if err := c.cfg.Store.PutIfAbsent(ctx, key, obj); err != nil {
			return false, fmt.Errorf("compact: upload %s: %w", key, err)
		}
		swap.Objects = []meta.SwapObject{{Key: key, Size: int64(len(obj))}}
		written := int64(len(obj))
		st.BytesWritten += written
		m.written.Add(float64(written))
	}
	res, err := c.cfg.Meta.Propose(ctx, swap)
	if err != nil {
		// Maybe applied, maybe not: an object never swapped in is an
		// orphan the reconciler deletes.
		m.swaps.WithLabelValues("failed").Inc()
		return false, fmt.Errorf("compact: swap %s/%d at %d: %w", r.topic.Name, r.partition, first, err)
	}
	switch {
	case res.Code == 0:
		st.Swaps++
		m.swaps.WithLabelValues("done").Inc()
		c.cfg.Logger.Debug("compacted", "topic", r.topic.Name, "partition", r.partition, "first", first, "last", last,
			"entries", len(r.old), "into", len(entries), "object", key)
		return true, nil
	case meta.SwapLost(res):
		st.Lost++
		m.swaps.WithLabelValues("lost").Inc()
		return false, nil
	default:
		m.swaps.WithLabelValues("failed").Inc()
		return false, fmt.Errorf("compact: swap %s/%d at %d: %w", r.topic.Name, r.partition, first, res.Err())
	}
}
