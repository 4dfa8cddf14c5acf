package slotlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
)

const maxPos = sharedlog.Pos(math.MaxUint64)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testConfig is a small window, so the window arithmetic is exercised
// with a few entries, and a short backoff.
func testConfig(st Slots) Config {
	return Config{
		Slots:         st,
		Name:          "test",
		Window:        4,
		MaxEntryBytes: 1 << 20,
		RetryBackoff:  time.Millisecond,
	}
}

func newLoglet(t *testing.T, cfg Config) *Loglet {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

var variants = []struct {
	name     string
	topOnly  bool
	occupant bool
	grace    time.Duration
	window   int
}{
	{"scan-up", false, true, 0, 4},
	{"top-only", true, false, 0, 4},
	{"scan-up/no-grace", false, false, -1, 4},
	{"top-only/no-grace/window-8", true, true, -1, 8},
}

func variantConfig(st *memStore, i int) Config {
	v := variants[i]
	st.withOccupant = v.occupant
	cfg := testConfig(st)
	cfg.TopOnly, cfg.TrimGrace, cfg.Window = v.topOnly, v.grace, v.window
	return cfg
}

func TestConformance(t *testing.T) {
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			opts := loglettest.Options{MaxEntryBytes: 256 << 10}
			opts.Run(t, func(t *testing.T) sharedlog.Loglet {
				return newLoglet(t, variantConfig(newMemStore(), i))
			})
			var mu sync.Mutex
			stores := map[string]*memStore{}
			opts.RunDurable(t, func(t *testing.T, dir string) sharedlog.Loglet {
				mu.Lock()
				st, ok := stores[dir]
				if !ok {
					st = newMemStore()
					stores[dir] = st
				}
				mu.Unlock()
				l, err := New(variantConfig(st, i))
				if err != nil {
					t.Fatal(err)
				}
				return l
			})
		})
	}
}

// TestAmbiguousPuts loses the reply of every third put after applying it
// and fails every seventh before applying it: every append still
// succeeds, each payload is in exactly one slot, and no slot is written
// twice.
func TestAmbiguousPuts(t *testing.T) {
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := newMemStore()
			var n atomic.Int64
			st.setPutFault(func(Slot) fault {
				switch k := n.Add(1); {
				case k%3 == 0:
					return faultLoseReply
				case k%7 == 0:
					return faultBefore
				}
				return faultNone
			})
			l := newLoglet(t, variantConfig(st, i))
			const appenders, per = 4, 40
			acked := backendtest.AppendConcurrently(t, ctx, []sharedlog.Loglet{l}, appenders, per)
			if t.Failed() {
				return
			}
			if n.Load() < appenders*per {
				t.Fatalf("only %d puts", n.Load())
			}
			checkLog(t, ctx, l, st, acked, appenders*per)
		})
	}
}

// checkLog asserts the log holds exactly the acknowledged entries at
// their positions, dense from 0, each payload once, each slot written
// once.
func checkLog(t *testing.T, ctx context.Context, l sharedlog.Loglet, st *memStore, acked map[sharedlog.Pos][]byte, want int) {
	t.Helper()
	tail, sealed, err := l.CheckTail(ctx)
	if err != nil || sealed || tail != sharedlog.Pos(want) {
		t.Fatalf("CheckTail = (%d, %v, %v), want (%d, false, nil)", tail, sealed, err, want)
	}
	seen := map[string]sharedlog.Pos{}
	for p := sharedlog.Pos(0); p < tail; {
		es, err := l.ReadNext(ctx, p, tail)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d): %d entries, %v", p, len(es), err)
		}
		for _, e := range es {
			if e.Pos != p {
				t.Fatalf("entry at %d, want %d", e.Pos, p)
			}
			if q, dup := seen[string(e.Data)]; dup {
				t.Fatalf("payload %q at %d and %d", e.Data, q, p)
			}
			seen[string(e.Data)] = p
			if a, ok := acked[p]; ok && !bytes.Equal(a, e.Data) {
				t.Fatalf("slot %d holds %q, the append acknowledged there was %q", p, e.Data, a)
			}
			if st != nil && st.writesAt(p) != 1 {
				t.Fatalf("slot %d written %d times", p, st.writesAt(p))
			}
			p++
		}
	}
	if len(acked) != want {
		t.Fatalf("%d positions acknowledged, want %d", len(acked), want)
	}
}

// TestHoleAndOrphan: a write that fails for good leaves a hole; the
// entry above it (its append failed too) is invisible until another
// handle fills the hole, and then sits in its slot.
func TestHoleAndOrphan(t *testing.T) {
	ctx := testCtx(t)
	st := newMemStore()
	var block atomic.Bool
	block.Store(true)
	st.setPutFault(func(s Slot) fault {
		if s.Pos == 2 && block.Load() {
			return faultBefore
		}
		return faultNone
	})
	cfg := testConfig(st)
	cfg.PutAttempts = 2
	a := newLoglet(t, cfg)
	// Two sequential appends, then two in flight at 2 and 3. The put at
	// 3 is held until the put at 2 has failed, so 3 is written (an
	// orphan) and rewound.
	for i := range 2 {
		if p, err := a.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil || p != sharedlog.Pos(i) {
			t.Fatalf("Append %d = (%d, %v)", i, p, err)
		}
	}
	errs := make(chan error, 2)
	for i := 2; i < 4; i++ {
		go func() {
			_, err := a.Append(ctx, fmt.Appendf(nil, "a%d", i))
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("an append at or above the failed slot succeeded")
		}
	}
	b := newLoglet(t, testConfig(st))
	tail, _, err := b.CheckTail(ctx)
	if err != nil || tail != 2 {
		t.Fatalf("CheckTail over the hole = (%d, %v), want 2", tail, err)
	}
	if es, err := b.ReadNext(ctx, 2, maxPos); err != nil || len(es) != 0 {
		t.Fatalf("ReadNext at the hole = (%d entries, %v)", len(es), err)
	}
	orphan, hasOrphan := st.slot(3)
	if es, err := b.ReadNext(ctx, 3, maxPos); err != nil || len(es) != 0 {
		t.Fatalf("ReadNext above the hole = (%d entries, %v), want none", len(es), err)
	}

	block.Store(false)
	if p, err := b.Append(ctx, []byte("fill")); err != nil || p != 2 {
		t.Fatalf("Append into the hole = (%d, %v), want 2", p, err)
	}
	want := sharedlog.Pos(3)
	if hasOrphan {
		want = 4
	}
	if p, err := b.Append(ctx, []byte("after")); err != nil || p != want {
		t.Fatalf("Append after the fill = (%d, %v), want %d", p, err, want)
	}
	// ReadNext may return fewer than there are (here: it stops before
	// b's own entries, which it holds): read on to the tail.
	var es []sharedlog.Entry
	for from := sharedlog.Pos(0); ; {
		more, err := b.ReadNext(ctx, from, maxPos)
		if err != nil {
			t.Fatalf("ReadNext(%d): %v", from, err)
		}
		if len(more) == 0 {
			break
		}
		es = append(es, more...)
		from += sharedlog.Pos(len(more))
	}
	if len(es) != int(want)+1 {
		t.Fatalf("read from 0: %d entries, want %d", len(es), want+1)
	}
	if hasOrphan && !bytes.Equal(es[3].Data, orphan.Data) {
		t.Fatalf("slot 3 = %q, want the orphan %q", es[3].Data, orphan.Data)
	}
	// a's view recovers: its next append lands at the tail.
	if p, err := a.Append(ctx, []byte("a again")); err != nil || p != want+1 {
		t.Fatalf("Append on the handle that failed = (%d, %v), want %d", p, err, want+1)
	}
}

// TestStaleHandleAfterTrim: a handle whose view predates another
// handle's trim never acknowledges an entry below the trim point.
func TestStaleHandleAfterTrim(t *testing.T) {
	for _, grace := range []time.Duration{-1, 0} {
		t.Run(fmt.Sprintf("grace=%v", grace), func(t *testing.T) {
			ctx := testCtx(t)
			st := newMemStore()
			cfg := testConfig(st)
			cfg.TrimGrace = grace
			a, b := newLoglet(t, cfg), newLoglet(t, cfg)
			for i := range 5 {
				if _, err := a.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 20 {
				if _, err := b.Append(ctx, fmt.Appendf(nil, "b%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.PrefixTrim(ctx, 25); err != nil {
				t.Fatal(err)
			}
			if _, ok := st.slot(3); ok == (grace < 0) {
				t.Fatalf("slot 3 present = %v after the trim with grace %v", ok, grace)
			}
			var got sharedlog.Pos
			for i := range 2 {
				p, err := a.Append(ctx, []byte("stale"))
				if err == nil {
					got = p
					break
				}
				if i > 0 {
					t.Fatalf("second Append on the stale handle: %v", err)
				}
				t.Logf("first Append on the stale handle: %v", err)
			}
			if got != 25 {
				t.Fatalf("stale handle's append acknowledged at %d, want 25", got)
			}
			if _, err := b.ReadNext(ctx, 5, maxPos); !errors.Is(err, sharedlog.ErrTrimmed) {
				t.Fatalf("ReadNext(5) = %v, want ErrTrimmed", err)
			}
			es, err := b.ReadNext(ctx, 25, maxPos)
			if err != nil || len(es) != 1 || string(es[0].Data) != "stale" {
				t.Fatalf("ReadNext(25) = (%v, %v)", es, err)
			}
		})
	}
}

// TestTwoHandles: two handles, as two agents would, append concurrently
// to one log; positions are dense and unique.
func TestTwoHandles(t *testing.T) {
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := newMemStore()
			handles := []sharedlog.Loglet{newLoglet(t, variantConfig(st, i)), newLoglet(t, variantConfig(st, i))}
			const per = 40
			acked := backendtest.AppendConcurrently(t, ctx, handles, 4, per)
			if !t.Failed() {
				checkLog(t, ctx, handles[0], st, acked, 2*4*per)
			}
		})
	}
}

// TestSealFromAnotherHandle: appends on one handle race a seal from
// another; acknowledged appends lie below the seal, appends begun after
// it fail with ErrSealed, and nothing above the seal is readable.
func TestSealFromAnotherHandle(t *testing.T) {
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := newMemStore()
			a, b := newLoglet(t, variantConfig(st, i)), newLoglet(t, variantConfig(st, i))
			var sealDone atomic.Bool
			type ack struct {
				pos       sharedlog.Pos
				afterSeal bool
			}
			var (
				acksMu sync.Mutex
				acks   []ack
			)
			var wg sync.WaitGroup
			var count atomic.Int64
			trigger := make(chan struct{})
			var once sync.Once
			for g := range 4 {
				wg.Go(func() {
					for i := 0; ; i++ {
						after := sealDone.Load()
						p, err := a.Append(ctx, fmt.Appendf(nil, "g%d/%d", g, i))
						if errors.Is(err, sharedlog.ErrSealed) {
							return
						}
						if err != nil {
							t.Errorf("Append: %v", err)
							return
						}
						acksMu.Lock()
						acks = append(acks, ack{p, after})
						acksMu.Unlock()
						if count.Add(1) == 40 {
							once.Do(func() { close(trigger) })
						}
					}
				})
			}
			<-trigger
			if err := b.Seal(ctx); err != nil {
				t.Fatal(err)
			}
			sealDone.Store(true)
			wg.Wait()
			tail, sealed, err := b.CheckTail(ctx)
			if err != nil || !sealed {
				t.Fatalf("CheckTail = (%d, %v, %v)", tail, sealed, err)
			}
			for _, k := range acks {
				if k.afterSeal {
					t.Fatalf("append begun after the seal acknowledged at %d", k.pos)
				}
				if k.pos >= tail {
					t.Fatalf("append acknowledged at %d, at or past the sealed tail %d", k.pos, tail)
				}
			}
			if atail, asealed, err := a.CheckTail(ctx); err != nil || atail != tail || !asealed {
				t.Fatalf("appender's CheckTail = (%d, %v, %v), want (%d, true)", atail, asealed, err, tail)
			}
			if es, err := a.ReadNext(ctx, tail, maxPos); err != nil || len(es) != 0 {
				t.Fatalf("ReadNext at the seal = (%d entries, %v)", len(es), err)
			}
			es, err := a.ReadNext(ctx, 0, tail)
			if err != nil || (tail > 0 && len(es) == 0) {
				t.Fatalf("ReadNext(0, %d) = (%d, %v)", tail, len(es), err)
			}
		})
	}
}

func TestEntryTooLarge(t *testing.T) {
	cfg := testConfig(newMemStore())
	cfg.MaxEntryBytes = 10
	l := newLoglet(t, cfg)
	_, err := l.Append(testCtx(t), make([]byte, 11))
	if !errors.Is(err, ErrEntryTooLarge) || !errors.Is(err, sharedlog.ErrRejected) {
		t.Fatalf("Append of 11 bytes with MaxEntryBytes 10 = %v, want ErrEntryTooLarge, rejected", err)
	}
}

// TestRejectedPut: a put the service refuses at the first try fails the
// append for good; refused after a try whose reply was lost, the append
// is ambiguous, since that try may have landed.
func TestRejectedPut(t *testing.T) {
	for _, lostFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost-first=%v", lostFirst), func(t *testing.T) {
			st := newMemStore()
			var n atomic.Int64
			st.setPutFault(func(Slot) fault {
				if n.Add(1) == 1 && lostFirst {
					return faultBefore
				}
				return faultReject
			})
			l := newLoglet(t, testConfig(st))
			_, err := l.Append(testCtx(t), []byte("x"))
			if err == nil || errors.Is(err, sharedlog.ErrRejected) == lostFirst {
				t.Fatalf("Append = %v, want rejected %v", err, !lostFirst)
			}
		})
	}
}

// TestTrimGraceOnClock drives the trim-grace protocol on a fake clock:
// trimmed slots are deleted only once TrimGrace has passed since the trim
// was seen, and a handle rereads the trim point before it acknowledges
// once its last read is older than TrimGrace/2.
func TestTrimGraceOnClock(t *testing.T) {
	ctx := testCtx(t)
	st := newMemStore()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := testConfig(st)
	cfg.Clock, cfg.TrimGrace = clk, time.Minute
	l := newLoglet(t, cfg)
	for i := range 6 {
		if _, err := l.Append(ctx, fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.PrefixTrim(ctx, 4); err != nil {
		t.Fatal(err)
	}
	present := func(p sharedlog.Pos) bool {
		_, ok := st.slot(p)
		return ok
	}
	if !present(0) {
		t.Fatal("slot 0 deleted at the trim, before the grace period")
	}
	clk.Advance(time.Minute - time.Millisecond)
	if err := l.PrefixTrim(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if !present(0) {
		t.Fatal("slot 0 deleted before the grace period passed")
	}
	clk.Advance(time.Millisecond)
	if err := l.PrefixTrim(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for p := range sharedlog.Pos(6) {
		if present(p) != (p >= 4) {
			t.Fatalf("slot %d present = %v once the grace period passed", p, present(p))
		}
	}

	// The PrefixTrim just read the trim point: within TrimGrace/2 an
	// append trusts that read.
	reads := st.trimPointReads()
	clk.Advance(30 * time.Second)
	if _, err := l.Append(ctx, []byte("trusted")); err != nil {
		t.Fatal(err)
	}
	if got := st.trimPointReads(); got != reads {
		t.Fatalf("%d trim point reads for an append within the trust period", got-reads)
	}
	clk.Advance(time.Millisecond)
	if _, err := l.Append(ctx, []byte("reread")); err != nil {
		t.Fatal(err)
	}
	if got := st.trimPointReads(); got == reads {
		t.Fatal("an append past the trust period did not reread the trim point")
	}
}

func TestWalk(t *testing.T) {
	e := func(ps ...sharedlog.Pos) []SlotInfo {
		var out []SlotInfo
		for _, p := range ps {
			out = append(out, SlotInfo{Pos: p, Kind: KindEntry})
		}
		return out
	}
	sealAt := func(infos []SlotInfo, p sharedlog.Pos) []SlotInfo {
		for i := range infos {
			if infos[i].Pos == p {
				infos[i].Kind = KindSeal
			}
		}
		return infos
	}
	tests := []struct {
		name     string
		infos    []SlotInfo
		start    sharedlog.Pos
		complete bool
		p        sharedlog.Pos
		sealed   bool
		found    bool
	}{
		{"empty complete", nil, 5, true, 5, false, true},
		{"empty incomplete", nil, 5, false, 5, false, false},
		{"dense", e(0, 1, 2), 0, true, 3, false, true},
		{"hole", e(0, 1, 3, 4), 0, true, 2, false, true},
		{"hole before start ignored", e(0, 2, 3), 2, true, 4, false, true},
		{"gap at start", e(3, 4), 1, true, 1, false, true},
		{"seal", sealAt(e(0, 1, 2, 3), 2), 0, true, 2, true, true},
		{"orphan above seal", sealAt(e(4, 5, 7), 5), 4, false, 5, true, true},
		{"dense incomplete", e(4, 5, 6), 4, false, 7, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, sealed, found := walk(tt.infos, tt.start, tt.complete)
			if p != tt.p || sealed != tt.sealed || found != tt.found {
				t.Fatalf("walk = (%d, %v, %v), want (%d, %v, %v)", p, sealed, found, tt.p, tt.sealed, tt.found)
			}
		})
	}
}

func TestTrusted(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name   string
		readAt time.Time
		t      time.Time
		trust  time.Duration
		want   bool
	}{
		{"never read", time.Time{}, now, time.Minute, false},
		{"no trust, read after", now.Add(time.Millisecond), now, 0, true},
		{"no trust, read same instant", now, now, 0, true},
		{"no trust, read before", now.Add(-time.Millisecond), now, 0, false},
		{"within trust", now.Add(-30 * time.Second), now, time.Minute, true},
		{"past trust", now.Add(-2 * time.Minute), now, time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := trusted(tt.readAt, tt.t, tt.trust); got != tt.want {
				t.Fatalf("trusted = %v, want %v", got, tt.want)
			}
		})
	}
}
