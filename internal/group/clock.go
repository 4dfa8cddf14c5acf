package group

import "time"

// Clock is the coordinator's time source. Every timeout (session,
// rebalance, initial rebalance delay, pending sync, offset expiry sweep)
// is a timer from it, so a test can move time by hand.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or, for a fake clock, from
	// whoever advances time) once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether
	// it did. A callback that already started must check that it is
	// still wanted.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}
