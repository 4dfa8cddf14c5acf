package faultlog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/faultlog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

var noFaults = faultlog.InjectorFunc(func(faultlog.Op) faultlog.Fault { return faultlog.Fault{} })

func TestConformanceNoFaults(t *testing.T) {
	loglettest.Run(t, func(t *testing.T) sharedlog.Loglet {
		return faultlog.Wrap(memlog.New(), noFaults)
	})
}

// Latency alone must not break the contract; it shuffles interleavings.
func TestConformanceWithLatency(t *testing.T) {
	loglettest.Run(t, func(t *testing.T) sharedlog.Loglet {
		return faultlog.Wrap(memlog.New(), faultlog.NewRandom(1, faultlog.RandomConfig{
			DelayProb: 0.2,
			MaxDelay:  200 * time.Microsecond,
		}))
	})
}

func TestLostReplyAppendIsDurable(t *testing.T) {
	ctx := t.Context()
	inner := memlog.New()
	inj := faultlog.FailNext(faultlog.OpAppend, 3, faultlog.FailAfter)
	l := faultlog.Wrap(inner, inj)
	for i := range 3 {
		if pos, err := l.Append(ctx, fmt.Appendf(nil, "lost%d", i)); !errors.Is(err, faultlog.ErrInjected) {
			t.Fatalf("append %d = (%d, %v), want ErrInjected", i, pos, err)
		}
	}
	if n := inj.Remaining(); n != 0 {
		t.Fatalf("Remaining = %d after three faults, want 0", n)
	}
	pos, err := l.Append(ctx, []byte("acked"))
	if err != nil || pos != 3 {
		t.Fatalf("append after the faults = (%d, %v), want (3, nil)", pos, err)
	}
	// Through the wrapper and straight from the inner loglet: the lost
	// replies were really appended.
	for name, log := range map[string]sharedlog.Loglet{"wrapper": l, "inner": inner} {
		es, err := log.ReadNext(ctx, 0, 10)
		if err != nil {
			t.Fatalf("%s: ReadNext: %v", name, err)
		}
		want := []string{"lost0", "lost1", "lost2", "acked"}
		if len(es) != len(want) {
			t.Fatalf("%s: read %d entries, want %d", name, len(es), len(want))
		}
		for i, en := range es {
			if string(en.Data) != want[i] {
				t.Fatalf("%s: entry %d = %q, want %q", name, i, en.Data, want[i])
			}
		}
	}
}

// Per operation and mode: FailBefore leaves the inner loglet untouched,
// FailAfter changes it, and both return ErrInjected.
func TestModes(t *testing.T) {
	type state struct {
		tail    sharedlog.Pos
		sealed  bool
		trimmed bool
	}
	for _, tc := range []struct {
		op         faultlog.Op
		call       func(ctx context.Context, l sharedlog.Loglet) error
		before     state // after a FailBefore
		afterFault state // after a FailAfter
	}{
		{
			op: faultlog.OpAppend,
			call: func(ctx context.Context, l sharedlog.Loglet) error {
				_, err := l.Append(ctx, []byte("x"))
				return err
			},
			before:     state{tail: 2},
			afterFault: state{tail: 3},
		},
		{
			op:         faultlog.OpSeal,
			call:       func(ctx context.Context, l sharedlog.Loglet) error { return l.Seal(ctx) },
			before:     state{tail: 2},
			afterFault: state{tail: 2, sealed: true},
		},
		{
			op:         faultlog.OpPrefixTrim,
			call:       func(ctx context.Context, l sharedlog.Loglet) error { return l.PrefixTrim(ctx, 1) },
			before:     state{tail: 2},
			afterFault: state{tail: 2, trimmed: true},
		},
		{
			op: faultlog.OpCheckTail,
			call: func(ctx context.Context, l sharedlog.Loglet) error {
				_, _, err := l.CheckTail(ctx)
				return err
			},
			before:     state{tail: 2},
			afterFault: state{tail: 2},
		},
		{
			op: faultlog.OpReadNext,
			call: func(ctx context.Context, l sharedlog.Loglet) error {
				_, err := l.ReadNext(ctx, 0, 10)
				return err
			},
			before:     state{tail: 2},
			afterFault: state{tail: 2},
		},
		{
			op: faultlog.OpWaitTail,
			call: func(ctx context.Context, l sharedlog.Loglet) error {
				_, err := l.(sharedlog.TailWaiter).WaitTail(ctx, 0)
				return err
			},
			before:     state{tail: 2},
			afterFault: state{tail: 2},
		},
	} {
		for _, mode := range []faultlog.Mode{faultlog.FailBefore, faultlog.FailAfter} {
			t.Run(fmt.Sprintf("%v/%v", tc.op, mode), func(t *testing.T) {
				ctx := t.Context()
				inner := memlog.New()
				for range 2 {
					if _, err := inner.Append(ctx, []byte("seed")); err != nil {
						t.Fatal(err)
					}
				}
				l := faultlog.Wrap(inner, faultlog.FailNext(tc.op, 1, mode))
				if err := tc.call(ctx, l); !errors.Is(err, faultlog.ErrInjected) {
					t.Fatalf("got %v, want ErrInjected", err)
				}
				want := tc.before
				if mode == faultlog.FailAfter {
					want = tc.afterFault
				}
				tail, sealed, err := inner.CheckTail(ctx)
				if err != nil {
					t.Fatal(err)
				}
				_, readErr := inner.ReadNext(ctx, 0, 1)
				got := state{tail: tail, sealed: sealed, trimmed: errors.Is(readErr, sharedlog.ErrTrimmed)}
				if got != want {
					t.Fatalf("inner loglet state %+v, want %+v", got, want)
				}
				// Only one fault was armed: the same call now succeeds.
				if err := tc.call(ctx, l); err != nil && !errors.Is(err, sharedlog.ErrSealed) {
					t.Fatalf("second call: %v", err)
				}
			})
		}
	}
}

// noWaiter hides memlog's WaitTail.
type noWaiter struct{ sharedlog.Loglet }

func TestKeepsTailWaiter(t *testing.T) {
	if _, ok := faultlog.Wrap(memlog.New(), noFaults).(sharedlog.TailWaiter); !ok {
		t.Error("wrapping a TailWaiter lost WaitTail")
	}
	if _, ok := faultlog.Wrap(noWaiter{memlog.New()}, noFaults).(sharedlog.TailWaiter); ok {
		t.Error("wrapping a loglet without WaitTail added one")
	}
}

func TestDelayHonoursContext(t *testing.T) {
	inner := memlog.New()
	l := faultlog.Wrap(inner, faultlog.InjectorFunc(func(faultlog.Op) faultlog.Fault {
		return faultlog.Fault{Delay: time.Hour}
	}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, []byte("delayed"))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("delayed Append with canceled ctx: %v, want context.Canceled", err)
	}
	if tail, _, _ := inner.CheckTail(t.Context()); tail != 0 {
		t.Fatalf("an append canceled during its delay was written: tail %d", tail)
	}
}

func TestRandomReplaysFromSeed(t *testing.T) {
	cfg := faultlog.RandomConfig{
		Ops:        faultlog.OpAppend | faultlog.OpSeal,
		FailBefore: 0.1,
		FailAfter:  0.2,
		DelayProb:  0.5,
		MaxDelay:   time.Millisecond,
	}
	draw := func(seed uint64) []faultlog.Fault {
		r := faultlog.NewRandom(seed, cfg)
		out := make([]faultlog.Fault, 2000)
		for i := range out {
			out[i] = r.Fault(faultlog.OpAppend)
			if f := r.Fault(faultlog.OpReadNext); f != (faultlog.Fault{}) {
				t.Fatalf("ReadNext is not in Ops but got %+v", f)
			}
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	counts := map[faultlog.Mode]int{}
	delays, differ := 0, false
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("draw %d differs for the same seed: %+v vs %+v", i, a[i], b[i])
		}
		differ = differ || a[i] != c[i]
		counts[a[i].Mode]++
		if a[i].Delay > 0 {
			delays++
		}
		if a[i].Delay >= cfg.MaxDelay {
			t.Fatalf("delay %v not below MaxDelay", a[i].Delay)
		}
	}
	if !differ {
		t.Error("seeds 7 and 8 drew the same faults")
	}
	// Fixed seed, so these are deterministic; the bounds only catch a
	// mixed-up probability.
	for mode, want := range map[faultlog.Mode]int{faultlog.FailBefore: 200, faultlog.FailAfter: 400, faultlog.None: 1400} {
		if got := counts[mode]; got < want*7/10 || got > want*13/10 {
			t.Errorf("%v drawn %d times in 2000, want about %d", mode, got, want)
		}
	}
	if delays < 800 || delays > 1200 {
		t.Errorf("%d delays in 2000, want about 1000", delays)
	}
}

// Concurrent appends with random lost replies: every append whose reply
// was lost is durable and visible anyway, exactly once.
func TestConcurrentLostReplies(t *testing.T) {
	ctx := t.Context()
	inner := memlog.New()
	l := faultlog.Wrap(inner, faultlog.NewRandom(3, faultlog.RandomConfig{Ops: faultlog.OpAppend, FailAfter: 0.3}))
	const appenders, per = 8, 50
	var (
		mu    sync.Mutex
		acked = map[string]sharedlog.Pos{}
		lost  = map[string]bool{}
		wg    sync.WaitGroup
	)
	for a := range appenders {
		wg.Go(func() {
			for i := range per {
				data := fmt.Sprintf("a%d-%d", a, i)
				pos, err := l.Append(ctx, []byte(data))
				mu.Lock()
				switch {
				case err == nil:
					acked[data] = pos
				case errors.Is(err, faultlog.ErrInjected):
					lost[data] = true
				default:
					t.Errorf("Append: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(lost) == 0 || len(acked) == 0 {
		t.Fatalf("%d lost and %d acked: the injector did not mix outcomes", len(lost), len(acked))
	}
	seen := map[string]bool{}
	for from := sharedlog.Pos(0); from < appenders*per; {
		es, err := l.ReadNext(ctx, from, appenders*per)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d): %d entries, %v", from, len(es), err)
		}
		for _, en := range es {
			data := string(en.Data)
			if pos, ok := acked[data]; ok && pos != en.Pos {
				t.Fatalf("%q acked at %d, read at %d", data, pos, en.Pos)
			}
			if _, ok := acked[data]; !ok && !lost[data] {
				t.Fatalf("entry %d = %q was never appended", en.Pos, data)
			}
			if seen[data] {
				t.Fatalf("%q read twice", data)
			}
			seen[data] = true
		}
		from += sharedlog.Pos(len(es))
	}
	if len(seen) != len(acked)+len(lost) {
		t.Fatalf("read %d entries, want %d acked + %d lost", len(seen), len(acked), len(lost))
	}
}
