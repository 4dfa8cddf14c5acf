// Package etcdlog owns the etcd loglet: a sharedlog.Loglet kept as one
// key per position under a path in an etcd cluster, and the MetaStore
// that keeps a VirtualLog's chain in a key beside its segments.
//
// # Ordering
//
// Appends are leaderless compare-and-swap: a writer puts the entries of a
// batch at the positions from the tail it believes in, in one
// transaction that succeeds only if the first position is still free,
// the loglet is not sealed and the trim point is not past it. Positions
// are written in order with no holes, so the tail is the number of entry
// keys from any position known to be below it. A writer that loses
// learns the new tail from the same round trip (the transaction's else
// branch counts the keys from its guess) and tries again there. The tail
// is found by counting, not by a reverse range read with limit 1: etcd
// 3.4 sorts such a read in memory over the whole range.
//
// # Group commit
//
// One writer goroutine per Loglet puts queued appends together, several
// positions in one transaction, bounded by Options.MaxBatchEntries (etcd
// allows 128 operations per transaction by default) and MaxBatchBytes
// (etcd refuses requests over 1.5 MiB by default). The queue is
// commitq's; the transaction is this package's.
//
// # Ambiguous appends
//
// Each batch carries a random id, stored in every entry's value. When a
// transaction's reply is lost, the writer sends the identical
// transaction, same positions and bytes, until it learns the outcome: it
// succeeds (the first try did not land), or its else branch shows the
// first slot holding the batch's id (the first try landed), or another
// id (it did not, and never will: the slot is taken). A slot is never
// written twice. If the outcome cannot be learned within
// MaxResolveAttempts (paced by package retry) the Append returns the
// error, ambiguous as the Loglet contract allows: resending is how one
// attempt learns its outcome, and sending the entry again as a new
// append is left to the caller that deduplicates (the replica). A
// request etcd refuses for good (malformed, too large, unauthorized)
// before anything of the batch may have landed is marked
// sharedlog.ErrRejected, as is an entry over MaxEntryBytes.
//
// # Seal and trim
//
// Seal puts the seal key; every append transaction requires it absent,
// so after Seal no append lands and the tail is final. PrefixTrim moves
// the trim key and deletes the entries below it in one transaction.
//
// The Loglet is a TailWaiter: WaitTail watches the loglet's keys.
package etcdlog

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/commitq"
)

var (
	// ErrEntryTooLarge: the entry exceeds Options.MaxEntryBytes; it was
	// not written.
	ErrEntryTooLarge = errors.New("etcdlog: entry too large")
	// ErrBadOptions: an Options field, path or URL is invalid.
	ErrBadOptions = errors.New("etcdlog: bad options")
	// ErrCorrupt: keys break an invariant the loglet maintains, such as
	// a hole below the tail or a value without its header.
	ErrCorrupt = errors.New("etcdlog: corrupt loglet")
)

const (
	// etcdMaxTxnOps is etcd's default --max-txn-ops: a batch's puts must
	// fit in one transaction.
	etcdMaxTxnOps = 128
	// maxRequestBytes stays below etcd's default --max-request-bytes
	// (1.5 MiB) with room for keys and headers.
	maxRequestBytes = 1400 << 10
	maxPathBytes    = 1024
)

// Options tune a Loglet. The zero value gives the defaults.
type Options struct {
	// MaxEntryBytes is the largest entry Append takes. Default and
	// maximum 1 MiB, as etcd refuses requests over 1.5 MiB by default.
	MaxEntryBytes int
	// MaxBatchEntries and MaxBatchBytes bound one group commit; a larger
	// entry goes alone. Defaults 64 entries (at most 127) and 1 MiB.
	MaxBatchEntries int
	MaxBatchBytes   int
	// MaxQueueBytes bounds the bytes of appends queued or committing,
	// counting a fixed overhead per entry; Append blocks (honouring ctx)
	// beyond it. Default 16 MiB.
	MaxQueueBytes int
	// MaxReadEntries bounds one ReadNext; a read is at most this many
	// entries of MaxEntryBytes. Default 64.
	MaxReadEntries int
	// AttemptTimeout bounds one transaction of the writer. Default 5s.
	AttemptTimeout time.Duration
	// MaxAppendAttempts bounds the transactions one batch takes: each
	// lost to another writer, refused for a passing reason, or resent
	// after a lost reply. Default 1000: under contention a writer loses
	// a round to every writer that wins one.
	MaxAppendAttempts int
	// MaxResolveAttempts bounds how often the writer resends a batch
	// whose reply was lost before giving up with an ambiguous error.
	// Default 8, paced by package retry from 10ms to 1s.
	MaxResolveAttempts int
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxEntryBytes < 0 || o.MaxBatchEntries < 0 || o.MaxBatchBytes < 0 || o.MaxQueueBytes < 0 ||
		o.MaxReadEntries < 0 || o.AttemptTimeout < 0 || o.MaxAppendAttempts < 0 || o.MaxResolveAttempts < 0 {
		return o, fmt.Errorf("%w: negative limit in %+v", ErrBadOptions, o)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxEntryBytes, 1<<20)
	def(&o.MaxBatchEntries, 64)
	def(&o.MaxBatchBytes, 1<<20)
	def(&o.MaxQueueBytes, 16<<20)
	def(&o.MaxReadEntries, 64)
	def(&o.MaxAppendAttempts, 1000)
	def(&o.MaxResolveAttempts, 8)
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = 5 * time.Second
	}
	switch {
	case o.MaxEntryBytes > 1<<20:
		return o, fmt.Errorf("%w: MaxEntryBytes %d above 1 MiB", ErrBadOptions, o.MaxEntryBytes)
	case o.MaxBatchBytes > 1<<20:
		return o, fmt.Errorf("%w: MaxBatchBytes %d above 1 MiB", ErrBadOptions, o.MaxBatchBytes)
	case o.MaxBatchEntries >= etcdMaxTxnOps:
		return o, fmt.Errorf("%w: MaxBatchEntries %d, at most %d", ErrBadOptions, o.MaxBatchEntries, etcdMaxTxnOps-1)
	}
	return o, nil
}

// Stats counts what a Loglet's writer did, for tests and metrics.
type Stats struct {
	// Batches and Entries count committed group commits and entries.
	Batches, Entries int64
	// Lost counts transactions that lost their first slot to another
	// writer.
	Lost int64
	// Ambiguous counts transactions whose reply was lost; Landed and
	// NotLanded how the batches they carried came out.
	Ambiguous, Landed, NotLanded int64
}

// Loglet is a sharedlog.Loglet in etcd. Safe for concurrent use; several
// Loglets, in one process or many, may share one loglet.
type Loglet struct {
	cli     *clientv3.Client
	ownsCli bool
	path    string
	k       keys
	opts    Options

	life      context.Context // canceled by Close
	stop      context.CancelFunc
	q         *commitq.Queue
	watchDone chan struct{} // closed when the watcher exits; nil if none

	mu struct {
		sync.Mutex
		// knownTail is a tail this handle saw or made; the tail never
		// moves back, so it is a safe guess for the next batch.
		knownTail sharedlog.Pos
		sealed    bool
		closed    bool
		// changed is closed and replaced on a local append or seal, a
		// watch event, or Close, to wake WaitTail callers.
		changed chan struct{}
		// watching: the watcher goroutine runs; watchReady is closed
		// once its first watch is established.
		watching   bool
		watchReady chan struct{}
		stats      Stats
	}
}

var (
	_ sharedlog.Loglet     = (*Loglet)(nil)
	_ sharedlog.TailWaiter = (*Loglet)(nil)
)

// Open opens the loglet at path (a key path such as /strand/log/seg-1)
// in the cluster cli reaches, creating it if it does not exist. The
// Loglet does not own cli.
func Open(ctx context.Context, cli *clientv3.Client, path string, opts Options) (*Loglet, error) {
	return open(ctx, cli, false, path, opts)
}

func open(ctx context.Context, cli *clientv3.Client, ownsCli bool, p string, opts Options) (*Loglet, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkPath(p); err != nil {
		return nil, err
	}
	l := &Loglet{
		cli:     cli,
		ownsCli: ownsCli,
		path:    p,
		k:       newKeys(p),
		opts:    opts,
	}
	l.life, l.stop = context.WithCancel(context.Background())
	l.mu.changed = make(chan struct{})
	l.q = commitq.Start(commitq.Limits{
		MaxBatchEntries: opts.MaxBatchEntries,
		MaxBatchBytes:   opts.MaxBatchBytes,
		MaxQueueBytes:   opts.MaxQueueBytes,
	}, l.admit, l.commit)
	// The trim key exists from the start, so appends and trims can
	// compare its value (etcd fails a value compare on a missing key).
	_, err = cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.k.trim), "=", 0)).
		Then(clientv3.OpPut(l.k.trim, encodePos(0))).
		Commit()
	if err != nil {
		l.q.Close(l.stop)
		return nil, l.opErr(ctx, "create", err)
	}
	if _, _, err := l.CheckTail(ctx); err != nil {
		l.q.Close(l.stop)
		return nil, err
	}
	return l, nil
}

// checkPath accepts clean absolute key paths without NUL bytes.
func checkPath(p string) error {
	switch {
	case p == "" || p[0] != '/' || p == "/":
		return fmt.Errorf("%w: path %q: want /name...", ErrBadOptions, p)
	case len(p) > maxPathBytes:
		return fmt.Errorf("%w: path of %d bytes, at most %d", ErrBadOptions, len(p), maxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: path %q holds a NUL byte", ErrBadOptions, p)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: path %q is not clean (want %q)", ErrBadOptions, p, path.Clean(p))
	}
	return nil
}

// Path returns the loglet's key path.
func (l *Loglet) Path() string { return l.path }

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
	return l.q.Append(ctx, append([]byte(nil), entry...))
}

// admit refuses an append the loglet knows cannot land.
func (l *Loglet) admit() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mu.closed:
		return sharedlog.ErrClosed
	case l.mu.sealed:
		return sharedlog.ErrSealed
	}
	return nil
}

// tailInfo is what one read transaction tells about the tail.
type tailInfo struct {
	tail, trimmed sharedlog.Pos
	sealed        bool
	rev           int64 // the revision the read saw
}

// readTail reads the seal and trim keys and counts the entry keys from
// this handle's known tail, in one linearizable read.
func (l *Loglet) readTail(ctx context.Context) (tailInfo, error) {
	l.mu.Lock()
	lo := l.mu.knownTail
	l.mu.Unlock()
	resp, err := l.cli.Txn(ctx).Then(
		clientv3.OpGet(l.k.seal, clientv3.WithCountOnly()),
		clientv3.OpGet(l.k.trim),
		clientv3.OpGet(l.k.entry(lo), clientv3.WithRange(l.k.entryEnd), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return tailInfo{}, err
	}
	rs := resp.Responses
	if len(rs) != 3 {
		return tailInfo{}, fmt.Errorf("%w: tail read returned %d responses", ErrCorrupt, len(rs))
	}
	trim := rs[1].GetResponseRange()
	if len(trim.Kvs) != 1 {
		return tailInfo{}, fmt.Errorf("%w: %q has no trim key", ErrCorrupt, l.path)
	}
	trimmed, err := decodePos(string(trim.Kvs[0].Value))
	if err != nil {
		return tailInfo{}, err
	}
	// Entries exist exactly at [trimmed, tail), and lo is at most the
	// tail.
	ti := tailInfo{
		tail:    max(lo, trimmed) + sharedlog.Pos(rs[2].GetResponseRange().Count),
		trimmed: trimmed,
		sealed:  rs[0].GetResponseRange().Count > 0,
		rev:     resp.Header.Revision,
	}
	l.learn(ti.tail, ti.sealed)
	return ti, nil
}

func (l *Loglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if err := l.check(ctx); err != nil {
		return 0, false, err
	}
	ti, err := l.readTail(ctx)
	if err != nil {
		return 0, false, l.opErr(ctx, "check tail", err)
	}
	return ti.tail, ti.sealed, nil
}

func (l *Loglet) ReadNext(ctx context.Context, from, upTo sharedlog.Pos) ([]sharedlog.Entry, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	end := upTo
	if lim := sharedlog.Pos(l.opts.MaxReadEntries); from < end && end-from > lim {
		end = from + lim
	}
	ops := []clientv3.Op{clientv3.OpGet(l.k.trim)}
	if from < end {
		ops = append(ops, clientv3.OpGet(l.k.entry(from), clientv3.WithRange(l.k.entry(end)), clientv3.WithLimit(int64(end-from))))
	}
	resp, err := l.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, l.opErr(ctx, "read", err)
	}
	trim := resp.Responses[0].GetResponseRange()
	if len(trim.Kvs) != 1 {
		return nil, fmt.Errorf("%w: %q has no trim key", ErrCorrupt, l.path)
	}
	trimmed, err := decodePos(string(trim.Kvs[0].Value))
	if err != nil {
		return nil, err
	}
	if from < trimmed {
		return nil, sharedlog.ErrTrimmed
	}
	if from >= end {
		return nil, nil
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	out := make([]sharedlog.Entry, 0, len(kvs))
	for i, kv := range kvs {
		pos, err := l.k.entryPos(kv.Key)
		if err != nil {
			return nil, err
		}
		if want := from + sharedlog.Pos(i); pos != want {
			return nil, fmt.Errorf("%w: %q: read from %d found position %d where %d belongs", ErrCorrupt, l.path, from, pos, want)
		}
		_, data, err := decodeValue(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%w (at %d in %q)", err, pos, l.path)
		}
		out = append(out, sharedlog.Entry{Pos: pos, Data: data})
	}
	if n := len(out); n > 0 {
		l.learn(out[n-1].Pos+1, false)
	}
	return out, nil
}

func (l *Loglet) Seal(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	_, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(l.k.seal), "=", 0)).
		Then(clientv3.OpPut(l.k.seal, "")).
		Commit()
	if err != nil {
		return l.opErr(ctx, "seal", err)
	}
	l.learn(0, true)
	return nil
}

func (l *Loglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	ti, err := l.readTail(ctx)
	if err != nil {
		return l.opErr(ctx, "trim", err)
	}
	// The tail only grows, so one read a moment ago is a safe clamp.
	before = min(before, ti.tail)
	if before <= ti.trimmed {
		return nil
	}
	_, err = l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(l.k.trim), "<", encodePos(before))).
		Then(
			clientv3.OpPut(l.k.trim, encodePos(before)),
			clientv3.OpDelete(l.k.entry(0), clientv3.WithRange(l.k.entry(before))),
		).Commit()
	if err != nil {
		return l.opErr(ctx, "trim", err)
	}
	return nil
}

func (l *Loglet) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	for {
		if err := l.check(ctx); err != nil {
			return 0, err
		}
		ch, err := l.changedCh(ctx)
		if err != nil {
			return 0, err
		}
		ti, err := l.readTail(ctx)
		if err != nil {
			return 0, l.opErr(ctx, "wait tail", err)
		}
		if ti.tail > after || ti.sealed {
			return ti.tail, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ti.tail, ctx.Err()
		}
	}
}

// Close stops the writer, failing queued appends with ErrClosed, stops
// the watcher and closes the client if OpenURL made it. It does not seal.
// Later calls return nil.
func (l *Loglet) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	l.wakeLocked()
	watchDone := l.watchDone
	l.mu.Unlock()
	l.q.Close(l.stop)
	if watchDone != nil {
		<-watchDone
	}
	if l.ownsCli {
		return l.cli.Close()
	}
	return nil
}

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

// opErr wraps a failed request's error: ctx's own error when ctx ended,
// ErrClosed when Close raced with the call.
func (l *Loglet) opErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("etcdlog: %s %q: %w", op, l.path, cerr)
	}
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("etcdlog: %s %q: %w (%v)", op, l.path, sharedlog.ErrClosed, err)
	}
	return fmt.Errorf("etcdlog: %s %q: %w", op, l.path, err)
}

// learn records a tail or seal seen, waking waiters when either is news.
func (l *Loglet) learn(tail sharedlog.Pos, sealed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tail > l.mu.knownTail || (sealed && !l.mu.sealed) {
		l.mu.knownTail = max(l.mu.knownTail, tail)
		l.mu.sealed = l.mu.sealed || sealed
		l.wakeLocked()
	}
}

// wakeLocked wakes WaitTail callers and appenders held by backpressure.
func (l *Loglet) wakeLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
	l.q.WakeAppenders()
}
