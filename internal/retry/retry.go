// Package retry owns the one backoff loop Strand's retries share: a
// bounded number of tries, a wait before each retry that doubles up to a
// cap, with jitter, on a clock.Clock, cut short by a context.
//
// A Policy says how much to retry; the caller decides what. Retrying is
// only safe where the operation is: an append to the shared log is
// retried in exactly one place, the replica's appender, because only
// there do entries carry the writer id, incarnation and sequence that
// let apply drop a second copy (see package sharedlog's Log.Append).
//
//	loop := policy.Start(ctx, clk)
//	for loop.Next() {
//		if err = try(); err == nil || !retriable(err) {
//			break
//		}
//	}
package retry

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// Policy bounds one retry loop. The zero value tries once.
type Policy struct {
	// Attempts bounds the tries, the first included; 0 means one.
	// Forever means no bound: the loop ends only with its context. Only
	// a loop that is its component's life (a log reader, a watch) may go
	// on forever, and it says why.
	Attempts int
	// Min is the wait before the first retry; each retry doubles it, up
	// to Max.
	Min time.Duration
	Max time.Duration
}

// Loop is one run of a Policy. It is a value, so a loop that succeeds at
// its first try costs no allocation and no clock read. Not safe for
// concurrent use.
type Loop struct {
	p       Policy
	ctx     context.Context
	clk     clock.Clock
	attempt int // tries started
	backoff int // retries since the last Reset
	err     error
	// rng draws the jitter. It is seeded from the clock when the first
	// wait starts: loops in different processes spread out, and a run on
	// a deterministic clock (a Fake, testing/synctest) waits the same
	// every time, so its trace replays.
	rng    rand.PCG
	seeded bool
}

// Start begins a loop whose waits run on clk (clock.Real if nil) and end
// early when ctx does.
func (p Policy) Start(ctx context.Context, clk clock.Clock) Loop {
	return Loop{p: p, ctx: ctx, clk: clock.OrReal(clk)}
}

// Next reports whether to make another try. The first call returns true
// at once (unless ctx is done); later ones wait out the backoff first.
// Next returns false once the tries are spent, without waiting, or when
// ctx ends; Err then says which.
func (l *Loop) Next() bool {
	if l.err != nil {
		return false
	}
	if err := l.ctx.Err(); err != nil {
		l.err = err
		return false
	}
	if l.p.Attempts != Forever && l.attempt >= max(l.p.Attempts, 1) {
		l.err = ErrExhausted
		return false
	}
	if l.attempt > 0 {
		if err := clock.Sleep(l.ctx, l.clk, l.Delay()); err != nil {
			l.err = err
			return false
		}
		l.backoff++
	}
	l.attempt++
	return true
}

// Delay draws the wait before the next retry: Min doubled once per
// retry so far, at most Max, with its upper half drawn at random ("equal
// jitter"), so loops that failed together do not retry together, yet
// each still backs off.
func (l *Loop) Delay() time.Duration {
	d := l.p.Min
	for range l.backoff {
		if (l.p.Max > 0 && d >= l.p.Max) || d > math.MaxInt64/2 {
			break
		}
		d *= 2
	}
	if l.p.Max > 0 {
		d = min(d, l.p.Max)
	}
	if d <= 1 {
		return max(d, 0)
	}
	if !l.seeded {
		l.rng.Seed(uint64(l.clk.Now().UnixNano()), jitterStream)
		l.seeded = true
	}
	half := d / 2
	return half + time.Duration(l.rng.Uint64()%uint64(d-half+1))
}

// jitterStream is the second half of the jitter generator's seed; any
// constant does.
const jitterStream = 0x5eed

// Attempt is the number of tries started, the current one included.
func (l *Loop) Attempt() int { return l.attempt }

// Reset starts the count afresh after the operation made progress: the
// try under way counts as the first, and the next retry waits Min.
func (l *Loop) Reset() {
	l.attempt, l.backoff = 1, 0
}

// Err is why Next returned false: ErrExhausted or the context's error;
// nil while the loop runs.
func (l *Loop) Err() error { return l.err }

// Forever is Policy.Attempts for a loop without a bound.
const Forever = -1

// ErrExhausted: the loop made all its tries.
var ErrExhausted = errors.New("retry: attempts exhausted")
