package bench

import (
	"math"
	"math/bits"
	"sync"
)

// histSubBits sets the histogram's precision: every power-of-two range of
// values is split into 2^histSubBits equal buckets, so a bucket is at most
// 1/128 of its lower bound wide. Reporting a bucket's midpoint puts any
// percentile within 1/256 (0.39%) of the exact value at that rank; values
// below 128 are counted exactly. HdrHistogram with 2 significant digits
// gives about 1%.
const (
	histSubBits    = 7
	histSubBuckets = 1 << histSubBits
	// histBuckets covers every non-negative int64: the top power of two,
	// 2^62, has shift 62-histSubBits.
	histBuckets = (63-histSubBits)*histSubBuckets + histSubBuckets
)

// MaxRelativeError bounds |Quantile(q) - exact| / exact for any q, where
// exact is the recorded value of rank ceil(q*count).
const MaxRelativeError = 1.0 / (2 * histSubBuckets)

// Histogram counts non-negative int64 values (nanoseconds in this package)
// in log-linear buckets with bounded relative error (MaxRelativeError),
// as HdrHistogram does, in a fixed 58 KiB whatever the range. It is not
// safe for concurrent use; see recorder.
type Histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	min, max int64
	sum      float64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	h := &Histogram{}
	h.Reset()
	return h
}

// Reset empties h.
func (h *Histogram) Reset() {
	clear(h.counts[:])
	h.n, h.sum = 0, 0
	h.min, h.max = math.MaxInt64, 0
}

// histIndex maps v >= 0 to its bucket: the linear range below
// histSubBuckets maps to itself; above, the top histSubBits+1 bits pick the
// bucket within the value's power of two.
func histIndex(v int64) int {
	shift := bits.Len64(uint64(v)) - 1 - histSubBits
	if shift < 0 {
		shift = 0
	}
	return shift*histSubBuckets + int(v>>shift)
}

// histBucket is the inverse of histIndex: the lowest value of bucket i and
// the bucket's width.
func histBucket(i int) (low, width int64) {
	shift := i/histSubBuckets - 1
	if shift < 0 {
		shift = 0
	}
	m := int64(i - shift*histSubBuckets)
	return m << shift, 1 << shift
}

// Record adds one value. Negative values count as 0: a clock that steps
// back must not index outside the table.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[histIndex(v)]++
	h.n++
	h.sum += float64(v)
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// Merge adds every value counted in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest value recorded, exactly; 0 if none.
func (h *Histogram) Max() int64 { return h.max }

// Min is the smallest value recorded, exactly; 0 if none.
func (h *Histogram) Min() int64 {
	if h.n == 0 {
		return 0
	}
	return h.min
}

// Mean is the exact mean; 0 if none.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile estimates the value of rank ceil(q*Count()) (at least 1) among
// the recorded values in ascending order: that value's bucket midpoint,
// clamped to the exact min and max. q is clamped to [0, 1]; 0 if empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := histBucket(i)
			return min(max(low+(width-1)/2, h.min), h.max)
		}
	}
	return h.max
}

// recorder is a Histogram shared by the goroutines that measure one kind
// of latency: kgo's promise goroutines and the consumers. It keeps the
// run's total and the current interval, which the progress line and the
// plot read once a second.
type recorder struct {
	mu struct {
		sync.Mutex
		total    *Histogram
		interval *Histogram
	}
}

func newRecorder() *recorder {
	r := &recorder{}
	r.mu.total = NewHistogram()
	r.mu.interval = NewHistogram()
	return r
}

// record adds v to the current interval, and to the total if measured
// (the value's record was sent after warm-up).
func (r *recorder) record(v int64, measured bool) {
	r.mu.Lock()
	if measured {
		r.mu.total.Record(v)
	}
	r.mu.interval.Record(v)
	r.mu.Unlock()
}

// takeInterval swaps out the interval histogram, handing the old one to
// the caller, who may pass it back as spare to avoid an allocation.
func (r *recorder) takeInterval(spare *Histogram) *Histogram {
	if spare == nil {
		spare = NewHistogram()
	} else {
		spare.Reset()
	}
	r.mu.Lock()
	out := r.mu.interval
	r.mu.interval = spare
	r.mu.Unlock()
	return out
}

// resetTotal forgets everything recorded so far (the end of warm-up).
func (r *recorder) resetTotal() {
	r.mu.Lock()
	r.mu.total.Reset()
	r.mu.Unlock()
}

// snapshotTotal copies the total histogram.
func (r *recorder) snapshotTotal() *Histogram {
	out := NewHistogram()
	r.mu.Lock()
	out.Merge(r.mu.total)
	r.mu.Unlock()
	return out
}
