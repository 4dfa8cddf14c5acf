package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/objstore/storetest"
)

func TestWrappersConformance(t *testing.T) {
	tests := []struct {
		name string
		wrap func(objstore.Store) objstore.Store
	}{
		{"Faults", func(s objstore.Store) objstore.Store { return objstore.WithFaults(s, objstore.NewFaults(1)) }},
		{"FaultFunc", func(s objstore.Store) objstore.Store {
			return objstore.WithFaults(s, objstore.FaultFunc(func(objstore.Op, string) objstore.FaultMode { return objstore.NoFault }))
		}},
		{"Latency", func(s objstore.Store) objstore.Store { return objstore.WithLatency(s, objstore.FixedLatency(0)) }},
		{"Counters", func(s objstore.Store) objstore.Store { return objstore.WithCounters(s) }},
		{"Timing", func(s objstore.Store) objstore.Store {
			return objstore.WithTiming(s, func(objstore.Op, time.Duration, int64, error) {})
		}},
		{"Stacked", func(s objstore.Store) objstore.Store {
			return objstore.WithCounters(objstore.WithLatency(objstore.WithFaults(s, objstore.NewFaults(2)), objstore.FixedLatency(0)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) objstore.Store { return tc.wrap(memobj.New()) })
		})
	}
}

// opCall runs one operation of kind op on s against key.
func opCall(ctx context.Context, s objstore.Store, op objstore.Op, key string, data []byte) error {
	switch op {
	case objstore.OpPut:
		return s.Put(ctx, key, data)
	case objstore.OpPutIfAbsent:
		return s.PutIfAbsent(ctx, key, data)
	case objstore.OpGet:
		_, err := s.Get(ctx, key, 0, -1)
		return err
	case objstore.OpDelete:
		return s.Delete(ctx, key)
	case objstore.OpList:
		_, err := s.List(ctx, key)
		return err
	}
	panic(fmt.Sprintf("unknown op %v", op))
}

func mustGet(t *testing.T, s objstore.Store, key string) ([]byte, error) {
	t.Helper()
	return s.Get(context.Background(), key, 0, -1)
}

// TestFaultModes checks, per operation, that FaultBefore leaves the store
// untouched and FaultAfter performs the operation while reporting
// ErrInjected.
func TestFaultModes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		op   objstore.Op
		mode objstore.FaultMode
		// check inspects the inner store after the faulted call on key "k",
		// which held "old" before it.
		check func(t *testing.T, inner objstore.Store)
	}{
		{objstore.OpPut, objstore.FaultBefore, wantContent("k", "old")},
		{objstore.OpPut, objstore.FaultAfter, wantContent("k", "new")},
		{objstore.OpPutIfAbsent, objstore.FaultBefore, wantContent("fresh", "")},
		{objstore.OpPutIfAbsent, objstore.FaultAfter, wantContent("fresh", "new")},
		{objstore.OpDelete, objstore.FaultBefore, wantContent("k", "old")},
		{objstore.OpDelete, objstore.FaultAfter, wantContent("k", "")},
		{objstore.OpGet, objstore.FaultBefore, wantContent("k", "old")},
		{objstore.OpGet, objstore.FaultAfter, wantContent("k", "old")},
		{objstore.OpList, objstore.FaultBefore, wantContent("k", "old")},
		{objstore.OpList, objstore.FaultAfter, wantContent("k", "old")},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/%v", tc.op, tc.mode), func(t *testing.T) {
			inner := memobj.New()
			if err := inner.Put(ctx, "k", []byte("old")); err != nil {
				t.Fatal(err)
			}
			faults := objstore.NewFaults(1).FailNext(1, tc.mode, tc.op)
			s := objstore.WithFaults(inner, faults)
			key := "k"
			if tc.op == objstore.OpPutIfAbsent {
				key = "fresh"
			}
			if err := opCall(ctx, s, tc.op, key, []byte("new")); !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("faulted %v: %v, want ErrInjected", tc.op, err)
			}
			if got := faults.Injected(); got != 1 {
				t.Fatalf("Injected() = %d, want 1", got)
			}
			tc.check(t, inner)
			// The rule was for one op only: the same call now goes through.
			if err := opCall(ctx, s, tc.op, "other", []byte("x")); err != nil && !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("unfaulted %v: %v", tc.op, err)
			}
		})
	}
}

// wantContent checks key's content in the inner store; "" means absent.
func wantContent(key, want string) func(t *testing.T, inner objstore.Store) {
	return func(t *testing.T, inner objstore.Store) {
		t.Helper()
		got, err := mustGet(t, inner, key)
		if want == "" {
			if !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
			}
			return
		}
		if err != nil || string(got) != want {
			t.Fatalf("Get(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
}

// TestFaultAfterWriteIsDurable is the "reply lost" case the produce path
// must survive: the write is there, the caller was told it failed, and
// its retry behaves as the contract says.
func TestFaultAfterWriteIsDurable(t *testing.T) {
	ctx := context.Background()
	inner := memobj.New()
	faults := objstore.NewFaults(1).FailNext(1, objstore.FaultAfter, objstore.OpPutIfAbsent, objstore.OpPut)
	s := objstore.WithFaults(inner, faults)

	if err := s.PutIfAbsent(ctx, "obj/1", []byte("payload")); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("PutIfAbsent: %v, want ErrInjected", err)
	}
	got, err := s.Get(ctx, "obj/1", 0, -1)
	if err != nil || string(got) != "payload" {
		t.Fatalf("Get after lost reply = %q, %v; want the written bytes", got, err)
	}
	if err := s.PutIfAbsent(ctx, "obj/1", []byte("payload")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retried PutIfAbsent: %v, want ErrExists", err)
	}
	if err := s.Put(ctx, "obj/2", []byte("second")); err != nil {
		t.Fatalf("Put after the rule was used up: %v", err)
	}
	// FaultAfter on an operation that fails by itself reports the real
	// error: the store did not change, and saying ErrInjected would hide
	// that.
	faults.FailNext(1, objstore.FaultAfter, objstore.OpPutIfAbsent)
	if err := s.PutIfAbsent(ctx, "obj/1", []byte("other")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("FaultAfter over a losing PutIfAbsent: %v, want ErrExists", err)
	}
}

func TestFaultsFailNextCounts(t *testing.T) {
	ctx := context.Background()
	faults := objstore.NewFaults(1).FailNext(2, objstore.FaultBefore, objstore.OpPut)
	s := objstore.WithFaults(memobj.New(), faults)
	// Gets do not use up the Put rule.
	for range 3 {
		if _, err := s.Get(ctx, "k", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("Get: %v, want ErrNotFound", err)
		}
	}
	var results []bool
	for range 4 {
		results = append(results, errors.Is(s.Put(ctx, "k", []byte("v")), objstore.ErrInjected))
	}
	if want := []bool{true, true, false, false}; !slices.Equal(results, want) {
		t.Fatalf("Put failed = %v, want %v", results, want)
	}
	if got := faults.Injected(); got != 2 {
		t.Fatalf("Injected() = %d, want 2", got)
	}

	// No ops listed: any kind counts.
	faults.FailNext(2, objstore.FaultBefore)
	if err := s.Delete(ctx, "k"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Delete: %v, want ErrInjected", err)
	}
	if _, err := s.List(ctx, ""); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("List: %v, want ErrInjected", err)
	}
	if _, err := s.List(ctx, ""); err != nil {
		t.Fatalf("List after rule used up: %v", err)
	}
}

func TestFaultsRandomIsSeeded(t *testing.T) {
	const n = 2000
	draw := func(seed uint64) []objstore.FaultMode {
		f := objstore.NewFaults(seed).FailRandomly(0.3, objstore.FaultAfter, objstore.OpGet)
		out := make([]objstore.FaultMode, n)
		for i := range out {
			out[i] = f.Fault(objstore.OpGet, "k")
		}
		if m := f.Fault(objstore.OpPut, "k"); m != objstore.NoFault {
			t.Fatalf("Put matched a Get-only rule: %v", m)
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed gave different fault sequences")
	}
	if slices.Equal(a, c) {
		t.Fatalf("different seeds gave the same fault sequence")
	}
	failed := 0
	for _, m := range a {
		switch m {
		case objstore.FaultAfter:
			failed++
		case objstore.NoFault:
		default:
			t.Fatalf("unexpected mode %v", m)
		}
	}
	// 0.3 of 2000 is 600; the bounds are over 6 standard deviations wide.
	if failed < 480 || failed > 720 {
		t.Fatalf("%d of %d failed, want about %d", failed, n, int(0.3*n))
	}
}

func TestFaultFuncByKey(t *testing.T) {
	ctx := context.Background()
	inner := memobj.New()
	s := objstore.WithFaults(inner, objstore.FaultFunc(func(op objstore.Op, key string) objstore.FaultMode {
		if op == objstore.OpPut && strings.HasPrefix(key, "data/") {
			return objstore.FaultBefore
		}
		return objstore.NoFault
	}))
	if err := s.Put(ctx, "data/1", []byte("x")); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Put data/1: %v, want ErrInjected", err)
	}
	if err := s.Put(ctx, "meta/1", []byte("x")); err != nil {
		t.Fatalf("Put meta/1: %v", err)
	}
	infos, err := inner.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []objstore.ObjectInfo{{Key: "meta/1", Size: 1}}; !slices.Equal(infos, want) {
		t.Fatalf("inner store holds %v, want %v", infos, want)
	}
}

// TestLatencyDelays uses a fake clock (synctest), so the delay is checked
// exactly without the test taking any real time.
func TestLatencyDelays(t *testing.T) {
	const d = 50 * time.Millisecond
	for _, op := range objstore.Ops {
		t.Run(op.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := objstore.WithLatency(memobj.New(), objstore.FixedLatency(d))
				start := time.Now()
				err := opCall(context.Background(), s, op, "k", []byte("v"))
				if err != nil && !errors.Is(err, objstore.ErrNotFound) {
					t.Fatalf("%v: %v", op, err)
				}
				if got := time.Since(start); got != d {
					t.Fatalf("%v took %v of fake time, want %v", op, got, d)
				}
			})
		})
	}
}

// slowStore takes d of (fake) time for every Put.
type slowStore struct {
	objstore.Store
	d time.Duration
}

func (s slowStore) Put(ctx context.Context, key string, data []byte) error {
	time.Sleep(s.d)
	return s.Store.Put(ctx, key, data)
}

// TestLatencyCountsBackingTime: the delay is the request's whole time,
// the backing store's own time included, not added to it.
func TestLatencyCountsBackingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct{ backing, delay, want time.Duration }{
			{30 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
			{80 * time.Millisecond, 50 * time.Millisecond, 80 * time.Millisecond},
		} {
			s := objstore.WithLatency(slowStore{memobj.New(), tc.backing}, objstore.FixedLatency(tc.delay))
			start := time.Now()
			if err := s.Put(context.Background(), "k", []byte("v")); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != tc.want {
				t.Fatalf("backing %v, delay %v: Put took %v, want %v", tc.backing, tc.delay, got, tc.want)
			}
		}
	})
}

func TestLatencyHonoursContext(t *testing.T) {
	for _, op := range objstore.Ops {
		t.Run(op.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner := memobj.New()
				s := objstore.WithLatency(inner, objstore.FixedLatency(time.Hour))
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() { errc <- opCall(ctx, s, op, "k", []byte("v")) }()
				synctest.Wait() // the call is now blocked in its delay
				start := time.Now()
				cancel()
				if err := <-errc; !errors.Is(err, context.Canceled) {
					t.Fatalf("%v: %v, want context.Canceled", op, err)
				}
				if waited := time.Since(start); waited != 0 {
					t.Fatalf("%v returned %v of fake time after cancel, want at once", op, waited)
				}
				// The operation ran before its delay, as a real store's
				// request may land after its caller gave up: a canceled
				// Put still wrote.
				if op == objstore.OpPut || op == objstore.OpPutIfAbsent {
					if _, err := inner.Get(context.Background(), "k", 0, -1); err != nil {
						t.Fatalf("%v canceled during its delay did not write: Get = %v", op, err)
					}
				}
			})
		})
		t.Run(op.String()+"/before", func(t *testing.T) {
			inner := memobj.New()
			s := objstore.WithLatency(inner, objstore.FixedLatency(time.Hour))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := opCall(ctx, s, op, "k", []byte("v")); !errors.Is(err, context.Canceled) {
				t.Fatalf("%v: %v, want context.Canceled", op, err)
			}
			if _, err := inner.Get(context.Background(), "k", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("%v canceled before it began changed the store: Get = %v", op, err)
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := objstore.WithLatency(memobj.New(), objstore.FixedLatency(time.Hour))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			if err := s.Put(ctx, "k", nil); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Put: %v, want DeadlineExceeded", err)
			}
			if got := time.Since(start); got != time.Second {
				t.Fatalf("Put returned after %v, want at the 1s deadline", got)
			}
		})
	})
}

// TestLatencyProfiles samples each profile and checks the empirical
// quantiles against its table and against the claims its doc makes.
func TestLatencyProfiles(t *testing.T) {
	const n = 40000
	tests := []struct {
		profile objstore.LatencyProfile
		// p50 and p99 bounds for every op kind, from the doc comments.
		minP50, maxP99 time.Duration
	}{
		{objstore.S3Standard, 10 * time.Millisecond, time.Second},
		{objstore.S3Express, 0, 20 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.profile.Name, func(t *testing.T) {
			l, err := objstore.NewLatency(tc.profile, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				op    objstore.Op
				table []objstore.Quantile
			}{
				{objstore.OpGet, tc.profile.Read},
				{objstore.OpPut, tc.profile.Write},
				{objstore.OpPutIfAbsent, tc.profile.Write},
				{objstore.OpDelete, tc.profile.Meta},
				{objstore.OpList, tc.profile.Meta},
			} {
				samples := make([]time.Duration, n)
				for i := range samples {
					samples[i] = l.Sample(c.op, 0)
				}
				slices.Sort(samples)
				lo, hi := c.table[0].D, c.table[len(c.table)-1].D
				if samples[0] < lo || samples[n-1] > hi {
					t.Fatalf("%v: samples span [%v, %v], table spans [%v, %v]", c.op, samples[0], samples[n-1], lo, hi)
				}
				for _, q := range c.table {
					if q.Q == 0 || q.Q == 1 || (1-q.Q)*n < 200 {
						continue // too few samples beyond this point to judge
					}
					got := samples[int(q.Q*n)]
					if diff := got - q.D; diff < -q.D/10 || diff > q.D/10 {
						t.Errorf("%v p%v = %v, table says %v", c.op, q.Q*100, got, q.D)
					}
				}
				if p50 := samples[n/2]; p50 < tc.minP50 {
					t.Errorf("%v p50 = %v, doc promises at least %v", c.op, p50, tc.minP50)
				}
				if p99 := samples[n*99/100]; p99 > tc.maxP99 {
					t.Errorf("%v p99 = %v, doc promises at most %v", c.op, p99, tc.maxP99)
				}
			}
			// Payload adds transfer time at BytesPerSecond.
			const size = 8 << 20
			minTransfer := time.Duration(float64(size) / tc.profile.BytesPerSecond * float64(time.Second))
			if got := l.Sample(objstore.OpPut, size); got < minTransfer+tc.profile.Write[0].D {
				t.Errorf("Put of %d bytes sampled %v, want at least %v", size, got, minTransfer+tc.profile.Write[0].D)
			}
		})
	}
}

func TestLatencySeeded(t *testing.T) {
	draw := func(seed uint64) []time.Duration {
		l, err := objstore.NewLatency(objstore.S3Standard, seed)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]time.Duration, 100)
		for i := range out {
			out[i] = l.Sample(objstore.Ops[i%len(objstore.Ops)], int64(i))
		}
		return out
	}
	if !slices.Equal(draw(3), draw(3)) {
		t.Fatalf("same seed gave different delays")
	}
	if slices.Equal(draw(3), draw(4)) {
		t.Fatalf("different seeds gave the same delays")
	}
}

func TestLatencyProfileValidate(t *testing.T) {
	ms := time.Millisecond
	good := []objstore.Quantile{{Q: 0, D: ms}, {Q: 1, D: 2 * ms}}
	tests := []struct {
		name  string
		table []objstore.Quantile
		ok    bool
	}{
		{"good", good, true},
		{"one point", []objstore.Quantile{{Q: 0, D: ms}}, false},
		{"no Q=0", []objstore.Quantile{{Q: 0.1, D: ms}, {Q: 1, D: ms}}, false},
		{"no Q=1", []objstore.Quantile{{Q: 0, D: ms}, {Q: 0.9, D: ms}}, false},
		{"falling D", []objstore.Quantile{{Q: 0, D: 2 * ms}, {Q: 0.5, D: ms}, {Q: 1, D: 3 * ms}}, false},
		{"repeated Q", []objstore.Quantile{{Q: 0, D: ms}, {Q: 0.5, D: ms}, {Q: 0.5, D: 2 * ms}, {Q: 1, D: 3 * ms}}, false},
		{"negative D", []objstore.Quantile{{Q: 0, D: -ms}, {Q: 1, D: ms}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := objstore.LatencyProfile{Name: tc.name, Read: good, Write: good, Meta: tc.table}
			_, err := objstore.NewLatency(p, 1)
			if tc.ok != (err == nil) {
				t.Fatalf("NewLatency error = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, objstore.ErrBadLatencyProfile) {
				t.Fatalf("error %v does not wrap ErrBadLatencyProfile", err)
			}
		})
	}
	for _, p := range []objstore.LatencyProfile{objstore.S3Standard, objstore.S3Express} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}

func TestCountingCounts(t *testing.T) {
	ctx := context.Background()
	c := objstore.WithCounters(memobj.New())
	steps := []func() error{
		func() error { return c.Put(ctx, "a", make([]byte, 100)) },
		func() error { return c.Put(ctx, "b", make([]byte, 50)) },
		func() error { return c.PutIfAbsent(ctx, "a", make([]byte, 7)) }, // ErrExists, bytes still sent
		func() error { _, err := c.Get(ctx, "a", 10, 20); return err },
		func() error { _, err := c.Get(ctx, "missing", 0, -1); return err },
		func() error { return c.Delete(ctx, "b") },
		func() error { _, err := c.List(ctx, ""); return err },
	}
	for _, step := range steps {
		_ = step() // errors are part of what is counted
	}
	got := c.Snapshot()
	want := map[objstore.Op]objstore.OpCounts{
		objstore.OpPut:         {Requests: 2, Bytes: 150},
		objstore.OpPutIfAbsent: {Requests: 1, Errors: 1, Bytes: 7},
		objstore.OpGet:         {Requests: 2, Errors: 1, Bytes: 20},
		objstore.OpDelete:      {Requests: 1},
		objstore.OpList:        {Requests: 1},
	}
	for op, w := range want {
		if g := got.Op(op); g != w {
			t.Errorf("%v counts = %+v, want %+v", op, g, w)
		}
	}
	if got.Requests() != 7 || got.BytesIn() != 157 || got.BytesOut() != 20 {
		t.Errorf("totals: requests %d in %d out %d, want 7 157 20", got.Requests(), got.BytesIn(), got.BytesOut())
	}

	if _, err := c.Get(ctx, "a", 0, -1); err != nil {
		t.Fatal(err)
	}
	delta := c.Snapshot().Sub(got)
	if d := delta.Op(objstore.OpGet); d != (objstore.OpCounts{Requests: 1, Bytes: 100}) {
		t.Errorf("delta Get = %+v, want 1 request of 100 bytes", d)
	}
	if delta.Requests() != 1 {
		t.Errorf("delta requests = %d, want 1", delta.Requests())
	}
}

func TestCountingConcurrent(t *testing.T) {
	const (
		goroutines = 8
		perG       = 200
	)
	ctx := context.Background()
	c := objstore.WithCounters(memobj.New())
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				key := fmt.Sprintf("g%d/%d", g, i)
				if err := c.Put(ctx, key, make([]byte, 10)); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				if _, err := c.Get(ctx, key, 0, 3); err != nil {
					t.Errorf("Get: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := c.Snapshot()
	if p := got.Op(objstore.OpPut); p != (objstore.OpCounts{Requests: goroutines * perG, Bytes: goroutines * perG * 10}) {
		t.Errorf("Put counts = %+v", p)
	}
	if g := got.Op(objstore.OpGet); g != (objstore.OpCounts{Requests: goroutines * perG, Bytes: goroutines * perG * 3}) {
		t.Errorf("Get counts = %+v", g)
	}
}

// TestTimingReports checks that WithTiming reports every call once, with
// its operation, the time the store below took (a latency wrapper's, on
// synctest's fake clock, so exactly) and its error.
func TestTimingReports(t *testing.T) {
	const d = 30 * time.Millisecond
	type report struct {
		op  objstore.Op
		d   time.Duration
		err error
	}
	for _, op := range objstore.Ops {
		t.Run(op.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got []report
				s := objstore.WithTiming(objstore.WithLatency(memobj.New(), objstore.FixedLatency(d)),
					func(op objstore.Op, d time.Duration, _ int64, err error) { got = append(got, report{op, d, err}) })
				err := opCall(context.Background(), s, op, "k", []byte("v"))
				if len(got) != 1 {
					t.Fatalf("%d reports, want 1: %+v", len(got), got)
				}
				if got[0].op != op || got[0].d != d || got[0].err != err {
					t.Errorf("report %+v, want {%v %v %v}", got[0], op, d, err)
				}
			})
		})
	}
}

// TestTimingBytes checks that WithTiming reports the bytes each call
// moved as Counting counts them (the agent's strand_objstore_bytes_total
// comes from it): puts whether or not they succeed, what Get returned.
func TestTimingBytes(t *testing.T) {
	ctx := context.Background()
	c := objstore.WithCounters(memobj.New())
	var reported [len(objstore.Ops)]int64
	s := objstore.WithTiming(c, func(op objstore.Op, _ time.Duration, bytes int64, _ error) { reported[op] += bytes })
	_ = s.Put(ctx, "a", make([]byte, 100))
	_ = s.PutIfAbsent(ctx, "a", make([]byte, 7)) // ErrExists, bytes still sent
	_, _ = s.Get(ctx, "a", 10, 20)
	_, _ = s.Get(ctx, "missing", 0, -1)
	_ = s.Delete(ctx, "a")
	_, _ = s.List(ctx, "")
	counted := c.Snapshot()
	for _, op := range objstore.Ops {
		if got, want := reported[op], counted.Op(op).Bytes; got != want {
			t.Errorf("%v: reported %d bytes, Counting counted %d", op, got, want)
		}
	}
	if reported[objstore.OpPut]+reported[objstore.OpPutIfAbsent] != 107 || reported[objstore.OpGet] != 20 {
		t.Errorf("reported %v, want 107 bytes put and 20 got", reported)
	}
}
