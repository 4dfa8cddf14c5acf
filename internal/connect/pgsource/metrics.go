package pgsource

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the PostgreSQL sources' series, labelled by connector,
// reported by the agent running the task; the caller registers
// Collectors once.
type Metrics struct {
	records       *prometheus.CounterVec
	txns          *prometheus.CounterVec
	sourceTxns    *prometheus.CounterVec
	snapshotRows  *prometheus.CounterVec
	walLag        *prometheus.GaugeVec
	lagSeconds    *prometheus.GaugeVec
	slotRetained  *prometheus.GaugeVec
	confirmedLSN  *prometheus.GaugeVec
	skippedResent *prometheus.CounterVec
}

// NewMetrics makes the series, unregistered.
func NewMetrics() *Metrics {
	c := []string{"connector"}
	return &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_pgsource_records_total",
			Help: "Change events a PostgreSQL source committed to its topics, by op (c, u, d, r; tombstones not counted)."}, []string{"connector", "op"}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_pgsource_transactions_total",
			Help: "Kafka transactions a PostgreSQL source committed (each holds one or more whole PostgreSQL transactions, or a part of the snapshot)."}, c),
		sourceTxns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_pgsource_source_transactions_total",
			Help: "PostgreSQL transactions a PostgreSQL source committed to its topics."}, c),
		snapshotRows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_pgsource_snapshot_rows_total",
			Help: "Rows the initial snapshot committed (a snapshot redone after a restart counts again)."}, c),
		walLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connect_pgsource_wal_lag_bytes",
			Help: "The server's current WAL LSN minus the slot's confirmed flush LSN (measured every 5 s)."}, c),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connect_pgsource_lag_seconds",
			Help: "At the last Kafka commit, how long after its last PostgreSQL transaction's commit it was; 0 once caught up with an idle server."}, c),
		slotRetained: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connect_pgsource_slot_retained_wal_bytes",
			Help: "WAL the replication slot keeps on the server: current WAL LSN minus the slot's restart LSN (measured every 5 s)."}, c),
		confirmedLSN: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connect_pgsource_confirmed_lsn",
			Help: "The LSN last confirmed to the server (flushed: committed in Kafka)."}, c),
		skippedResent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_pgsource_skipped_transactions_total",
			Help: "PostgreSQL transactions the server sent again after a restart that were already committed, and so skipped."}, c),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.records, m.txns, m.sourceTxns, m.snapshotRows, m.walLag, m.lagSeconds,
		m.slotRetained, m.confirmedLSN, m.skippedResent}
}

// declare makes connector's series, at zero, when its task starts: a
// dashboard shows a source that has not connected yet as a flat line
// rather than none.
func (m *Metrics) declare(connector string) {
	if m == nil {
		return
	}
	for _, op := range []string{"c", "u", "d", "r"} {
		m.records.WithLabelValues(connector, op)
	}
	for _, v := range []*prometheus.CounterVec{m.txns, m.sourceTxns, m.snapshotRows, m.skippedResent} {
		v.WithLabelValues(connector)
	}
	for _, v := range []*prometheus.GaugeVec{m.walLag, m.lagSeconds, m.slotRetained, m.confirmedLSN} {
		v.WithLabelValues(connector)
	}
}

// Forget drops connector's series (the connector deleted).
func (m *Metrics) Forget(connector string) {
	for _, op := range []string{"c", "u", "d", "r"} {
		m.records.DeleteLabelValues(connector, op)
	}
	for _, v := range []*prometheus.CounterVec{m.txns, m.sourceTxns, m.snapshotRows, m.skippedResent} {
		v.DeleteLabelValues(connector)
	}
	for _, v := range []*prometheus.GaugeVec{m.walLag, m.lagSeconds, m.slotRetained, m.confirmedLSN} {
		v.DeleteLabelValues(connector)
	}
}
