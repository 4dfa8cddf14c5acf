// Package backendtest owns the checks that the loglet backends (pglog,
// etcdlog, dynamolog, s3log, slotlog) run the same way beyond the
// conformance suite of loglettest: a migration of a live VirtualLog onto
// the backend, a server crash under load, concurrent appenders on
// several handles, and the append benchmark. Each backend's test file
// keeps what only it knows: how to start its server, open a loglet and
// inject its faults. It imports no backend, so slotlog's own tests may
// use it too.
package backendtest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// Migrate appends from several goroutines while v is reconfigured onto
// each of targets in turn (a target names the next segment given the
// chain, as logurl.NextURL does), then checks what a log must keep through a
// migration: every acknowledged append readable exactly at the position
// it got, positions dense from 0, nothing else in the log. It returns the
// acknowledged appends.
func Migrate(t *testing.T, ctx context.Context, v *sharedlog.VirtualLog, targets ...func(c sharedlog.Chain) (string, error)) map[sharedlog.Pos]string {
	t.Helper()
	const appenders, each = 4, 40
	var (
		mu    sync.Mutex
		acked = map[sharedlog.Pos]string{}
		count atomic.Int64
		wg    sync.WaitGroup
		// step is closed each time another quarter of the appends is in,
		// so every reconfiguration runs while appends go on.
		steps = make([]chan struct{}, len(targets))
	)
	for i := range steps {
		steps[i] = make(chan struct{})
	}
	for a := range appenders {
		wg.Go(func() {
			for i := range each {
				data := fmt.Sprintf("a%d-%d", a, i)
				pos, err := v.Append(ctx, []byte(data))
				if err != nil {
					t.Errorf("appender %d: Append %d: %v", a, i, err)
					return
				}
				mu.Lock()
				if prev, dup := acked[pos]; dup {
					t.Errorf("position %d acknowledged for %q and %q", pos, prev, data)
				}
				acked[pos] = data
				mu.Unlock()
				n := count.Add(1)
				for s := range steps {
					if n == int64((s+1)*appenders*each/(len(targets)+1)) {
						close(steps[s])
					}
				}
			}
		})
	}
	for s, target := range targets {
		select {
		case <-steps[s]:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		to, err := target(v.Chain())
		if err != nil {
			t.Fatalf("naming segment %d: %v", s+2, err)
		}
		if err := v.Reconfigure(ctx, to); err != nil {
			t.Fatalf("Reconfigure to %s: %v", to, err)
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	WantDense(t, ctx, v, acked)
	if got := len(v.Chain().Segments); got != len(targets)+1 {
		t.Fatalf("chain has %d segments, want %d: %+v", got, len(targets)+1, v.Chain())
	}
	return acked
}

// WantDense checks that v holds exactly acked, densely from 0.
func WantDense(t *testing.T, ctx context.Context, v sharedlog.Log, acked map[sharedlog.Pos]string) {
	t.Helper()
	tail, _, err := v.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tail != sharedlog.Pos(len(acked)) {
		t.Fatalf("tail %d after %d acknowledged appends", tail, len(acked))
	}
	for p := sharedlog.Pos(0); p < tail; {
		es, err := v.ReadNext(ctx, p, tail)
		if err != nil {
			t.Fatalf("ReadNext(%d): %v", p, err)
		}
		if len(es) == 0 {
			t.Fatalf("ReadNext(%d) below the tail %d returned nothing", p, tail)
		}
		for _, e := range es {
			if e.Pos != p || string(e.Data) != acked[p] {
				t.Fatalf("entry at %d (read as %d) = %q, acknowledged %q", p, e.Pos, e.Data, acked[p])
			}
			p++
		}
	}
}

// WantSchemes checks that the chain's segments are on the backends
// schemes names, in order.
func WantSchemes(t *testing.T, c sharedlog.Chain, schemes ...string) {
	t.Helper()
	for i, want := range schemes {
		if i >= len(c.Segments) {
			t.Fatalf("chain has %d segments, want a %s segment at %d", len(c.Segments), want, i)
		}
		if u, _ := url.Parse(c.Segments[i].URL); u.Scheme != want {
			t.Fatalf("segment %d is %s, want a %s segment", i, c.Segments[i].URL, want)
		}
	}
}

// WantLog checks the loglet holds exactly want, each entry once.
func WantLog(t *testing.T, ctx context.Context, l sharedlog.Loglet, want ...string) {
	t.Helper()
	tail, _, err := l.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tail != sharedlog.Pos(len(want)) {
		t.Fatalf("tail %d, want %d (entries %q)", tail, len(want), want)
	}
	es, err := l.ReadNext(ctx, 0, tail)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(want) {
		t.Fatalf("read %d entries, want %d", len(es), len(want))
	}
	for i, e := range es {
		if string(e.Data) != want[i] {
			t.Fatalf("entry %d = %q, want %q", i, e.Data, want[i])
		}
	}
}

// AppendAcrossCrash runs appenders on l, calls crash (kill -9 of the
// server and its restart) once 100 appends are acknowledged, and checks
// that every acknowledged append survived at its position, that the log
// is dense, and that no entry is in it twice. Appends in flight at the
// kill may fail; the writer must keep going once the server is back.
// stats, if not nil, describes the writer for the log.
func AppendAcrossCrash(t *testing.T, ctx context.Context, l sharedlog.Loglet, crash func() error, stats func() any) {
	t.Helper()
	const appenders, each, crashAfter = 8, 60, 100
	var (
		mu     sync.Mutex
		acked  = map[sharedlog.Pos]string{}
		failed atomic.Int64
		count  atomic.Int64
		crashc = make(chan struct{})
		once   sync.Once
		wg     sync.WaitGroup
	)
	for a := range appenders {
		wg.Go(func() {
			for i := range each {
				data := fmt.Sprintf("a%d-%d", a, i)
				pos, err := l.Append(ctx, []byte(data))
				if err != nil {
					failed.Add(1) // ambiguous: the server died under it
					continue
				}
				mu.Lock()
				if prev, dup := acked[pos]; dup {
					t.Errorf("position %d acknowledged for %q and %q", pos, prev, data)
				}
				acked[pos] = data
				mu.Unlock()
				if count.Add(1) == crashAfter {
					once.Do(func() { close(crashc) })
				}
			}
		})
	}
	<-crashc
	if err := crash(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var st any
	if stats != nil {
		st = stats()
	}
	t.Logf("%d appends acknowledged, %d failed across the crash; writer stats %+v", len(acked), failed.Load(), st)

	tail, _, err := l.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]sharedlog.Pos{}
	for p := sharedlog.Pos(0); p < tail; {
		es, err := l.ReadNext(ctx, p, tail)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d) below the tail %d: %d entries, %v", p, tail, len(es), err)
		}
		for _, e := range es {
			if prev, dup := seen[string(e.Data)]; dup {
				t.Fatalf("%q is at %d and %d", e.Data, prev, e.Pos)
			}
			seen[string(e.Data)] = e.Pos
			p++
		}
	}
	for pos, data := range acked {
		if got, ok := seen[data]; !ok || got != pos {
			t.Fatalf("acknowledged %q at %d; after the crash it is at %d (present %v)", data, pos, got, ok)
		}
	}
	if int(tail) < len(acked) || int(tail) > len(acked)+int(failed.Load()) {
		t.Fatalf("tail %d with %d acknowledged and %d failed appends", tail, len(acked), failed.Load())
	}
}

// AppendConcurrently appends per entries from each of appenders
// goroutines on every handle at once, as agents sharing a log do, and
// returns what each position was acknowledged for. A failed append or a
// position acknowledged twice fails t (t.Errorf: the caller checks
// t.Failed before relying on the result).
func AppendConcurrently(t *testing.T, ctx context.Context, handles []sharedlog.Loglet, appenders, per int) map[sharedlog.Pos][]byte {
	t.Helper()
	acked := map[sharedlog.Pos][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for h, l := range handles {
		for a := range appenders {
			wg.Go(func() {
				for i := range per {
					data := fmt.Appendf(nil, "h%d/a%d/%d", h, a, i)
					p, err := l.Append(ctx, data)
					if err != nil {
						t.Errorf("Append: %v", err)
						return
					}
					mu.Lock()
					if _, dup := acked[p]; dup {
						t.Errorf("position %d acknowledged twice", p)
					}
					acked[p] = data
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return acked
}

// CheckDense checks that l is exactly the acknowledged entries, dense
// from 0, each payload once, and that want positions were acknowledged.
// It does nothing if t has already failed.
func CheckDense(t *testing.T, ctx context.Context, l sharedlog.Loglet, acked map[sharedlog.Pos][]byte, want int) {
	t.Helper()
	if t.Failed() {
		return
	}
	if len(acked) != want {
		t.Fatalf("%d positions acknowledged, want %d", len(acked), want)
	}
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
			if q, dup := seen[string(e.Data)]; dup {
				t.Fatalf("payload %q at %d and %d", e.Data, q, e.Pos)
			}
			seen[string(e.Data)] = e.Pos
			if !bytes.Equal(acked[e.Pos], e.Data) {
				t.Fatalf("slot %d holds %q, acknowledged %q", e.Pos, e.Data, acked[e.Pos])
			}
			p++
		}
	}
}
