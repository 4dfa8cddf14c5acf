package fetch

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestPacer drives the verification pacer with a fake clock: reads wait
// for the budget the reads before them took, small reads are charged
// 16 KiB, and idle time is not saved up for a burst.
func TestPacer(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var slept []time.Duration
	p := newPacer(1<<20, func() time.Time { return now }, func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		now = now.Add(d)
		return nil
	})
	ctx := context.Background()
	step := func(n int64, idle time.Duration) {
		t.Helper()
		now = now.Add(idle)
		if err := p.wait(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	step(512<<10, 0)            // the first read starts at once
	step(1, 0)                  // waits out the first read's 500 ms
	step(1, 0)                  // and this one the 16 KiB charged for that one
	step(1<<20, 10*time.Second) // after a long idle: at once, no credit
	step(1, 0)                  // waits the whole second of the last read
	want := []time.Duration{500 * time.Millisecond, 15625 * time.Microsecond, time.Second}
	if !slices.Equal(slept, want) {
		t.Fatalf("slept %v, want %v", slept, want)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	p = newPacer(1<<20, time.Now, nil)
	p.wait(cancelled, 1<<20)
	if err := p.wait(cancelled, 1); err == nil {
		t.Fatal("wait with a cancelled context and a budget to wait for returned nil")
	}
}
