package sinks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/views"
)

// Config configures a Runner.
type Config struct {
	Store views.Store
	// Dir holds one directory per sink this agent ran, by relation id;
	// the Runner's alone.
	Dir string
	// Kafka gives the options of a client of the cluster as a
	// principal that may read the inputs, write the sinks' topics,
	// create the progress topics and use the transactional ids.
	Kafka func() []kgo.Opt
	// Schemas are the registry's, for Avro and Protobuf sources; may be
	// nil.
	Schemas func() *source.Schemas
	// SourceMetrics count what the readers read; may be nil.
	SourceMetrics *source.Metrics
	// Owner returns the node id of the agent that runs the sink of key
	// (placement.Ring.Owner over the live agents); Self is this agent's.
	Owner func(key string) int32
	Self  int32
	Clock clock.Clock
	// Restore, if set, fills a sink's missing state directory from its
	// newest snapshot (viewsnap.Snapshotter.Restore), or leaves it
	// missing; snapshot.go.
	Restore func(ctx context.Context, rel meta.Relation, dir string)
	// Logger may be nil.
	Logger *slog.Logger
	// MaxEpochChanges bounds an epoch's input changes (and so one
	// transaction's records, but for a join's fan-out); default 50,000.
	MaxEpochChanges int
	// RetryBackoff is the wait before a failed sink starts again
	// (default 1 s, doubling to 30 s).
	RetryBackoff time.Duration
	// RecheckInterval is how often the owners are computed again
	// without a catalog change (default 1 s): an agent's lease ends by
	// the log's clock, not by an apply here.
	RecheckInterval time.Duration
}

const (
	defaultMaxEpochChanges = 50_000
	maxRetryBackoff        = 30 * time.Second
	minReconcileInterval   = 50 * time.Millisecond
)

// PlacementKey is the key a sink is placed by (placement.Ring).
func PlacementKey(id uint64) string { return "sql-sink:" + strconv.FormatUint(id, 10) }

// Runner runs the catalog's sinks this agent owns. Its methods are
// safe for concurrent use.
type Runner struct {
	cfg     Config
	metrics *Metrics
	mu      struct {
		sync.Mutex
		tasks map[uint64]*task
	}
}

// New returns a runner; Run runs it.
func New(cfg Config) (*Runner, error) {
	if cfg.Store == nil || cfg.Dir == "" || cfg.Kafka == nil || cfg.Owner == nil {
		return nil, errors.New("sinks: Store, Dir, Kafka and Owner are required")
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxEpochChanges <= 0 {
		cfg.MaxEpochChanges = defaultMaxEpochChanges
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sinks: %w", err)
	}
	r := &Runner{cfg: cfg, metrics: newMetrics()}
	r.mu.tasks = map[uint64]*task{}
	return r, nil
}

// Metrics are the runner's Prometheus collectors.
func (r *Runner) Metrics() *Metrics { return r.metrics }

// Run keeps the running tasks equal to the catalog's sinks this agent
// owns until ctx ends, then stops them (their state stays).
func (r *Runner) Run(ctx context.Context) {
	defer r.stopAll()
	var swept sweepState
	for {
		changed := r.cfg.Store.Changed()
		if err := r.reconcile(ctx); err != nil {
			r.cfg.Logger.Warn("sinks: reading the catalog", "err", err)
		}
		r.maybeSweep(ctx, &swept)
		recheck, tm := clock.After(r.cfg.Clock, r.cfg.RecheckInterval)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-changed:
		case <-recheck:
		}
		tm.Stop()
		if clock.Sleep(ctx, r.cfg.Clock, minReconcileInterval) != nil {
			return
		}
	}
}

// reconcile starts the owned sinks without a task, stops the tasks of
// sinks dropped or now owned by another agent, and deletes the state
// of dropped sinks. A sink that moved away keeps its state here: if it
// comes back, it catches up from it instead of from the beginning.
func (r *Runner) reconcile(ctx context.Context) error {
	v := r.cfg.Store.View()
	rels, err := v.Relations()
	v.Close()
	if err != nil {
		return err
	}
	sinks := map[uint64]meta.Relation{}
	for _, rel := range rels {
		if rel.Kind == meta.RelationSink {
			sinks[rel.ID] = rel
		}
	}
	r.mu.Lock()
	var stop []*task
	var dropped []*task
	for id, t := range r.mu.tasks {
		_, exists := sinks[id]
		if !exists || r.cfg.Owner(PlacementKey(id)) != r.cfg.Self {
			stop = append(stop, t)
			delete(r.mu.tasks, id)
			if !exists {
				dropped = append(dropped, t)
			}
		}
	}
	for id, rel := range sinks {
		if _, ok := r.mu.tasks[id]; ok || r.cfg.Owner(PlacementKey(id)) != r.cfg.Self {
			continue
		}
		t := r.newTask(ctx, rel, rels)
		r.mu.tasks[id] = t
		go t.run()
	}
	r.mu.Unlock()
	for _, t := range stop {
		t.stop()
		r.metrics.running.WithLabelValues(t.rel.Name).Set(0)
	}
	for _, t := range dropped {
		r.metrics.forget(t.rel.Name)
	}
	// Directories of sinks no longer in the catalog.
	ents, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		id, err := strconv.ParseUint(e.Name(), 10, 64)
		if _, ok := sinks[id]; err == nil && ok {
			continue
		}
		if err := os.RemoveAll(filepath.Join(r.cfg.Dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) stopAll() {
	r.mu.Lock()
	tasks := r.mu.tasks
	r.mu.tasks = map[uint64]*task{}
	r.mu.Unlock()
	for _, t := range tasks {
		t.stop()
	}
}

// Dir is the state directory of the sink with relation id id.
func (r *Runner) Dir(id uint64) string {
	return filepath.Join(r.cfg.Dir, strconv.FormatUint(id, 10))
}

// Status is the sink's state as SHOW SINKS lists it: on its owner,
// "starting", "catching up", "running" or "failed", with the owner's
// node id; elsewhere where it is placed.
func (r *Runner) Status(id uint64) (state, err string) {
	owner := r.cfg.Owner(PlacementKey(id))
	r.mu.Lock()
	t, ok := r.mu.tasks[id]
	r.mu.Unlock()
	if !ok {
		if owner == r.cfg.Self {
			return fmt.Sprintf("starting on agent %d", owner), ""
		}
		return fmt.Sprintf("on agent %d", owner), ""
	}
	st := t.status()
	return fmt.Sprintf("%s on agent %d", st.State, r.cfg.Self), st.Err
}

// SinkStatus is a sink's task on this agent.
type SinkStatus struct {
	State string
	Err   string
	// Transactions committed by this task, and records in them.
	Transactions, Records uint64
}

// SinkStatus reports the sink's task here; ok false if this agent
// does not run it.
func (r *Runner) SinkStatus(id uint64) (SinkStatus, bool) {
	r.mu.Lock()
	t, ok := r.mu.tasks[id]
	r.mu.Unlock()
	if !ok {
		return SinkStatus{}, false
	}
	return t.status(), true
}
