package pglog_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// migrate appends from several goroutines while the log is reconfigured
// onto each of targets in turn, then checks what a log must keep through
// a migration: every acknowledged append readable exactly at the
// position it got, positions dense from 0, nothing else in the log.
func migrate(t *testing.T, v *sharedlog.VirtualLog, targets ...func(c sharedlog.Chain) string) map[sharedlog.Pos]string {
	t.Helper()
	ctx := testCtx(t)
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
		to := target(v.Chain())
		if err := v.Reconfigure(ctx, to); err != nil {
			t.Fatalf("Reconfigure to %s: %v", to, err)
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	wantDense(t, ctx, v, acked)
	if got := len(v.Chain().Segments); got != len(targets)+1 {
		t.Fatalf("chain has %d segments, want %d: %+v", got, len(targets)+1, v.Chain())
	}
	return acked
}

// wantDense checks that v holds exactly acked, densely from 0.
func wantDense(t *testing.T, ctx context.Context, v sharedlog.Log, acked map[sharedlog.Pos]string) {
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

// TestVirtualFileToPostgres is the first migration of issue 6: a log that
// starts in a local file moves to PostgreSQL while appends continue, and
// then to a second PostgreSQL segment, named by logurl.NextURL.
func TestVirtualFileToPostgres(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	fileURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	v, err := logurl.OpenVirtual(ctx, fileURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := newID(t)
	acked := migrate(t, v,
		func(sharedlog.Chain) string { return logURL(t, "log", name+"/seg-00000001") },
		func(c sharedlog.Chain) string {
			next, err := logurl.NextURL(c)
			if err != nil {
				t.Fatal(err)
			}
			return next
		},
	)
	segs := v.Chain().Segments
	for i, want := range []string{"file", "postgres", "postgres"} {
		if u, _ := url.Parse(segs[i].URL); u.Scheme != want {
			t.Fatalf("segment %d is %s, want a %s segment", i, segs[i].URL, want)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	// Another agent opening the log follows the chain onto PostgreSQL.
	w, err := logurl.OpenVirtual(ctx, fileURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wantDense(t, ctx, w, acked)
	pos, err := w.Append(ctx, []byte("after reopen"))
	if err != nil || pos != sharedlog.Pos(len(acked)) {
		t.Fatalf("Append after reopening = (%d, %v), want (%d, nil)", pos, err, len(acked))
	}
}

// TestVirtualOverPostgres: a VirtualLog whose chain and segments all live
// in PostgreSQL, shared by two agents, reconfigured and trimmed.
func TestVirtualOverPostgres(t *testing.T) {
	ctx := testCtx(t)
	u := logURL(t, "log", newID(t))
	v, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	acked := migrate(t, v, func(c sharedlog.Chain) string {
		next, err := logurl.NextURL(c)
		if err != nil {
			t.Fatal(err)
		}
		return next
	})
	other, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wantDense(t, ctx, other, acked)
	if err := other.PrefixTrim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// v learns of the trim from the first segment's loglet.
	if es, err := v.ReadNext(ctx, 9, 20); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("ReadNext(9) after the other agent trimmed to 10 = (%d entries, %v), want ErrTrimmed", len(es), err)
	}
}
