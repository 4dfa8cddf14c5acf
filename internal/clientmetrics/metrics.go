package clientmetrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of requests, the values of the result label.
const (
	resultOK          = "ok"
	resultThrottled   = "throttled"
	resultUnknownSub  = "unknown_subscription"
	resultTooLarge    = "too_large"
	resultTerminated  = "after_terminating"
	resultCompression = "unsupported_compression"
	resultPayload     = "unreadable"
	resultInvalid     = "invalid"
)

// Reasons a pushed point is not exported, the values of the reason label.
const (
	dropUnsupported = "unsupported_type"
	dropReserved    = "reserved_name"
	dropConflict    = "type_conflict"
	dropCap         = "series_cap"
)

func resultOf(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, ErrThrottled):
		return resultThrottled
	case errors.Is(err, ErrUnknownSubscription):
		return resultUnknownSub
	case errors.Is(err, ErrTooLarge):
		return resultTooLarge
	case errors.Is(err, ErrTerminated):
		return resultTerminated
	case errors.Is(err, ErrCompression):
		return resultCompression
	case errors.Is(err, ErrPayload):
		return resultPayload
	}
	return resultInvalid
}

// managerCounters are the Manager's own series, about the telemetry
// rather than from it.
type managerCounters struct {
	subscriptions, pushes, droppedPoints *prometheus.CounterVec
	evicted                              prometheus.Counter
	clients, series                      prometheus.GaugeFunc
}

func newManagerCounters(m *Manager) managerCounters {
	c := managerCounters{
		subscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_client_telemetry_subscriptions_total",
			Help: "GetTelemetrySubscriptions requests (KIP-714) this agent answered, by result (ok, throttled: asked again within the push interval)."}, []string{"result"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_client_telemetry_pushes_total",
			Help: "PushTelemetry requests (KIP-714) this agent answered, by result: ok, throttled, unknown_subscription, too_large, after_terminating, unsupported_compression, unreadable, invalid."}, []string{"result"}),
		droppedPoints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_client_telemetry_dropped_points_total",
			Help: "Pushed data points not re-exported, by reason: unsupported_type (histograms, summaries, delta sums), reserved_name (a strand_, go_ or process_ name), type_conflict (a name another client pushed as another type), series_cap (--client-telemetry-max-series reached by one client)."}, []string{"reason"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_client_telemetry_evicted_clients_total",
			Help: "Telemetry clients forgotten, with their series, to stay within --client-telemetry-max-clients or --client-telemetry-max-series (the least recently heard from first)."}),
	}
	c.clients = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strand_client_telemetry_clients",
		Help: "Clients whose telemetry this agent tracks: those that asked for a subscription or pushed within three push intervals."}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.expireLocked(m.clk.Now())
		return float64(len(m.mu.clients))
	})
	c.series = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strand_client_telemetry_series",
		Help: "Series re-exported from clients' pushed metrics, across clients (bounded by --client-telemetry-max-series)."}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.expireLocked(m.clk.Now())
		return float64(m.mu.series)
	})
	// Every result and reason is declared, so dashboards see zeros.
	for _, r := range []string{resultOK, resultThrottled} {
		c.subscriptions.WithLabelValues(r)
	}
	for _, r := range []string{resultOK, resultThrottled, resultUnknownSub, resultTooLarge, resultTerminated, resultCompression, resultPayload, resultInvalid} {
		c.pushes.WithLabelValues(r)
	}
	for _, r := range []string{dropUnsupported, dropReserved, dropConflict, dropCap} {
		c.droppedPoints.WithLabelValues(r)
	}
	return c
}

func (c *managerCounters) subscribe(result string) { c.subscriptions.WithLabelValues(result).Inc() }
func (c *managerCounters) push(result string)      { c.pushes.WithLabelValues(result).Inc() }
func (c *managerCounters) dropped(reason string, n int) {
	if n > 0 {
		c.droppedPoints.WithLabelValues(reason).Add(float64(n))
	}
}

// Collectors are the Manager's own series, to register beside the
// Manager itself (which exports the pushed ones).
func (m *Manager) Collectors() []prometheus.Collector {
	c := &m.counters
	return []prometheus.Collector{c.subscriptions, c.pushes, c.droppedPoints, c.evicted, c.clients, c.series}
}
