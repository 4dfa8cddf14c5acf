package compact

import (
	"context"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// The pacer lets reads run at most rate bytes a second: the first read
// starts at once, the next waits for the first's share of the second,
// and idle time is not saved up.
func TestPacerSpacesReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clock.NewFake(time.Unix(1000, 0))
	p := newPacer(1000, 0, clk)
	if err := p.wait(ctx, 500); err != nil || clk.Pending() != 0 {
		t.Fatalf("first read waited: %v, %d timers", err, clk.Pending())
	}
	done := make(chan error, 1)
	go func() { done <- p.wait(ctx, 500) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(499 * time.Millisecond)
	if clk.Pending() != 1 {
		t.Fatal("second read's wait ended after 499ms of the first's 500ms")
	}
	clk.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Ten seconds idle buy no burst: the next read after them starts at
	// once, the one after waits again.
	clk.Advance(10 * time.Second)
	if err := p.wait(ctx, 1000); err != nil || clk.Pending() != 0 {
		t.Fatalf("read after idle time waited: %v", err)
	}
	go func() { done <- p.wait(ctx, 1) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Idle time is saved up for at most burst bytes: after it, reads of the
// burst and one more go at once, the next waits; and a new rate applies
// to the reads that follow it.
func TestPacerBurstAndRateChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clock.NewFake(time.Unix(1000, 0))
	p := newPacer(1000, 500, clk)
	clk.Advance(time.Hour)
	for _, n := range []int64{300, 200, 500} {
		if err := p.wait(ctx, n); err != nil || clk.Pending() != 0 {
			t.Fatalf("read of %d within the burst waited: %v", n, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.wait(ctx, 1) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(499 * time.Millisecond)
	if clk.Pending() != 1 {
		t.Fatal("the read after the burst waited less than the last read's share")
	}
	clk.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A new rate applies to the reads after it: at 10 bytes a second,
	// a read of 1 takes the next 100ms away.
	p.setRate(10)
	clk.Advance(time.Millisecond) // the last read's share at 1000 B/s
	if err := p.wait(ctx, 1); err != nil || clk.Pending() != 0 {
		t.Fatalf("read after the last one's share waited: %v", err)
	}
	go func() { done <- p.wait(ctx, 1) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(99 * time.Millisecond)
	if clk.Pending() != 1 {
		t.Fatal("a read at the new rate waited less than the one before's share")
	}
	clk.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
