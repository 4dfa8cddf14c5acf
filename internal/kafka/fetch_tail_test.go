package kafka

import (
	"testing"
	"time"
)

// TestTailGuard drives the produce pace on fake time: it turns on when a
// tail consumer falls more than tailLagBytes behind on a busy agent,
// holds producers to tailPaceFactor of what the consumer reads, holds
// between fetches, and turns off once the consumer is back near the
// ends, when the agent has CPU to spare, or when no tail consumer is
// seen.
func TestTailGuard(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newTailGuard(func() time.Time { return now })
	const readPerWindow = 10 << 20 // 50 MiB/s
	// window observes one tail answer and ends the window.
	window := func(behind int64, contended bool) {
		t.Helper()
		g.observe(behind, readPerWindow, contended)
		now = now.Add(tailWindow)
		g.throttle(0)
	}
	// produced is what producers sending requests of reqBytes as fast
	// as they are let through get in over d, while the consumer, still
	// behind, reads readPerWindow each tailWindow; read is what it read.
	var read int64
	produced := func(d time.Duration, reqBytes int64) int64 {
		t.Helper()
		var n int64
		fetch := now
		// advance moves the clock to until, the consumer fetching on
		// the way.
		advance := func(until time.Time) {
			for ; !fetch.After(until); fetch = fetch.Add(tailWindow) {
				now = fetch
				g.observe(2*tailLagBytes, readPerWindow, true)
				read += readPerWindow
			}
			now = until
		}
		for end := now.Add(d); now.Before(end); {
			// A request takes a millisecond to handle.
			advance(now.Add(time.Millisecond))
			wait := g.throttle(reqBytes)
			if wait > tailThrottleMax {
				t.Fatalf("throttle %v, past the bound %v", wait, tailThrottleMax)
			}
			advance(now.Add(wait))
			n += reqBytes
		}
		return n
	}

	window(4*tailLagBytes, false)
	if d := g.throttle(64 << 20); d != 0 {
		t.Fatalf("throttle %v with CPU to spare, want 0", d)
	}
	window(tailLagBytes/4, true)
	if d := g.throttle(64 << 20); d != 0 {
		t.Fatalf("throttle %v for a consumer near the ends, want 0", d)
	}
	for range 10 {
		window(2*tailLagBytes, true)
	}
	if d := g.throttle(64 << 20); d == 0 {
		t.Fatal("no throttle for a consumer behind on a busy agent")
	}
	// Producers get less than the consumer reads, so the lag drains,
	// but not much less: about tailPaceFactor of it.
	start := now
	n := produced(10*time.Second, 1<<20)
	secs := now.Sub(start).Seconds()
	rate, consumed := float64(n)/secs, float64(read)/secs
	if rate >= consumed || rate < 0.75*consumed {
		t.Fatalf("producers got %.1f MB/s while the consumer read %.1f MB/s, want %.0f%% of it (pace %.1f, read rate %.1f)", rate/1e6, consumed/1e6, 100*tailPaceFactor, g.mu.rate/1e6, g.mu.readRate/1e6)
	}

	// Between fetches (no answer in a window, one within tailIdle) it
	// holds; a lag between half the bound and the bound holds too.
	now = now.Add(2 * tailWindow)
	if d := g.throttle(64 << 20); d == 0 {
		t.Fatal("pace off between fetches")
	}
	window(tailLagBytes*3/4, false)
	if g.mu.rate == 0 {
		t.Fatal("pace off with the lag inside the band")
	}
	window(0, true)
	if d := g.throttle(64 << 20); d != 0 {
		t.Fatalf("throttle %v once caught up, want 0", d)
	}

	// No tail answer for tailIdle: off.
	for range 10 {
		window(2*tailLagBytes, true)
	}
	now = now.Add(tailIdle)
	if d := g.throttle(64 << 20); d != 0 {
		t.Fatalf("throttle %v with no tail consumer for %v, want 0", d, tailIdle)
	}
}
