package clock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

var start = time.UnixMilli(1_700_000_000_000)

func TestFakeAdvance(t *testing.T) {
	c := clock.NewFake(start)
	var mu sync.Mutex
	var got []string
	note := func(s string) func() {
		return func() {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}
	}
	c.AfterFunc(3*time.Second, note("3s"))
	c.AfterFunc(time.Second, note("1s-a"))
	c.AfterFunc(time.Second, note("1s-b"))
	stopped := c.AfterFunc(2*time.Second, note("stopped"))
	c.AfterFunc(2*time.Second, func() {
		note("2s")()
		// Set from a callback and due before the target: it runs
		// within the same Advance, at its own time.
		c.AfterFunc(500*time.Millisecond, note("2.5s"))
		if now := c.Now(); !now.Equal(start.Add(2 * time.Second)) {
			t.Errorf("Now in the 2s callback = +%v", now.Sub(start))
		}
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should report true once, then false")
	}
	if n := c.Pending(); n != 4 {
		t.Fatalf("Pending = %d, want 4", n)
	}
	c.Advance(2900 * time.Millisecond)
	want := []string{"1s-a", "1s-b", "2s", "2.5s"}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if now := c.Now(); !now.Equal(start.Add(2900 * time.Millisecond)) {
		t.Fatalf("Now = +%v, want +2.9s", now.Sub(start))
	}
	c.Advance(100 * time.Millisecond)
	if !slices.Equal(got, append(want, "3s")) || c.Pending() != 0 {
		t.Fatalf("fired %v, %d pending", got, c.Pending())
	}
}

func TestSleep(t *testing.T) {
	c := clock.NewFake(start)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, c, time.Minute) }()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute - 1)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before its time", err)
	default:
	}
	c.Advance(1)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- clock.Sleep(cctx, c, time.Minute) }()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Sleep = %v", err)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("a canceled Sleep left %d timers", n)
	}
	if err := clock.Sleep(ctx, c, 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}

func TestRealAfter(t *testing.T) {
	ch, _ := clock.After(clock.Real, time.Millisecond)
	<-ch
	ch, tm := clock.After(clock.Real, time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	select {
	case <-ch:
		t.Fatal("a stopped timer fired")
	default:
	}
}

func TestShifted(t *testing.T) {
	f := clock.NewFake(time.Unix(100, 0))
	s := clock.Shifted(f, -time.Hour)
	if got := s.Now(); !got.Equal(time.Unix(100, 0).Add(-time.Hour)) {
		t.Fatalf("Now %v", got)
	}
	fired := false
	s.AfterFunc(time.Second, func() { fired = true })
	f.Advance(time.Second)
	if !fired {
		t.Fatal("a shifted clock's timer did not follow its base clock")
	}
	if clock.Shifted(f, 0) != clock.Clock(f) {
		t.Fatal("a zero shift is not the clock itself")
	}
}
