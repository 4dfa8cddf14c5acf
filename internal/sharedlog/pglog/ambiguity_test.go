package pglog_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/pglog"
	"github.com/strandkafka/strand/internal/testservers/faultproxy"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// viaProxy returns rawURL, a URL of the test server, made to reach it
// through a new fault proxy.
func viaProxy(t *testing.T, rawURL string) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	u.Host = p.Addr()
	return u.String(), p
}

// proxied opens a loglet whose pool reaches the server through a fault
// proxy, with one connection so the fault lands on the writer's, and
// appends a first entry so that connection exists and has its
// statements prepared.
func proxied(t *testing.T) (*pglog.Loglet, *faultproxy.Proxy) {
	t.Helper()
	u, p := viaProxy(t, pgtest.URL(t))
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := oneConnLoglet(t, cfg)
	return l, p
}

// oneConnLoglet opens a loglet on a pool of one connection made with
// cfg, and appends a first entry so that connection exists and has its
// statements prepared.
func oneConnLoglet(t *testing.T, cfg *pgxpool.Config) (*pglog.Loglet, *pgxpool.Pool) {
	t.Helper()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l, err := pglog.Open(testCtx(t), pool, newID(t), pglog.Options{AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if pos, err := l.Append(testCtx(t), []byte("first")); err != nil || pos != 0 {
		t.Fatalf("first Append = (%d, %v)", pos, err)
	}
	return l, pool
}

// wantLog checks the loglet holds exactly want, each entry once.
func wantLog(t *testing.T, l sharedlog.Loglet, want ...string) {
	t.Helper()
	backendtest.WantLog(t, testCtx(t), l, want...)
}

// TestLostCommitReply: the batch commits but the connection breaks before
// its reply arrives. The writer finds the batch by its id and the Append
// succeeds at the position the batch took, without writing it again.
func TestLostCommitReply(t *testing.T) {
	l, p := proxied(t)
	fired := p.CutOnReply(nil)
	pos, err := l.Append(testCtx(t), []byte("reply lost"))
	if err != nil {
		t.Fatalf("Append with its reply lost = %v, want the writer to resolve it", err)
	}
	select {
	case <-fired:
	default:
		t.Fatal("the fault never fired")
	}
	if pos != 1 {
		t.Fatalf("Append landed at %d, want 1", pos)
	}
	if st := l.Stats(); st.Ambiguous != 1 || st.Landed != 1 || st.NotLanded != 0 {
		t.Fatalf("stats %+v, want one ambiguous commit that landed", st)
	}
	wantLog(t, l, "first", "reply lost")
}

// TestZombieAppendFenced: the batch's statement is kept from the server
// while the writer, seeing its connection break, resolves the outcome and
// sends the batch again; then the kept statement reaches the server. The
// fence must make it write nothing, so the entry is in the log once.
func TestZombieAppendFenced(t *testing.T) {
	l, p := proxied(t)
	held := p.HoldRequests(nil, nil)
	pos, err := l.Append(testCtx(t), []byte("zombie"))
	if err != nil {
		t.Fatalf("Append whose first send was held = %v", err)
	}
	select {
	case <-held.Got():
	default:
		t.Fatal("nothing was held")
	}
	if pos != 1 {
		t.Fatalf("Append landed at %d, want 1", pos)
	}
	if st := l.Stats(); st.Ambiguous != 1 || st.NotLanded != 1 || st.Landed != 0 {
		t.Fatalf("stats %+v, want one ambiguous commit that did not land", st)
	}
	// Now the first send arrives. The server runs it (its reply is the
	// command tag of a SELECT that found no row to update) and it must
	// change nothing.
	reply, err := held.Release(testCtx(t), true, nil)
	if err != nil {
		t.Fatalf("releasing the held append: %v", err)
	}
	if !bytes.Contains(reply, []byte("SELECT 0\x00")) {
		t.Fatalf("the held append's reply %q lacks the tag SELECT 0: it ran against an unfenced row, or not at all", reply)
	}
	wantLog(t, l, "first", "zombie")
	// The writer carries on at the new epoch.
	if pos, err := l.Append(testCtx(t), []byte("after")); err != nil || pos != 2 {
		t.Fatalf("Append after the fence = (%d, %v), want (2, nil)", pos, err)
	}
	wantLog(t, l, "first", "zombie", "after")
}

// TestCanceledMidCommit: the appender gives up (ctx canceled) while its
// batch is stuck; the writer still settles the batch, once.
func TestCanceledMidCommit(t *testing.T) {
	l, p := proxied(t)
	held := p.HoldRequests(nil, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, []byte("canceled"))
		done <- err
	}()
	<-held.Got()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Append = %v, want context.Canceled", err)
	}
	// The writer handles batches in order, so this one returns after the
	// canceled one is settled.
	pos, err := l.Append(testCtx(t), []byte("next"))
	if err != nil {
		t.Fatal(err)
	}
	if pos != 2 {
		t.Fatalf("Append after the canceled one landed at %d, want 2 (the canceled one at 1)", pos)
	}
	if _, err := held.Release(testCtx(t), true, nil); err != nil {
		t.Fatal(err)
	}
	wantLog(t, l, "first", "canceled", "next")
}
