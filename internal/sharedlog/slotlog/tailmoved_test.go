package slotlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// TestTailMoved: the probe reports another handle's append, its seal,
// and a trim that deleted the slot it probes; and nothing when nothing
// happened.
func TestTailMoved(t *testing.T) {
	ctx := testCtx(t)
	st := newMemStore()
	cfg := testConfig(st)
	cfg.TrimGrace = -1 // deletes at once: the probe meets an empty, trimmed slot
	a, b := newLoglet(t, cfg), newLoglet(t, cfg)
	moved := func(tail sharedlog.Pos, want bool) {
		t.Helper()
		got, err := a.TailMoved(ctx, tail)
		if err != nil || got != want {
			t.Fatalf("TailMoved(%d) = %v, %v; want %v", tail, got, err, want)
		}
	}
	appendN := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := b.Append(ctx, fmt.Appendf(nil, "b%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if tail, _, err := a.CheckTail(ctx); err != nil || tail != 0 {
		t.Fatalf("CheckTail = %d, %v", tail, err)
	}
	moved(0, false)
	appendN(3)
	moved(0, true)
	if tail, _, err := a.CheckTail(ctx); err != nil || tail != 3 {
		t.Fatalf("CheckTail = %d, %v", tail, err)
	}
	moved(3, false)
	appendN(2)
	if err := b.PrefixTrim(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.slot(3); ok {
		t.Fatal("slot 3 survived the trim")
	}
	moved(3, true) // slot 3 is empty again, but the trim point is past it
	if err := b.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	moved(5, true)
}

// TestTailMovedReadsTrimPointOncePerTrust: with a grace period, a probe
// costs one request, and the trim point is read again only when the last
// read is older than TrimGrace/2.
func TestTailMovedReadsTrimPointOncePerTrust(t *testing.T) {
	ctx := testCtx(t)
	st := newMemStore()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(st)
	cfg.Clock = clk
	l := newLoglet(t, cfg)
	if _, _, err := l.CheckTail(ctx); err != nil {
		t.Fatal(err)
	}
	reads := st.trimPointReads()
	trust := DefaultTrimGrace / 2
	for range 5 {
		clk.Advance(trust / 5)
		if moved, err := l.TailMoved(ctx, 0); err != nil || moved {
			t.Fatalf("TailMoved = %v, %v", moved, err)
		}
	}
	if got := st.trimPointReads() - reads; got != 0 {
		t.Fatalf("%d trim point reads within the trust period, want 0", got)
	}
	clk.Advance(time.Second)
	if moved, err := l.TailMoved(ctx, 0); err != nil || moved {
		t.Fatalf("TailMoved = %v, %v", moved, err)
	}
	if got := st.trimPointReads() - reads; got != 1 {
		t.Fatalf("%d trim point reads past the trust period, want 1", got)
	}
}
