package connect

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the connectors' series on one agent; the caller registers
// Collectors once. They count what this agent runs: sum over agents.
// They carry no connector label: a failing connector is found by its
// status (GET /connectors?expand=status), the series say that one is.
type Metrics struct {
	owned    *prometheus.GaugeVec
	restarts prometheus.Counter
	failures prometheus.Counter
}

// NewMetrics makes the series.
func NewMetrics() *Metrics {
	m := &Metrics{
		owned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connect_connectors",
			Help: "Connectors placed on this agent, by state: running, failed, paused or unassigned (starting, or not yet reported)."}, []string{"state"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_connect_task_restarts_total",
			Help: "Times a connector's task was started again on this agent after it failed (after the backoff)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_connect_task_failures_total",
			Help: "Times a connector's task failed on this agent: its Run, New or Validate returned an error, or a secret could not be read."}),
	}
	m.setOwned(nil)
	return m
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.owned, m.restarts, m.failures}
}

func (m *Metrics) setOwned(states map[string]int) {
	for _, s := range []string{"running", "failed", "paused", "unassigned"} {
		m.owned.WithLabelValues(s).Set(float64(states[s]))
	}
}
