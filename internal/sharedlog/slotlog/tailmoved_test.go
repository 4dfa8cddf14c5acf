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

// TestReadOwnAppendsFromMemory: a handle reads its own acknowledged
// entries back without a request (a replica applies what it proposed),
// another handle's from the service; the entries it holds are bounded,
// and those it let go are read from the service, unchanged.
func TestReadOwnAppendsFromMemory(t *testing.T) {
	ctx := testCtx(t)
	st := newMemStore()
	cfg := testConfig(st)
	a, b := newLoglet(t, cfg), newLoglet(t, cfg)
	reads := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.reads
	}
	read := func(l *Loglet, from, to sharedlog.Pos) []sharedlog.Entry {
		t.Helper()
		var out []sharedlog.Entry
		for from < to {
			es, err := l.ReadNext(ctx, from, to)
			if err != nil || len(es) == 0 {
				t.Fatalf("ReadNext(%d, %d) = %d entries, %v", from, to, len(es), err)
			}
			out = append(out, es...)
			from += sharedlog.Pos(len(es))
		}
		return out
	}
	appendN := func(l *Loglet, prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := l.Append(ctx, fmt.Appendf(nil, "%s%d", prefix, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(es []sharedlog.Entry, from sharedlog.Pos, prefix string) {
		t.Helper()
		for i, e := range es {
			if want := fmt.Sprintf("%s%d", prefix, i); e.Pos != from+sharedlog.Pos(i) || string(e.Data) != want {
				t.Fatalf("entry %d = %d %q, want %d %q", i, e.Pos, e.Data, from+sharedlog.Pos(i), want)
			}
		}
	}

	appendN(a, "a", 3)
	before := reads()
	check(read(a, 0, 3), 0, "a")
	if n := reads() - before; n != 0 {
		t.Fatalf("reading its own 3 appends sent %d reads, want 0", n)
	}
	appendN(b, "b", 2)
	if _, _, err := a.CheckTail(ctx); err != nil {
		t.Fatal(err)
	}
	before = reads()
	check(read(a, 3, 5), 3, "b")
	if n := reads() - before; n == 0 {
		t.Fatal("another handle's appends were read without a request")
	}

	n := maxKnownEntries + 10
	appendN(a, "c", n)
	before = reads()
	check(read(a, 5, 5+sharedlog.Pos(n)), 5, "c")
	if r := reads() - before; r == 0 {
		t.Fatalf("%d own appends, more than the %d held, were all read from memory", n, maxKnownEntries)
	}
	a.mu.Lock()
	held := len(a.mu.known.data)
	a.mu.Unlock()
	if held != 0 {
		t.Fatalf("%d own entries still held after they were read", held)
	}
}

// TestReadStopsAtOwnEntry: reading past another handle's entries up to
// this handle's own, the service is asked for the others' only.
func TestReadStopsAtOwnEntry(t *testing.T) {
	ctx := testCtx(t)
	st := newMemStore()
	cfg := testConfig(st)
	a, b := newLoglet(t, cfg), newLoglet(t, cfg)
	for _, l := range []*Loglet{b, b, a} {
		if _, err := l.Append(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	es, err := a.ReadNext(ctx, 0, 3)
	if err != nil || len(es) != 2 {
		t.Fatalf("ReadNext(0, 3) = %d entries, %v; want b's 2", len(es), err)
	}
	a.mu.Lock()
	_, held := a.mu.known.data[2]
	a.mu.Unlock()
	if !held {
		t.Fatal("a's own entry at 2 was read from the service")
	}
	if es, err = a.ReadNext(ctx, 2, 3); err != nil || len(es) != 1 || es[0].Pos != 2 {
		t.Fatalf("ReadNext(2, 3) = %v, %v", es, err)
	}
}
