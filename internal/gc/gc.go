// Package gc owns the deletion of data objects: the janitor that deletes
// objects apply queued as dead once the grace period has passed, and the
// reconciler that finds orphans (objects uploaded but never committed)
// by listing the object store and deletes them. Both run in one
// Collector on one agent at a time, chosen by placement among the live
// agents; when that agent's lease ends another one's placement names it
// and it carries on from the state in the log.
//
// What makes deletion safe is decided in apply (package meta, gc.go):
//
//   - A dead object is one no index entry points into any more. A fetch
//     that planned a read of it from an older View may still be reading:
//     the janitor deletes it only once the log clock is the delete delay
//     past its death, longer than any fetch holds a plan (a minute by
//     default, Kafka's log.segment.delete.delay.ms; see
//     meta.DeleteDelayConfig), and once every live agent's heartbeat
//     says it applied the death, so an agent whose apply stalled still
//     finds what its view names. Below metadata level 5 deaths carry no
//     position to wait on, and the wait is the grace period (see
//     meta.DefaultGCGrace).
//   - An orphan's key carries its writer's time (package segment). Apply
//     refuses to commit an object whose key time is below the orphan
//     horizon (log clock minus grace, never moving back), so the
//     reconciler may delete any listed key below the horizon of a View
//     that does not know it: nothing can commit it after that View.
//
// Deleting is idempotent: two agents that both think they own the
// janitor for a while (their views of who is live differ) delete the
// same objects, and the second GCProgress skips what the first removed.
// The reconciler's progress (one key bucket of a minute at a time) is in
// the log too, so a new owner resumes where the old one stopped.
package gc

import (
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
	"github.com/strandkafka/strand/internal/segment"
)

// JanitorKey is the key placement maps to the agent that collects.
const JanitorKey = "strand/gc"

// Defaults for Config.
const (
	// DefaultGrace is --gc-grace's default; meta.DefaultGCGrace says
	// why 10 minutes.
	DefaultGrace = time.Duration(meta.DefaultGCGrace) * time.Millisecond
	// DefaultDeleteDelay is --gc-delete-delay's default: Kafka's
	// log.segment.delete.delay.ms (meta.DeleteDelayConfig says why it
	// suffices).
	DefaultDeleteDelay = time.Duration(meta.DefaultDeleteDelayMs) * time.Millisecond
	// DefaultInterval is the pause between steps. A step deletes at
	// most MaxDeletes objects and lists at most MaxBuckets buckets, so
	// the pace is bounded: 1000 DELETEs and 10 LISTs a second at most,
	// far below a store's limits, and enough to keep up with objects
	// written at 4 MiB each at 4 GB/s.
	DefaultInterval = time.Second
	// DefaultMaxDeletes bounds the dead objects one step deletes, and
	// so one GCProgress (apply takes at most 4096).
	DefaultMaxDeletes = 1000
	// DefaultMaxBuckets bounds the one-minute key buckets one step
	// lists: catching up a day of buckets (after the level-3 upgrade)
	// takes 144 steps.
	DefaultMaxBuckets = 10
	// deleteConcurrency bounds the DELETEs in flight.
	deleteConcurrency = 8
)

// Meta is what the collector needs of the metadata replica.
type Meta interface {
	meta.Viewer
	Propose(ctx context.Context, c meta.Command) (meta.Result, error)
}

// Config configures a Collector.
type Config struct {
	Store objstore.Store
	Meta  Meta
	// Placement names the janitor: the agent that owns JanitorKey.
	Placement placement.Ring
	// Grace is --gc-grace below metadata level 5: the owner proposes it
	// into the log, and waits the longer of it and the log's. From level
	// 5 the log's (meta.GCGraceConfig) alone rules.
	Grace      time.Duration
	Interval   time.Duration
	MaxDeletes int
	MaxBuckets int
	// Clock times the steps (not what is due: that is the log clock).
	Clock  clock.Clock
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxDeletes == 0 {
		c.MaxDeletes = DefaultMaxDeletes
	}
	if c.MaxBuckets == 0 {
		c.MaxBuckets = DefaultMaxBuckets
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Store == nil || c.Meta == nil:
		return errors.New("gc: Config.Store and Config.Meta are required")
	case c.Grace < time.Millisecond:
		return fmt.Errorf("gc: grace %v is below 1ms", c.Grace)
	case c.Interval < 0 || c.MaxDeletes < 1 || c.MaxDeletes > 4096 || c.MaxBuckets < 1:
		return errors.New("gc: Interval must not be negative, MaxDeletes must be 1 to 4096, MaxBuckets positive")
	}
	return nil
}

// Collector runs the janitor and the reconciler on the agent placement
// names. Safe for concurrent use.
type Collector struct {
	cfg  Config
	loop *clock.Loop

	mu struct {
		sync.Mutex
		waitLogged bool
		// partialAt is when the reconciler last listed a bucket the
		// horizon had not passed yet (Config.Clock).
		partialAt time.Time
	}
}

// Step is what one step did.
type Step struct {
	// Owner: this agent is the janitor; nothing else is set otherwise.
	Owner bool
	// Deleted dead objects, and orphans found and deleted.
	Deleted, Orphans int
	OrphanBytes      int64
	// Buckets is how many key buckets the reconciler listed.
	Buckets int
}

// New returns a Collector; Start runs it.
func New(cfg Config) (*Collector, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Collector{cfg: cfg}, nil
}

// Start runs a step every Interval until Close.
func (c *Collector) Start() {
	c.loop = clock.EveryFromNow(c.cfg.Clock, c.cfg.Interval, func(ctx context.Context) {
		if _, err := c.Step(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("gc: step failed; retrying", "err", err)
		}
	})
}

// Close stops the steps and waits for the one under way.
func (c *Collector) Close() { c.loop.Stop() }

// Step runs one step if this agent is the janitor: it deletes the dead
// objects due, lists the key buckets below the orphan horizon that the
// reconciler has not swept and deletes the orphans in them, and reports
// it all (and its grace) in one GCProgress.
func (c *Collector) Step(ctx context.Context) (Step, error) {
	v := c.cfg.Meta.View()
	defer v.Close()
	g, on, err := v.GC()
	if err != nil {
		return Step{}, err
	}
	if !on {
		c.logWaitOnce()
		return Step{}, nil
	}
	if !c.cfg.Placement.Owns(JanitorKey) {
		return Step{}, nil
	}
	now, err := v.LogClock()
	if err != nil {
		return Step{}, err
	}
	st := Step{Owner: true}
	f, err := v.Features()
	if err != nil {
		return st, err
	}
	grace := g.GraceMs
	var prog meta.GCProgress
	if f.MetadataLevel() < meta.MetadataLevel5 {
		// Before the grace was a cluster-wide config, the janitor's
		// flag set it.
		grace = max(c.cfg.Grace.Milliseconds(), g.GraceMs)
		if c.cfg.Grace.Milliseconds() != g.GraceMs {
			prog.GraceMs = c.cfg.Grace.Milliseconds()
		}
	}

	// Dead objects: due the delete delay after their death (the grace
	// below level 5), and once every live agent has applied it.
	cluster, err := v.BrokerConfigs("")
	if err != nil {
		return st, err
	}
	delay := meta.DeleteDelayMs(cluster, grace, f.MetadataLevel())
	due, err := v.DeadObjects(now-delay, c.cfg.MaxDeletes)
	if err != nil {
		return st, err
	}
	if due, err = appliedByAll(v, due); err != nil {
		return st, err
	}
	deleted, derr := c.deleteAll(ctx, due)
	for _, d := range deleted {
		prog.Deleted = append(prog.Deleted, meta.DeadObject{DeadAt: d.DeadAt, Key: d.Key})
	}
	st.Deleted = len(deleted)

	// Orphans: whole buckets below the horizon of this view. Anything
	// this view does not know with a key time below it can never be
	// committed (apply refuses it), whenever it was uploaded.
	horizon := min(g.Horizon(now), now-grace)
	cursor := g.ReconciledTo
	var lerr error
	for st.Buckets < c.cfg.MaxBuckets && cursor+meta.OrphanBucketMs <= horizon && derr == nil {
		n, bytes, err := c.reconcileBucket(ctx, v, cursor, horizon)
		if err != nil {
			lerr = err
			break
		}
		st.Orphans += n
		st.OrphanBytes += bytes
		st.Buckets++
		cursor += meta.OrphanBucketMs
	}
	if cursor > g.ReconciledTo {
		prog.ReconciledTo = cursor
	} else if lerr == nil && derr == nil && cursor <= horizon && c.partialDue(grace) {
		// Caught up: the bucket the horizon is in is not whole yet.
		// Its keys below the horizon are listed too, at most once a
		// grace period, so an orphan goes about grace after it was
		// written rather than up to a bucket later; the sweep mark
		// stays, and the whole bucket is listed once more when it
		// falls below the horizon.
		n, bytes, err := c.reconcileBucket(ctx, v, cursor, horizon)
		lerr = err
		st.Orphans += n
		st.OrphanBytes += bytes
		st.Buckets++
	}
	prog.Orphans, prog.OrphanBytes = int64(st.Orphans), st.OrphanBytes

	if prog.GraceMs != 0 || len(prog.Deleted) > 0 || prog.ReconciledTo != 0 || prog.Orphans > 0 {
		res, err := c.cfg.Meta.Propose(ctx, prog)
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			// The deletes stand; the next step finds the same objects
			// due, deletes them again (a no-op) and reports them.
			return st, fmt.Errorf("gc: reporting progress: %w", err)
		}
	}
	return st, errors.Join(derr, lerr)
}

// appliedByAll keeps the objects of due (in death order) whose death
// every live agent has applied, by the positions their heartbeats
// carry. A copy that lags the log plans reads from a view in which
// younger dead objects still live, however long the grace: deleting one
// before it caught up would turn its reads into missing objects. The
// queue is in log order, so the first one some agent has not applied
// ends the list. Objects that died below metadata level 5 carry no
// position and go by time alone.
func appliedByAll(v *meta.View, due []meta.DeadObject) ([]meta.DeadObject, error) {
	if len(due) == 0 || due[len(due)-1].AppliedBy == 0 {
		return due, nil
	}
	low, found, err := v.LowestLiveApplied("")
	if err != nil || !found {
		return due, err
	}
	for i, d := range due {
		if d.AppliedBy > low.Applied {
			return due[:i], nil
		}
	}
	return due, nil
}

// deleteAll deletes the objects, deleteConcurrency at a time, and
// returns those deleted.
func (c *Collector) deleteAll(ctx context.Context, objs []meta.DeadObject) ([]meta.DeadObject, error) {
	ok := make([]bool, len(objs))
	errs := make([]error, len(objs))
	sem := make(chan struct{}, deleteConcurrency)
	var wg sync.WaitGroup
	for i := range objs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.cfg.Store.Delete(ctx, objs[i].Key); err != nil {
				errs[i] = fmt.Errorf("gc: deleting %s: %w", objs[i].Key, err)
				return
			}
			ok[i] = true
		}()
	}
	wg.Wait()
	var out []meta.DeadObject
	for i, d := range objs {
		if ok[i] {
			out = append(out, d)
		}
	}
	return out, errors.Join(errs...)
}

// reconcileBucket lists the key bucket starting at start and deletes the
// keys v does not know whose time is below horizon.
func (c *Collector) reconcileBucket(ctx context.Context, v *meta.View, start, horizon int64) (int, int64, error) {
	infos, err := c.cfg.Store.List(ctx, segment.BucketPrefix(start))
	if err != nil {
		return 0, 0, fmt.Errorf("gc: listing %s: %w", segment.BucketPrefix(start), err)
	}
	var orphans []meta.DeadObject
	for _, info := range infos {
		t, timed := meta.ObjectKeyTime(info.Key)
		if !timed || t >= horizon {
			continue // not of this layout, or young: may still commit
		}
		known, err := c.known(v, info.Key)
		if err != nil {
			return 0, 0, err
		}
		if !known {
			orphans = append(orphans, meta.DeadObject{Key: info.Key, Size: info.Size})
		}
	}
	deleted, err := c.deleteAll(ctx, orphans)
	if err != nil {
		// The bucket is not swept: the next step lists it again.
		return 0, 0, err
	}
	var bytes int64
	for _, d := range deleted {
		bytes += d.Size
		c.cfg.Logger.Info("gc: deleted an orphan", "key", d.Key, "bytes", d.Size)
	}
	return len(deleted), bytes, nil
}

// known reports whether v knows the object listed as key under any key
// the store may list it by (objstore.Aliaser): a tier object committed
// as held by two zones is listed as held by the three when a hedge's
// copy landed too.
func (c *Collector) known(v *meta.View, key string) (bool, error) {
	a, ok := c.cfg.Store.(objstore.Aliaser)
	if !ok {
		return v.ObjectKnown(key)
	}
	for _, k := range a.Aliases(key) {
		if known, err := v.ObjectKnown(k); err != nil || known {
			return known, err
		}
	}
	return false, nil
}

// partialDue reports whether a grace period (ms) passed since the last
// listing of a partial bucket, and if so starts another.
func (c *Collector) partialDue(graceMs int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	if !c.mu.partialAt.IsZero() && now.Sub(c.mu.partialAt) < time.Duration(graceMs)*time.Millisecond {
		return false
	}
	c.mu.partialAt = now
	return true
}

func (c *Collector) logWaitOnce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.waitLogged {
		c.mu.waitLogged = true
		c.cfg.Logger.Info("gc: garbage collection waits for " + meta.FeatureMetadata + " 3 (strand features upgrade)")
	}
}
