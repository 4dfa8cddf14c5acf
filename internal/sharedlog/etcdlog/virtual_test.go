package etcdlog_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

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

func nextURL(t *testing.T) func(c sharedlog.Chain) string {
	return func(c sharedlog.Chain) string {
		next, err := logurl.NextURL(c)
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
}

// TestVirtualPostgresToEtcd is the second migration of issue 6: a log on
// PostgreSQL moves to etcd while appends continue, then to a second etcd
// segment named by logurl.NextURL. The chain stays in PostgreSQL, where
// the log was created.
func TestVirtualPostgresToEtcd(t *testing.T) {
	ctx := testCtx(t)
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("log", fmt.Sprintf("etcd-migration-%s-%d", runID, paths.Add(1)))
	u.RawQuery = q.Encode()
	pgURL := u.String()
	v, err := logurl.OpenVirtual(ctx, pgURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := newPath()
	acked := migrate(t, v,
		func(sharedlog.Chain) string { return etcdURL(t, base+"/seg-00000002") },
		nextURL(t),
	)
	segs := v.Chain().Segments
	for i, want := range []string{"postgres", "etcd", "etcd"} {
		if su, _ := url.Parse(segs[i].URL); su.Scheme != want {
			t.Fatalf("segment %d is %s, want a %s segment", i, segs[i].URL, want)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := logurl.OpenVirtual(ctx, pgURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wantDense(t, ctx, w, acked)
}

// TestVirtualOverEtcd: a VirtualLog whose chain and segments all live in
// etcd, shared by two agents; the second waits for the first's appends
// through WaitTail (a watch) rather than polling.
func TestVirtualOverEtcd(t *testing.T) {
	ctx := testCtx(t)
	u := etcdURL(t, newPath())
	v, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	acked := migrate(t, v, nextURL(t))
	other, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wantDense(t, ctx, other, acked)
	tail := sharedlog.Pos(len(acked))
	woke := make(chan error, 1)
	go func() {
		got, err := other.WaitTail(ctx, tail)
		if err == nil && got <= tail {
			err = fmt.Errorf("WaitTail(%d) returned tail %d", tail, got)
		}
		woke <- err
	}()
	if _, err := v.Append(ctx, []byte("wake")); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
}
