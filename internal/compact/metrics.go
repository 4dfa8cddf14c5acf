package compact

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts one agent's compaction: bytes read and written (their
// ratio is the write amplification compaction adds to the produce path's
// one write), swaps by outcome, and the lag.
type Metrics struct {
	read, written prometheus.Counter
	swaps         *prometheus.CounterVec
	lag           prometheus.Gauge
	pace          prometheus.Gauge
}

// NewMetrics returns unregistered metrics; Collectors lists them for a
// registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		read: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_compaction_read_bytes_total",
			Help: "Batch bytes the compactor read from level-0 objects."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_compaction_written_bytes_total",
			Help: "Bytes of the per-partition objects the compactor wrote (uploaded, swapped in or not)."}),
		swaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_compaction_swaps_total",
			Help: "Index swaps the compactor proposed, by result: done, lost (a race changed the run first; the object is left for garbage collection) or failed."},
			[]string{"result"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strand_compaction_lag_seconds",
			Help: "Age (by its key time) of the oldest level-0 index entry the last pass left uncompacted in the partitions this agent owns."}),
		pace: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strand_compaction_pace_bytes_per_second",
			Help: "The read pace of the last pass: the bytes it found due spread over most of the interval, within the floor and --compaction-max-bytes-per-sec."}),
	}
	for _, r := range []string{"done", "lost", "failed"} {
		m.swaps.WithLabelValues(r)
	}
	return m
}

// Collectors returns the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.read, m.written, m.swaps, m.lag, m.pace}
}
