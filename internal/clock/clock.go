// Package clock owns Strand's one time source. Code that reads the time
// or waits for it, where a test must control either, takes a Clock
// instead of calling package time, so the test can hand it a Fake and
// move time by hand.
//
// Real is the wall clock; a package defaults to it (see OrReal) and says
// in its own documentation what it times through the clock. Code that a
// test runs under testing/synctest needs no Fake: the bubble fakes package
// time itself, so Real is deterministic there too.
//
// Who takes a Clock: the group coordinator (every session, rebalance
// and sweep timer), the replica (entry timestamps, incarnations, the
// append retry backoff), the produce pipeline (the flush interval, upload
// retries, metrics), the VirtualLog (reconfiguration waits), slotlog (its
// trim-grace protocol and put resolution) and the agent, which hands its
// clock to all of them. Package retry waits on it.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and calls functions later. Implementations are
// safe for concurrent use.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or, for a Fake, from
	// whoever advances time) once d has passed. d <= 0 means at once.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether
	// it did. A callback that already started must check that it is
	// still wanted.
	Stop() bool
}

// Real is the wall clock: package time.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// OrReal returns c, or Real if c is nil: a Config's default.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Since is the time passed on c since t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// After returns a channel closed once d has passed on c, and the timer
// that closes it; stop the timer when the wait ends early.
func After(c Clock, d time.Duration) (<-chan struct{}, Timer) {
	ch := make(chan struct{})
	return ch, c.AfterFunc(d, func() { close(ch) })
}

// Sleep waits until d has passed on c, or ctx is done, in which case it
// returns ctx.Err().
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if c == Real {
		// A runtime timer's channel needs no goroutine to close it:
		// latency injection sleeps once per operation.
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch, t := After(c, d)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// Stop stops t if there is one: for timers kept in fields that may be
// unset.
func Stop(t Timer) {
	if t != nil {
		t.Stop()
	}
}

// Shifted returns c read d later (earlier for a negative d); its timers
// are c's. Test builds use it to run an agent on a skewed clock
// (package planted).
func Shifted(c Clock, d time.Duration) Clock {
	if d == 0 {
		return c
	}
	return shifted{c, d}
}

type shifted struct {
	c Clock
	d time.Duration
}

func (s shifted) Now() time.Time { return s.c.Now().Add(s.d) }

func (s shifted) AfterFunc(d time.Duration, f func()) Timer { return s.c.AfterFunc(d, f) }
