package connect

// The runner: every agent runs one, over its copy of the metadata. A
// connector runs on the one agent placement.Ring names for its key,
// "connect:<name>", over the live agents, as groups' coordinators and
// SQL sinks are placed; it moves when that agent's lease ends. The
// runner starts the task of every RUNNING connector it owns, and stops
// it when the connector is paused, deleted, restarted or reconfigured
// (both raise its generation: the task is started again with what the
// metadata says now) or placed elsewhere.
//
// A task that fails is reported FAILED with its error as the trace and
// started again after a backoff, 1 s doubling to 30 s, reset once a run
// lasted longer than the longest backoff. Status is proposed on
// transitions only (RUNNING once Env.Running is called, FAILED with a
// trace unlike the last one), so a task failing the same way every 30 s
// writes to the log once, and one that runs and fails again writes at
// most twice per backoff (at least RetryBackoff apart): the backoff is
// the status' rate limit.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// Store is the agent's copy of the metadata (replica.Replica).
type Store interface {
	meta.Viewer
	// Changed returns a channel closed after the next apply batch.
	Changed() <-chan struct{}
	// Propose writes c through the log and returns its result from
	// this copy.
	Propose(ctx context.Context, c meta.Command) (meta.Result, error)
	// Sync catches this copy up with the log.
	Sync(ctx context.Context) error
}

// PlacementKey is the key a connector is placed by (placement.Ring).
func PlacementKey(name string) string { return "connect:" + name }

// Config configures a Runner.
type Config struct {
	Store   Store
	Classes *ClassSet
	Secrets *Secrets
	// Dir holds one directory per connector this agent ran (Env.Dir),
	// by escaped name; the Runner's alone.
	Dir   string
	Kafka func() []kgo.Opt
	// Owner returns the node id of the agent that runs the connector of
	// key; Self is this agent's.
	Owner func(key string) int32
	Self  int32
	// Authorize, if set, decides what a connector's owner (a principal,
	// as auth.Principal.String writes it) may do on a topic: Env.Authorize.
	Authorize func(owner string, op acl.Operation, topic string) error
	// Worker is this agent's Connect address (host:port), the status'
	// worker_id.
	Worker  string
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *Metrics
	// RetryBackoff is the first wait before a failed task starts again
	// (default 1 s), doubling to MaxRetryBackoff (default 30 s).
	RetryBackoff, MaxRetryBackoff time.Duration
	// RecheckInterval is how often placement is computed again without
	// a metadata change (default 1 s): a lease ends by the log's clock.
	RecheckInterval time.Duration
	// SweepInterval is how often the agent that owns the key
	// "connect:secrets" sweeps unreferenced secrets (default 5 min;
	// negative: never).
	SweepInterval time.Duration
}

const (
	minReconcileInterval = 50 * time.Millisecond
	// statusTimeout bounds one status proposal: a task does not wait
	// on the log forever to say it failed.
	statusTimeout = 10 * time.Second
	sweepKey      = "connect:secrets"
)

// Runner runs the connectors this agent owns. Its methods are safe for
// concurrent use.
type Runner struct {
	cfg    Config
	worker atomic.Pointer[string]
	mu     struct {
		sync.Mutex
		tasks map[string]*task
	}
}

// SetWorker sets the worker id the runner's statuses name from now on
// (Config.Worker), once the agent knows its bound address.
func (r *Runner) SetWorker(w string) { r.worker.Store(&w) }

// NewRunner returns a runner; Run runs it.
func NewRunner(cfg Config) (*Runner, error) {
	if cfg.Store == nil || cfg.Dir == "" || cfg.Kafka == nil || cfg.Owner == nil || cfg.Secrets == nil {
		return nil, errors.New("connect: Store, Dir, Kafka, Owner and Secrets are required")
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if cfg.MaxRetryBackoff <= 0 {
		cfg.MaxRetryBackoff = 30 * time.Second
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = time.Second
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 5 * time.Minute
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	r := &Runner{cfg: cfg}
	r.SetWorker(cfg.Worker)
	r.mu.tasks = map[string]*task{}
	return r, nil
}

// Metrics are the runner's series (Config.Metrics).
func (r *Runner) Metrics() *Metrics { return r.cfg.Metrics }

// Run keeps the running tasks equal to the RUNNING connectors this
// agent owns until ctx ends, then stops them.
func (r *Runner) Run(ctx context.Context) {
	defer r.stopAll()
	var sw sweeper
	var lastSweep time.Time
	for {
		changed := r.cfg.Store.Changed()
		if err := r.reconcile(ctx); err != nil {
			r.cfg.Logger.Warn("connect: reading the connectors", "err", err)
		}
		if now := r.cfg.Clock.Now(); r.cfg.SweepInterval > 0 && now.Sub(lastSweep) >= r.cfg.SweepInterval && r.cfg.Owner(sweepKey) == r.cfg.Self {
			lastSweep = now
			r.sweep(ctx, &sw)
		}
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

// reconcile starts the owned RUNNING connectors without a task (or with
// one of an older generation), stops the others, and deletes the
// directories of connectors that no longer exist.
func (r *Runner) reconcile(ctx context.Context) error {
	v := r.cfg.Store.View()
	conns, err := v.Connectors()
	v.Close()
	if err != nil {
		return err
	}
	want := map[string]meta.Connector{}
	states := map[string]int{}
	for _, c := range conns {
		if r.cfg.Owner(PlacementKey(c.Name)) != r.cfg.Self {
			continue
		}
		switch {
		case c.State == meta.ConnectorPaused:
			states["paused"]++
		case c.TaskStatus().State == meta.TaskFailed:
			states["failed"]++
		case c.TaskStatus().State == meta.TaskRunning:
			states["running"]++
		default:
			states["unassigned"]++
		}
		if c.State == meta.ConnectorRunning {
			want[c.Name] = c
		}
	}
	r.cfg.Metrics.setOwned(states)
	r.mu.Lock()
	var stop []*task
	gone := map[*task]bool{} // not restarted here: its series go
	for name, t := range r.mu.tasks {
		if c, ok := want[name]; !ok || c.Generation != t.conn.Generation {
			stop = append(stop, t)
			gone[t] = !ok
			delete(r.mu.tasks, name)
		}
	}
	r.mu.Unlock()
	// Every stopped task has returned before its next generation
	// starts: two runs of one connector must never overlap here (one
	// slot, one directory, one transactional id).
	for _, t := range stop {
		t.stop()
		if cls, ok := r.cfg.Classes.Lookup(t.conn.Config["connector.class"]); ok && gone[t] && cls.Forget != nil {
			cls.Forget(t.conn.Name)
		}
	}
	r.mu.Lock()
	for name, c := range want {
		if _, ok := r.mu.tasks[name]; ok {
			continue
		}
		t := r.newTask(ctx, c)
		r.mu.tasks[name] = t
		go t.run()
	}
	r.mu.Unlock()
	exists := map[string]bool{}
	for _, c := range conns {
		exists[dirName(c.Name)] = true
	}
	ents, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !exists[e.Name()] {
			if err := os.RemoveAll(filepath.Join(r.cfg.Dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Runner) sweep(ctx context.Context, sw *sweeper) {
	v := r.cfg.Store.View()
	conns, err := v.Connectors()
	v.Close()
	if err != nil {
		r.cfg.Logger.Warn("connect: secret sweep", "err", err)
		return
	}
	live := map[string]bool{}
	for _, c := range conns {
		for _, val := range c.Config {
			if IsRef(val) {
				live[refKey(val)] = true
			}
		}
	}
	n, err := sw.sweep(ctx, r.cfg.Secrets, live)
	if err != nil {
		r.cfg.Logger.Warn("connect: secret sweep", "err", err)
	}
	if n > 0 {
		r.cfg.Logger.Info("connect: deleted unreferenced secrets", "count", n)
	}
}

func (r *Runner) stopAll() {
	r.mu.Lock()
	tasks := r.mu.tasks
	r.mu.tasks = map[string]*task{}
	r.mu.Unlock()
	for _, t := range tasks {
		t.stop()
	}
}

// Running reports whether this agent runs the connector's task now.
func (r *Runner) Running(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.mu.tasks[name]
	return ok
}

func dirName(name string) string { return url.PathEscape(name) }

// task runs one generation of one connector.
type task struct {
	r      *Runner
	conn   meta.Connector
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// last is the status last proposed, so only transitions are;
	// Env.Running may be called from any goroutine of the task.
	last struct {
		sync.Mutex
		state meta.TaskState
		trace string
	}
}

func (r *Runner) newTask(parent context.Context, c meta.Connector) *task {
	ctx, cancel := context.WithCancel(parent)
	return &task{r: r, conn: c, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

func (t *task) stop() {
	t.cancel()
	<-t.done
}

// run starts the task until its context ends, again after each failure.
func (t *task) run() {
	defer close(t.done)
	cfg := &t.r.cfg
	log := cfg.Logger.With("connector", t.conn.Name, "generation", t.conn.Generation)
	backoff := cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			cfg.Metrics.restarts.Inc()
		}
		start := cfg.Clock.Now()
		err := t.runOnce(log)
		if t.ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the task returned although it was not stopped")
		}
		cfg.Metrics.failures.Inc()
		log.Warn("connect: task failed", "err", err, "retry_in", backoff)
		t.propose(meta.TaskFailed, err.Error())
		if cfg.Clock.Now().Sub(start) > cfg.MaxRetryBackoff {
			backoff = cfg.RetryBackoff
		}
		if clock.Sleep(t.ctx, cfg.Clock, backoff) != nil {
			return
		}
		backoff = min(2*backoff, cfg.MaxRetryBackoff)
	}
}

// runOnce resolves the config, makes the task and runs it once.
func (t *task) runOnce(log *slog.Logger) (err error) {
	cfg := &t.r.cfg
	defer func() {
		// A class's bug fails its task, not the agent.
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	name := t.conn.Config["connector.class"]
	class, ok := cfg.Classes.Lookup(name)
	if !ok {
		return fmt.Errorf("no connector class %q on this agent", name)
	}
	resolved, err := cfg.Secrets.Resolve(t.ctx, t.conn.Config)
	if err != nil {
		return err
	}
	if err := class.Validate(resolved); err != nil {
		return err
	}
	tk, err := class.New(resolved)
	if err != nil {
		return err
	}
	dir := filepath.Join(cfg.Dir, dirName(t.conn.Name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	env := Env{
		Name: t.conn.Name, Kafka: cfg.Kafka, Dir: dir, Clock: cfg.Clock, Logger: log,
		Running: func() { t.propose(meta.TaskRunning, "") },
	}
	if cfg.Authorize != nil {
		owner := t.conn.Owner
		env.Authorize = func(op acl.Operation, topic string) error { return cfg.Authorize(owner, op, topic) }
	}
	return tk.Run(t.ctx, env)
}

// propose writes the task's status, if it changed since the last one
// this task wrote.
func (t *task) propose(state meta.TaskState, trace string) {
	if len(trace) > meta.MaxConnectorTraceBytes {
		trace = trace[:meta.MaxConnectorTraceBytes]
	}
	t.last.Lock()
	defer t.last.Unlock()
	if t.last.state == state && t.last.trace == trace {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, statusTimeout)
	defer cancel()
	res, err := t.r.cfg.Store.Propose(ctx, meta.ConnectorTaskStatus{Name: t.conn.Name, Generation: t.conn.Generation,
		State: state, Node: t.r.cfg.Self, Worker: *t.r.worker.Load(), Trace: trace})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		if t.ctx.Err() == nil {
			t.r.cfg.Logger.Warn("connect: proposing a task's status", "connector", t.conn.Name, "err", err)
		}
		return
	}
	t.last.state, t.last.trace = state, trace
}
