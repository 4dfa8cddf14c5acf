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
	p := newPacer(1000, clk)
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
