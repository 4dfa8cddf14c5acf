package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/retry"
)

var start = time.UnixMilli(1_700_000_000_000)

// retries drives n calls of loop.Next, each of which must wait, on c,
// advancing the clock step by step until the wait ends, and returns the
// waits.
func retries(t *testing.T, c *clock.Fake, loop *retry.Loop, n int) []time.Duration {
	t.Helper()
	var waits []time.Duration
	for i := range n {
		done := make(chan bool, 1)
		before := c.Now()
		go func() { done <- loop.Next() }()
		if err := c.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		// Step to the timer: the wait must not end early.
		for c.Pending() > 0 {
			c.Advance(time.Millisecond)
		}
		if !<-done {
			t.Fatalf("retry %d: Next = false: %v", i+1, loop.Err())
		}
		waits = append(waits, c.Now().Sub(before))
	}
	return waits
}

// first calls loop.Next, which must not wait.
func first(t *testing.T, c *clock.Fake, loop *retry.Loop) {
	t.Helper()
	if !loop.Next() || c.Pending() != 0 {
		t.Fatalf("first Next: Err %v, %d timers", loop.Err(), c.Pending())
	}
}

func TestBackoff(t *testing.T) {
	p := retry.Policy{Attempts: 6, Min: 100 * time.Millisecond, Max: 500 * time.Millisecond}
	c := clock.NewFake(start)
	loop := p.Start(context.Background(), c)
	first(t, c, &loop)
	waits := retries(t, c, &loop, 5)
	caps := []time.Duration{100, 200, 400, 500, 500}
	for i, w := range waits {
		hi := caps[i] * time.Millisecond
		// The fake steps by 1ms, so a wait reads up to 1ms long.
		if w < hi/2 || w > hi+time.Millisecond {
			t.Errorf("wait %d = %v, want within [%v, %v]", i+1, w, hi/2, hi)
		}
	}
	if loop.Attempt() != 6 {
		t.Fatalf("Attempt = %d, want 6", loop.Attempt())
	}
	// Spent: false at once, without a timer.
	if loop.Next() || !errors.Is(loop.Err(), retry.ErrExhausted) || c.Pending() != 0 {
		t.Fatalf("Next after 6 tries: Err %v, %d timers", loop.Err(), c.Pending())
	}

	// The same clock reading draws the same waits: a run on a
	// deterministic clock replays.
	c2 := clock.NewFake(start)
	loop2 := p.Start(context.Background(), c2)
	first(t, c2, &loop2)
	if again := retries(t, c2, &loop2, 5); !equal(again, waits) {
		t.Fatalf("waits %v, then %v from the same clock", waits, again)
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestZeroPolicyTriesOnce(t *testing.T) {
	loop := retry.Policy{}.Start(context.Background(), nil)
	n := 0
	for loop.Next() {
		n++
	}
	if n != 1 || !errors.Is(loop.Err(), retry.ErrExhausted) {
		t.Fatalf("%d tries, Err %v; want 1 and ErrExhausted", n, loop.Err())
	}
}

func TestCanceled(t *testing.T) {
	c := clock.NewFake(start)
	ctx, cancel := context.WithCancel(context.Background())
	loop := retry.Policy{Attempts: 3, Min: time.Second}.Start(ctx, c)
	if !loop.Next() {
		t.Fatal("first Next = false")
	}
	done := make(chan bool, 1)
	go func() { done <- loop.Next() }()
	if err := c.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if <-done || !errors.Is(loop.Err(), context.Canceled) {
		t.Fatalf("Next during a canceled wait: Err %v", loop.Err())
	}
	if loop.Next() {
		t.Fatal("Next after the loop ended = true")
	}
}

func TestResetAfterProgress(t *testing.T) {
	c := clock.NewFake(start)
	loop := retry.Policy{Attempts: 3, Min: 10 * time.Millisecond, Max: time.Second}.Start(context.Background(), c)
	first(t, c, &loop)
	retries(t, c, &loop, 2) // waits of up to 10, then 20ms
	loop.Reset()
	if loop.Attempt() != 1 {
		t.Fatalf("Attempt after Reset = %d, want 1", loop.Attempt())
	}
	if d := loop.Delay(); d > 10*time.Millisecond {
		t.Fatalf("first wait after Reset = %v, want at most Min", d)
	}
	// Two more tries: the one under way counts as the first of three.
	retries(t, c, &loop, 2)
	if loop.Next() || !errors.Is(loop.Err(), retry.ErrExhausted) {
		t.Fatalf("Next after Reset and two retries: Err %v", loop.Err())
	}
}
