package bench

import (
	"math"
	"runtime/metrics"
	"testing"
)

func TestSchedQuantiles(t *testing.T) {
	buckets := []float64{0, 1e-3, 2e-3, 10e-3, math.Inf(1)}
	before := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{5, 5, 5, 5}}
	// 100 new waits: 90 under 1 ms, 8 in [1, 2) ms, 1 in [2, 10) ms,
	// 1 above 10 ms.
	after := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{95, 13, 6, 6}}
	q, n := schedQuantiles(before, after, 0.5, 0.98, 0.99, 1)
	if n != 100 {
		t.Fatalf("count %d, want 100", n)
	}
	want := []float64{1, 2, 10, 10}
	for i := range want {
		if math.Abs(q[i]-want[i]) > 1e-9 {
			t.Errorf("quantile %d: %v ms, want %v", i, q[i], want[i])
		}
	}
	if _, n := schedQuantiles(after, after, 0.5); n != 0 {
		t.Errorf("no new waits: count %d, want 0", n)
	}
	if h := schedLatencies(); h == nil || len(h.Counts) == 0 {
		t.Errorf("the runtime serves no %s histogram", schedLatencyMetric)
	}
}
