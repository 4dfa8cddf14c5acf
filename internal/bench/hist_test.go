package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistogramQuantilesAgainstSortedReference(t *testing.T) {
	quantiles := []float64{0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1}
	for _, tc := range []struct {
		name string
		n    int
		gen  func(r *rand.Rand) int64
	}{
		{"small integers (exact range)", 10_000, func(r *rand.Rand) int64 { return r.Int64N(histSubBuckets) }},
		{"uniform up to 1s in ns", 100_000, func(r *rand.Rand) int64 { return r.Int64N(1e9) }},
		{"exponential latency around 5ms", 100_000, func(r *rand.Rand) int64 { return int64(r.ExpFloat64() * 5e6) }},
		{"log-uniform over 12 decades", 100_000, func(r *rand.Rand) int64 { return int64(math.Pow(10, r.Float64()*12)) }},
		{"bimodal fsync and S3 tail", 50_000, func(r *rand.Rand) int64 {
			if r.IntN(100) == 0 {
				return 200e6 + r.Int64N(700e6)
			}
			return 50e3 + r.Int64N(100e3)
		}},
		{"huge values", 1_000, func(r *rand.Rand) int64 { return math.MaxInt64 - r.Int64N(1<<40) }},
		{"one constant", 1_000, func(*rand.Rand) int64 { return 123_456_789 }},
		{"single value", 1, func(*rand.Rand) int64 { return 42_000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.n)))
			h := NewHistogram()
			ref := make([]int64, tc.n)
			for i := range ref {
				ref[i] = tc.gen(r)
				h.Record(ref[i])
			}
			slices.Sort(ref)
			if h.Count() != uint64(tc.n) {
				t.Fatalf("Count = %d, want %d", h.Count(), tc.n)
			}
			if h.Min() != ref[0] || h.Max() != ref[len(ref)-1] {
				t.Fatalf("Min, Max = %d, %d, want exact %d, %d", h.Min(), h.Max(), ref[0], ref[len(ref)-1])
			}
			for _, q := range quantiles {
				rank := max(int(math.Ceil(q*float64(tc.n))), 1)
				want := ref[rank-1]
				got := h.Quantile(q)
				if err := math.Abs(float64(got) - float64(want)); err > float64(want)*MaxRelativeError {
					t.Errorf("Quantile(%v) = %d, exact %d: relative error %.5f > %.5f",
						q, got, want, err/float64(want), MaxRelativeError)
				}
			}
		})
	}
}

func TestHistogramBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	values := []int64{0, 1, histSubBuckets - 1, histSubBuckets, 2*histSubBuckets - 1, 2 * histSubBuckets, 1e9, math.MaxInt64}
	for range 100_000 {
		values = append(values, r.Int64()>>r.IntN(63))
	}
	for _, v := range values {
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, outside [0, %d)", v, i, histBuckets)
		}
		low, width := histBucket(i)
		if v < low || v-low >= width {
			t.Fatalf("value %d in bucket %d = [%d, %d+%d)", v, i, low, low, width)
		}
		if width > 1 && float64(width) > float64(low)/histSubBuckets {
			t.Fatalf("bucket %d [%d, +%d) wider than 1/%d of its lower bound", i, low, width, histSubBuckets)
		}
	}
}

func TestHistogramMergeResetNegative(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	for i := range 20_000 {
		v := int64(r.ExpFloat64() * 1e6)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	a.Merge(NewHistogram())
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("merged Quantile(%v) = %d, recorded together %d", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Count() != all.Count() || a.Mean() != all.Mean() {
		t.Errorf("merged count, mean = %d, %v; want %d, %v", a.Count(), a.Mean(), all.Count(), all.Mean())
	}
	a.Reset()
	if a.Count() != 0 || a.Quantile(0.5) != 0 || a.Max() != 0 || a.Min() != 0 {
		t.Errorf("after Reset: count %d p50 %d max %d min %d", a.Count(), a.Quantile(0.5), a.Max(), a.Min())
	}
	a.Record(-5)
	if a.Min() != 0 || a.Quantile(1) != 0 {
		t.Errorf("negative value not counted as 0: min %d max %d", a.Min(), a.Quantile(1))
	}
}

func TestRecorderIntervalAndTotal(t *testing.T) {
	r := newRecorder()
	r.record(1000, false) // warm-up: interval only
	r.record(2000, true)
	iv := r.takeInterval(nil)
	if iv.Count() != 2 {
		t.Fatalf("interval count %d, want 2", iv.Count())
	}
	if tot := r.snapshotTotal(); tot.Count() != 1 || tot.Max() != 2000 {
		t.Fatalf("total count %d max %d, want 1 and 2000", tot.Count(), tot.Max())
	}
	r.record(3000, true)
	if iv2 := r.takeInterval(iv); iv2.Count() != 1 || iv2.Max() != 3000 {
		t.Fatalf("second interval count %d max %d, want 1 and 3000", iv2.Count(), iv2.Max())
	}
	r.resetTotal()
	if tot := r.snapshotTotal(); tot.Count() != 0 {
		t.Fatalf("total after reset has %d values", tot.Count())
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	r := rand.New(rand.NewPCG(6, 7))
	vals := make([]int64, 1024)
	for i := range vals {
		vals[i] = int64(r.ExpFloat64() * 5e6)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(vals[i&1023])
	}
}
