package sinks

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the sinks' series, labelled by sink, reported by the
// agent that runs the sink; the caller registers Collectors once.
type Metrics struct {
	records   *prometheus.CounterVec
	txns      *prometheus.CounterVec
	failures  *prometheus.CounterVec
	lastEpoch *prometheus.GaugeVec
	lag       *prometheus.GaugeVec
	running   *prometheus.GaugeVec
	// restoredAhead counts restored snapshots found ahead of the
	// committed progress (snapshot.go: never, for a sound snapshot).
	restoredAhead *prometheus.CounterVec
}

func newMetrics() *Metrics {
	return &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_sink_records_total",
			Help: "Records a sink wrote to its topic in committed transactions, on this agent."}, []string{"sink"}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_sink_transactions_total",
			Help: "Kafka transactions a sink committed on this agent (one per epoch)."}, []string{"sink"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_sink_failures_total",
			Help: "Times a sink failed on this agent and started again from its committed progress."}, []string{"sink"}),
		lastEpoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_sink_last_commit_timestamp_seconds",
			Help: "When a sink last committed a transaction (unix seconds)."}, []string{"sink"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_sink_input_lag_records",
			Help: "Records a sink's committed progress is behind its input topics' ends (measured every 5 s)."}, []string{"sink"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_sink_owned",
			Help: "1 while this agent owns and runs the sink."}, []string{"sink"}),
		restoredAhead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_sink_restored_ahead_total",
			Help: "Restored snapshots of a sink's state found ahead of its committed progress, and so not used."}, []string{"sink"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.records, m.txns, m.failures, m.lastEpoch, m.lag, m.running, m.restoredAhead}
}

func (m *Metrics) forget(sink string) {
	m.records.DeleteLabelValues(sink)
	m.txns.DeleteLabelValues(sink)
	m.failures.DeleteLabelValues(sink)
	m.lastEpoch.DeleteLabelValues(sink)
	m.lag.DeleteLabelValues(sink)
	m.running.DeleteLabelValues(sink)
	m.restoredAhead.DeleteLabelValues(sink)
}
