// Package pglog owns the PostgreSQL loglet: a sharedlog.Loglet kept in
// rows of a PostgreSQL database, and the MetaStore that keeps a
// VirtualLog's chain in a row beside it. Many loglets (the segments of
// many logs) share three tables, keyed by a log id.
//
// # Ordering
//
// Positions are not a sequence (a bigserial leaves gaps and its rows
// commit out of order). Each loglet has a row in the tails table holding
// its tail; an append is one statement that increments the tail and
// inserts the entries numbered from the old value. The row lock it takes
// is held to commit, so appends to one loglet commit in position order,
// and any snapshot that sees tail n sees every entry below n: a reader
// never sees p+1 before p. ReadNext reads the tail and the entries in one
// statement, so in one snapshot.
//
// # Group commit
//
// One writer goroutine per Loglet sends queued appends together, as one
// statement and one transaction, bounded by Options.MaxBatchEntries and
// MaxBatchBytes; while one batch commits the next gathers. The queue is
// commitq's; the statement is this package's.
//
// # Ambiguous commits
//
// When the connection fails while a batch commits, the batch may or may
// not have landed, and the statement may even still be on its way to the
// server, to run after the client gave up. Every batch carries a random
// 16-byte id stored with its entries; the writer resolves the outcome on
// another connection by fencing first (bumping the loglet's epoch, which
// every append statement checks, under the row lock) and then looking the
// batch id up above the tail it knew before sending. After the fence a
// late copy of the statement matches no row and writes nothing, so the
// answer is final: landed (the appends succeed at the positions found) or
// not (the writer sends the batch again). A slot is never written twice,
// and an entry lands at most once per Append call. If the outcome cannot
// be learned (the server stays unreachable), Append returns the error,
// ambiguous as the Loglet contract allows.
//
// Resolving and following the epoch are the protocol's own; retrying is
// not. An error the server reported means nothing was written, and
// Append returns it: marked sharedlog.ErrRejected when sending it again
// cannot pass (a bad statement, a missing privilege), plain when it may
// (a serialization failure, too many connections, a connection that
// never opened), for the caller that retries appends (the replica) to
// decide.
//
// # Durability
//
// Append returns after COMMIT, so the entries are as durable as the
// server makes commits: synchronous_commit must not be off (OpenURL
// sets it to on unless the URL names a setting).
//
// # Following the tail
//
// The Loglet is a TailWaiter, told of other handles' appends by LISTEN
// and NOTIFY. Every statement that moves the tail (an append batch, a
// seal) calls pg_notify on the loglet's channel (see tables.channel), in
// its own transaction, so the notification goes out only on commit: one
// per batch, not per entry. The first WaitTail starts a listener: one
// connection per handle, opened with the pool's config, that LISTENs and
// wakes the handle's waiters on every notification; they read the tail
// again with CheckTail. The payload (the new tail) is for people
// watching the channel; the code trusts only what CheckTail reads.
//
// Notifications sent while the listener is not connected are lost, so
// each time it starts listening it wakes the waiters to read the tail
// again, and a waiter reads it every Options.WaitRecheckInterval anyway,
// a safety net for what no notification says (a connection that died
// without the client noticing). The listener reconnects until Close, or
// until the loglet is seen sealed: its tail is final, and a sealed
// segment of a long chain holds no connection.
//
// NOTIFY costs an append a little: at commit a notifying transaction
// takes a lock on the database's notification queue that serializes it
// with other notifying commits, and the queue keeps each notification
// until every listener of the database has read it. The listener only
// reads, so it never holds the queue back for long.
package pglog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/commitq"
)

var (
	// ErrEntryTooLarge: the entry exceeds Options.MaxEntryBytes; it was
	// not written.
	ErrEntryTooLarge = errors.New("pglog: entry too large")
	// ErrBadOptions: an Options field or URL parameter is invalid.
	ErrBadOptions = errors.New("pglog: bad options")
	// ErrNoLoglet: the loglet's row is gone from the tails table; someone
	// deleted it behind the log's back.
	ErrNoLoglet = errors.New("pglog: loglet row missing")
	// ErrCorrupt: rows break an invariant the loglet maintains, such as
	// a hole below the tail.
	ErrCorrupt = errors.New("pglog: corrupt loglet")
)

// DefaultTablePrefix names the tables <prefix>_tails, <prefix>_entries
// and <prefix>_chains.
const DefaultTablePrefix = "strand_log"

// maxLogIDBytes bounds a log id (it is a primary key column).
const maxLogIDBytes = 1024

// Options tune a Loglet. The zero value gives the defaults.
type Options struct {
	// Schema holds the tables; empty means the connection's search path.
	Schema string
	// TablePrefix names the tables. Default DefaultTablePrefix.
	TablePrefix string
	// MaxEntryBytes is the largest entry Append takes. Default 16 MiB.
	MaxEntryBytes int
	// MaxBatchEntries and MaxBatchBytes bound one group commit; a larger
	// entry goes alone. Defaults 512 entries and 1 MiB.
	MaxBatchEntries int
	MaxBatchBytes   int
	// MaxQueueBytes bounds the bytes of appends queued or committing,
	// counting a fixed overhead per entry; Append blocks (honouring ctx)
	// beyond it. Default 16 MiB.
	MaxQueueBytes int
	// MaxReadEntries and MaxReadBytes bound one ReadNext, which still
	// returns at least one entry. Defaults 1024 entries and 4 MiB.
	MaxReadEntries int
	MaxReadBytes   int
	// AttemptTimeout bounds one statement of the writer: an append, or
	// a step of resolving one. Default 10s.
	AttemptTimeout time.Duration
	// MaxCommitAttempts bounds how often the writer sends one batch as
	// the epoch moves under it: a fence by another writer, or its own
	// while resolving a lost commit. Default 8.
	MaxCommitAttempts int
	// MaxResolveAttempts bounds how often the writer tries to learn the
	// outcome of one lost commit before giving up with an ambiguous
	// error. Default 8, paced by package retry from 10ms to 1s.
	MaxResolveAttempts int
	// WaitRecheckInterval is how often a WaitTail caller reads the tail
	// though no notification woke it: the bound on how late it learns
	// of an append whose notification was lost. Default 5s.
	WaitRecheckInterval time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxEntryBytes < 0 || o.MaxBatchEntries < 0 || o.MaxBatchBytes < 0 || o.MaxQueueBytes < 0 ||
		o.MaxReadEntries < 0 || o.MaxReadBytes < 0 || o.AttemptTimeout < 0 || o.MaxCommitAttempts < 0 || o.MaxResolveAttempts < 0 ||
		o.WaitRecheckInterval < 0 {
		return o, fmt.Errorf("%w: negative limit in %+v", ErrBadOptions, o)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxEntryBytes, 16<<20)
	def(&o.MaxBatchEntries, 512)
	def(&o.MaxBatchBytes, 1<<20)
	def(&o.MaxQueueBytes, 16<<20)
	def(&o.MaxReadEntries, 1024)
	def(&o.MaxReadBytes, 4<<20)
	def(&o.MaxCommitAttempts, 8)
	def(&o.MaxResolveAttempts, 8)
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = 10 * time.Second
	}
	if o.WaitRecheckInterval == 0 {
		o.WaitRecheckInterval = 5 * time.Second
	}
	// PostgreSQL stores at most 1 GB in a field; leave room for a batch.
	if o.MaxEntryBytes > 256<<20 {
		return o, fmt.Errorf("%w: MaxEntryBytes %d above 256 MiB", ErrBadOptions, o.MaxEntryBytes)
	}
	return o, nil
}

// Stats counts what a Loglet's writer did, for tests and metrics.
type Stats struct {
	// Batches and Entries count committed group commits and their
	// entries.
	Batches, Entries int64
	// Ambiguous counts commits whose reply was lost; Landed and NotLanded
	// how their resolution came out.
	Ambiguous, Landed, NotLanded int64
	// Fenced counts batches refused because another writer fenced the
	// loglet; they were sent again.
	Fenced int64
}

// Loglet is a sharedlog.Loglet in a PostgreSQL database. Safe for
// concurrent use; several Loglets, in one process or many, may share one
// loglet.
type Loglet struct {
	pool    *pgxpool.Pool
	ownPool bool
	logID   string
	opts    Options
	t       *tables
	channel string // the loglet's NOTIFY channel

	// waitBlocked, if set, is called each time a WaitTail caller starts
	// to wait for a wake-up: a test seam (export_test.go).
	waitBlocked func()

	// life is canceled by Close, stopping the writer's statements.
	life context.Context
	stop context.CancelFunc
	q    *commitq.Queue

	mu struct {
		sync.Mutex
		// knownTail is a tail this handle saw; the tail never moves back,
		// so a batch sent later lands at or above it.
		knownTail sharedlog.Pos
		epoch     int64 // the fence epoch appends must match
		sealed    bool  // seen sealed: appends fail without a round trip
		closed    bool
		stats     Stats

		// changed is closed and replaced to wake WaitTail callers: on a
		// notification, when the listener starts listening, when this
		// handle learns the tail moved or the seal, and on Close.
		changed chan struct{}
		// listening: the listener was started; it is never started
		// again. listenStop ends it, and listenDone is closed when it
		// has closed its connection.
		listening  bool
		listenStop context.CancelFunc
		listenDone chan struct{}
		// listenPID is the server process of the listener's connection
		// while it listens, 0 otherwise: tests kill it.
		listenPID uint32
	}
}

var (
	_ sharedlog.Loglet     = (*Loglet)(nil)
	_ sharedlog.TailWaiter = (*Loglet)(nil)
)

// Open opens the loglet logID in the database pool reaches, creating the
// tables and the loglet if they do not exist. The Loglet does not own
// pool: the caller closes it after the Loglet.
func Open(ctx context.Context, pool *pgxpool.Pool, logID string, opts Options) (*Loglet, error) {
	return open(ctx, pool, false, logID, opts)
}

func open(ctx context.Context, pool *pgxpool.Pool, ownPool bool, logID string, opts Options) (*Loglet, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if logID == "" || len(logID) > maxLogIDBytes {
		return nil, fmt.Errorf("%w: log id of %d bytes, want 1 to %d", ErrBadOptions, len(logID), maxLogIDBytes)
	}
	t, err := newTables(opts.Schema, opts.TablePrefix)
	if err != nil {
		return nil, err
	}
	if err := t.ensure(ctx, pool); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, t.createTailSQL, logID); err != nil {
		return nil, fmt.Errorf("pglog: creating loglet %q: %w", logID, err)
	}
	l := &Loglet{
		pool:    pool,
		ownPool: ownPool,
		logID:   logID,
		opts:    opts,
		t:       t,
		channel: t.channel(logID),
	}
	l.mu.changed = make(chan struct{})
	l.life, l.stop = context.WithCancel(context.Background())
	if _, err := l.readState(ctx); err != nil {
		l.stop()
		return nil, err
	}
	l.q = commitq.Start(commitq.Limits{
		MaxBatchEntries: opts.MaxBatchEntries,
		MaxBatchBytes:   opts.MaxBatchBytes,
		MaxQueueBytes:   opts.MaxQueueBytes,
	}, l.admit, l.commit)
	return l, nil
}

// LogID returns the loglet's key in the tables.
func (l *Loglet) LogID() string { return l.logID }

// Stats returns the writer's counters.
func (l *Loglet) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.stats
}

func (l *Loglet) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(entry) > l.opts.MaxEntryBytes {
		return 0, sharedlog.Rejected(fmt.Errorf("%w: %d bytes, limit %d", ErrEntryTooLarge, len(entry), l.opts.MaxEntryBytes))
	}
	// A non-nil copy: pgx sends a nil slice as NULL.
	return l.q.Append(ctx, append(make([]byte, 0, len(entry)), entry...))
}

// admit refuses an append the loglet knows cannot land.
func (l *Loglet) admit() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mu.closed:
		return sharedlog.ErrClosed
	case l.mu.sealed:
		// Seen sealed: sealed for good, so this is no guess.
		return sharedlog.ErrSealed
	}
	return nil
}

func (l *Loglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if err := l.check(ctx); err != nil {
		return 0, false, err
	}
	var next int64
	var sealed bool
	if err := l.pool.QueryRow(ctx, l.t.tailSQL, l.logID).Scan(&next, &sealed); err != nil {
		return 0, false, l.queryErr(ctx, "check tail", err)
	}
	tail := sharedlog.Pos(next)
	l.learn(tail, sealed)
	return tail, sealed, nil
}

func (l *Loglet) ReadNext(ctx context.Context, from, upTo sharedlog.Pos) ([]sharedlog.Entry, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	if from > math.MaxInt64 || from >= upTo {
		// Nothing can be there; still report a from below the trim point.
		if from <= math.MaxInt64 {
			return nil, l.checkTrimmed(ctx, from)
		}
		return nil, nil
	}
	rows, err := l.pool.Query(ctx, l.t.readSQL, l.logID, int64(from), int64(min(upTo, math.MaxInt64)),
		l.opts.MaxReadEntries, l.opts.MaxReadBytes)
	if err != nil {
		return nil, l.queryErr(ctx, "read", err)
	}
	defer rows.Close()
	var (
		out           []sharedlog.Entry
		next, trimmed int64
		found         bool
	)
	for rows.Next() {
		var pos *int64
		var data []byte
		if err := rows.Scan(&next, &trimmed, &pos, &data); err != nil {
			return nil, l.queryErr(ctx, "read", err)
		}
		found = true
		if pos == nil {
			continue // the tails row alone: no entries in range
		}
		want := from + sharedlog.Pos(len(out))
		if sharedlog.Pos(*pos) != want {
			return nil, fmt.Errorf("%w: %q: read from %d found position %d where %d belongs (tail %d, trimmed %d)",
				ErrCorrupt, l.logID, from, *pos, want, next, trimmed)
		}
		if data == nil {
			data = []byte{}
		}
		out = append(out, sharedlog.Entry{Pos: want, Data: data})
	}
	if err := rows.Err(); err != nil {
		return nil, l.queryErr(ctx, "read", err)
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrNoLoglet, l.logID)
	}
	if from < sharedlog.Pos(trimmed) {
		return nil, sharedlog.ErrTrimmed
	}
	if len(out) == 0 && from < min(upTo, sharedlog.Pos(next)) {
		return nil, fmt.Errorf("%w: %q: no entry at %d below the tail %d", ErrCorrupt, l.logID, from, next)
	}
	l.learn(sharedlog.Pos(next), false)
	return out, nil
}

// checkTrimmed returns ErrTrimmed if from is below the trim point.
func (l *Loglet) checkTrimmed(ctx context.Context, from sharedlog.Pos) error {
	st, err := l.readState(ctx)
	if err != nil {
		return err
	}
	if from < st.trimmed {
		return sharedlog.ErrTrimmed
	}
	return nil
}

func (l *Loglet) Seal(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	// The UPDATE waits for the row lock, so for every append committing
	// now; once it commits, no append can commit, and the tail is final.
	var next int64
	if err := l.pool.QueryRow(ctx, l.t.sealSQL, l.logID, l.channel).Scan(&next, nil); err != nil {
		return l.queryErr(ctx, "seal", err)
	}
	l.learn(sharedlog.Pos(next), true)
	return nil
}

func (l *Loglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	before = min(before, math.MaxInt64)
	var trimmed int64
	if err := l.pool.QueryRow(ctx, l.t.trimSQL, l.logID, int64(before)).Scan(&trimmed); err != nil {
		return l.queryErr(ctx, "trim", err)
	}
	// Outside the tails row lock, so a large delete does not stall
	// appends. Reads already refuse positions below trimmed; if this
	// fails, the next trim deletes the rows.
	if _, err := l.pool.Exec(ctx, l.t.deleteSQL, l.logID, trimmed); err != nil {
		return l.queryErr(ctx, "trim", err)
	}
	return nil
}

// Close stops the writer, failing queued appends with ErrClosed, stops
// the listener, waking WaitTail callers, and closes the pool if OpenURL
// made it. An append whose batch is being committed gets an error that
// wraps ErrClosed; it may have landed. It does not seal. Later calls
// return nil.
func (l *Loglet) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	l.wakeLocked()
	listenDone := l.mu.listenDone
	l.mu.Unlock()
	// Canceling life stops the listener too.
	l.q.Close(l.stop)
	if listenDone != nil {
		<-listenDone
	}
	if l.ownPool {
		l.pool.Close()
	}
	return nil
}

// check returns ctx's error, or ErrClosed after Close.
func (l *Loglet) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return sharedlog.ErrClosed
	}
	return nil
}

// queryErr wraps a failed statement's error: ctx's own error when ctx
// ended (pgx reports a canceled query its own way), ErrClosed when Close
// raced with the call.
func (l *Loglet) queryErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("pglog: %s %q: %w", op, l.logID, cerr)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q", ErrNoLoglet, l.logID)
	}
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("pglog: %s %q: %w (%v)", op, l.logID, sharedlog.ErrClosed, err)
	}
	return fmt.Errorf("pglog: %s %q: %w", op, l.logID, err)
}

// learn records a tail (and seal) read from the database.
func (l *Loglet) learn(tail sharedlog.Pos, sealed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.learnTailLocked(tail)
	if sealed {
		l.sealedLocked()
	}
}

// learnTailLocked records a tail, waking waiters if it is news: this
// handle's own appends wake its waiters without a notification's round
// trip.
func (l *Loglet) learnTailLocked(tail sharedlog.Pos) {
	if tail > l.mu.knownTail {
		l.mu.knownTail = tail
		l.wakeLocked()
	}
}

// sealedLocked records that the loglet is sealed. Its tail is final, so
// the listener has nothing left to hear and gives its connection back;
// waiters wake to find the seal.
func (l *Loglet) sealedLocked() {
	if l.mu.sealed {
		return
	}
	l.mu.sealed = true
	if l.mu.listenStop != nil {
		l.mu.listenStop()
	}
	l.wakeLocked()
}

// wakeLocked wakes WaitTail callers.
func (l *Loglet) wakeLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// state is a tails row.
type state struct {
	next, trimmed sharedlog.Pos
	sealed        bool
	epoch         int64
}

// readState reads the loglet's row and records what it learned.
func (l *Loglet) readState(ctx context.Context) (state, error) {
	var next, trimmed, epoch int64
	var sealed bool
	if err := l.pool.QueryRow(ctx, l.t.stateSQL, l.logID).Scan(&next, &trimmed, &sealed, &epoch); err != nil {
		return state{}, l.queryErr(ctx, "read state", err)
	}
	st := state{next: sharedlog.Pos(next), trimmed: sharedlog.Pos(trimmed), sealed: sealed, epoch: epoch}
	l.learnState(st)
	return st, nil
}

func (l *Loglet) learnState(st state) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.learnTailLocked(st.next)
	if st.sealed {
		l.sealedLocked()
	}
	l.mu.epoch = max(l.mu.epoch, st.epoch)
}
