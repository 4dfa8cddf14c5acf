package kafka

import (
	"errors"
	"sync"
)

// byteBudget bounds the request bytes held across all connections (Kafka's
// queued.max.request.bytes). Waiters are served first come, first served so
// a large request is not starved by a stream of small ones. Waiting is on
// channels, not a mutex, so it stays abortable (and durably blocking under
// testing/synctest).
type byteBudget struct {
	mu struct {
		sync.Mutex
		freeBytes int64
		// waiters is bounded by the number of connections: each reader
		// waits for at most one request at a time.
		waiters []*budgetWaiter
	}
}

type budgetWaiter struct {
	bytes int64
	ready chan struct{}
}

var errBudgetAborted = errors.New("kafka: wait for request memory aborted")

func newByteBudget(capBytes int64) *byteBudget {
	b := new(byteBudget)
	b.mu.freeBytes = capBytes
	return b
}

// acquire takes n bytes, waiting until they are free or until either abort
// channel is closed. The caller guarantees n is at most the capacity.
func (b *byteBudget) acquire(n int64, abort1, abort2 <-chan struct{}) error {
	b.mu.Lock()
	if len(b.mu.waiters) == 0 && b.mu.freeBytes >= n {
		b.mu.freeBytes -= n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{bytes: n, ready: make(chan struct{})}
	b.mu.waiters = append(b.mu.waiters, w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-abort1:
	case <-abort2:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while we were giving up: hand it back.
		b.mu.freeBytes += n
	default:
		for i, x := range b.mu.waiters {
			if x == w {
				b.mu.waiters = append(b.mu.waiters[:i], b.mu.waiters[i+1:]...)
				break
			}
		}
	}
	// Our leaving may unblock the waiters behind us.
	b.grantLocked()
	return errBudgetAborted
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.mu.freeBytes += n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *byteBudget) grantLocked() {
	for len(b.mu.waiters) > 0 && b.mu.waiters[0].bytes <= b.mu.freeBytes {
		w := b.mu.waiters[0]
		b.mu.freeBytes -= w.bytes
		close(w.ready)
		b.mu.waiters[0] = nil
		b.mu.waiters = b.mu.waiters[1:]
	}
}

func (b *byteBudget) free() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.freeBytes
}
