// Package sharedlog owns Strand's shared log: the Loglet interface that
// every backend implements, the VirtualLog that chains loglet segments
// together and moves a running log from one backend to another, and the
// MetaStore register that holds the chain.
//
// Every change to Strand's metadata is an entry appended here; every agent
// reads the entries back in position order and applies them (package meta).
// The log knows nothing about what an entry means.
//
// Backends live in subpackages (memlog, filelog, ...). Each one passes
// loglettest.Run, which pins down the contract documented on Loglet.
//
// Appends are retried in one place, above the log (see Log.Append):
// backends return ErrSealed, ErrRejected or an ambiguous error, and pace
// only the steps their own protocol takes with package retry. The
// VirtualLog's waits (another client's reconfiguration, polling a loglet
// that is not a TailWaiter) run on VirtualOptions.Clock.
//
// # Following the log for nothing
//
// A reader learns of other clients' appends from the backend: a
// TailWaiter is told (memory, file, etcd watches, PostgreSQL
// LISTEN/NOTIFY); the others are polled. On a service that bills each
// request (S3, DynamoDB) a 20ms poll would cost an idle agent millions
// of requests a month, so such a loglet is a TailProber, asked in one
// request whether its tail moved, and the VirtualLog asks it only every
// IdlePollInterval (15s, counted from the tail the handle last learned,
// so an agent's own appends, its lease renewals, stand in for probes)
// unless a reader holds Eager: a reader that waits for other agents'
// appends (a long-polling Fetch) makes the log poll every PollInterval,
// and at once, while it waits. What nobody waits for may be seen late;
// a reader that must see every acknowledged append asks CheckTail
// (replica.Sync).
package sharedlog

import (
	"context"
	"errors"
)

// Pos is a position in a log. Positions are dense: the first entry is at 0,
// the next at 1, and so on, with no holes. A loglet's positions are its own
// and start at 0; the VirtualLog maps them onto one global address space.
type Pos uint64

// Entry is one entry read back from a log.
type Entry struct {
	Pos  Pos
	Data []byte
}

var (
	// ErrSealed: the loglet is sealed and the append was not written, nor
	// will it ever be. A VirtualLog writer reloads the chain and retries
	// on the new active segment.
	ErrSealed = errors.New("sharedlog: loglet is sealed")
	// ErrTrimmed: the read started below the trim point; the entries
	// there are gone. A reader that needs them must restore a snapshot.
	ErrTrimmed = errors.New("sharedlog: position is below the trim point")
	// ErrClosed: the loglet was closed by its owner.
	ErrClosed = errors.New("sharedlog: loglet is closed")
	// ErrConflict: a MetaStore compare-and-swap lost to another writer.
	ErrConflict = errors.New("sharedlog: chain version conflict")
	// ErrRejected: the log refused the append for good: nothing was
	// written, and the same bytes would be refused again (too large,
	// malformed, unauthorized). Like database/sql's driver.ErrBadConn it
	// tells the retry loop above the backends what to do: here, not to
	// retry. Backends mark such errors with Rejected.
	ErrRejected = errors.New("sharedlog: append rejected")
)

// Rejected marks err as ErrRejected: errors.Is(Rejected(err), ErrRejected)
// holds, and the message and every other match stay err's. Rejected(nil)
// is nil.
func Rejected(err error) error {
	if err == nil || errors.Is(err, ErrRejected) {
		return err
	}
	return rejected{err}
}

type rejected struct{ err error }

func (r rejected) Error() string   { return r.err.Error() }
func (r rejected) Unwrap() []error { return []error{r.err, ErrRejected} }

// Log is the part of the Loglet API that users of a log (package meta)
// need. Both a single Loglet and a VirtualLog implement it.
type Log interface {
	// Append writes entry at the tail and returns its position. When it
	// returns a nil error the entry is durable and visible to readers.
	//
	// ErrSealed means the entry was not written. An error matching
	// ErrRejected means it was not written and never will be: do not
	// retry. Any other error is ambiguous: the entry may or may not have
	// been written, and may even become visible later. Callers
	// deduplicate above the log (every metadata entry carries writer id,
	// incarnation and sequence).
	//
	// Retrying an append is the caller's business, and only a caller
	// that deduplicates may do it; the replica's appender is the one
	// place that does. A backend keeps only what its protocol needs to
	// finish one attempt, and says so: learning the outcome of a request
	// whose reply was lost (resending the identical request to the same
	// slot, or fencing and looking the write up), and following the log
	// when another writer took the slot or moved the epoch, where nothing
	// of the entry can be in the log. Then it returns.
	//
	// The log does not retain entry after Append returns.
	Append(ctx context.Context, entry []byte) (Pos, error)

	// CheckTail returns the tail, the position the next append would
	// get, and whether the log is sealed. Every position below the
	// returned tail is durable and readable (unless trimmed). Once a log
	// reports sealed, its tail never changes again.
	CheckTail(ctx context.Context) (tail Pos, sealed bool, err error)

	// ReadNext returns entries starting exactly at from, in position
	// order, without gaps, all below max. It returns at least one entry
	// when from is below both max and the tail, and may return fewer
	// than max-from to bound the size of one call. It returns an empty
	// slice, not an error, when from is at or past the tail: it does not
	// wait. From below the trim point is ErrTrimmed. The caller owns the
	// returned slices.
	ReadNext(ctx context.Context, from, max Pos) ([]Entry, error)

	// PrefixTrim allows the log to discard every entry below before.
	// Reads below the trim point return ErrTrimmed afterwards. Trimming
	// is idempotent; trimming below an earlier trim point does nothing;
	// trimming past the tail trims to the tail.
	PrefixTrim(ctx context.Context, before Pos) error
}

// Loglet is one segment of the shared log on one backend. Safe for
// concurrent use.
type Loglet interface {
	Log

	// Seal stops the loglet from accepting appends. It is idempotent.
	// When Seal returns nil, every later Append fails with ErrSealed and
	// CheckTail reports sealed with a final tail. An Append racing with
	// Seal either lands below that final tail (and is readable) or fails.
	Seal(ctx context.Context) error

	// Close releases the loglet's resources. It does not seal.
	Close() error
}

// TailWaiter is an optional power of a Log: WaitTail blocks until the tail
// is past after, the log is sealed, or ctx is done, and returns the tail it
// saw. Backends that learn of appends locally (memory, file) or are told
// of them (etcd, PostgreSQL) implement it so readers need not poll; for
// the others, readers poll CheckTail.
type TailWaiter interface {
	WaitTail(ctx context.Context, after Pos) (Pos, error)
}

// TailProber is an optional power of a Loglet whose CheckTail costs
// several requests and whose every request is billed (slotlog: S3,
// DynamoDB). TailMoved answers, in about one request, whether the tail
// may be past tail, a position at or below the tail (every position
// below it holds an entry): false means the tail was tail, and the
// loglet unsealed, at some moment during the call; true means call
// CheckTail. A VirtualLog polls such a loglet with
// TailMoved, and only every VirtualOptions.IdlePollInterval while no
// reader is eager (Eager).
type TailProber interface {
	TailMoved(ctx context.Context, tail Pos) (bool, error)
}

// Eager is an optional power of a Log whose WaitTail polls: Eager makes
// WaitTail poll at its shortest interval, at once and until release is
// called. A reader that waits for other clients' appends (a long-polling
// Fetch) holds it, so the log polls quickly only while someone waits
// and an idle reader costs next to nothing. Holds nest; release may be
// called more than once.
type Eager interface {
	Eager() (release func())
}
