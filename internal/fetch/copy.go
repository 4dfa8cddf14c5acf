package fetch

import (
	"bytes"
	"context"
	"fmt"
	"runtime"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// Copying an answer is the fetch path's CPU-heavy step: a catching-up
// consumer asks for tens of MiB per request, and the copy of the cached
// bytes (to patch base offsets) is nearly all the CPU its read takes.
// Go's scheduler has no priorities, so twenty consumers copying at once
// fill the run queue, and every other goroutine waits behind them: on a
// 2-core machine, with 11-15 goroutines runnable, the agent's goroutines
// waited p90 25 ms and p99 50-67 ms for a CPU (runtime/metrics
// /sched/latencies), and a producer's request pays that at every
// hand-off on its path (handler, flush, log append, apply, writer).
//
// So a read copies its answer only while it holds one of the reader's
// copy slots, half the Ps (at least one): the other Ps stay free for
// every other goroutine, which then runs as soon as it is ready (with
// the slots, p90 30 µs and p99 4-8 ms under the same load). Nothing
// waits for a slot but a copy, and a slot is held only for the copy
// itself, never across an object store GET or a long poll, so a read
// waits at most for the copies ahead of it, milliseconds each. Waiters
// get slots in arrival order (a channel's blocked senders queue), so no
// read is starved; and nothing is paced: with nothing else to run, the
// copies still have half the Ps, and the socket writes (the kernel's
// copy, as much work again) are not bounded at all.

// copySlotsFor is how many answers are copied at once with gomaxprocs
// Ps.
func copySlotsFor(gomaxprocs int) int { return max(1, gomaxprocs/2) }

// copySlots is a counting semaphore of answers being copied.
type copySlots chan struct{}

func newCopySlots() copySlots { return make(copySlots, copySlotsFor(runtime.GOMAXPROCS(0))) }

// join returns a's runs copied into one slice, each batch's base offset
// patched, copying while it holds a copy slot. The slice is a recycled
// answer (answerpool.go) or one allocated without zeroing: bytes.Join
// allocates the whole answer uninitialized and the copy writes all of it
// (make and append would first clear it, as much work again as the
// copy).
func (r *Reader) join(ctx context.Context, a *answer) ([]byte, error) {
	if a.size == 0 {
		return []byte{}, nil
	}
	if err := r.acquireCopySlot(ctx); err != nil {
		return nil, err
	}
	if r.copying != nil {
		r.copying()
	}
	out := r.answers.get(a.size)
	if out != nil {
		at := 0
		for _, run := range a.runs {
			at += copy(out[at:], run)
		}
	} else {
		out = bytes.Join(a.runs, nil)
	}
	<-r.slots

	pos := 0
	for i, run := range a.runs {
		base := a.bases[i]
		for rest := out[pos : pos+len(run)]; len(rest) > 0; {
			// addEntry checked these very bytes: the errors are
			// for a change that breaks it.
			batch, next, err := recordbatch.Next(rest)
			if err != nil {
				return nil, fmt.Errorf("%w: answer at %d: %w", ErrCorrupt, pos, err)
			}
			h, err := recordbatch.ParseHeader(batch)
			if err != nil {
				return nil, fmt.Errorf("%w: answer at %d: %w", ErrCorrupt, pos, err)
			}
			recordbatch.SetBaseOffset(batch, base)
			base += int64(h.LastOffsetDelta) + 1
			rest = next
		}
		pos += len(run)
	}
	return out, nil
}

// acquireCopySlot waits for a copy slot, or until ctx ends.
func (r *Reader) acquireCopySlot(ctx context.Context) error {
	select {
	case r.slots <- struct{}{}:
		return nil
	default:
	}
	if r.waiting != nil {
		r.waiting()
	}
	select {
	case r.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
