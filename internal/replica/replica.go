package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/partwatch"
	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
)

var (
	// ErrHalted: the replica met an entry it cannot apply, or a local
	// fault while applying, and stopped. Errors matching it are a
	// *HaltError with the position and cause.
	ErrHalted = errors.New("replica: halted")
	// ErrClosed: the replica was closed.
	ErrClosed = errors.New("replica: replica closed")
	// ErrFenced: another process wrote with this writer id and a newer
	// incarnation, or took a sequence this replica owned. Two live
	// replicas must never share a writer id; this one stops proposing.
	ErrFenced = errors.New("replica: writer fenced by a newer incarnation")
	// ErrAmbiguous: appending failed and the entry may or may not be in
	// the log. Its commands may still apply, exactly once.
	ErrAmbiguous = errors.New("replica: append outcome unknown")
	// ErrTooLarge: the commands do not fit in one entry.
	ErrTooLarge = errors.New("replica: commands exceed the entry limits")
)

// HaltError says where and why a replica stopped applying. The entry at
// Pos was not applied; every entry below it was.
type HaltError struct {
	Pos   sharedlog.Pos
	Cause error
}

func (e *HaltError) Error() string {
	return fmt.Sprintf("replica: halted at log position %d: %v", e.Pos, e.Cause)
}

func (e *HaltError) Is(target error) bool { return target == ErrHalted }
func (e *HaltError) Unwrap() error        { return e.Cause }

// Defaults for Config.
const (
	DefaultMaxEntryBytes      = 1 << 20
	DefaultMaxEntryCommands   = 1024
	DefaultMaxPendingCommands = 8192
	DefaultMaxPendingBytes    = 64 << 20
	DefaultPollInterval       = 50 * time.Millisecond
)

// Bounds of the driver's own loops.
const (
	// applyBatchEntries and applyBatchBytes bound how many log entries
	// share one Pebble batch.
	applyBatchEntries = 256
	applyBatchBytes   = 16 << 20
	// maxAppendAttempts bounds the tries of one entry (see appendRetry).
	maxAppendAttempts    = 5
	appendAttemptTimeout = 10 * time.Second
	tailCheckTimeout     = 10 * time.Second
	readTimeout          = 30 * time.Second
)

var (
	// appendRetry paces the one retry of an ambiguous append: a backend
	// finishes one attempt (resolving a lost reply where its protocol
	// can) and returns, and only here is an entry sent again.
	appendRetry = retry.Policy{Attempts: maxAppendAttempts, Min: 10 * time.Millisecond, Max: time.Second}
	// readRetry paces the player after a failed read. It never gives up:
	// the copy is useless without the log, and a log that comes back
	// must find it still reading.
	readRetry = retry.Policy{Attempts: retry.Forever, Min: 10 * time.Millisecond, Max: time.Second}
)

// Config configures a Replica.
type Config struct {
	// Dir is the Pebble directory of this copy.
	Dir string
	// Log is the shared log every replica applies.
	Log sharedlog.Log
	// WriterID names this replica's proposals, 1 to meta.MaxWriterIDBytes
	// bytes. Two live replicas must not share one.
	WriterID string
	// Incarnation is a lower bound for this run's incarnation; 0 means
	// the proposer clock in nanoseconds. See chooseIncarnation.
	Incarnation uint64
	// MaxEntryBytes and MaxEntryCommands bound one log entry.
	MaxEntryBytes    int
	MaxEntryCommands int
	// MaxPendingCommands and MaxPendingBytes bound the proposals waiting
	// to be appended; Propose blocks while they are full.
	MaxPendingCommands int
	MaxPendingBytes    int
	// PollInterval is how often the tail is checked when Log is not a
	// sharedlog.TailWaiter. A VirtualLog is one: it polls on its own
	// (sharedlog.VirtualOptions).
	PollInterval time.Duration
	// Clock is the proposer clock stamped on entries (apply reads time
	// only from there); it also picks the default incarnation, dates
	// snapshots and times the append retries and the tail polls.
	// Default clock.Real.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// FS is the file system Pebble keeps this copy in. Nil means
	// vfs.Default. It is a test seam: tests inject write failures with
	// Pebble's errorfs.
	FS vfs.FS
	// FailStop is called when this copy can no longer be trusted (see
	// failstop.go), with what went wrong. It must end the process: the
	// agent's logs and exits. The copy is rebuilt from its own files and
	// the log when the process restarts, so stopping loses nothing. Nil
	// means log the error and exit with status 1.
	FailStop func(err error)
	// Applied, if set, is called after each applied batch with the
	// results of the commands this run proposed in it (entries of
	// earlier runs and dropped duplicates left out), in log order, from
	// the goroutine that applies: it must not block. The agent derives
	// the __consumer_offsets records from them (package offsetstopic).
	Applied func(results []meta.Result)

	// applyBatchEntries overrides the constant, for tests that compare
	// batchings.
	applyBatchEntries int
}

func (c *Config) setDefaults() {
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxEntryCommands == 0 {
		c.MaxEntryCommands = DefaultMaxEntryCommands
	}
	if c.MaxPendingCommands == 0 {
		c.MaxPendingCommands = max(DefaultMaxPendingCommands, c.MaxEntryCommands)
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = max(DefaultMaxPendingBytes, c.MaxEntryBytes)
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.applyBatchEntries == 0 {
		c.applyBatchEntries = applyBatchEntries
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("replica: Config.Dir is empty")
	case c.Log == nil:
		return errors.New("replica: Config.Log is nil")
	case c.WriterID == "" || len(c.WriterID) > meta.MaxWriterIDBytes:
		return fmt.Errorf("replica: Config.WriterID must be 1 to %d bytes", meta.MaxWriterIDBytes)
	case c.MaxEntryBytes <= meta.EntryHeaderMaxBytes:
		return fmt.Errorf("replica: Config.MaxEntryBytes must exceed %d", meta.EntryHeaderMaxBytes)
	case c.MaxEntryCommands < 1:
		return errors.New("replica: Config.MaxEntryCommands must be positive")
	case c.MaxPendingCommands < c.MaxEntryCommands:
		return errors.New("replica: Config.MaxPendingCommands must be at least MaxEntryCommands")
	case c.MaxPendingBytes < c.MaxEntryBytes:
		return errors.New("replica: Config.MaxPendingBytes must be at least MaxEntryBytes")
	case c.PollInterval < 0:
		return errors.New("replica: Config.PollInterval is negative")
	}
	return nil
}

// Replica is one copy of the metadata database. It plays the shared log
// into Pebble in the background, proposes commands by appending them, and
// serves reads from the local copy through meta.View.
type Replica struct {
	cfg    Config
	db     *pebble.DB
	log    sharedlog.Log
	logger *slog.Logger

	// ctx lives until Close; the background goroutines stop with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	tails tailChecker
	// stop ends the process when this copy cannot be trusted.
	stop *stopper
	// kick wakes a polling player when someone learned of a new tail.
	kick chan struct{}
	// watches are the long polls waiting on partitions (Watch).
	watches *partwatch.Registry
	// halted is closed when the replica halts.
	halted chan struct{}

	closeOnce sync.Once

	// snapMu serializes Snapshot and CollectSnapshots, so a marker of
	// this writer found in the store is never of a run in progress
	// (snapshot_gc.go).
	snapMu sync.Mutex
	// markerSeen maps the key of another writer's snapshot or GC marker
	// to when, on this replica's clock, it was first listed: how a
	// marker's age is told without reading another machine's clock
	// (snapshot_gc.go). Guarded by snapMu.
	markerSeen map[string]time.Time

	mu struct {
		sync.Mutex
		// incarnation is this run's, 0 until Open picked it.
		incarnation uint64
		// applied is the next position to apply: every entry below it
		// is in Pebble.
		applied sharedlog.Pos
		// knownTail is the highest tail anyone has seen.
		knownTail sharedlog.Pos
		// caughtUpAt is when the copy last held every entry it knew
		// of: when the known tail last moved past a caught-up copy, or
		// the start of the last read that reached it (ApplyLag).
		caughtUpAt time.Time
		// changed is closed and replaced after each apply batch, and on
		// halt and close.
		changed chan struct{}
		halted  *HaltError
		fenced  bool
		closed  bool
		// waiters maps a sequence number this replica appended (or is
		// appending) to the proposals in that entry.
		waiters map[uint64]*entryWaiter
	}

	q proposalQueue

	// applier is the player's, reused from one apply batch to the next.
	applier *meta.Applier

	// features is the copy's finalized features (features.go), read at
	// Open and by the player after a batch that changed them.
	features atomic.Pointer[meta.FinalizedFeatures]
}

// Open opens (or creates) the copy in cfg.Dir, plays the log up to its
// current tail, picks this run's incarnation and starts proposing. A halt
// while catching up fails Open with the *HaltError.
func Open(ctx context.Context, cfg Config) (*Replica, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stop := newStopper(&cfg)
	opts := pebbleOptions(cfg.Logger)
	opts.FS = watchFS(cfg.FS, cfg.Dir, stop.stopInPebble)
	opts.Logger = pebbleLogger{l: cfg.Logger, fatal: func(msg string) {
		stop.stopInPebble(fmt.Errorf("replica: %s (in %s)", msg, cfg.Dir))
	}}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("replica: open pebble: %w", err)
	}
	applied, err := readApplied(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	r := &Replica{
		cfg:    cfg,
		db:     db,
		log:    cfg.Log,
		logger: cfg.Logger.With("writer", cfg.WriterID),
		kick:   make(chan struct{}, 1),
		halted: make(chan struct{}),
		stop:   stop,

		watches: partwatch.New(),

		applier: meta.NewApplier(nil),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.mu.applied = applied
	r.mu.knownTail = applied
	r.mu.caughtUpAt = cfg.Clock.Now()
	r.mu.changed = make(chan struct{})
	r.mu.waiters = make(map[uint64]*entryWaiter)
	// Before the player starts, so it alone updates them from here on.
	if err := r.loadFeatures(db); err != nil {
		db.Close()
		return nil, err
	}
	r.tails.init(r)
	r.q.init()
	if e, ok := cfg.Log.(sharedlog.Eager); ok {
		r.watches.OnBusy(eagerWhileBusy(e))
	}
	stop.setHalt(func(err error) { r.halt(&HaltError{Pos: r.NextToApply(), Cause: err}) })

	r.wg.Add(1)
	go r.runPlayer()

	if err := r.Sync(ctx); err != nil {
		r.Close()
		return nil, err
	}
	inc, err := r.chooseIncarnation()
	if err != nil {
		r.Close()
		return nil, err
	}
	r.mu.Lock()
	r.mu.incarnation = inc
	r.mu.Unlock()
	r.wg.Add(1)
	go r.runAppender()
	return r, nil
}

func readApplied(db *pebble.DB) (sharedlog.Pos, error) {
	next, err := meta.NextToApply(pebbleReader{db})
	return sharedlog.Pos(next), err
}

// chooseIncarnation picks this run's incarnation, after Open has played
// the log to its tail.
//
// Sequence numbers restart at 1 in each incarnation, so this writer id must
// never use an incarnation twice: an ambiguous append from an earlier run
// can land in the log long after that run died, and if it carried the same
// (incarnation, seq) as one of ours, apply would keep whichever came first
// and silently drop the other. The result is the max of:
//   - the replicated incarnation + 1: above every entry that landed before
//     Open reached the tail;
//   - the incarnation this directory last used + 1, stored (synced) before
//     the first append: above entries of earlier runs here that have not
//     landed yet;
//   - Config.Incarnation, by default the clock in nanoseconds: above
//     earlier runs whose directory was wiped, as long as the clock moved
//     forward between runs.
func (r *Replica) chooseIncarnation() (uint64, error) {
	inc := r.cfg.Incarnation
	if inc == 0 {
		// At least 1: apply treats incarnation 0, seq 0 as already seen.
		inc = max(uint64(r.cfg.Clock.Now().UnixNano()), 1)
	}
	last, found, err := meta.LastIncarnation(pebbleReader{r.db}, r.cfg.WriterID)
	if err != nil {
		return 0, err
	}
	if found {
		inc = max(inc, last+1)
	}
	key, val := meta.LocalIncarnation(r.cfg.WriterID, inc)
	if err := r.db.Set(key, val, pebble.Sync); err != nil {
		return 0, err
	}
	return inc, nil
}

// Incarnation is this run's incarnation.
func (r *Replica) Incarnation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.incarnation
}

// WriterID is the configured writer id.
func (r *Replica) WriterID() string { return r.cfg.WriterID }

// Close stops the replica and closes Pebble. Pending proposals fail with
// ErrClosed (their commands may still apply, from the log). Views must be
// closed first.
func (r *Replica) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.cancel()
		r.tails.close()
		r.wg.Wait()
		r.mu.Lock()
		r.mu.closed = true
		r.failAllLocked(ErrClosed)
		err = r.db.Close()
	})
	return err
}

// Halted is closed when the replica halts; Err then says why. A halt is
// for good: nothing in this process brings the copy back.
func (r *Replica) Halted() <-chan struct{} { return r.halted }

// Err returns the halt error, if the replica halted.
func (r *Replica) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.halted != nil {
		return r.mu.halted
	}
	return nil
}

// NextToApply returns the position of the next entry to apply: every
// entry below it is applied, none at or above it is.
func (r *Replica) NextToApply() sharedlog.Pos {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.applied
}

// Changed returns a channel closed after the next apply batch commits (and
// on halt and Close). Read state after taking the channel, then wait on it.
func (r *Replica) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.changed
}

// Watch registers a watch on parts, notified after each apply batch that
// changes one of them (meta.Changes: its state, index, or open or
// aborted transactions, or its topic deleted), and with all of them on
// a halt and on Close. Register, then read state, then wait on it;
// close it when done. See package partwatch.
func (r *Replica) Watch(parts []meta.PartitionRef) *partwatch.Watch {
	return r.watches.Watch(parts)
}

// WaitApplied waits until every entry below pos is applied.
func (r *Replica) WaitApplied(ctx context.Context, pos sharedlog.Pos) error {
	for {
		r.mu.Lock()
		applied, halted, closed, ch := r.mu.applied, r.mu.halted, r.mu.closed, r.mu.changed
		r.mu.Unlock()
		switch {
		case applied >= pos:
			return nil
		case halted != nil:
			return halted
		case closed:
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Sync waits until this copy has applied everything in the log when Sync
// was called: a read from meta.View after it returns is linearizable.
// Concurrent callers share tail checks.
func (r *Replica) Sync(ctx context.Context) error {
	tail, err := r.tails.check(ctx)
	if err != nil {
		return err
	}
	r.noteTail(tail)
	return r.WaitApplied(ctx, tail)
}

// View returns a snapshot of the state as of the last apply batch. Reads
// are local: no log access; call Sync first for a linearizable read. The
// View must be closed, and before the Replica is.
func (r *Replica) View() *meta.View {
	return meta.NewView(pebbleSnapshot{r.db.NewSnapshot()})
}

// Digest is a SHA-256 over the replicated state, the applied position
// included (meta.View.Digest). Replicas that applied the same log prefix have equal digests.
func (r *Replica) Digest() ([32]byte, error) {
	v := r.View()
	defer v.Close()
	return v.Digest()
}

// noteTail records a tail someone saw and wakes a polling player.
func (r *Replica) noteTail(tail sharedlog.Pos) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	if tail > r.mu.knownTail {
		if r.mu.applied >= r.mu.knownTail {
			// Caught up until this moment: the lag starts now.
			r.mu.caughtUpAt = now
		}
		r.mu.knownTail = tail
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// ApplyLag is how far the copy is behind the newest log entry it knows
// of, in time: zero when it has applied all of them, else how long ago
// it last held every entry it knew of, as Kafka's replica lag time
// measures a follower. Entries appended where this agent has not yet
// looked count once it learns of them, which with a tailing log
// (TailWaiter) is at once.
func (r *Replica) ApplyLag() time.Duration {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.applied >= r.mu.knownTail {
		return 0
	}
	return max(now.Sub(r.mu.caughtUpAt), 0)
}

// noteCaughtUp records that a read started at start applied every entry
// below target, if that is all the copy knew of then.
func (r *Replica) noteCaughtUp(target sharedlog.Pos, start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.applied >= target && start.After(r.mu.caughtUpAt) {
		r.mu.caughtUpAt = start
	}
}

// runPlayer tails the log and applies it until Close or a halt, waiting
// out readRetry's backoff after a failed read.
func (r *Replica) runPlayer() {
	defer r.wg.Done()
	loop := readRetry.Start(r.ctx, r.cfg.Clock)
	for loop.Next() {
		err := r.play(&loop)
		if r.ctx.Err() != nil || errors.Is(err, ErrHalted) {
			return
		}
		r.logger.Warn("replica: reading the log failed; retrying", "err", err, "attempt", loop.Attempt())
	}
}

// play reads and applies the log until a read fails or the copy halts,
// resetting loop after every step that worked.
func (r *Replica) play(loop *retry.Loop) error {
	for {
		r.mu.Lock()
		applied, target, halted := r.mu.applied, r.mu.knownTail, r.mu.halted
		r.mu.Unlock()
		if halted != nil {
			return halted
		}
		var err error
		if applied < target {
			start := r.cfg.Clock.Now()
			if err = r.playTo(applied, target); err == nil {
				r.noteCaughtUp(target, start)
			}
		} else {
			err = r.waitForTail(applied)
		}
		if err != nil {
			return err
		}
		loop.Reset()
	}
}

// waitForTail returns once the known tail may have moved past applied.
// A TailWaiter is waited on under the replica's context alone: a kick
// must not cancel it, for that would cut off a request in flight, billed
// all the same and, in bursts (a kick per Propose), enough to kill
// dynalite. A VirtualLog wakes its waiter itself for what a kick tells:
// an append or a CheckTail (Sync) made through it.
func (r *Replica) waitForTail(applied sharedlog.Pos) error {
	if tw, ok := r.log.(sharedlog.TailWaiter); ok {
		tail, err := tw.WaitTail(r.ctx, applied)
		if err != nil {
			return err
		}
		if tail > applied {
			r.noteTail(tail)
			return nil
		}
		// Sealed with nothing new: poll rather than spin.
	}
	poll, t := clock.After(r.cfg.Clock, r.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-r.kick:
		return nil // the known tail moved, or a Sync wants a check
	case <-poll:
	}
	ctx, cancel := context.WithTimeout(r.ctx, tailCheckTimeout)
	defer cancel()
	tail, _, err := r.log.CheckTail(ctx)
	if err != nil {
		return err
	}
	r.noteTail(tail)
	return nil
}

// eagerWhileBusy returns a partwatch busy hook that holds e's Eager while
// any watch is live: a long-polling Fetch waits for appends other agents
// make, which this copy learns of only by polling, so the log polls
// quickly while one waits and rarely otherwise (see Idle polling in the
// package doc).
func eagerWhileBusy(e sharedlog.Eager) func(busy bool) {
	var release func()
	return func(busy bool) {
		// partwatch calls this under its lock, alternating true and
		// false: release is never raced.
		if busy {
			release = e.Eager()
		} else if release != nil {
			release()
			release = nil
		}
	}
}

// playTo reads entries in [from, to) and applies them.
func (r *Replica) playTo(from, to sharedlog.Pos) error {
	ctx, cancel := context.WithTimeout(r.ctx, readTimeout)
	entries, err := r.log.ReadNext(ctx, from, to)
	cancel()
	if errors.Is(err, sharedlog.ErrTrimmed) {
		return r.halt(&HaltError{Pos: from, Cause: fmt.Errorf(
			"the log is trimmed above this copy's applied position; restore a newer snapshot (Restore): %w", err)})
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return fmt.Errorf("replica: log returned no entries in [%d, %d) below its tail", from, to)
	}
	for i, e := range entries {
		if e.Pos != from+sharedlog.Pos(i) || e.Pos >= to {
			return r.halt(&HaltError{Pos: from + sharedlog.Pos(i),
				Cause: fmt.Errorf("log returned position %d reading from %d", e.Pos, from)})
		}
	}
	for len(entries) > 0 {
		n, size := 0, 0
		for n < len(entries) && n < r.cfg.applyBatchEntries && (n == 0 || size+len(entries[n].Data) <= applyBatchBytes) {
			size += len(entries[n].Data)
			n++
		}
		if err := r.applyBatch(entries[:n]); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// applyBatch applies entries (consecutive, starting at the applied
// position) and publishes the outcome.
func (r *Replica) applyBatch(entries []sharedlog.Entry) error {
	outs, next, poison, err := applyEntries(r.db, r.applier, entries)
	if err != nil {
		// Pebble failed (a write failure has stopped the process before
		// Pebble could return it, so a read, most likely). A restart
		// rebuilds the copy; halting alone would leave the agent
		// running without one.
		h := &HaltError{Pos: entries[0].Pos, Cause: fmt.Errorf("local fault while applying: %w", err)}
		r.stop.stop(h)
		return r.halt(h)
	}
	if next > entries[0].Pos && r.applier.FeaturesChanged() {
		if err := r.loadFeatures(r.db); err != nil {
			h := &HaltError{Pos: next, Cause: fmt.Errorf("local fault reading the finalized features: %w", err)}
			r.stop.stop(h)
			return r.halt(h)
		}
	}
	if next > entries[0].Pos {
		var mine []meta.Outcome
		for _, out := range outs {
			if out.Header.WriterID == r.cfg.WriterID {
				mine = append(mine, out)
			}
		}
		r.publish(next, mine, r.applier.Changes())
	}
	if poison != nil {
		return r.halt(poison)
	}
	return nil
}

// applyEntries applies consecutive entries in one Pebble batch, with the
// new applied position, and commits it. It stops before an entry that
// cannot be applied (poison) and commits what came before. next is the
// position after the last entry applied; outs has one outcome per entry
// applied. A non-nil err is a local fault: nothing was committed.
//
// The batch commits without fsync: the log is the durable copy. Pebble
// recovers a prefix of its committed batches after a crash, and each batch
// carries its applied position, so a restarted copy resumes exactly after
// the last batch it kept and replays the rest from the log.
func applyEntries(db *pebble.DB, a *meta.Applier, entries []sharedlog.Entry) (outs []meta.Outcome, next sharedlog.Pos, poison *HaltError, err error) {
	b := db.NewIndexedBatch()
	defer b.Close()
	a.Reset(pebbleBatch{b})
	first := entries[0].Pos
	next = first
	outs = make([]meta.Outcome, 0, len(entries))
	for _, e := range entries {
		out, err := a.Apply(uint64(e.Pos), e.Data)
		var pe *meta.PoisonError
		if errors.As(err, &pe) {
			poison = &HaltError{Pos: e.Pos, Cause: pe.Err}
			break
		}
		if err != nil {
			return nil, first, nil, err
		}
		next = e.Pos + 1
		outs = append(outs, out)
	}
	if next == first {
		return nil, first, poison, nil
	}
	if err := a.Finish(uint64(next)); err != nil {
		return nil, first, nil, err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return nil, first, nil, err
	}
	return outs, next, poison, nil
}

// publish makes an applied batch visible to waiters, wakes the watches
// on the partitions it changed, and hands this writer's results to its
// proposers.
func (r *Replica) publish(next sharedlog.Pos, mine []meta.Outcome, changes meta.Changes) {
	var done []*entryWaiter
	var doneResults [][]meta.Result
	var fenced []*entryWaiter
	var applied []meta.Result
	r.mu.Lock()
	r.mu.applied = next
	if next > r.mu.knownTail {
		r.mu.knownTail = next
	}
	inc := r.mu.incarnation
	for _, out := range mine {
		h := out.Header
		switch {
		case inc == 0:
			// Open is still catching up; these are earlier runs' entries.
		case h.Incarnation > inc:
			// A newer run with our writer id: it owns the id now.
			r.mu.fenced = true
		case h.Incarnation == inc && !out.Dropped:
			if r.cfg.Applied != nil {
				applied = append(applied, out.Results...)
			}
			if w, ok := r.mu.waiters[h.Seq]; ok {
				delete(r.mu.waiters, h.Seq)
				done = append(done, w)
				doneResults = append(doneResults, out.Results)
			}
		case h.Incarnation == inc && out.Dropped:
			// Our first copy applied earlier and took the waiter, unless
			// someone else wrote this (incarnation, seq).
			if w, ok := r.mu.waiters[h.Seq]; ok {
				delete(r.mu.waiters, h.Seq)
				fenced = append(fenced, w)
				r.mu.fenced = true
			}
		}
	}
	if r.mu.fenced {
		for _, w := range r.takeWaitersLocked() {
			fenced = append(fenced, w)
		}
	}
	ch := r.mu.changed
	r.mu.changed = make(chan struct{})
	r.mu.Unlock()
	close(ch)
	r.watches.Notify(changes)
	if len(applied) > 0 {
		// Before the proposers learn their results: whoever they answer
		// finds the change already noted.
		r.cfg.Applied(applied)
	}
	for i, w := range done {
		w.complete(doneResults[i])
	}
	failWaiters(fenced, ErrFenced)
}

// halt stops applying for good and fails everything waiting.
func (r *Replica) halt(h *HaltError) error {
	r.mu.Lock()
	if r.mu.halted == nil {
		r.mu.halted = h
		r.logger.Error("replica: replica halted", "pos", h.Pos, "err", h.Cause)
		close(r.halted)
	}
	h = r.mu.halted
	r.failAllLocked(h)
	return h
}

// failAllLocked ends every wait when the copy stops for good (closed or
// halted): it wakes Changed and every long poll, and fails the entry
// waiters and the queued proposals with err. It unlocks r.mu.
func (r *Replica) failAllLocked(err error) {
	waiters := r.takeWaitersLocked()
	ch := r.mu.changed
	r.mu.changed = make(chan struct{})
	r.mu.Unlock()
	close(ch)
	r.watches.NotifyAll()
	failWaiters(waiters, err)
	failProposals(r.q.drain(), err)
}

func (r *Replica) takeWaitersLocked() []*entryWaiter {
	ws := make([]*entryWaiter, 0, len(r.mu.waiters))
	for seq, w := range r.mu.waiters {
		ws = append(ws, w)
		delete(r.mu.waiters, seq)
	}
	return ws
}

// proposeErr is why proposals cannot proceed, or nil.
func (r *Replica) proposeErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proposeErrLocked()
}

func (r *Replica) proposeErrLocked() error {
	switch {
	case r.mu.halted != nil:
		return r.mu.halted
	case r.mu.closed || r.ctx.Err() != nil:
		return ErrClosed
	case r.mu.fenced:
		return ErrFenced
	}
	return nil
}
