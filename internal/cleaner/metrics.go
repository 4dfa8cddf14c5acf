package cleaner

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts one agent's cleaning of compacted topics, beside the
// object compactor's (package compact): bytes read and written (write
// amplification), records dropped, rounds, swaps by outcome, and Kafka's
// max-dirty-percent as a ratio.
type Metrics struct {
	read, written, recordsDropped, rounds prometheus.Counter
	swaps                                 *prometheus.CounterVec
	maxDirty                              prometheus.Gauge
}

// NewMetrics returns unregistered metrics; Collectors lists them.
func NewMetrics() *Metrics {
	m := &Metrics{
		read: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_cleaner_read_bytes_total",
			Help: "Batch bytes cleaning rounds of compacted topics read and filtered."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_cleaner_written_bytes_total",
			Help: "Bytes of the objects cleaning rounds wrote (uploaded, swapped in or not)."}),
		recordsDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_cleaner_dropped_records_total",
			Help: "Records cleaning rounds dropped: superseded by a newer record of their key, tombstones past their horizon, aborted, keyless."}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_cleaner_rounds_total",
			Help: "Cleaning rounds started."}),
		swaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_cleaner_swaps_total",
			Help: "Index swaps cleaning rounds proposed, by result: done, lost (a race changed the entries first; the round ends) or failed."},
			[]string{"result"}),
		maxDirty: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strand_cleaner_max_dirty_ratio",
			Help: "Highest cleanable dirty ratio (dirty bytes over clean plus dirty) of the compacted partitions this agent owns, at the last pass: Kafka's max-dirty-percent."}),
	}
	for _, r := range []string{"done", "lost", "failed"} {
		m.swaps.WithLabelValues(r)
	}
	return m
}

// Collectors returns the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.read, m.written, m.recordsDropped, m.rounds, m.swaps, m.maxDirty}
}
