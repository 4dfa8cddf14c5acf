package views

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

func TestGateBoundsSlots(t *testing.T) {
	g := newGate(2)
	ctx := context.Background()
	for i := range 2 {
		if err := g.acquire(ctx); err != nil {
			t.Fatalf("acquire %d of 2: %v", i, err)
		}
	}
	// Full: a third waits, until its context ends.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.acquire(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("third acquire of 2 slots: %v, want context.Canceled", err)
	}
	g.release()
	done := make(chan error, 1)
	go func() { done <- g.acquire(ctx) }()
	if err := <-done; err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	if n := len(g); n != 2 {
		t.Fatalf("%d slots taken, want 2", n)
	}
}

func TestDefaultStepSlotsLeavesAProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 1, 2: 1, 4: 3, 16: 15} {
		runtime.GOMAXPROCS(procs)
		if got := defaultStepSlots(); got != want {
			t.Errorf("GOMAXPROCS %d: %d step slots, want %d", procs, got, want)
		}
	}
	if got := cap(newGate(0)); got != 1 {
		t.Errorf("a gate of 0 slots has %d, want 1", got)
	}
}
