package source

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the sources' counters, labelled by source; the caller
// registers them (Collectors) once per agent and hands them to every
// Reader and Scan.
type Metrics struct {
	records *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	bad     *prometheus.CounterVec
	late    *prometheus.CounterVec
}

// NewMetrics makes the counters.
func NewMetrics() *Metrics {
	return &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_source_records_total",
			Help: "Records a SQL source read (committed records only, bad ones included)."}, []string{"source"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_source_bytes_total",
			Help: "Bytes of keys and values a SQL source read."}, []string{"source"}),
		bad: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_source_bad_records_total",
			Help: "Records a SQL source could not decode, by reason; dropped or sent to its dead-letter topic."}, []string{"source", "reason"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_source_late_records_total",
			Help: "Records whose event time was earlier than their partition's watermark."}, []string{"source"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.records, m.bytes, m.bad, m.late}
}

// Forget drops a dropped source's series.
func (m *Metrics) Forget(source string) {
	m.records.DeleteLabelValues(source)
	m.bytes.DeleteLabelValues(source)
	m.late.DeleteLabelValues(source)
	for _, r := range Reasons {
		m.bad.DeleteLabelValues(source, string(r))
	}
}

// sourceMetrics are one source's counters; nil Metrics count nothing.
type sourceMetrics struct {
	records, bytes, late prometheus.Counter
	bad                  map[Reason]prometheus.Counter
}

func (m *Metrics) of(source string) *sourceMetrics {
	if m == nil {
		m = NewMetrics() // unregistered: counted, not exported
	}
	sm := &sourceMetrics{records: m.records.WithLabelValues(source), bytes: m.bytes.WithLabelValues(source),
		late: m.late.WithLabelValues(source), bad: map[Reason]prometheus.Counter{}}
	for _, r := range Reasons {
		sm.bad[r] = m.bad.WithLabelValues(source, string(r))
	}
	return sm
}

func (sm *sourceMetrics) read(r recordSize) {
	sm.records.Inc()
	sm.bytes.Add(float64(len(r.Key) + len(r.Value)))
}

type recordSize struct{ Key, Value []byte }
