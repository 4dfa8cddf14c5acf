package viewsnap

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the snapshots' series, labelled by view; the caller
// registers Collectors once.
type Metrics struct {
	snapshots       *prometheus.CounterVec
	snapshotBytes   *prometheus.CounterVec
	snapshotSize    *prometheus.GaugeVec
	snapshotSeconds *prometheus.GaugeVec
	restores        *prometheus.CounterVec
	restoreSeconds  *prometheus.GaugeVec
}

// NewMetrics makes the series.
func NewMetrics() *Metrics {
	return &Metrics{
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_snapshots_total",
			Help: "Snapshots of a materialized view's state this agent uploaded."}, []string{"view"}),
		snapshotBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_snapshot_uploaded_bytes_total",
			Help: "Bytes this agent uploaded for a materialized view's snapshots (files earlier snapshots had are not uploaded again)."}, []string{"view"}),
		snapshotSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_snapshot_bytes",
			Help: "Size of the newest snapshot of a materialized view this agent took."}, []string{"view"}),
		snapshotSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_snapshot_duration_seconds",
			Help: "How long this agent's newest snapshot of a materialized view took (checkpoint, uploads, manifest, GC)."}, []string{"view"}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_restores_total",
			Help: "Times a materialized view's missing state was looked for in its snapshots, by result: restored, none (no snapshot), failed (rebuilt from the inputs' beginning)."}, []string{"view", "result"}),
		restoreSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_restore_duration_seconds",
			Help: "How long the last restore of a materialized view's state from its snapshot took (download and checks)."}, []string{"view"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.snapshots, m.snapshotBytes, m.snapshotSize, m.snapshotSeconds, m.restores, m.restoreSeconds}
}
