package kafka

import (
	"testing"
	"time"
)

// TestTailGuard drives the produce throttle on fake time: it grows
// while a tail consumer stays more than tailLagBytes behind on a busy
// agent, holds between fetches, shrinks once the consumer is back near
// the ends, and is off when the agent has CPU to spare or no tail
// consumer is seen.
func TestTailGuard(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newTailGuard(func() time.Time { return now })
	step := func(behind int64, contended bool) time.Duration {
		t.Helper()
		g.observe(behind, contended)
		now = now.Add(tailWindow)
		return g.throttle()
	}

	if d := step(4*tailLagBytes, false); d != 0 {
		t.Fatalf("throttle %v with CPU to spare, want 0", d)
	}
	if d := step(tailLagBytes/4, true); d != 0 {
		t.Fatalf("throttle %v for a consumer near the ends, want 0", d)
	}
	var last time.Duration
	for i := range 12 {
		d := step(2*tailLagBytes, true)
		if d <= last && d != tailThrottleMax {
			t.Fatalf("window %d: throttle %v after %v, want it growing to %v", i, d, last, tailThrottleMax)
		}
		last = d
	}
	if last != tailThrottleMax {
		t.Fatalf("throttle %v after 12 windows behind, want the bound %v", last, tailThrottleMax)
	}
	// Between fetches (no answer in a window, one within tailIdle) it
	// holds; a lag between half the bound and the bound holds too.
	now = now.Add(tailWindow)
	if d := g.throttle(); d != tailThrottleMax {
		t.Fatalf("throttle %v between fetches, want %v held", d, tailThrottleMax)
	}
	if d := step(tailLagBytes*3/4, true); d != tailThrottleMax {
		t.Fatalf("throttle %v inside the band, want %v held", d, tailThrottleMax)
	}
	if d := step(0, false); d >= tailThrottleMax || d == 0 {
		t.Fatalf("throttle %v once caught up, want it shrinking from %v", d, tailThrottleMax)
	}
	for range 40 {
		last = step(0, true)
	}
	if last != 0 {
		t.Fatalf("throttle %v after 40 windows at the ends, want 0", last)
	}

	// No tail answer for tailIdle: off at once.
	for range 12 {
		step(2*tailLagBytes, true)
	}
	now = now.Add(tailIdle)
	if d := g.throttle(); d != 0 {
		t.Fatalf("throttle %v with no tail consumer for %v, want 0", d, tailIdle)
	}
}
