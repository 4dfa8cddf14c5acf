package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Store is the agent's copy of the metadata (replica.Replica).
type Store interface {
	meta.Viewer
	// Changed returns a channel closed after the next apply batch:
	// take it, read the catalog, then wait on it.
	Changed() <-chan struct{}
}

// Config configures a Runner.
type Config struct {
	Store Store
	// Dir holds one directory per view, by relation id; the Runner's
	// alone (what it does not recognize there it deletes).
	Dir string
	// Kafka gives the options of a client reading the inputs' topics
	// (in process, as a principal that may read them).
	Kafka func() []kgo.Opt
	// Schemas are the registry's, for Avro and Protobuf sources; may be
	// nil.
	Schemas func() *source.Schemas
	// SourceMetrics count what the readers read; may be nil.
	SourceMetrics *source.Metrics
	Clock         clock.Clock
	Logger        *slog.Logger
	// MaxEpochChanges is where an epoch stops taking the inputs'
	// batches (default defaultMaxEpochChanges); it holds at most that
	// plus one batch (maxBatchChanges) per input.
	MaxEpochChanges int
	// RetryBackoff is the wait before a failed view starts again
	// (default 2 s, doubling to 30 s).
	RetryBackoff time.Duration
	// Restore, when set, is called before a view's state is opened
	// while its directory is missing (a new or wiped agent): it may
	// put a snapshot there (package viewsnap), which the task then
	// resumes from; if it leaves none, the view is rebuilt from its
	// inputs' beginning.
	Restore func(ctx context.Context, rel meta.Relation, dir string)
	// StepSlots bounds the views whose epochs run at once, plus one
	// that has waited 50 ms, and any that has waited 200 ms (see
	// gate.go), so that the rest of the agent, pull queries first,
	// keeps a processor free of the views' work. 0: no bound (the
	// default: the gate's gain is not shown yet); negative:
	// GOMAXPROCS-1, at least 1.
	StepSlots int
}

const (
	defaultMaxEpochChanges = 50_000
	maxRetryBackoff        = 30 * time.Second
	// minReconcileInterval spaces the runner's reads of the catalog.
	minReconcileInterval = 50 * time.Millisecond
	// maxPollRecords bounds a reader's batch; an upsert record is two
	// changes (-old +new), so a batch holds at most maxBatchChanges.
	maxPollRecords  = 10_000
	maxBatchChanges = 2 * maxPollRecords
	// batchesBuffered bounds the batches a reader polls ahead of the
	// epoch that consumes them.
	batchesBuffered = 4
)

// Runner maintains the catalog's materialized views. Its methods are
// safe for concurrent use.
type Runner struct {
	cfg     Config
	metrics *Metrics
	// steps is taken by a task for each epoch's Step (gate.go).
	steps *gate
	mu    struct {
		sync.Mutex
		tasks map[uint64]*task
	}
	// admin is WaitCaughtUp's client, made at its first use.
	adminOnce sync.Once
	admin     *kgo.Client
	adminErr  error
}

// Status is a view's state on this agent.
type Status struct {
	// State is "starting", "running" or "failed".
	State string
	// Err is the last failure ("" when none).
	Err string
	// Epochs is the number of epochs committed.
	Epochs uint64
	// LastEpoch is when the last epoch committed (zero: none since
	// this task started).
	LastEpoch time.Time
	// LagRecords are the records the committed state is behind the
	// inputs' ends, -1 until measured; LagSeconds the age of the
	// newest input record it holds (0 when caught up).
	LagRecords int64
	LagSeconds float64
	// StateBytes is the view's local state on disk, -1 until measured.
	StateBytes int64
	// UpdatesPerSecond is the rate of changes to the view's contents
	// over the last measurement interval (5 s).
	UpdatesPerSecond float64
	// Late, Dropped and Bad count, since this agent started the view,
	// input records behind the watermark, changes its windows dropped
	// as late, and input records that did not decode.
	Late, Dropped, Bad uint64
}

// New returns a runner; Run runs it.
func New(cfg Config) (*Runner, error) {
	if cfg.Store == nil || cfg.Dir == "" || cfg.Kafka == nil {
		return nil, errors.New("views: Store, Dir and Kafka are required")
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxEpochChanges <= 0 {
		cfg.MaxEpochChanges = defaultMaxEpochChanges
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 2 * time.Second
	}
	if cfg.StepSlots < 0 {
		cfg.StepSlots = defaultStepSlots()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("views: %w", err)
	}
	r := &Runner{cfg: cfg, metrics: newMetrics(), steps: newGate(cfg.StepSlots, cfg.Clock)}
	r.mu.tasks = map[uint64]*task{}
	return r, nil
}

// Metrics are the runner's Prometheus collectors.
func (r *Runner) Metrics() *Metrics { return r.metrics }

// Run keeps the running tasks equal to the catalog's views until ctx
// ends, then stops every task (their state stays, to resume from).
func (r *Runner) Run(ctx context.Context) {
	defer r.stopAll()
	defer func() {
		// Once more, so a WaitCaughtUp after the end makes no client
		// (and reading r.admin is ordered after its making).
		r.adminOnce.Do(func() { r.adminErr = errors.New("views: the runner stopped") })
		if r.admin != nil {
			r.admin.Close()
		}
	}()
	for {
		changed := r.cfg.Store.Changed()
		if err := r.reconcile(ctx); err != nil {
			r.cfg.Logger.Warn("materialized views: reading the catalog", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		// A halted replica's channel stays closed: reading the catalog
		// at most every minReconcileInterval keeps that from spinning.
		if clock.Sleep(ctx, r.cfg.Clock, minReconcileInterval) != nil {
			return
		}
	}
}

// reconcile starts the views without a task and stops (and deletes)
// the tasks and directories of views that no longer exist.
func (r *Runner) reconcile(ctx context.Context) error {
	v := r.cfg.Store.View()
	rels, err := v.Relations()
	v.Close()
	if err != nil {
		return err
	}
	byID := map[uint64]meta.Relation{}
	for _, rel := range rels {
		if rel.Kind == meta.RelationView {
			byID[rel.ID] = rel
		}
	}
	r.mu.Lock()
	var stop []*task
	for id, t := range r.mu.tasks {
		if _, ok := byID[id]; !ok {
			stop = append(stop, t)
			delete(r.mu.tasks, id)
		}
	}
	for _, rel := range rels {
		if rel.Kind != meta.RelationView {
			continue
		}
		if _, ok := r.mu.tasks[rel.ID]; ok {
			continue
		}
		t := r.newTask(ctx, rel, rels)
		r.mu.tasks[rel.ID] = t
		go t.run()
	}
	r.mu.Unlock()
	for _, t := range stop {
		t.endSubscriptions(sqlerr.Errorf(sqlerr.UndefinedTable, "materialized view %q was dropped", t.rel.Name))
		t.stop()
		if err := os.RemoveAll(t.dir); err != nil {
			r.cfg.Logger.Warn("materialized view: deleting dropped view's state", "view", t.rel.Name, "err", err)
		}
		r.metrics.forget(t.rel.Name)
	}
	// Directories of views dropped while this agent was down.
	ents, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		id, err := strconv.ParseUint(e.Name(), 10, 64)
		if _, ok := byID[id]; err == nil && ok {
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
		t.endSubscriptions(sqlerr.Errorf(sqlerr.AdminShutdown, "the agent is shutting down: SUBSCRIBE to %q ended", t.rel.Name))
		t.stop()
	}
}

// Dir is the directory of the view with relation id id.
func (r *Runner) Dir(id uint64) string {
	return filepath.Join(r.cfg.Dir, strconv.FormatUint(id, 10))
}

// Status is the view's state and its last error, as SHOW MATERIALIZED
// VIEWS lists them (catalog.Views).
func (r *Runner) Status(id uint64) (state, err string) {
	st, ok := r.ViewStatus(id)
	if !ok {
		return "not maintained yet", ""
	}
	return st.State, st.Err
}

// ViewStatus reports the view's state; ok false if no task runs it.
func (r *Runner) ViewStatus(id uint64) (Status, bool) {
	r.mu.Lock()
	t, ok := r.mu.tasks[id]
	r.mu.Unlock()
	if !ok {
		return Status{}, false
	}
	return t.status(), true
}

// Columns returns the view's columns. A view whose task has not opened
// its state yet, or failed, answers 55000.
func (r *Runner) Columns(id uint64) ([]exec.Column, error) {
	t, err := r.ready(id)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return t.mu.cols, nil
}

// Open returns the view's committed contents for one read; release
// must be called when the read is done: until then the view's state
// stays open (a failing or dropped view's task waits for its readers
// before closing its database).
func (r *Runner) Open(id uint64) (view *flow.View, release func(), err error) {
	t, err := r.ready(id)
	if err != nil {
		return nil, nil, err
	}
	defer t.mu.Unlock()
	t.mu.readers++
	var once sync.Once
	return t.mu.view, func() {
		once.Do(func() {
			t.mu.Lock()
			t.mu.readers--
			if t.mu.readers == 0 {
				t.mu.idle.Broadcast()
			}
			t.mu.Unlock()
		})
	}, nil
}

// ready returns the view's task, locked, if its state is open.
func (r *Runner) ready(id uint64) (*task, error) {
	r.mu.Lock()
	t, ok := r.mu.tasks[id]
	r.mu.Unlock()
	if !ok {
		return nil, sqlerr.Errorf(sqlerr.ObjectNotInPrerequisiteState, "materialized view %d is not maintained on this agent yet", id)
	}
	t.mu.Lock()
	if t.mu.view == nil {
		msg := "is starting"
		if t.mu.err != "" {
			msg = "failed: " + t.mu.err
		}
		t.mu.Unlock()
		return nil, sqlerr.Errorf(sqlerr.ObjectNotInPrerequisiteState, "materialized view %q %s", t.rel.Name, msg)
	}
	return t, nil
}

// task maintains one view.
type task struct {
	r      *Runner
	rel    meta.Relation
	rels   []meta.Relation // the catalog when it started: inputs' definitions
	dir    string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// stale counts the states found in an older layout and discarded;
	// after the second (a snapshot's), no snapshot is restored. Run's
	// goroutine alone reads and writes it.
	stale int
	mu    struct {
		sync.Mutex
		state     string
		err       string
		epochs    uint64
		lastEpoch time.Time
		cols      []exec.Column
		// db is the open state (nil while none is open), for
		// Checkpoint (snapshot.go).
		db *pebble.DB
		// view is the open state's reader, nil while none is open;
		// readers count the reads of it in progress (Open), idle is
		// signalled when they reach 0.
		view    *flow.View
		readers int
		idle    *sync.Cond
		// positions are the inputs' committed positions (the last
		// checkpoint), for the lag.
		positions []map[int32]source.Position
		// subs are the view's subscriptions (Subscribe); stopped is
		// set once the task stops for good and refuses new ones.
		subs    map[*Subscription]struct{}
		stopped bool
		// defs are the inputs of the running dataflow (nil before it
		// starts); epochDone is closed, and replaced, when an epoch
		// commits (WaitCaughtUp waits on it).
		defs      []*source.Def
		epochDone chan struct{}
		live      live // metrics.go
		// drv is the running driver, nil while none runs; its Stats
		// are read under commitMu (explain.go).
		drv *flow.Driver
	}
	// commitMu is held by the loop from an epoch's Step until its
	// changes are published, and by Subscribe while it reads its
	// snapshot: a subscription starts exactly between two epochs.
	commitMu sync.Mutex
}

func (r *Runner) newTask(ctx context.Context, rel meta.Relation, rels []meta.Relation) *task {
	t := &task{r: r, rel: rel, rels: rels, dir: r.Dir(rel.ID), done: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(ctx)
	t.mu.state = "starting"
	t.mu.idle = sync.NewCond(&t.mu.Mutex)
	t.mu.epochDone = make(chan struct{})
	t.mu.live.lagRecords, t.mu.live.stateBytes, t.mu.live.ends = -1, -1, -1
	r.metrics.start(rel.Name)
	return t
}

func (t *task) stop() {
	t.cancel()
	<-t.done
}

func (t *task) status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	lv := t.mu.live
	return Status{State: t.mu.state, Err: t.mu.err, Epochs: t.mu.epochs, LastEpoch: t.mu.lastEpoch,
		LagRecords: lv.lagRecords, LagSeconds: lv.lagSeconds, StateBytes: lv.stateBytes,
		UpdatesPerSecond: lv.updatesPerSecond, Late: lv.late, Dropped: lv.dropped, Bad: lv.bad}
}

// run runs the view until stopped, starting again from its checkpoint
// after a failure.
func (t *task) run() {
	defer close(t.done)
	backoff := t.r.cfg.RetryBackoff
	for {
		err := t.runOnce()
		if t.ctx.Err() != nil {
			return
		}
		if errors.Is(err, flow.ErrStaleLayout) {
			// Begun by an older build: discarded, and restored from
			// the newest snapshot; if that one is in an older
			// layout too, built again from the inputs.
			t.r.cfg.Logger.Info("materialized view state in an older layout; discarding it", "view", t.rel.Name, "err", err)
			if err = os.RemoveAll(t.dir); err == nil {
				t.stale++
				continue
			}
		}
		t.r.cfg.Logger.Error("materialized view failed; retrying from its checkpoint", "view", t.rel.Name, "err", err, "retry_in", backoff)
		t.mu.Lock()
		t.mu.state, t.mu.err = "failed", err.Error()
		t.mu.Unlock()
		t.r.metrics.failures.WithLabelValues(t.rel.Name).Inc()
		if clock.Sleep(t.ctx, t.r.cfg.Clock, backoff) != nil {
			return
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
}

// checkpoint is what an epoch commits of its inputs: per input (in the
// graph's order), per partition, where to resume.
type checkpoint struct {
	Inputs []map[int32]source.Position `json:"inputs"`
}

// input is one source the view reads.
type input struct {
	def    *source.Def
	reader *source.Reader
	ch     chan polled
	// dropLate: the view closes windows by the watermark, so it drops
	// the records the source finds late (emit.go).
	dropLate bool
}

type polled struct {
	b   *source.Batch
	err error
}

func (t *task) runOnce() error {
	vw, defs, err := t.compile()
	if err != nil {
		return err
	}
	if _, err := os.Stat(t.dir); t.r.cfg.Restore != nil && t.stale < 2 && errors.Is(err, fs.ErrNotExist) {
		t.r.cfg.Restore(t.ctx, t.rel, t.dir)
	}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		return err
	}
	cache := pebble.NewCache(stateCacheSize)
	defer cache.Unref()
	db, merges, err := openState(filepath.Join(t.dir, "state"), cache)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	defer db.Close()
	st := flow.NewPebbleStore(db, nil, false)
	st.SetCountedMerges(merges)
	defer st.Close()
	// Before the database closes: no new reads, and the reads in
	// progress finish.
	defer func() {
		t.mu.Lock()
		t.mu.view, t.mu.db, t.mu.drv = nil, nil, nil
		for t.mu.readers > 0 {
			t.mu.idle.Wait()
		}
		t.mu.Unlock()
	}()
	// An epoch takes batches until it holds MaxEpochChanges, so it may
	// overshoot by a batch per input.
	drv, err := flow.NewDriver(vw.Graph(), st, flow.Options{Index: &vw.Index,
		MaxEpochChanges: t.r.cfg.MaxEpochChanges + len(defs)*maxBatchChanges})
	if err != nil {
		return err
	}
	var cp checkpoint
	if b, ok, err := drv.Checkpoint(); err != nil {
		return err
	} else if ok {
		if err := json.Unmarshal(b, &cp); err != nil || len(cp.Inputs) != len(defs) {
			return fmt.Errorf("state: %w: checkpoint does not match the view's inputs", types.ErrCorrupt)
		}
	} else {
		cp.Inputs = make([]map[int32]source.Position, len(defs))
	}
	t.mu.Lock()
	t.mu.cols, t.mu.view, t.mu.db, t.mu.state, t.mu.drv = vw.Columns, drv.View(), db, "running", drv
	t.mu.defs = defs
	// The driver's epoch count survives restarts (it is in the state):
	// a subscription's epochs keep increasing across a retry.
	t.mu.epochs = drv.Epoch()
	t.mu.live.droppedRun = 0
	t.mu.Unlock()

	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	ins := make([]*input, len(defs))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, def := range defs {
		var schemas *source.Schemas
		if t.r.cfg.Schemas != nil {
			schemas = t.r.cfg.Schemas()
		}
		dec, err := source.NewDecoder(def, schemas)
		if err != nil {
			return err
		}
		start, err := t.startOf(ctx, def, cp.Inputs[i])
		if err != nil {
			return fmt.Errorf("source %s: %w", def.Name, err)
		}
		rd, err := source.NewReader(ctx, source.ReaderConfig{Def: def, Decoder: dec, Kafka: t.r.cfg.Kafka(),
			Start: start, StateDir: filepath.Join(t.dir, "upsert-"+strconv.Itoa(i)),
			Metrics: t.r.cfg.SourceMetrics, MaxPollRecords: maxPollRecords})
		if err != nil {
			return fmt.Errorf("source %s: %w", def.Name, err)
		}
		in := &input{def: def, reader: rd, ch: make(chan polled, batchesBuffered), dropLate: vw.Windowed}
		ins[i] = in
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rd.Close()
			for {
				b, err := rd.Poll(ctx)
				select {
				case in.ch <- polled{b, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	t.mu.Lock()
	t.mu.positions = ClonePositions(cp.Inputs)
	t.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.measureLag(ctx, defs)
	}()
	return t.loop(ctx, drv, ins, cp)
}

// startOf is where to read def's topic from: the checkpoint's
// positions, and a partition it has none for (none of its records read
// yet, or added since) from the log's start, so no partition is left
// unread. With no checkpoint at all, nil: the Reader starts every
// partition as the source's startup option says.
func (t *task) startOf(ctx context.Context, def *source.Def, cp map[int32]source.Position) (map[int32]source.Position, error) {
	if len(cp) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(t.r.cfg.Kafka()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListStartOffsets(ctx, def.Topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, err
	}
	start := maps.Clone(cp)
	offs.Each(func(o kadm.ListedOffset) {
		if _, ok := start[o.Partition]; !ok && o.Topic == def.Topic {
			start[o.Partition] = source.Position{Offset: o.Offset}
		}
	})
	return start, nil
}

// loop runs epochs: it waits for a batch on any input, takes what else
// is ready (up to the epoch's bound), and steps the driver with the
// changes and the inputs' new positions as the checkpoint.
func (t *task) loop(ctx context.Context, drv *flow.Driver, ins []*input, cp checkpoint) error {
	m := t.r.metrics
	name := t.rel.Name
	for i := range cp.Inputs {
		if cp.Inputs[i] == nil {
			cp.Inputs[i] = map[int32]source.Position{}
		}
	}
	wms := make([]time.Time, len(ins))
	var late lateSeen
	for {
		epoch := flow.Epoch{Inputs: make([][]types.Change, len(ins))}
		n, got := 0, false
		var counts epochCounts
		take := func(i int, p polled) error {
			if p.err != nil {
				return fmt.Errorf("source %s: %w", ins[i].def.Name, p.err)
			}
			got = true
			for _, pb := range p.b.Partitions {
				if ins[i].dropLate {
					pb.Changes = late.drop(pb.Changes, pb.Late)
				}
				epoch.Inputs[i] = append(epoch.Inputs[i], pb.Changes...)
				n += len(pb.Changes)
				cp.Inputs[i][pb.Partition] = pb.Next
				counts.add(len(pb.Late), pb.Bad, pb.NewestTimestamp)
			}
			if p.b.Watermark.After(wms[i]) {
				wms[i] = p.b.Watermark
			}
			return nil
		}
		// Block for the first batch of any input (a reflect.Select
		// would do it without a goroutine per input; the readers'
		// channels are few).
		if err := WaitAny(ctx, inputChans(ins), take); err != nil {
			return err
		}
		// Then whatever else is ready, bounded by the epoch's size.
		for more := true; more && n < t.r.cfg.MaxEpochChanges; {
			more = false
			for i, in := range ins {
				select {
				case p := <-in.ch:
					if err := take(i, p); err != nil {
						return err
					}
					more = true
				default:
				}
			}
		}
		if !got {
			continue
		}
		wm := wms[0]
		for _, w := range wms[1:] {
			if w.Before(wm) {
				wm = w
			}
		}
		epoch.Watermark = wm
		b, err := json.Marshal(cp)
		if err != nil {
			return err
		}
		epoch.Checkpoint = b
		release, err := t.r.steps.acquire(ctx)
		if err != nil {
			return err
		}
		t.commitMu.Lock()
		out, err := drv.Step(epoch)
		release()
		if err != nil {
			t.commitMu.Unlock()
			return err
		}
		now := t.r.cfg.Clock.Now()
		var consumed int64
		for _, parts := range cp.Inputs {
			for _, p := range sortedKeys(parts) {
				consumed += parts[p].Offset
			}
		}
		counts.consumed = consumed
		t.mu.Lock()
		t.mu.epochs, t.mu.lastEpoch, t.mu.err = drv.Epoch(), now, ""
		t.mu.positions = ClonePositions(cp.Inputs)
		t.committedLocked(now, n, counts, droppedLate(drv)+late.dropped, out)
		close(t.mu.epochDone)
		t.mu.epochDone = make(chan struct{})
		t.publishLocked(drv.Epoch(), out)
		t.mu.Unlock()
		t.commitMu.Unlock()
		m.epochs.WithLabelValues(name).Inc()
		m.changes.WithLabelValues(name).Add(float64(n))
		m.watermark.WithLabelValues(name).Set(watermarkSeconds(drv.Watermark()))
		m.lastEpoch.WithLabelValues(name).Set(float64(now.UnixMicro()) / 1e6)
		m.offsets.WithLabelValues(name).Set(float64(consumed))
	}
}

// lagInterval is how often a view's lag in records is measured (a
// ListOffsets request per input).
const lagInterval = 5 * time.Second

// measureLag sets the view's records-behind gauge every lagInterval:
// the inputs' end offsets (read_committed: the last stable offsets)
// minus the committed positions, summed.
func (t *task) measureLag(ctx context.Context, defs []*source.Def) {
	cl, err := kgo.NewClient(append(t.r.cfg.Kafka(), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		t.mu.Lock()
		pos := t.mu.positions
		t.mu.Unlock()
		var behind, endSum int64
		ok := true
		for i, def := range defs {
			ends, err := adm.ListEndOffsets(ctx, def.Topic)
			if err == nil {
				err = ends.Error()
			}
			if err != nil {
				ok = false
				break
			}
			ends.Each(func(o kadm.ListedOffset) {
				if o.Topic != def.Topic {
					return
				}
				var at int64
				if i < len(pos) {
					at = pos[i][o.Partition].Offset
				}
				behind += max(0, o.Offset-at)
				endSum += o.Offset
			})
		}
		t.measured(t.r.cfg.Clock.Now(), behind, endSum, ok)
		if clock.Sleep(ctx, t.r.cfg.Clock, lagInterval) != nil {
			return
		}
	}
}

// inputChans are ins' channels, for WaitAny.
func inputChans(ins []*input) []chan polled {
	chs := make([]chan polled, len(ins))
	for i, in := range ins {
		chs[i] = in.ch
	}
	return chs
}

// ClonePositions copies input positions (a checkpoint's), so the
// caller's may change while the copy is read; nil stays nil (a sink's
// "no progress yet").
func ClonePositions(in []map[int32]source.Position) []map[int32]source.Position {
	if in == nil {
		return nil
	}
	out := make([]map[int32]source.Position, len(in))
	for i, m := range in {
		out[i] = maps.Clone(m)
	}
	return out
}

// WaitAny blocks until one of chs has a value and hands it to take,
// then hands over, in order, any other value taken meanwhile (none is
// lost): how a view's or a sink's epoch waits for the first batch of
// any of its inputs (a reflect.Select would do it without a goroutine
// per input; the inputs are few).
func WaitAny[T any](ctx context.Context, chs []chan T, take func(int, T) error) error {
	if len(chs) == 1 {
		select {
		case p := <-chs[0]:
			return take(0, p)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	type tagged struct {
		i int
		p T
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := make(chan tagged, len(chs))
	var wg sync.WaitGroup
	for i, ch := range chs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case p := <-ch:
				first <- tagged{i, p}
			case <-wctx.Done():
			}
		}()
	}
	var res tagged
	select {
	case res = <-first:
	case <-ctx.Done():
		cancel()
		wg.Wait()
		return ctx.Err()
	}
	cancel()
	wg.Wait()
	close(first)
	// Another input's batch may have been taken too: keep it, in
	// order, so no batch is lost.
	if err := take(res.i, res.p); err != nil {
		return err
	}
	for x := range first {
		if err := take(x.i, x.p); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[int32]V) []int32 {
	ks := make([]int32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// stateCacheBytes bounds a view's Pebble block cache; flow's own cache
// of hot values (flow.DefaultCacheBytes) is in front of it.
const stateCacheBytes = 16 << 20

// quietLogger keeps Pebble's routine messages out of the agent's log;
// what fails reaches the task as an error.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("views: state: "+format, args...))
}
