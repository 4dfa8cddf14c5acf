package views

import (
	"context"
	"runtime"
)

// A pull query's latency on a busy agent is mostly the wait for a
// processor, not its own work (tens of microseconds over Pebble). When
// every P runs a view's epoch, a lookup whose bytes arrive waits for
// the Go scheduler twice: its goroutine is found ready only when a P
// runs out of work or sysmon polls the network (every 10 ms under
// load), and then queues behind the epochs until their 10 ms
// preemption slices end. Nine views at a few thousand events/s keep
// both Ps of a 2-core agent busy in bursts: a point lookup's p99 was
// 7-17 ms where its p50 was 0.5 ms.
//
// So the epochs' Steps (where a view spends its CPU: operators, state
// reads and the batch commit) take a slot of a gate with one slot fewer
// than GOMAXPROCS: a P stays free for the SQL endpoint, the Kafka
// handlers and the views' own readers, and finds a ready goroutine as
// soon as the network says so. The views' throughput per CPU second is
// the same; on GOMAXPROCS processors they use at most GOMAXPROCS-1 for
// their epochs, which a view catching up notices and a steady one
// (its epochs taking less than a processor) does not. With GOMAXPROCS
// 1 there is one slot and nothing to keep free.

// gate is a counting semaphore: a buffered channel holding a token per
// Step in progress.
type gate chan struct{}

// defaultStepSlots is GOMAXPROCS-1, at least 1.
func defaultStepSlots() int {
	return max(1, runtime.GOMAXPROCS(0)-1)
}

func newGate(slots int) gate { return make(gate, max(1, slots)) }

// acquire waits for a slot, or for ctx to end.
func (g gate) acquire(ctx context.Context) error {
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g gate) release() { <-g }
