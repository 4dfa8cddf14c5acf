package views

import (
	"context"
	"runtime"
	"time"

	"github.com/strandkafka/strand/internal/clock"
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
// the same.
//
// The kept processor is lent, not reserved: a Step that has waited
// maxStepWait for a slot takes the spare one. A view catching up runs
// epochs of up to MaxEpochChanges (a second of CPU), and with one slot
// every other view would wait that long for each, far beyond what
// freshness allows; and an agent whose views need every processor
// keeps up rather than fall behind for the reads' sake. The spare is
// taken only while Steps queue for maxStepWait, which a steady agent
// (its epochs needing less than GOMAXPROCS-1 processors) never does.

// maxStepWait is how long a Step waits for a slot before it takes the
// spare one: well inside the freshness target (500 ms at p99), long
// next to a steady epoch (a few milliseconds).
const maxStepWait = 50 * time.Millisecond

// maxGateWait is how long a Step waits at all: then it runs without a
// slot. Steps wait in arrival order, so on a starved agent a view with
// short epochs queued behind the others' long ones, epoch after epoch
// (a freshness p99 of seconds, where without the gate the scheduler
// shared the processors and its short epochs finished first); past
// this wait the gate adds nothing, and what bounds the Steps running
// at once is the number of views.
const maxGateWait = 4 * maxStepWait

// gate is a counting semaphore of Steps: slots holds a token per Step
// in progress, spare the one Step that may run past them.
type gate struct {
	slots chan struct{}
	spare chan struct{}
	clk   clock.Clock
}

// defaultStepSlots is GOMAXPROCS-1, at least 1.
func defaultStepSlots() int {
	return max(1, runtime.GOMAXPROCS(0)-1)
}

// newGate returns a gate of slots; nil, which lets every Step
// through, for 0 or fewer.
func newGate(slots int, clk clock.Clock) *gate {
	if slots <= 0 {
		return nil
	}
	return &gate{slots: make(chan struct{}, slots), spare: make(chan struct{}, 1), clk: clock.OrReal(clk)}
}

// acquire waits for a slot (or, after maxStepWait, the spare; after
// maxGateWait, nothing), or for ctx to end. release gives back what it
// took.
func (g *gate) acquire(ctx context.Context) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	select {
	case g.slots <- struct{}{}:
		return g.releaseSlot, nil
	default:
	}
	waited, timer := clock.After(g.clk, maxStepWait)
	defer clock.Stop(timer)
	select {
	case g.slots <- struct{}{}:
		return g.releaseSlot, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-waited:
	}
	longWait, longTimer := clock.After(g.clk, maxGateWait-maxStepWait)
	defer clock.Stop(longTimer)
	select {
	case g.slots <- struct{}{}:
		return g.releaseSlot, nil
	case g.spare <- struct{}{}:
		return g.releaseSpare, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-longWait:
		return func() {}, nil
	}
}

func (g *gate) releaseSlot()  { <-g.slots }
func (g *gate) releaseSpare() { <-g.spare }
