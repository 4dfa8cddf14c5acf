// Package metastoretest is the conformance suite for sharedlog.MetaStore
// backends: every backend's tests call Run.
package metastoretest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// NewRegister creates a fresh, empty register and returns a function that
// opens a handle on it. Every call of open must return a new, independent
// handle on the same register, as a second agent or a restarted process
// would have (a backend with no state outside the handle, like memory,
// returns the same one); the suite uses handles to check that CAS is
// atomic between them and that acknowledged writes survive reopening.
// Handles are released with t.Cleanup.
type NewRegister func(t *testing.T) (open func(t *testing.T) sharedlog.MetaStore)

const (
	// contenders is how many handles race in the concurrency test, and
	// raceVersions how many versions they race for.
	contenders   = 4
	raceVersions = 40
	// opTimeout guards every test against a backend that hangs.
	opTimeout = 30 * time.Second
)

// Run checks the MetaStore contract documented on sharedlog.MetaStore.
func Run(t *testing.T, newRegister NewRegister) {
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore)
	}{
		{"GetEmpty", testGetEmpty},
		{"CASFirst", testCASFirst},
		{"CASConflict", testCASConflict},
		{"CASInvalid", testCASInvalid},
		{"Sequence", testSequence},
		{"LargeChain", testLargeChain},
		{"ConcurrentCAS", testConcurrentCAS},
		{"Reopen", testReopen},
		{"CanceledContext", testCanceledContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			t.Cleanup(cancel)
			tt.fn(t, ctx, newRegister(t))
		})
	}
}

// chainAt returns a valid chain at version v with n segments, the last one
// active, tagged so chains from different writers differ.
func chainAt(v uint64, n int, tag string) sharedlog.Chain {
	c := sharedlog.Chain{Version: v}
	var start sharedlog.Pos
	for i := range n {
		s := sharedlog.Segment{Start: start, URL: fmt.Sprintf("mem://%s/seg-%d-%d", tag, v, i)}
		if i < n-1 {
			s.Sealed, s.End = true, start+sharedlog.Pos(10*i+1)
			start = s.End
		}
		c.Segments = append(c.Segments, s)
	}
	c.TrimPoint = c.Segments[0].Start + sharedlog.Pos(v%3)
	return c
}

func mustGet(t *testing.T, ctx context.Context, ms sharedlog.MetaStore) sharedlog.Chain {
	t.Helper()
	c, err := ms.Get(ctx)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return c
}

func mustEqual(t *testing.T, got, want sharedlog.Chain) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stored chain\n got %+v\nwant %+v", got, want)
	}
}

func testGetEmpty(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	c := mustGet(t, ctx, open(t))
	if c.Version != 0 || len(c.Segments) != 0 || c.TrimPoint != 0 {
		t.Fatalf("Get on a new register = %+v, want the empty chain", c)
	}
}

func testCASFirst(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	ms := open(t)
	want := chainAt(1, 1, "first")
	if err := ms.CAS(ctx, 0, want); err != nil {
		t.Fatalf("CAS(0): %v", err)
	}
	mustEqual(t, mustGet(t, ctx, ms), want)
}

func testCASConflict(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	ms := open(t)
	want := chainAt(1, 1, "a")
	if err := ms.CAS(ctx, 0, want); err != nil {
		t.Fatalf("CAS(0): %v", err)
	}
	for _, tc := range []struct {
		name   string
		expect uint64
		next   sharedlog.Chain
	}{
		{"stale", 0, chainAt(1, 1, "b")},
		{"future", 5, chainAt(6, 2, "b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ms.CAS(ctx, tc.expect, tc.next)
			if !errors.Is(err, sharedlog.ErrConflict) {
				t.Fatalf("CAS(%d) on version 1 = %v, want ErrConflict", tc.expect, err)
			}
			mustEqual(t, mustGet(t, ctx, ms), want)
		})
	}
}

func testCASInvalid(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	ms := open(t)
	want := chainAt(1, 1, "a")
	if err := ms.CAS(ctx, 0, want); err != nil {
		t.Fatalf("CAS(0): %v", err)
	}
	unsealedMiddle := chainAt(2, 3, "b")
	unsealedMiddle.Segments[0].Sealed = false
	gap := chainAt(2, 3, "b")
	gap.Segments[1].Start++
	for _, tc := range []struct {
		name string
		next sharedlog.Chain
	}{
		{"version skips", chainAt(3, 1, "b")},
		{"version repeats", chainAt(1, 1, "b")},
		{"empty", sharedlog.Chain{Version: 2}},
		{"unsealed middle", unsealedMiddle},
		{"gap", gap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ms.CAS(ctx, 1, tc.next); !errors.Is(err, sharedlog.ErrInvalidChain) {
				t.Fatalf("CAS = %v, want ErrInvalidChain", err)
			}
			mustEqual(t, mustGet(t, ctx, ms), want)
		})
	}
}

func testSequence(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	ms := open(t)
	for v := uint64(1); v <= 20; v++ {
		next := chainAt(v, int(v%5)+1, "seq")
		if err := ms.CAS(ctx, v-1, next); err != nil {
			t.Fatalf("CAS(%d): %v", v-1, err)
		}
		mustEqual(t, mustGet(t, ctx, ms), next)
	}
}

func testLargeChain(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	ms := open(t)
	want := chainAt(1, 500, "large/ünïcode \"quoted\"")
	want.Segments[0].Start = 1<<64 - 1<<40 // positions use all 64 bits
	for i := 1; i < len(want.Segments); i++ {
		want.Segments[i-1].End = want.Segments[i-1].Start + sharedlog.Pos(i)
		want.Segments[i].Start = want.Segments[i-1].End
	}
	want.TrimPoint = want.Segments[0].Start
	if err := ms.CAS(ctx, 0, want); err != nil {
		t.Fatalf("CAS: %v", err)
	}
	mustEqual(t, mustGet(t, ctx, ms), want)
}

// testConcurrentCAS races handles for every version: each version must
// have exactly one winner, and the stored chain must be the last
// winner's.
func testConcurrentCAS(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	var (
		mu      sync.Mutex
		winners = map[uint64]int{}
		chains  = map[uint64]sharedlog.Chain{}
	)
	handles := make([]sharedlog.MetaStore, contenders)
	for i := range handles {
		handles[i] = open(t)
	}
	var wg sync.WaitGroup
	errc := make(chan error, contenders)
	for i, ms := range handles {
		wg.Go(func() {
			for {
				cur, err := ms.Get(ctx)
				if err != nil {
					errc <- fmt.Errorf("contender %d: Get: %w", i, err)
					return
				}
				if cur.Version >= raceVersions {
					return
				}
				next := chainAt(cur.Version+1, int(cur.Version%4)+1, fmt.Sprintf("c%d", i))
				err = ms.CAS(ctx, cur.Version, next)
				if errors.Is(err, sharedlog.ErrConflict) {
					continue
				}
				if err != nil {
					errc <- fmt.Errorf("contender %d: CAS(%d): %w", i, cur.Version, err)
					return
				}
				mu.Lock()
				if w, ok := winners[next.Version]; ok {
					mu.Unlock()
					errc <- fmt.Errorf("version %d won by contenders %d and %d", next.Version, w, i)
					return
				}
				winners[next.Version] = i
				chains[next.Version] = next
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for v := uint64(1); v <= raceVersions; v++ {
		if _, ok := winners[v]; !ok {
			t.Errorf("version %d has no winner", v)
		}
	}
	if len(winners) != raceVersions {
		t.Errorf("%d versions won, want %d", len(winners), raceVersions)
	}
	for _, ms := range handles {
		mustEqual(t, mustGet(t, ctx, ms), chains[raceVersions])
	}
}

func testReopen(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	first := open(t)
	var want sharedlog.Chain
	for v := uint64(1); v <= 3; v++ {
		want = chainAt(v, int(v), "reopen")
		if err := first.CAS(ctx, v-1, want); err != nil {
			t.Fatalf("CAS(%d): %v", v-1, err)
		}
	}
	second := open(t)
	mustEqual(t, mustGet(t, ctx, second), want)
	// A write through the new handle is seen by, and fences, the old one.
	next := chainAt(4, 2, "reopen-2")
	if err := second.CAS(ctx, 3, next); err != nil {
		t.Fatalf("CAS(3) on the second handle: %v", err)
	}
	mustEqual(t, mustGet(t, ctx, first), next)
	if err := first.CAS(ctx, 3, chainAt(4, 1, "stale")); !errors.Is(err, sharedlog.ErrConflict) {
		t.Fatalf("stale CAS(3) on the first handle = %v, want ErrConflict", err)
	}
	mustEqual(t, mustGet(t, ctx, open(t)), next)
}

func testCanceledContext(t *testing.T, ctx context.Context, open func(t *testing.T) sharedlog.MetaStore) {
	ms := open(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := ms.CAS(cctx, 0, chainAt(1, 1, "canceled")); err == nil {
		t.Fatal("CAS with a canceled context succeeded")
	}
	// The outcome of a failed CAS is ambiguous, but the store must still
	// answer with one of the two chains.
	c := mustGet(t, ctx, ms)
	if c.Version > 1 {
		t.Fatalf("stored version %d after one CAS", c.Version)
	}
}
