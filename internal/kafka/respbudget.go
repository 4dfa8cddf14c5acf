package kafka

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The response memory budget (Config.MaxHeldResponseBytes) bounds the
// memory of the large responses, Fetch and Metadata, from before they are
// built until they are written, across all connections. Kafka's
// per-request bounds (fetch.max.bytes) are not enough: twenty consumers
// asking for 50 MiB each, or fifty connections asking for the metadata of
// a million partitions, add up to gigabytes.
//
// A response reserves its bytes from the budget before it is built and
// holds them until the writer has written it (or dropped it with its
// connection): a handler returns a heldResponse, and the writer releases
// it (releaseHeld). What a response counts is what it holds until then:
// the records of a Fetch once (the writer splices them into its writes,
// splice.go) and twice where it copies them instead, a Metadata answer by
// the size of its encoding, twice (its structs and the writer's copy). When the budget is short, Fetch waits at most its MaxWaitMillis
// and then reads what it got (at least one batch once it has any, as
// KIP-74 asks, or none); Metadata waits, in turn, for its whole answer.

// respBudget is the shared budget. Waiters are served in arrival order, so
// a large reservation is not starved by small ones.
type respBudget struct {
	capBytes int64
	mu       struct {
		sync.Mutex
		used int64
		// waiters is bounded by the handlers running: each waits for
		// at most one reservation at a time.
		waiters []*respWaiter
	}
}

type respWaiter struct {
	want, need int64
	// got is set before ready is closed.
	got   int64
	ready chan struct{}
}

func newRespBudget(capBytes int64) *respBudget {
	return &respBudget{capBytes: capBytes}
}

// take reserves up to want bytes, at least need of them (need is capped at
// the budget): it waits, behind earlier waiters, until need bytes are
// free, then takes as many as are free up to want. It returns 0 when ctx
// ends, abort is closed or timeout fires first (a nil channel never
// does); a timeout already fired takes only what is free at once.
func (b *respBudget) take(ctx context.Context, want, need int64, timeout <-chan time.Time, abort <-chan struct{}) int64 {
	if want <= 0 {
		return 0
	}
	need = max(1, min(need, want, b.capBytes))
	b.mu.Lock()
	if len(b.mu.waiters) == 0 && b.capBytes-b.mu.used >= need {
		got := min(want, b.capBytes-b.mu.used)
		b.mu.used += got
		b.mu.Unlock()
		return got
	}
	w := &respWaiter{want: want, need: need, ready: make(chan struct{})}
	b.mu.waiters = append(b.mu.waiters, w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return w.got
	case <-ctx.Done():
	case <-timeout:
	case <-abort:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while giving up: keep it, it is free to use.
		return w.got
	default:
	}
	for i, x := range b.mu.waiters {
		if x == w {
			b.mu.waiters = append(b.mu.waiters[:i], b.mu.waiters[i+1:]...)
			break
		}
	}
	// Leaving may unblock the waiters behind.
	b.grantLocked()
	return 0
}

// add counts n bytes that are already allocated, without waiting; the
// budget may go over its cap, and later reservations wait until it is
// back under.
func (b *respBudget) add(n int64) {
	b.mu.Lock()
	b.mu.used += n
	b.mu.Unlock()
}

func (b *respBudget) release(n int64) {
	b.mu.Lock()
	b.mu.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *respBudget) grantLocked() {
	for len(b.mu.waiters) > 0 {
		w := b.mu.waiters[0]
		free := b.capBytes - b.mu.used
		if free < w.need {
			return
		}
		w.got = min(w.want, free)
		b.mu.used += w.got
		close(w.ready)
		b.mu.waiters[0] = nil
		b.mu.waiters = b.mu.waiters[1:]
	}
}

// usedBytes is what is reserved now.
func (b *respBudget) usedBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.used
}

// respHold is what one response holds of the budget. The handler that
// builds the response changes it; once the handler has returned, only
// release is called (by the writer). A nil *respHold (no budget) does
// nothing.
type respHold struct {
	b *respBudget
	n int64
}

// holdResponse starts a response's hold, or returns nil when the server
// has no budget (handler tests with a hand-made Deps).
func (d *Deps) holdResponse() *respHold {
	if d == nil || d.shared == nil || d.shared.responses == nil {
		return nil
	}
	return &respHold{b: d.shared.responses}
}

// take reserves more, as respBudget.take, and returns what it got; with no
// budget it returns want.
func (h *respHold) take(ctx context.Context, want, need int64, timeout <-chan time.Time, abort <-chan struct{}) int64 {
	if h == nil {
		return want
	}
	got := h.b.take(ctx, want, need, timeout, abort)
	h.n += got
	return got
}

// resize makes the hold n bytes: it gives back what is no longer needed,
// or counts, without waiting, bytes already allocated past it.
func (h *respHold) resize(n int64) {
	switch {
	case h == nil:
	case n < h.n:
		h.b.release(h.n - n)
	case n > h.n:
		h.b.add(n - h.n)
	}
	if h != nil {
		h.n = n
	}
}

// release gives everything back. Safe to call more than once.
func (h *respHold) release() { h.resize(0) }

// wrap returns resp holding h until it is written, or resp itself when
// there is no budget. encodedBytes is about the size of resp's encoding.
func (h *respHold) wrap(resp kmsg.Response, encodedBytes int64) kmsg.Response {
	if h == nil {
		return resp
	}
	return heldResponse{Response: resp, release: h.release, encodedBytes: encodedBytes}
}

// heldResponse is a response that holds bytes of the response budget
// until the writer releases it.
type heldResponse struct {
	kmsg.Response
	// release is a func, not the *respHold, so the error-code walk
	// (firstErrorCode) does not wander into the budget.
	release func()
	// encodedBytes sizes the writer's buffer before encoding.
	encodedBytes int64
}

// AppendTo grows dst to the encoding's size first: appending a large
// answer to the writer's empty buffer would otherwise reallocate it a few
// dozen times, allocating and copying about twice the answer. (The one
// allocation is zeroed all the same, through bytes.Buffer as through
// slices.Grow; Fetch answers avoid both by not being copied at all.)
func (h heldResponse) AppendTo(dst []byte) []byte {
	if n := int(min(h.encodedBytes, maxFetchResponseBytes+64<<20)); cap(dst)-len(dst) < n {
		b := bytes.NewBuffer(dst)
		b.Grow(n)
		dst = b.Bytes()
	}
	return h.Response.AppendTo(dst)
}

// releaseHeld gives back what p's response holds, once its handler has
// returned: the writer calls it when the response was written or
// dropped. A connection closed while the handler still runs drops the
// request first; the hold is then given back when the handler returns.
func releaseHeld(p *call) {
	if isClosed(p.done) {
		releaseResponse(p.resp)
		return
	}
	go func() {
		<-p.done
		releaseResponse(p.resp)
	}()
}

func releaseResponse(resp kmsg.Response) {
	if h, ok := resp.(heldResponse); ok {
		h.release()
	}
}

// draining is closed once the server begins shutting down; nil for a
// request with no server (handler tests), which never closes.
func (r *Request) draining() <-chan struct{} {
	if r.Conn == nil || r.Conn.srv == nil {
		return nil
	}
	return r.Conn.srv.drain
}

// unwrapResponse returns the response a heldResponse carries.
func unwrapResponse(resp kmsg.Response) kmsg.Response {
	if h, ok := resp.(heldResponse); ok {
		return h.Response
	}
	return resp
}
