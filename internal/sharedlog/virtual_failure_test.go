package sharedlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/faultlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// The failures a reconfiguration can meet part way: a target that cannot
// be reached, a chain that cannot be stored, a MetaStore that fails
// between the seal and the CAS. Before the seal the log must be left
// exactly as it was; after it, the reconfiguration must be finished by
// whoever comes next, and never with a panic.

// casFaultStore fails the next n CASes: before the write (nothing
// stored) or, with lost, after it (stored, the reply lost), the two
// outcomes MetaStore.CAS's ambiguous errors allow.
type casFaultStore struct {
	sharedlog.MetaStore
	mu struct {
		sync.Mutex
		fail   int
		lost   bool
		failed int
	}
}

var errCASFault = errors.New("test: CAS fault")

func (s *casFaultStore) failNext(n int, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.fail, s.mu.lost = n, lost
}

// failed returns how many CASes failed.
func (s *casFaultStore) failed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}

func (s *casFaultStore) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	s.mu.Lock()
	fail, lost := s.mu.fail > 0, s.mu.lost
	if fail {
		s.mu.fail--
		s.mu.failed++
	}
	s.mu.Unlock()
	if !fail {
		return s.MetaStore.CAS(ctx, expect, next)
	}
	if lost {
		if err := s.MetaStore.CAS(ctx, expect, next); err != nil {
			return err
		}
	}
	return fmt.Errorf("CAS expecting version %d: %w", expect, errCASFault)
}

// storedChain returns what ms holds.
func storedChain(t *testing.T, ctx context.Context, ms sharedlog.MetaStore) sharedlog.Chain {
	t.Helper()
	c, err := ms.Get(ctx)
	if err != nil {
		t.Fatalf("MetaStore.Get: %v", err)
	}
	return c
}

func wantChain(t *testing.T, got, want sharedlog.Chain) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("chain %+v, want %+v", got, want)
	}
}

// wantSealed checks whether the loglet behind url is sealed.
func wantSealed(t *testing.T, ctx context.Context, reg *memLoglets, url string, want bool) {
	t.Helper()
	if _, sealed, err := reg.get(url).CheckTail(ctx); err != nil || sealed != want {
		t.Fatalf("loglet %s: sealed %v (%v), want %v", url, sealed, err, want)
	}
}

// TestVirtualReconfigureRefusedTarget: a reconfiguration whose target
// cannot be opened, or would make a chain that cannot be stored, is
// refused before the seal. The stored chain is unchanged, the active
// loglet unsealed, and appends continue; a later attempt to a good
// target works.
func TestVirtualReconfigureRefusedTarget(t *testing.T) {
	tests := []struct {
		name string
		// target returns the URL to reconfigure to, making it bad.
		target  func(reg *memLoglets) string
		wantErr error
	}{
		{
			name: "unreachable",
			target: func(reg *memLoglets) string {
				reg.setUnreachable("mem://refuse/down", true)
				return "mem://refuse/down"
			},
			wantErr: errUnreachable,
		},
		{
			name:    "URL too long for a chain",
			target:  func(*memLoglets) string { return "mem://refuse/" + strings.Repeat("x", 5000) },
			wantErr: sharedlog.ErrInvalidChain,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
			v := openVirtual(t, ms, reg, testOpts("mem://refuse/0"))
			mustAppend(t, ctx, v, "a")
			mustAppend(t, ctx, v, "b")
			before := storedChain(t, ctx, ms)

			err := v.Reconfigure(ctx, tt.target(reg))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Reconfigure = %v, want %v", err, tt.wantErr)
			}
			wantChain(t, storedChain(t, ctx, ms), before)
			wantChain(t, v.Chain(), before)
			wantSealed(t, ctx, reg, "mem://refuse/0", false)
			if p := mustAppend(t, ctx, v, "c"); p != 2 {
				t.Fatalf("append after the refused reconfiguration at %d, want 2", p)
			}
			mustReconfigure(t, ctx, v, "mem://refuse/1")
			mustAppend(t, ctx, v, "d")
			wantData(t, readAll(t, ctx, v, 0), "a", "b", "c", "d")
		})
	}
}

// TestVirtualStallWithUnreachableTarget: the active loglet was sealed by
// a client that never wrote the chain, and the segment the appender
// picks to finish the reconfiguration cannot be opened. The append fails
// (with ErrSealed: nothing was written) instead of panicking, the chain
// is unchanged, and once the target is back the next append finishes
// the reconfiguration.
func TestVirtualStallWithUnreachableTarget(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	opts := testOpts("mem://stalldown/seg-00000000")
	opts.StallTimeout = -1
	v := openVirtual(t, ms, reg, opts)
	mustAppend(t, ctx, v, "a")
	if err := reg.get("mem://stalldown/seg-00000000").Seal(ctx); err != nil {
		t.Fatal(err)
	}
	before := storedChain(t, ctx, ms)
	const next = "mem://stalldown/seg-00000002" // DefaultNextURL's pick
	reg.setUnreachable(next, true)

	_, err := v.Append(ctx, []byte("b"))
	if !errors.Is(err, sharedlog.ErrSealed) || !errors.Is(err, errUnreachable) {
		t.Fatalf("Append during a stall with the target down = %v, want ErrSealed and the open error", err)
	}
	wantChain(t, storedChain(t, ctx, ms), before)

	reg.setUnreachable(next, false)
	if p := mustAppend(t, ctx, v, "b"); p != 1 {
		t.Fatalf("append once the target is back at %d, want 1", p)
	}
	if act := v.Chain().Active(); act.URL != next || act.Start != 1 {
		t.Fatalf("active segment %+v, want %s from 1", act, next)
	}
	wantData(t, readAll(t, ctx, v, 0), "a", "b")
}

// TestVirtualCASFailsAfterSeal: the seal went through but the CAS of the
// extended chain failed. What the CAS's ambiguous error hides is settled
// by reading the store back; a chain that was not stored is rolled
// forward by a retry of the reconfiguration or by the next appender,
// here or in a restarted agent.
func TestVirtualCASFailsAfterSeal(t *testing.T) {
	const (
		from = "mem://casfail/seg-00000000"
		to   = "mem://casfail/target"
	)
	// setup returns a log holding "a", "b" whose next CASes fail.
	setup := func(t *testing.T, fail int, lost bool) (*casFaultStore, *memLoglets, *sharedlog.VirtualLog) {
		ms := &casFaultStore{MetaStore: sharedlog.NewMemMetaStore()}
		reg := newMemLoglets()
		v := openVirtual(t, ms, reg, testOpts(from))
		ctx := testCtx(t)
		mustAppend(t, ctx, v, "a")
		mustAppend(t, ctx, v, "b")
		ms.failNext(fail, lost)
		return ms, reg, v
	}
	wantMoved := func(t *testing.T, c sharedlog.Chain, url string) {
		t.Helper()
		want := []sharedlog.Segment{{Start: 0, End: 2, Sealed: true, URL: from}, {Start: 2, URL: url}}
		if fmt.Sprint(c.Segments) != fmt.Sprint(want) {
			t.Fatalf("chain %+v, want %+v", c.Segments, want)
		}
	}

	t.Run("stored, reply lost", func(t *testing.T) {
		ctx := testCtx(t)
		ms, _, v := setup(t, 1, true)
		mustReconfigure(t, ctx, v, to)
		wantMoved(t, storedChain(t, ctx, ms), to)
		wantMoved(t, v.Chain(), to)
		if p := mustAppend(t, ctx, v, "c"); p != 2 {
			t.Fatalf("append at %d, want 2", p)
		}
	})

	t.Run("one failure is retried", func(t *testing.T) {
		ctx := testCtx(t)
		ms, _, v := setup(t, 1, false)
		mustReconfigure(t, ctx, v, to)
		wantMoved(t, storedChain(t, ctx, ms), to)
		if p := mustAppend(t, ctx, v, "c"); p != 2 {
			t.Fatalf("append at %d, want 2", p)
		}
	})

	// failedReconfigure leaves the log sealed with the chain unextended:
	// the CAS keeps failing.
	failedReconfigure := func(t *testing.T) (*casFaultStore, *memLoglets, *sharedlog.VirtualLog) {
		t.Helper()
		ctx := testCtx(t)
		ms, reg, v := setup(t, 1000, false)
		before := storedChain(t, ctx, ms)
		err := v.Reconfigure(ctx, to)
		if !errors.Is(err, errCASFault) || !strings.Contains(err.Error(), "sealed") {
			t.Fatalf("Reconfigure with the store failing = %v, want the CAS error, saying the log is sealed", err)
		}
		if n := ms.failed(); n < 2 || n > 100 {
			t.Fatalf("%d CASes tried, want a few retries and a bound", n)
		}
		ms.failNext(0, false)
		wantChain(t, storedChain(t, ctx, ms), before)
		wantSealed(t, ctx, reg, from, true)
		return ms, reg, v
	}

	t.Run("retried reconfiguration rolls forward", func(t *testing.T) {
		ctx := testCtx(t)
		ms, _, v := failedReconfigure(t)
		mustReconfigure(t, ctx, v, to)
		wantMoved(t, storedChain(t, ctx, ms), to)
		if p := mustAppend(t, ctx, v, "c"); p != 2 {
			t.Fatalf("append at %d, want 2", p)
		}
	})

	t.Run("restarted agent rolls forward", func(t *testing.T) {
		ctx := testCtx(t)
		ms, reg, v := failedReconfigure(t)
		v.Close() // the agent that sealed is gone
		opts := testOpts("")
		opts.StallTimeout = -1
		w := openVirtual(t, ms, reg, opts)
		if p := mustAppend(t, ctx, w, "c"); p != 2 {
			t.Fatalf("append at %d, want 2", p)
		}
		wantMoved(t, storedChain(t, ctx, ms), "mem://casfail/seg-00000002")
		wantData(t, readAll(t, ctx, w, 0), "a", "b", "c")
	})
}

// TestVirtualSealFails: the seal of the active loglet fails, before or
// after it landed. The stored chain is as it was, the error says the log
// may be sealed, and a retried Reconfigure finishes the move with every
// entry in place. When the seal did not land, appends go on meanwhile.
func TestVirtualSealFails(t *testing.T) {
	for _, mode := range []faultlog.Mode{faultlog.FailBefore, faultlog.FailAfter} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t)
			ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
			reg.set("mem://sealfail/0", faultlog.Wrap(memlog.New(), faultlog.FailNext(faultlog.OpSeal, 1, mode)))
			v := openVirtual(t, ms, reg, testOpts("mem://sealfail/0"))
			want := []string{"a", "b"}
			for _, s := range want {
				mustAppend(t, ctx, v, s)
			}
			before := storedChain(t, ctx, ms)
			err := v.Reconfigure(ctx, "mem://sealfail/1")
			if !errors.Is(err, faultlog.ErrInjected) || !strings.Contains(err.Error(), "may be") {
				t.Fatalf("Reconfigure with the seal failing = %v, want the seal's error, saying the log may be sealed", err)
			}
			wantChain(t, storedChain(t, ctx, ms), before)
			if mode == faultlog.FailBefore {
				wantSealed(t, ctx, reg, "mem://sealfail/0", false)
				mustAppend(t, ctx, v, "c")
				want = append(want, "c")
			}
			mustReconfigure(t, ctx, v, "mem://sealfail/1")
			mustAppend(t, ctx, v, "d")
			wantData(t, readAll(t, ctx, v, 0), append(want, "d")...)
		})
	}
}

// TestVirtualTrimFailures: a trim that fails part way leaves the chain
// as it was and is finished by the next trim; a trim whose CAS stored
// the chain but lost its reply reports success.
func TestVirtualTrimFailures(t *testing.T) {
	// setup returns a log of three segments of 10 entries each, whose
	// middle loglet fails its next PrefixTrim if trimFails.
	setup := func(t *testing.T, name string, trimFails bool) (*casFaultStore, *sharedlog.VirtualLog) {
		ctx := testCtx(t)
		ms, reg := &casFaultStore{MetaStore: sharedlog.NewMemMetaStore()}, newMemLoglets()
		if trimFails {
			reg.set("mem://"+name+"/1", faultlog.Wrap(memlog.New(), faultlog.FailNext(faultlog.OpPrefixTrim, 1, faultlog.FailBefore)))
		}
		v := openVirtual(t, ms, reg, testOpts("mem://"+name+"/0"))
		for seg := range 3 {
			if seg > 0 {
				mustReconfigure(t, ctx, v, fmt.Sprintf("mem://%s/%d", name, seg))
			}
			for i := range 10 {
				mustAppend(t, ctx, v, fmt.Sprint(seg*10+i))
			}
		}
		return ms, v
	}
	wantTrimmed := func(t *testing.T, ctx context.Context, v *sharedlog.VirtualLog, c sharedlog.Chain, name string) {
		t.Helper()
		if c.TrimPoint != 15 || len(c.Segments) != 2 || c.Segments[0].URL != "mem://"+name+"/1" {
			t.Fatalf("chain after the trim %+v, want trim point 15 and the first segment dropped", c)
		}
		if _, err := v.ReadNext(ctx, 14, maxPos); !errors.Is(err, sharedlog.ErrTrimmed) {
			t.Fatalf("ReadNext(14) after the trim = %v, want ErrTrimmed", err)
		}
		es := readAll(t, ctx, v, 15)
		if len(es) != 15 || string(es[0].Data) != "15" {
			t.Fatalf("read %d entries from 15, want 15 from \"15\"", len(es))
		}
	}

	t.Run("a loglet fails its trim", func(t *testing.T) {
		ctx := testCtx(t)
		ms, v := setup(t, "trimfail", true)
		before := storedChain(t, ctx, ms)
		if err := v.PrefixTrim(ctx, 15); !errors.Is(err, faultlog.ErrInjected) {
			t.Fatalf("PrefixTrim with a loglet failing = %v, want its error", err)
		}
		wantChain(t, storedChain(t, ctx, ms), before)
		if es := readAll(t, ctx, v, 15); len(es) != 15 {
			t.Fatalf("read %d entries from 15 after the failed trim, want 15", len(es))
		}
		if err := v.PrefixTrim(ctx, 15); err != nil {
			t.Fatalf("PrefixTrim again: %v", err)
		}
		wantTrimmed(t, ctx, v, storedChain(t, ctx, ms), "trimfail")
	})

	t.Run("the CAS's reply is lost", func(t *testing.T) {
		ctx := testCtx(t)
		ms, v := setup(t, "trimlost", false)
		ms.failNext(1, true)
		if err := v.PrefixTrim(ctx, 15); err != nil {
			t.Fatalf("PrefixTrim whose CAS landed = %v, want success", err)
		}
		wantTrimmed(t, ctx, v, v.Chain(), "trimlost")
	})
}

// TestVirtualReconfigureTargetHangs: a target whose opener never answers
// (an etcd client retries an unreachable cluster until its context ends)
// is refused after TargetCheckTimeout, well before the caller's own
// deadline, and the log is left as it was.
func TestVirtualReconfigureTargetHangs(t *testing.T) {
	const (
		from   = "mem://hang/0"
		target = "mem://hang/unreachable"
	)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	open := func(ctx context.Context, url string) (sharedlog.Loglet, error) {
		if url == target {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return reg.open(ctx, url)
	}
	opts := testOpts(from)
	opts.TargetCheckTimeout = 50 * time.Millisecond
	v, err := sharedlog.OpenVirtual(testCtx(t), ms, open, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	ctx := testCtx(t)
	mustAppend(t, ctx, v, "a")
	before := storedChain(t, ctx, ms)

	err = v.Reconfigure(ctx, target)
	if ctx.Err() != nil {
		t.Fatalf("Reconfigure waited out the caller's deadline (%v); want the target check to give up first", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reconfigure = %v, want the target check's deadline", err)
	}
	wantChain(t, storedChain(t, ctx, ms), before)
	wantSealed(t, ctx, reg, from, false)
	if p := mustAppend(t, ctx, v, "b"); p != 1 {
		t.Fatalf("append after the refused reconfiguration at %d, want 1", p)
	}
}
