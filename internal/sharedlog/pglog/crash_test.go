package pglog_test

import (
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/pglog"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestServerCrash kills the server (kill -9 of postgres and its backends)
// while appenders run, restarts it, and checks that every acknowledged
// append survived at its position, that the log is dense, and that no
// entry is in it twice. Appends in flight at the kill may fail; the
// writer keeps going once the server is back.
func TestServerCrash(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	defer srv.Stop()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("log", "crash")
	u.RawQuery = q.Encode()
	ctx := testCtx(t)
	l, err := pglog.OpenURL(ctx, u.String(), pglog.Options{AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	const appenders, each, crashAfter = 8, 60, 100
	var (
		mu     sync.Mutex
		acked  = map[sharedlog.Pos]string{}
		failed atomic.Int64
		count  atomic.Int64
		crash  = make(chan struct{})
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
					once.Do(func() { close(crash) })
				}
			}
		})
	}
	<-crash
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("%d appends acknowledged, %d failed across the crash; writer stats %+v", len(acked), failed.Load(), l.Stats())

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
