package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to (Advance). Due timers run
// in time order, ties in the order they were set, on the goroutine that
// advances: a test knows every callback due has finished when Advance
// returns. Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
	// added is closed and replaced whenever a timer is set, for
	// BlockUntil.
	added chan struct{}
}

type fakeTimer struct {
	c       *Fake
	when    time.Time
	seq     int
	f       func()
	stopped bool
}

// NewFake returns a Fake reading start. Its times carry no monotonic
// reading, like times built from a Unix time.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start.Round(0), added: make(chan struct{})}
}

// Now implements Clock.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements Clock. A timer due now (d <= 0) still waits for
// the next Advance, as a wall-clock timer waits for its goroutine.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	close(c.added)
	c.added = make(chan struct{})
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.stopped {
		return false
	}
	t.stopped = true
	return true
}

// Advance moves time forward by d, running every timer due on the way at
// its own time, including timers those callbacks set.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t.stopped })
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.when.After(target) && (next == nil || t.when.Before(next.when) || (t.when.Equal(next.when) && t.seq < next.seq)) {
				next = t
			}
		}
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		next.stopped = true
		if next.when.After(c.now) {
			c.now = next.when
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending is the number of timers set and neither fired nor stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pendingLocked()
}

func (c *Fake) pendingLocked() int {
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// BlockUntil waits until at least n timers are pending, or ctx is done:
// a test calls it to know that the code under test is waiting on the
// clock before it advances.
func (c *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		pending, added := c.pendingLocked(), c.added
		c.mu.Unlock()
		if pending >= n {
			return nil
		}
		select {
		case <-added:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
