package fetch

import (
	"math/bits"
	"sync/atomic"
)

// Answers are the fetch path's largest allocations: every read copies
// its records into a new slice (copy.go), a consumer at 100 MB/s
// allocates 100 MB/s of them, and under the agent's memory limit the
// collector runs as often as that rate says. A caller that is done with
// an answer (the Kafka handler, once the response is written) gives it
// back with Reader.Recycle, and the next read of about its size copies
// into it instead.
//
// The pool holds buffers of a capacity class each: class i holds
// capacities in [minPooledBytes<<i, minPooledBytes<<(i+1)), and a read of
// n bytes takes from the smallest class whose every buffer holds n, or
// from the class of n itself (get).
// The pool keeps at most pooledIdleBytes of capacity idle, in any
// classes: a Fetch of 1 MiB from each of 8 partitions gives back 8 MiB
// at once, and two of those are kept.
const (
	minPooledBytes  = 64 << 10
	pooledClasses   = 7 // up to 8 MiB: larger answers are rare
	pooledIdleBytes = 16 << 20
)

type answerPool struct {
	classes [pooledClasses]chan []byte
	// idle is the capacity of the buffers the classes hold.
	idle atomic.Int64
}

func newAnswerPool() *answerPool {
	p := new(answerPool)
	for i := range p.classes {
		p.classes[i] = make(chan []byte, pooledIdleBytes/(minPooledBytes<<i))
	}
	return p
}

// get returns a buffer of n bytes from the pool, its contents
// anything, or nil if the pool has none that holds n. It takes from the
// smallest class all of whose buffers hold n, else from n's own class,
// whose buffer may be too small: answers are allocated at their exact
// size, so a consumer's answers of about one size land in one class, and
// a buffer found too small is dropped, leaving the class the larger ones.
func (p *answerPool) get(n int) []byte {
	if p == nil || n <= minPooledBytes {
		return nil
	}
	all := bits.Len(uint((n - 1) / minPooledBytes))
	for _, i := range [2]int{all, bits.Len(uint(n/minPooledBytes)) - 1} {
		if i >= pooledClasses {
			continue
		}
		select {
		case b := <-p.classes[i]:
			p.idle.Add(-int64(cap(b)))
			if cap(b) >= n {
				return b[:n]
			}
		default:
		}
	}
	return nil
}

// put keeps b for a later get, or drops it.
func (p *answerPool) put(b []byte) {
	if p == nil || cap(b) < minPooledBytes {
		return
	}
	i := bits.Len(uint(cap(b)/minPooledBytes)) - 1
	if i >= pooledClasses {
		return
	}
	if p.idle.Add(int64(cap(b))) > pooledIdleBytes {
		p.idle.Add(-int64(cap(b)))
		return
	}
	select {
	case p.classes[i] <- b[:0]:
	default:
		p.idle.Add(-int64(cap(b)))
	}
}
