package connect

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the connectors' series on one agent; the caller registers
// Collectors once.
type Metrics struct {
	owned    *prometheus.GaugeVec
	restarts *prometheus.CounterVec
	failures *prometheus.CounterVec
}

// NewMetrics makes the series.
func NewMetrics() *Metrics {
	return &Metrics{
		owned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_connect_connectors",
			Help: "Connectors placed on this agent, by state: running, failed, paused or unassigned (started, not yet running)."}, []string{"state"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_task_restarts_total",
			Help: "Times a connector's task was started again on this agent after it failed."}, []string{"connector"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_connect_task_failures_total",
			Help: "Times a connector's task failed on this agent."}, []string{"connector"}),
	}
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

func (m *Metrics) forget(connector string) {
	m.restarts.DeleteLabelValues(connector)
	m.failures.DeleteLabelValues(connector)
}
