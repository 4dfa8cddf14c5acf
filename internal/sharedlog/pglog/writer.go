package pglog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/commitq"
)

// batchIDBytes is the size of the random id every batch stores with its
// entries: large enough that two batches never share one.
const batchIDBytes = 16

// The backoff between the steps of resolving a lost commit.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// errNotApplied: the append statement ran and matched no tails row (the
// loglet is sealed, or fenced at another epoch): nothing was written.
var errNotApplied = errors.New("pglog: append matched no row")

// commit sends one batch until it lands, is refused, or its outcome
// cannot be learned, and answers its appenders.
//
// It sends the batch again only where the protocol itself moved on and
// nothing of the batch can be in the log: the epoch changed under it
// (another writer fenced, or this one did while resolving a lost
// commit), which is the compare-and-swap that is the append. Any other
// failure is the caller's to retry: an error the server gave (nothing
// written), marked sharedlog.ErrRejected unless it may pass if sent
// again, or a lost commit whose outcome resolve could not learn.
func (l *Loglet) commit(reqs []*commitq.Request) {
	var id [batchIDBytes]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand panics instead)
	datas := make([][]byte, len(reqs))
	for i, r := range reqs {
		datas[i] = r.Data
	}
	n := int64(len(reqs))
	var lastErr error
	for range l.opts.MaxCommitAttempts {
		if l.life.Err() != nil {
			break
		}
		l.mu.Lock()
		lowest, epoch := l.mu.knownTail, l.mu.epoch
		l.mu.Unlock()
		first, err := l.insert(epoch, id[:], n, datas)
		switch {
		case err == nil:
			l.ack(reqs, first)
			return
		case errors.Is(err, errNotApplied):
			st, err := l.readStateAttempt()
			switch {
			case err != nil:
				// The batch was refused, so not written, but why is
				// unknown; report the read's failure.
				l.finish(reqs, err)
				return
			case st.sealed:
				l.finish(reqs, sharedlog.ErrSealed)
				return
			case st.epoch == epoch:
				l.finish(reqs, fmt.Errorf("%w: %q: append matched no row at epoch %d", ErrCorrupt, l.logID, epoch))
				return
			}
			l.count(func(s *Stats) { s.Fenced++ })
			lastErr = err
		case definite(err):
			switch {
			case l.life.Err() != nil:
				err = fmt.Errorf("pglog: append to %q: %w (%v)", l.logID, sharedlog.ErrClosed, err)
			case retryable(err):
				err = fmt.Errorf("pglog: append to %q: not written: %w", l.logID, err)
			default:
				err = sharedlog.Rejected(fmt.Errorf("pglog: append to %q: %w", l.logID, err))
			}
			l.finish(reqs, err)
			return
		default:
			l.count(func(s *Stats) { s.Ambiguous++ })
			landed, first, rerr := l.resolve(lowest, id[:], n)
			if rerr != nil {
				l.finish(reqs, fmt.Errorf("pglog: append to %q: outcome unknown: %w (resolving it: %w)", l.logID, err, rerr))
				return
			}
			if landed {
				l.count(func(s *Stats) { s.Landed++ })
				l.ack(reqs, first)
				return
			}
			// The fence resolve set makes "not landed" final: send the
			// batch again at the new epoch.
			l.count(func(s *Stats) { s.NotLanded++ })
			lastErr = err
		}
	}
	if l.life.Err() != nil {
		lastErr = sharedlog.ErrClosed
	}
	l.finish(reqs, fmt.Errorf("pglog: append to %q: not written after %d attempts: %w", l.logID, l.opts.MaxCommitAttempts, lastErr))
}

// insert runs the append statement once.
func (l *Loglet) insert(epoch int64, id []byte, n int64, datas [][]byte) (sharedlog.Pos, error) {
	ctx, cancel := context.WithTimeout(l.life, l.opts.AttemptTimeout)
	defer cancel()
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		// Nothing was sent.
		return 0, notSent{err}
	}
	defer conn.Release()
	var first int64
	err = conn.QueryRow(ctx, l.t.appendSQL, l.logID, n, epoch, id, datas, l.channel).Scan(&first, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errNotApplied
	}
	if err != nil {
		return 0, err
	}
	return sharedlog.Pos(first), nil
}

// notSent marks an error that happened before anything reached the
// server.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// definite reports whether err proves the statement wrote nothing: it
// was never sent, or the server answered with an error, which aborts the
// statement's implicit transaction. A FATAL or PANIC report is not proof:
// the server may be dying after the commit.
func definite(err error) bool {
	var ns notSent
	if errors.As(err, &ns) || pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity != "FATAL" && pe.Severity != "PANIC"
}

// retryable reports whether a definite failure may pass if sent again:
// it was never sent, or the server refused it for a passing reason.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true
	}
	switch pe.Code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available
		"57014", // query_canceled (statement_timeout)
		"53300", // too_many_connections
		// A server shutting down or still recovering after a restart
		// refuses connections with these until it is back.
		"57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03": // cannot_connect_now ("the database system is starting up")
		return true
	}
	return strings.HasPrefix(pe.Code, "08") // connection_exception
}

// resolve learns whether the batch id landed, above lowest. It fences the
// loglet first (see tables.fenceSQL), so "not landed" is final.
func (l *Loglet) resolve(lowest sharedlog.Pos, id []byte, n int64) (landed bool, first sharedlog.Pos, err error) {
	loop := retry.Policy{Attempts: l.opts.MaxResolveAttempts, Min: minBackoff, Max: maxBackoff}.Start(l.life, nil)
	for loop.Next() {
		landed, first, final, aerr := l.resolveOnce(lowest, id, n)
		if aerr == nil {
			return landed, first, nil
		}
		err = aerr
		if final {
			return false, 0, err
		}
	}
	if l.life.Err() != nil {
		err = fmt.Errorf("%w (%v)", sharedlog.ErrClosed, err)
	}
	return false, 0, err
}

func (l *Loglet) resolveOnce(lowest sharedlog.Pos, id []byte, n int64) (landed bool, first sharedlog.Pos, final bool, err error) {
	ctx, cancel := context.WithTimeout(l.life, l.opts.AttemptTimeout)
	defer cancel()
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return false, 0, false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var next, trimmed, epoch int64
	var sealed bool
	if err := tx.QueryRow(ctx, l.t.fenceSQL, l.logID).Scan(&next, &trimmed, &sealed, &epoch); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return false, 0, true, fmt.Errorf("%w: %q", ErrNoLoglet, l.logID)
		}
		return false, 0, false, err
	}
	// A new statement, so a new snapshot, taken after the fence got the
	// row lock: it sees the lost append if that committed.
	var count, min int64
	if err := tx.QueryRow(ctx, l.t.findBatchSQL, l.logID, int64(lowest), id).Scan(&count, &min); err != nil {
		return false, 0, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		if count == n {
			// The entries were committed before the fence; its own
			// commit does not matter.
			return true, sharedlog.Pos(min), false, nil
		}
		return false, 0, false, err
	}
	l.learnState(state{next: sharedlog.Pos(next), trimmed: sharedlog.Pos(trimmed), sealed: sealed, epoch: epoch})
	switch {
	case count == n:
		return true, sharedlog.Pos(min), false, nil
	case count == 0 && sharedlog.Pos(trimmed) <= lowest:
		return false, 0, false, nil
	}
	// Trimmed away, wholly or partly, before we could look.
	return false, 0, true, fmt.Errorf("pglog: %q: batch found %d of %d entries above %d with the trim point at %d",
		l.logID, count, n, lowest, trimmed)
}

// readStateAttempt is readState bounded by AttemptTimeout and Close.
func (l *Loglet) readStateAttempt() (state, error) {
	ctx, cancel := context.WithTimeout(l.life, l.opts.AttemptTimeout)
	defer cancel()
	return l.readState(ctx)
}

// ack answers a landed batch's appenders with their positions.
func (l *Loglet) ack(reqs []*commitq.Request, first sharedlog.Pos) {
	n := sharedlog.Pos(len(reqs))
	l.mu.Lock()
	l.learnTailLocked(first + n)
	l.mu.stats.Batches++
	l.mu.stats.Entries += int64(n)
	l.mu.Unlock()
	l.q.Ack(reqs, first)
}

// finish answers a batch's appenders with err.
func (l *Loglet) finish(reqs []*commitq.Request, err error) {
	if errors.Is(err, sharedlog.ErrSealed) {
		l.mu.Lock()
		l.sealedLocked()
		l.mu.Unlock()
	}
	l.q.Fail(reqs, err)
}

func (l *Loglet) count(f func(*Stats)) {
	l.mu.Lock()
	f(&l.mu.stats)
	l.mu.Unlock()
}
