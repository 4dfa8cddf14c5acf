package views

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

func TestGateSlotsThenSpare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Unix(0, 0))
	g := newGate(1, clk)
	releaseA, err := g.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The slot is taken: B waits, then takes the spare after maxStepWait.
	type got struct {
		release func()
		err     error
	}
	b := make(chan got, 1)
	go func() { r, err := g.acquire(ctx); b <- got{r, err} }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-b:
		t.Fatalf("a second Step got past a gate of 1 slot before waiting maxStepWait: %v", r.err)
	default:
	}
	clk.Advance(maxStepWait)
	rb := <-b
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if len(g.slots) != 1 || len(g.spare) != 1 {
		t.Fatalf("slots %d, spare %d taken; want 1 and 1", len(g.slots), len(g.spare))
	}
	// Slot and spare taken: C waits past maxStepWait, until a release.
	c := make(chan got, 1)
	go func() { r, err := g.acquire(ctx); c <- got{r, err} }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(maxStepWait)
	canceled, cancelD := context.WithCancel(ctx)
	cancelD()
	if _, err := g.acquire(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire of a full gate with a canceled context: %v", err)
	}
	select {
	case r := <-c:
		t.Fatalf("a third Step got past 1 slot and the spare: %v", r.err)
	default:
	}
	rb.release()
	rc := <-c
	if rc.err != nil {
		t.Fatal(rc.err)
	}
	// Slot and spare taken again: D runs without either after
	// maxGateWait.
	d := make(chan got, 1)
	go func() { r, err := g.acquire(ctx); d <- got{r, err} }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(maxStepWait)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-d:
		t.Fatalf("a Step got past a full gate after maxStepWait, before maxGateWait: %v", r.err)
	default:
	}
	clk.Advance(maxGateWait - maxStepWait)
	rd := <-d
	if rd.err != nil {
		t.Fatal(rd.err)
	}
	rd.release()
	if len(g.slots) != 1 || len(g.spare) != 1 {
		t.Fatalf("a Step past the gate took or gave back a slot: slots %d, spare %d taken", len(g.slots), len(g.spare))
	}
	releaseA()
	rc.release()
	if len(g.slots) != 0 || len(g.spare) != 0 {
		t.Fatalf("after every release: slots %d, spare %d taken", len(g.slots), len(g.spare))
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
}

func TestGateNoSlotsUnbounded(t *testing.T) {
	g := newGate(0, nil)
	if g != nil {
		t.Fatalf("a gate of 0 slots: %+v, want none", g)
	}
	var releases []func()
	for i := range 8 {
		r, err := g.acquire(context.Background())
		if err != nil {
			t.Fatalf("acquire %d through no gate: %v", i, err)
		}
		releases = append(releases, r)
	}
	for _, r := range releases {
		r()
	}
}
