package clock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// TestLoop checks that a loop passes once per interval of its clock
// (from now with EveryFromNow), that Stop waits for a pass under way
// and cancels its context.
func TestLoop(t *testing.T) {
	for _, fromNow := range []bool{false, true} {
		clk := clock.NewFake(time.Unix(1000, 0))
		passes := make(chan struct{})
		release := make(chan struct{})
		var stopped error
		finished := 0
		pass := func(ctx context.Context) {
			passes <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				stopped = ctx.Err()
			}
			finished++
		}
		start := clock.Every
		if fromNow {
			start = clock.EveryFromNow
		}
		l := start(clk, time.Second, pass)
		if fromNow {
			<-passes
			release <- struct{}{}
		}
		for i := 0; i < 2; i++ {
			block(t, clk)
			clk.Advance(time.Second)
			<-passes
			release <- struct{}{}
		}
		block(t, clk)
		clk.Advance(time.Second)
		<-passes
		// The pass under way ends only when Stop cancels its context.
		want := finished + 1
		l.Stop()
		if finished != want {
			t.Errorf("Stop returned with %d passes finished, want %d: it did not wait for the one under way", finished, want)
		}
		if stopped == nil {
			t.Error("the pass's context was not canceled by Stop")
		}
	}
	var never *clock.Loop
	never.Stop()
}

// block waits until the loop sleeps on clk.
func block(t *testing.T, clk *clock.Fake) {
	t.Helper()
	if err := clk.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
}

// TestAtRate checks that AtRate starts passes an interval apart: after a
// pass that took 300 ms of a 1 s interval the loop waits 700 ms, where
// Every waits the whole second.
func TestAtRate(t *testing.T) {
	for _, atRate := range []bool{true, false} {
		clk := clock.NewFake(time.Unix(1000, 0))
		passes, release := make(chan struct{}), make(chan struct{})
		pass := func(ctx context.Context) {
			passes <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		start := clock.Every
		if atRate {
			start = clock.AtRate
		}
		l := start(clk, time.Second, pass)
		block(t, clk)
		clk.Advance(time.Second)
		<-passes
		clk.Advance(300 * time.Millisecond) // the pass's work
		release <- struct{}{}
		block(t, clk)
		clk.Advance(700 * time.Millisecond)
		if fired := clk.Pending() == 0; fired != atRate {
			t.Errorf("atRate %v: next pass due 700 ms after a 300 ms pass: %v", atRate, fired)
		}
		if !atRate {
			clk.Advance(300 * time.Millisecond)
		}
		<-passes
		l.Stop()
	}
}

// TestEveryVar checks that EveryVar reads its interval before each
// wait: after the interval grows from 1 s to 3 s, the next pass comes 3 s
// on, not 1 s.
func TestEveryVar(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var interval atomic.Int64
	interval.Store(int64(time.Second))
	passes, release := make(chan struct{}), make(chan struct{})
	l := clock.EveryVar(clk, func() time.Duration { return time.Duration(interval.Load()) }, func(ctx context.Context) {
		passes <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	block(t, clk)
	clk.Advance(time.Second)
	<-passes
	interval.Store(int64(3 * time.Second)) // while the pass runs
	release <- struct{}{}
	block(t, clk)
	clk.Advance(time.Second)
	if clk.Pending() == 0 {
		t.Fatal("a pass came 1 s after the interval became 3 s")
	}
	clk.Advance(2 * time.Second)
	<-passes
	l.Stop()
}
