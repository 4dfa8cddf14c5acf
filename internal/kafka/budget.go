package kafka

import (
	"errors"
	"math/bits"
	"sync"
	"time"
)

// byteBudget bounds the request bytes held across all connections (Kafka's
// queued.max.request.bytes). A frame takes its share as its bytes arrive,
// not at its header, so a client that announces a large frame and then
// trickles it holds about what it sent, not what it claimed.
//
// Growing shares could deadlock: frames that have each received part of
// their bytes, together holding the whole budget, all waiting for more.
// Only their deadlines would free it, and every other client would wait
// that long. So frames still arriving may together hold at most
// arrivingCapBytes, the budget less the largest frame. A frame that wants
// more when arriving frames hold that much becomes a finisher instead: it
// is reserved whole and no longer counts as arriving. Its rest fits once
// the finishers and the frames already received (being handled) release,
// since arriving frames hold at most the budget less one frame; those
// release without waiting for anything but their own client and handler.
// So there is always a frame that needs nothing more to finish, and while
// none exists every waiter fits.
//
// Waiters are served first come, first served so a large request is not
// starved by a stream of small ones. Waiting is on channels, not a mutex,
// so it stays abortable (and durably blocking under testing/synctest).
type byteBudget struct {
	capBytes         int64
	arrivingCapBytes int64

	mu struct {
		sync.Mutex
		usedBytes int64
		// arrivingBytes is what frames still arriving hold, finishers
		// aside.
		arrivingBytes int64
		// waiters is bounded by the number of connections: each reader
		// waits for at most one share at a time.
		waiters []*budgetWaiter
	}
}

// frameShare is one frame's hold on the budget. The reader that owns the
// frame changes it only through the budget's methods.
type frameShare struct {
	sizeBytes int64
	heldBytes int64
	// arriving is set while the frame's held bytes count as arriving.
	arriving bool
}

func (f *frameShare) whole() bool { return f.heldBytes == f.sizeBytes }

type budgetWaiter struct {
	share *frameShare
	want  int64
	ready chan struct{}
}

var errBudgetAborted = errors.New("kafka: wait for request memory aborted")

// newByteBudget returns a budget of capBytes for frames of at most
// maxFrameBytes <= capBytes.
func newByteBudget(capBytes, maxFrameBytes int64) *byteBudget {
	return &byteBudget{capBytes: capBytes, arrivingCapBytes: capBytes - maxFrameBytes}
}

// grow adds want bytes to f's share, or the rest of f's size when it
// becomes a finisher, waiting until they are free or until either abort
// channel is closed. It returns how long it waited. On error f may hold
// more than before; the caller releases it. The caller guarantees
// 0 < want <= f.sizeBytes-f.heldBytes and that f's size is at most the
// largest frame.
func (b *byteBudget) grow(f *frameShare, want int64, abort1, abort2 <-chan struct{}) (time.Duration, error) {
	b.mu.Lock()
	if len(b.mu.waiters) == 0 && b.tryGrantLocked(f, want) {
		b.mu.Unlock()
		return 0, nil
	}
	w := &budgetWaiter{share: f, want: want, ready: make(chan struct{})}
	b.mu.waiters = append(b.mu.waiters, w)
	b.mu.Unlock()

	start := time.Now()
	select {
	case <-w.ready:
		return time.Since(start), nil
	case <-abort1:
	case <-abort2:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while we were giving up.
		return 0, errBudgetAborted
	default:
	}
	for i, x := range b.mu.waiters {
		if x == w {
			b.mu.waiters = append(b.mu.waiters[:i], b.mu.waiters[i+1:]...)
			break
		}
	}
	// Our leaving may unblock the waiters behind us.
	b.grantLocked()
	return 0, errBudgetAborted
}

// tryGrantLocked grows f by want, or makes it a finisher, if the rules
// allow it now. f is arriving or new: a finisher is whole and a received
// frame complete, so neither grows.
func (b *byteBudget) tryGrantLocked(f *frameShare, want int64) bool {
	free := b.capBytes - b.mu.usedBytes
	if b.mu.arrivingBytes+want <= b.arrivingCapBytes {
		if want > free {
			// Waiting on finishers and received frames, which hold
			// the rest.
			return false
		}
		b.mu.usedBytes += want
		b.mu.arrivingBytes += want
		f.heldBytes += want
		f.arriving = true
		return true
	}
	rest := f.sizeBytes - f.heldBytes
	if rest > free {
		return false
	}
	b.mu.usedBytes += rest
	if f.arriving {
		b.mu.arrivingBytes -= f.heldBytes
		f.arriving = false
	}
	f.heldBytes += rest
	return true
}

// received marks f's bytes all read: they no longer count as arriving.
func (b *byteBudget) received(f *frameShare) {
	if !f.arriving {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.arrivingBytes -= f.heldBytes
	f.arriving = false
	b.grantLocked()
}

// release returns f's whole share.
func (b *byteBudget) release(f *frameShare) {
	if f.heldBytes == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.usedBytes -= f.heldBytes
	if f.arriving {
		b.mu.arrivingBytes -= f.heldBytes
		f.arriving = false
	}
	f.heldBytes = 0
	b.grantLocked()
}

func (b *byteBudget) grantLocked() {
	for len(b.mu.waiters) > 0 && b.tryGrantLocked(b.mu.waiters[0].share, b.mu.waiters[0].want) {
		close(b.mu.waiters[0].ready)
		b.mu.waiters[0] = nil
		b.mu.waiters = b.mu.waiters[1:]
	}
}

func (b *byteBudget) free() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.capBytes - b.mu.usedBytes
}

// maxFirstShareBytes is the largest first share: 64 KiB.
const maxFirstShareBytes = 1 << 16

// firstShareBytes bounds what a frame takes of the budget before its
// bytes arrive (see growFrame): a power of two between the smallest
// pooled frame buffer and maxFirstShareBytes, small enough that every connection
// holding that much leaves half the budget (a client announcing large
// frames on many connections gets no further), large enough that most
// requests are read whole at once.
func firstShareBytes(budgetBytes int64, maxConns int) int64 {
	n := min(max(budgetBytes/int64(2*maxConns), 1<<minPooledFrameShift), maxFirstShareBytes)
	return 1 << (bits.Len64(uint64(n)) - 1)
}

// nextShare is the share a frame of size bytes holding held grows to. A
// frame's shares are the rungs of a ladder down from its size by factors
// of frameGrowth: it starts on the highest rung within first (a frame
// that small is read whole at once) and climbs a rung each time its
// buffer fills. So its share stays within frameGrowth times what it has
// received, the last step is always to the whole frame, and the bytes
// copied on the way are about size/(frameGrowth-1).
func nextShare(size, held, first int64) int64 {
	target := size
	for target > first && target/frameGrowth > held {
		target /= frameGrowth
	}
	return target
}

// frameGrowth is the ratio between a frame's successive shares. 4 reads a
// 1 MiB frame in four steps from 16 KiB, copying 336 KiB on the way; 2
// would copy about the whole frame, 8 a seventh of it but hold up to 8
// times what was received.
const frameGrowth = 4
