package replica

import (
	"context"
	"sync"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// tailChecker shares CheckTail calls among concurrent Sync callers.
//
// A caller may only use a check that started after it arrived: a check
// already in flight may have read the tail before the caller's write it
// must observe was acknowledged. So a caller that finds a check in flight
// joins the next one, which starts when the current one ends, and every
// caller that arrives meanwhile shares it. At most two checks exist at a
// time, however many callers there are.
type tailChecker struct {
	r  *Replica
	mu struct {
		sync.Mutex
		inflight *tailCall
		next     *tailCall
		// closed stops new checks, so none starts after Close waits for
		// the replica's goroutines.
		closed bool
	}
	// onJoin, if set, is called when a caller joins the next check.
	// Tests use it to know a caller is waiting.
	onJoin func()
}

type tailCall struct {
	done chan struct{}
	tail sharedlog.Pos
	err  error
}

func (c *tailChecker) init(r *Replica) { c.r = r }

func (c *tailChecker) close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
}

// check returns a tail read after check was called.
func (c *tailChecker) check(ctx context.Context) (sharedlog.Pos, error) {
	c.mu.Lock()
	var call *tailCall
	switch {
	case c.mu.closed:
		c.mu.Unlock()
		return 0, ErrClosed
	case c.mu.inflight == nil:
		call = &tailCall{done: make(chan struct{})}
		c.mu.inflight = call
		c.r.wg.Add(1)
		go c.run(call)
	case c.mu.next == nil:
		call = &tailCall{done: make(chan struct{})}
		c.mu.next = call
	default:
		call = c.mu.next
	}
	joined := call != c.mu.inflight
	c.mu.Unlock()
	if joined && c.onJoin != nil {
		c.onJoin()
	}
	select {
	case <-call.done:
		return call.tail, call.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run performs call, then the next call if one was queued meanwhile. The
// check runs under the replica's context, not a caller's: one caller
// giving up must not fail the others.
func (c *tailChecker) run(call *tailCall) {
	defer c.r.wg.Done()
	for call != nil {
		ctx, cancel := context.WithTimeout(c.r.ctx, tailCheckTimeout)
		call.tail, _, call.err = c.r.log.CheckTail(ctx)
		cancel()
		if call.err != nil && c.r.ctx.Err() != nil {
			call.err = ErrClosed
		}
		close(call.done)

		c.mu.Lock()
		call = c.mu.next
		c.mu.next = nil
		c.mu.inflight = call
		c.mu.Unlock()
	}
}
