package pglog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/pglog"
)

const (
	// noRecheck is the WaitRecheckInterval of these tests: so long that
	// within wakeDeadline only a notification (or a reconnect) wakes a
	// waiter, and a test fails if notifications do not work.
	noRecheck = time.Minute
	// wakeDeadline bounds how long a notification may take to arrive:
	// generous for a loaded machine, far below noRecheck.
	wakeDeadline = 5 * time.Second
)

// waiter is a WaitTail running on a handle whose listener listens.
type waiter struct {
	// blocked receives a value each time a WaitTail caller of the
	// handle starts to wait for a wake-up.
	blocked chan struct{}
	// pid is the listener connection's server process.
	pid uint32
}

// openPair opens two handles on one new loglet: a writes, b waits. b's
// listener is started and listening when openPair returns.
func openPair(t *testing.T, id string) (a, b *pglog.Loglet, w *waiter) {
	t.Helper()
	ctx := testCtx(t)
	u := logURL(t, "log", id)
	var hs [2]*pglog.Loglet
	for i := range hs {
		l, err := pglog.OpenURL(ctx, u, pglog.Options{WaitRecheckInterval: noRecheck})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		hs[i] = l
	}
	w = &waiter{blocked: make(chan struct{}, 16)}
	pglog.OnWaitBlocked(hs[1], func() {
		select {
		case w.blocked <- struct{}{}:
		default:
		}
	})
	if err := pglog.StartListener(hs[1]); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, wakeDeadline)
	defer cancel()
	pid, err := pglog.ListenerPID(lctx, hs[1], 0)
	if err != nil {
		t.Fatalf("listener not listening: %v", err)
	}
	w.pid = pid
	return hs[0], hs[1], w
}

type waitResult struct {
	tail sharedlog.Pos
	err  error
}

// start runs b.WaitTail(ctx, after) and returns once it waits for a
// wake-up, so what the test does next happens while it waits.
func (w *waiter) start(t *testing.T, ctx context.Context, b *pglog.Loglet, after sharedlog.Pos) <-chan waitResult {
	t.Helper()
	ch := make(chan waitResult, 1)
	go func() {
		tail, err := b.WaitTail(ctx, after)
		ch <- waitResult{tail, err}
	}()
	w.awaitBlocked(t)
	return ch
}

func (w *waiter) awaitBlocked(t *testing.T) {
	t.Helper()
	select {
	case <-w.blocked:
	case <-time.After(wakeDeadline):
		t.Fatalf("WaitTail did not start waiting within %v", wakeDeadline)
	}
}

// wantWoken waits for the WaitTail to return (tail, nil).
func wantWoken(t *testing.T, ch <-chan waitResult, what string, tail sharedlog.Pos) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil || r.tail != tail {
			t.Fatalf("WaitTail woken by %s = (%d, %v), want (%d, nil)", what, r.tail, r.err, tail)
		}
	case <-time.After(wakeDeadline):
		t.Fatalf("WaitTail not woken by %s within %v (it rechecks only every %v): no notification", what, wakeDeadline, noRecheck)
	}
}

// TestWaitTailNotified: an append through one handle wakes a WaitTail on
// another, for log ids whose channel fits and one that must be hashed.
func TestWaitTailNotified(t *testing.T) {
	for _, tt := range []struct {
		name, suffix string
	}{
		{"short id", ""},
		{"long id", "/" + strings.Repeat("ü", 60)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			a, b, w := openPair(t, newID(t)+tt.suffix)
			if ch := pglog.Channel(b); len(ch) > 63 || !utf8.ValidString(ch) {
				t.Fatalf("channel %q: %d bytes, want a valid name of at most 63", ch, len(ch))
			}
			if _, err := a.Append(ctx, []byte("first")); err != nil {
				t.Fatal(err)
			}
			done := w.start(t, ctx, b, 1)
			if _, err := a.Append(ctx, []byte("second")); err != nil {
				t.Fatal(err)
			}
			wantWoken(t, done, "an append through another handle", 2)
		})
	}
}

// TestChannelNames: channels stay within PostgreSQL's 63 bytes and apart
// for log ids that differ only past it.
func TestChannelNames(t *testing.T) {
	ctx := testCtx(t)
	long := newID(t) + "/" + strings.Repeat("x", 100)
	seen := map[string]string{}
	for _, id := range []string{long + "a", long + "b", newID(t)} {
		l, err := pglog.OpenURL(ctx, logURL(t, "log", id), pglog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ch := pglog.Channel(l)
		l.Close()
		if len(ch) > 63 {
			t.Errorf("log %q: channel %q is %d bytes, want at most 63", id, ch, len(ch))
		}
		if other, ok := seen[ch]; ok {
			t.Errorf("logs %q and %q share channel %q", other, id, ch)
		}
		seen[ch] = id
	}
}

// TestWaitTailNotifiedOfSeal: a seal through another handle wakes a
// WaitTail, which returns the final tail, and the listener then stops.
func TestWaitTailNotifiedOfSeal(t *testing.T) {
	ctx := testCtx(t)
	a, b, w := openPair(t, newID(t))
	if _, err := a.Append(ctx, []byte("only")); err != nil {
		t.Fatal(err)
	}
	done := w.start(t, ctx, b, 1)
	if err := a.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, "a seal through another handle", 1)
	// The tail is final: nothing is left to listen for.
	select {
	case <-pglog.ListenerDone(b):
	case <-time.After(wakeDeadline):
		t.Fatalf("listener still running %v after the handle saw the seal", wakeDeadline)
	}
}

// TestWaitTailListenerReconnects: after the listener's connection is
// killed, the listener connects again and a later append still wakes a
// waiter.
func TestWaitTailListenerReconnects(t *testing.T) {
	ctx := testCtx(t)
	a, b, w := openPair(t, newID(t))
	done := w.start(t, ctx, b, 0)
	admin := newPool(t, 1)
	var killed bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(w.pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = (%v, %v)", w.pid, killed, err)
	}
	lctx, cancel := context.WithTimeout(ctx, wakeDeadline)
	defer cancel()
	if _, err := pglog.ListenerPID(lctx, b, w.pid); err != nil {
		t.Fatalf("listener did not listen again after its connection was killed: %v", err)
	}
	// Listening again wakes waiters to read the tail (notifications were
	// lost meanwhile); the waiter finds nothing and waits again, now for
	// a notification on the new connection.
	w.awaitBlocked(t)
	select {
	case r := <-done:
		t.Fatalf("WaitTail returned (%d, %v) with nothing appended", r.tail, r.err)
	default:
	}
	if _, err := a.Append(ctx, []byte("after reconnect")); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, "an append after the reconnect", 1)
}

// TestWaitTailCanceled: a waiting WaitTail returns ctx's error when ctx
// is canceled.
func TestWaitTailCanceled(t *testing.T) {
	_, b, w := openPair(t, newID(t))
	ctx, cancel := context.WithCancel(testCtx(t))
	done := w.start(t, ctx, b, 0)
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("WaitTail after cancel = (%d, %v), want context.Canceled", r.tail, r.err)
		}
	case <-time.After(wakeDeadline):
		t.Fatalf("WaitTail still waiting %v after its ctx was canceled", wakeDeadline)
	}
}
