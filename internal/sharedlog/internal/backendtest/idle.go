package backendtest

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// Counting wraps a service's HTTP handler, or the proxy in front of it,
// and counts the requests it serves: what the service would bill,
// whatever the client thinks it sent.
func Counting(h http.Handler) (http.Handler, *atomic.Int64) {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}), &n
}

// IdleMinute is the number of seconds CheckIdle leaves a log idle, and
// IdleBudget the requests the service may see meanwhile.
const (
	IdleMinute = 60
	IdleBudget = 6
)

// CheckIdle checks that a reader following a log on a request-priced
// service costs at most IdleBudget requests per idle minute, and that
// once a reader is eager (a fetch waits) another agent's append reaches
// it after one PollInterval. open opens a VirtualLog on the service
// (the same log each call) on clk; requests counts what the service
// served. Both agents of the test run on clk, so no wait is real.
func CheckIdle(t *testing.T, ctx context.Context, clk *clock.Fake, open func(t *testing.T) *sharedlog.VirtualLog, requests *atomic.Int64) {
	t.Helper()
	writer, reader := open(t), open(t)
	if _, err := writer.Append(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		tail sharedlog.Pos
		err  error
	}
	waitTail := func(after sharedlog.Pos) <-chan result {
		ch := make(chan result, 1)
		go func() {
			tail, err := reader.WaitTail(ctx, after)
			ch <- result{tail, err}
		}()
		return ch
	}
	// sleeping waits until the reader waits on clk, and fails if it
	// returned instead.
	sleeping := func(res <-chan result) {
		t.Helper()
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("the reader never waited on the clock: %v", err)
		}
		select {
		case r := <-res:
			t.Fatalf("WaitTail returned %d, %v with nothing appended", r.tail, r.err)
		default:
		}
	}

	res := waitTail(1)
	sleeping(res)
	before := requests.Load()
	for range IdleMinute {
		sleeping(res)
		clk.Advance(time.Second)
	}
	sleeping(res)
	idle := requests.Load() - before
	t.Logf("idle %ds: %d requests", IdleMinute, idle)
	if idle > IdleBudget {
		t.Errorf("idle %ds: the service served %d requests, want at most %d", IdleMinute, idle, IdleBudget)
	}

	// Traffic resumes: the other agent appends, which the sleeping
	// reader does not see until a fetch waits on it (Eager) and wakes
	// it: at once, with no tick of clk.
	if _, err := writer.Append(ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	sleeping(res)
	before = requests.Load()
	release := reader.Eager()
	defer release()
	if r := <-res; r.err != nil || r.tail != 2 {
		t.Fatalf("WaitTail after Eager = %d, %v; want 2", r.tail, r.err)
	}
	t.Logf("Eager woke the reader to the append with %d requests", requests.Load()-before)

	// While it is eager, the next append reaches it one PollInterval
	// later: it must return then, not go back to sleep.
	res = waitTail(2)
	sleeping(res)
	if _, err := writer.Append(ctx, []byte("eager")); err != nil {
		t.Fatal(err)
	}
	before = requests.Load()
	clk.Advance(defaultPoll)
	asleep := make(chan error, 1)
	go func() { asleep <- clk.BlockUntil(ctx, 1) }()
	select {
	case r := <-res:
		if r.err != nil || r.tail != 3 {
			t.Fatalf("WaitTail = %d, %v; want 3", r.tail, r.err)
		}
	case err := <-asleep:
		t.Fatalf("one PollInterval after the append the eager reader sleeps again (%v) without seeing it", err)
	}
	t.Logf("the eager reader saw the next append after one poll interval, with %d requests", requests.Load()-before)
}

// defaultPoll is sharedlog's default VirtualOptions.PollInterval, which
// CheckIdle's logs use.
const defaultPoll = 20 * time.Millisecond
