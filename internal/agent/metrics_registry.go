package agent

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/meta"
)

// registryMetrics are the schema registry's (registry.go): its requests,
// counted by the agent that served them, and what the registry holds,
// read from the agent's copy at scrape time. Registered only while the
// registry is served.
type registryMetrics struct {
	requests *prometheus.CounterVec   // endpoint, code
	latency  *prometheus.HistogramVec // endpoint
	contents *registryContents
}

func newRegistryMetrics(view func() *meta.View, logger *slog.Logger) *registryMetrics {
	return &registryMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strand_schema_registry_requests_total",
			Help: "Schema registry requests, by endpoint (the route of Confluent's API, \"unmatched\" for none) and HTTP status code.",
		}, []string{"endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strand_schema_registry_request_seconds",
			Help:    "Time to answer a schema registry request, by endpoint; a registration includes its round trip through the log.",
			Buckets: latencyBuckets,
		}, []string{"endpoint"}),
		contents: &registryContents{
			view: view,
			log:  logger,
			subjects: prometheus.NewDesc("strand_schema_registry_subjects",
				"Subjects with a live (not soft-deleted) version, in this agent's copy.", nil, nil),
			schemas: prometheus.NewDesc("strand_schema_registry_schemas",
				"Distinct schemas (ids) that live versions name, in this agent's copy.", nil, nil),
		},
	}
}

func (m *registryMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.latency, m.contents}
}

// observe counts one answered request. The labels are bounded: the
// API's routes and the HTTP statuses.
func (m *registryMetrics) observe(endpoint string, status int, took time.Duration) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(endpoint).Observe(took.Seconds())
}

// registryContents counts the subjects and schemas at scrape time: one
// pass over the subjects' versions in the local copy, which holds them
// all, so no count is kept in apply.
type registryContents struct {
	view              func() *meta.View
	log               *slog.Logger
	subjects, schemas *prometheus.Desc
}

func (c *registryContents) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.subjects
	ch <- c.schemas
}

func (c *registryContents) Collect(ch chan<- prometheus.Metric) {
	v := c.view()
	defer v.Close()
	subjects, live, err := v.SchemaSubjects()
	if err != nil {
		c.log.Warn("schema registry metrics: reading subjects", "err", err)
		return
	}
	ids := map[int32]bool{}
	n := 0
	for i, s := range subjects {
		if !live[i] {
			continue
		}
		n++
		vs, err := v.SchemaVersions(s)
		if err != nil {
			c.log.Warn("schema registry metrics: reading versions", "subject", s, "err", err)
			return
		}
		for _, sv := range vs {
			if !sv.Deleted {
				ids[sv.ID] = true
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.subjects, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.schemas, prometheus.GaugeValue, float64(len(ids)))
}
