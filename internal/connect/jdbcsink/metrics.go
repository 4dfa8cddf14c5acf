package jdbcsink

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the sinks' series, labelled by connector, reported by the
// agent that runs the task; the caller registers Collectors once. A
// nil *Metrics counts nothing.
type Metrics struct {
	rows         *prometheus.CounterVec
	batches      *prometheus.CounterVec
	batchSeconds *prometheus.HistogramVec
	lag          *prometheus.GaugeVec
	fenced       *prometheus.CounterVec
}

// NewMetrics makes the series.
func NewMetrics() *Metrics {
	return &Metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_sink_rows_total",
			Help: "Rows a JDBC sink wrote into its target in committed transactions, by operation (insert, upsert, update, delete; a key's changes within a batch count once)."},
			[]string{"connector", "op"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_sink_batches_total",
			Help: "Transactions a JDBC sink committed into its target (one per batch)."}, []string{"connector"}),
		batchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strand_connect_sink_batch_seconds",
			Help:    "Time to write one batch into the target: schema checks, the rows, the offsets and the commit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"connector"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connect_sink_lag_records",
			Help: "Records a JDBC sink's committed offsets are behind its partitions' last stable offsets, as of its last fetch."},
			[]string{"connector"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_sink_fenced_total",
			Help: "Batches rolled back because the target's offsets moved under the task (another task of the connector wrote)."},
			[]string{"connector"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.rows, m.batches, m.batchSeconds, m.lag, m.fenced}
}

// declare makes a connector's series, at zero, when its task starts:
// a sink that has not written yet shows as a flat line rather than none.
func (m *Metrics) declare(connector string) {
	if m == nil {
		return
	}
	for _, op := range []string{"insert", "upsert", "update", "delete"} {
		m.rows.WithLabelValues(connector, op)
	}
	m.batches.WithLabelValues(connector)
	m.batchSeconds.WithLabelValues(connector)
	m.lag.WithLabelValues(connector)
	m.fenced.WithLabelValues(connector)
}

// Forget drops a connector's series (the connector deleted).
func (m *Metrics) Forget(connector string) {
	if m == nil {
		return
	}
	for _, op := range []string{"insert", "upsert", "update", "delete"} {
		m.rows.DeleteLabelValues(connector, op)
	}
	m.batches.DeleteLabelValues(connector)
	m.batchSeconds.DeleteLabelValues(connector)
	m.lag.DeleteLabelValues(connector)
	m.fenced.DeleteLabelValues(connector)
}

func (m *Metrics) committed(connector string, w written, seconds float64) {
	if m == nil {
		return
	}
	for op, n := range map[string]int{"insert": w.inserted, "upsert": w.upserted, "update": w.updated, "delete": w.deleted} {
		if n > 0 {
			m.rows.WithLabelValues(connector, op).Add(float64(n))
		}
	}
	m.batches.WithLabelValues(connector).Inc()
	m.batchSeconds.WithLabelValues(connector).Observe(seconds)
}

func (m *Metrics) setLag(connector string, records int64) {
	if m != nil {
		m.lag.WithLabelValues(connector).Set(float64(records))
	}
}

func (m *Metrics) fence(connector string) {
	if m != nil {
		m.fenced.WithLabelValues(connector).Inc()
	}
}
