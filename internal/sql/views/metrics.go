package views

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the views' series, labelled by view; the caller
// registers Collectors once.
type Metrics struct {
	epochs    *prometheus.CounterVec
	changes   *prometheus.CounterVec
	failures  *prometheus.CounterVec
	lastEpoch *prometheus.GaugeVec
	offsets   *prometheus.GaugeVec
	lag       *prometheus.GaugeVec
	late      *prometheus.CounterVec
	watermark *prometheus.GaugeVec
}

func newMetrics() *Metrics {
	return &Metrics{
		epochs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_epochs_total",
			Help: "Epochs a materialized view committed on this agent."}, []string{"view"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_input_changes_total",
			Help: "Input changes a materialized view consumed on this agent."}, []string{"view"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_failures_total",
			Help: "Times a materialized view failed (to compile or to run) and was restarted from its checkpoint."}, []string{"view"}),
		lastEpoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_last_epoch_timestamp_seconds",
			Help: "When a materialized view last committed an epoch (unix seconds): its freshness."}, []string{"view"}),
		offsets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_input_offsets",
			Help: "Sum over a materialized view's input partitions of the next offset to read."}, []string{"view"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_input_lag_records",
			Help: "Records a materialized view's committed state is behind its input topics' ends (measured every 5 s)."}, []string{"view"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_late_records_total",
			Help: "Records a materialized view whose windows close by the watermark dropped as late: earlier than their partition's watermark, or for a closed window."}, []string{"view"}),
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_watermark_timestamp_seconds",
			Help: "A materialized view's watermark (unix seconds, 0 while it has none): windows ending at or before it are closed."}, []string{"view"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.epochs, m.changes, m.failures, m.lastEpoch, m.offsets, m.lag, m.late, m.watermark}
}

func (m *Metrics) forget(view string) {
	m.epochs.DeleteLabelValues(view)
	m.changes.DeleteLabelValues(view)
	m.failures.DeleteLabelValues(view)
	m.lastEpoch.DeleteLabelValues(view)
	m.offsets.DeleteLabelValues(view)
	m.lag.DeleteLabelValues(view)
	m.late.DeleteLabelValues(view)
	m.watermark.DeleteLabelValues(view)
}
