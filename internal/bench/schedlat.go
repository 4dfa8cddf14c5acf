package bench

import (
	"math"
	"runtime/metrics"
)

// schedLatencyMetric is the Go runtime's histogram of the time
// goroutines spent runnable before running. With --embedded the agent
// is this process, so its growth over the load says how long a pull
// query's goroutine waited for a processor (see views' gate.go).
const schedLatencyMetric = "/sched/latencies:seconds"

// schedLatencies reads the runtime's histogram of scheduling
// latencies (cumulative since the process started).
func schedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencyMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedQuantiles returns the q-quantiles, in milliseconds, of the
// latencies recorded between two readings of the histogram (each the
// upper bound of its bucket, the lower one for the last unbounded
// bucket), and the count.
func schedQuantiles(before, after *metrics.Float64Histogram, qs ...float64) ([]float64, uint64) {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return nil, 0
	}
	var total uint64
	d := make([]uint64, len(after.Counts))
	for i := range d {
		d[i] = after.Counts[i] - before.Counts[i]
		total += d[i]
	}
	if total == 0 {
		return nil, 0
	}
	out := make([]float64, len(qs))
	for j, q := range qs {
		rank := uint64(math.Ceil(q * float64(total)))
		var seen uint64
		for i, n := range d {
			seen += n
			if seen >= rank {
				hi := after.Buckets[i+1]
				if math.IsInf(hi, 1) {
					hi = after.Buckets[i]
				}
				out[j] = hi * 1e3
				break
			}
		}
	}
	return out, total
}
