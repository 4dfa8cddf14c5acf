package offsetstopic

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts one agent's __consumer_offsets records: written, lost
// (by why) and the write attempts that failed.
type Metrics struct {
	written       prometheus.Counter
	lost          *prometheus.CounterVec
	writeFailures prometheus.Counter
}

// NewMetrics returns unregistered metrics; Collectors lists them.
func NewMetrics() *Metrics {
	m := &Metrics{
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_consumer_offsets_records_written_total",
			Help: "Records (committed offsets, group states, tombstones) this agent wrote to __consumer_offsets."}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_consumer_offsets_records_lost_total",
			Help: "Changes of committed offsets or group states whose __consumer_offsets record this agent never wrote, by reason: write_failed (every attempt failed) or queue_full. The metadata database still holds them; the next change of the same key writes its record."},
			[]string{"reason"}),
		writeFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_consumer_offsets_write_failures_total",
			Help: "Attempts to write records to __consumer_offsets that failed (each is retried, a bounded number of times)."}),
	}
	for _, r := range []string{reasonWriteFailed, reasonQueueFull} {
		m.lost.WithLabelValues(r)
	}
	return m
}

// Collectors returns the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.written, m.lost, m.writeFailures}
}

const (
	reasonWriteFailed = "write_failed"
	reasonQueueFull   = "queue_full"
)
