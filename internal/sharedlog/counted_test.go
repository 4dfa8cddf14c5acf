package sharedlog_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

type opCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *opCounts) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[op]++
}

// proberOnly is a memlog with TailMoved and no WaitTail.
type proberOnly struct{ sharedlog.Loglet }

func (p proberOnly) TailMoved(ctx context.Context, tail sharedlog.Pos) (bool, error) {
	t, _, err := p.CheckTail(ctx)
	return t != tail, err
}

// TestCounted: every operation is counted once, and the wrapper has the
// optional powers of what it wraps and no others.
func TestCounted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		ll            sharedlog.Loglet
		waits, probes bool
	}{
		{"waiter", memlog.New(), true, false},
		{"prober", proberOnly{plainLoglet{memlog.New()}}, false, true},
		{"plain", plainLoglet{memlog.New()}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &opCounts{n: map[string]int{}}
			ll := sharedlog.Counted(tc.ll, c.count)
			tw, waits := ll.(sharedlog.TailWaiter)
			tp, probes := ll.(sharedlog.TailProber)
			if waits != tc.waits || probes != tc.probes {
				t.Fatalf("powers: TailWaiter %v, TailProber %v; want %v, %v", waits, probes, tc.waits, tc.probes)
			}
			if _, err := ll.Append(ctx, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ll.CheckTail(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := ll.ReadNext(ctx, 0, 1); err != nil {
				t.Fatal(err)
			}
			want := map[string]int{sharedlog.OpAppend: 1, sharedlog.OpCheckTail: 1, sharedlog.OpReadNext: 1}
			if waits {
				if _, err := tw.WaitTail(ctx, 0); err != nil {
					t.Fatal(err)
				}
				want[sharedlog.OpWaitTail] = 1
			}
			if probes {
				if _, err := tp.TailMoved(ctx, 1); err != nil {
					t.Fatal(err)
				}
				want[sharedlog.OpTailMoved] = 1
			}
			if err := ll.PrefixTrim(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := ll.Seal(ctx); err != nil {
				t.Fatal(err)
			}
			want[sharedlog.OpPrefixTrim], want[sharedlog.OpSeal] = 1, 1
			if !maps.Equal(c.n, want) {
				t.Fatalf("counts = %v, want %v", c.n, want)
			}
		})
	}
}

// plainLoglet hides a loglet's optional powers.
type plainLoglet struct{ l *memlog.Loglet }

func (p plainLoglet) Append(ctx context.Context, e []byte) (sharedlog.Pos, error) {
	return p.l.Append(ctx, e)
}
func (p plainLoglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	return p.l.CheckTail(ctx)
}
func (p plainLoglet) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	return p.l.ReadNext(ctx, from, max)
}
func (p plainLoglet) Seal(ctx context.Context) error { return p.l.Seal(ctx) }
func (p plainLoglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	return p.l.PrefixTrim(ctx, before)
}
func (p plainLoglet) Close() error { return p.l.Close() }

// TestCountedMetaStore counts Get and CAS.
func TestCountedMetaStore(t *testing.T) {
	ctx := context.Background()
	c := &opCounts{n: map[string]int{}}
	ms := sharedlog.CountedMetaStore(sharedlog.NewMemMetaStore(), c.count)
	if _, err := ms.Get(ctx); err != nil {
		t.Fatal(err)
	}
	chain := sharedlog.Chain{Version: 1, Segments: []sharedlog.Segment{{URL: "mem://x"}}}
	if err := ms.CAS(ctx, 0, chain); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{sharedlog.OpChainGet: 1, sharedlog.OpChainCAS: 1}
	if !maps.Equal(c.n, want) {
		t.Fatalf("counts = %v, want %v", c.n, want)
	}
}

// TestWaitTailAfterOwnAppend: a reader of a TailProber waiting past the
// handle's own append knows the tail as of the append: it sends nothing
// for a poll period, then asks the loglet only whether the tail moved
// (one probe, no CheckTail) before it sleeps again. An idle agent's
// lease renewal thereby doubles as its probe.
func TestWaitTailAfterOwnAppend(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &opCounts{n: map[string]int{}}
	ml := memlog.New()
	open := func(context.Context, string) (sharedlog.Loglet, error) {
		return sharedlog.Counted(proberOnly{plainLoglet{ml}}, c.count), nil
	}
	const idle = 12 * time.Second
	v, err := sharedlog.OpenVirtual(ctx, sharedlog.NewMemMetaStore(), open,
		sharedlog.VirtualOptions{InitialURL: "probed", Clock: clk, IdlePollInterval: idle})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	p, err := v.Append(ctx, []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	counts := func() map[string]int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return maps.Clone(c.n)
	}
	c.mu.Lock()
	clear(c.n)
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.WaitTail(ctx, p+1)
	}()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := counts(); len(got) != 0 {
		t.Fatalf("right after its own append the reader sent %v, want nothing", got)
	}
	clk.Advance(idle)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got := counts()
	cancel()
	<-done
	if want := map[string]int{sharedlog.OpTailMoved: 1}; !maps.Equal(got, want) {
		t.Fatalf("a poll period after the append the reader sent %v, want %v", got, want)
	}
}
