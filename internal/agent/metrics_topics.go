package agent

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
)

// topicTraffic counts the record bytes and records produced to and
// fetched from each topic (kafka.TopicObserver), as Kafka's
// BrokerTopicMetrics do. The hot path is a sync.Map load by topic id
// and atomic adds: no lock every connection shares, no name lookup.
// Names are resolved at scrape time from the metadata copy; a topic
// that no longer exists there is dropped with its counters, as Kafka
// drops a deleted topic's metrics.
type topicTraffic struct {
	byID sync.Map // meta.TopicID -> *topicCounts
	// view opens the metadata copy; set before the collector is
	// registered.
	view func() *meta.View

	bytesIn, bytesOut, recordsIn, recordsOut *prometheus.Desc
}

type topicCounts struct {
	bytesIn, bytesOut, recordsIn, recordsOut atomic.Int64
}

func newTopicTraffic() *topicTraffic {
	label := []string{"topic"}
	return &topicTraffic{
		bytesIn: prometheus.NewDesc("strand_topic_bytes_in_total",
			"Record-batch bytes of Produce requests written to the topic through this agent (Kafka's BytesInPerSec).", label, nil),
		bytesOut: prometheus.NewDesc("strand_topic_bytes_out_total",
			"Record-batch bytes of the topic this agent's Fetch answers carried (Kafka's BytesOutPerSec).", label, nil),
		recordsIn: prometheus.NewDesc("strand_topic_records_in_total",
			"Records of Produce requests written to the topic through this agent (Kafka's MessagesInPerSec).", label, nil),
		recordsOut: prometheus.NewDesc("strand_topic_records_out_total",
			"Records in the whole batches of the topic this agent's Fetch answers carried.", label, nil),
	}
}

func (t *topicTraffic) counts(id meta.TopicID) *topicCounts {
	if c, ok := t.byID.Load(id); ok {
		return c.(*topicCounts)
	}
	c, _ := t.byID.LoadOrStore(id, new(topicCounts))
	return c.(*topicCounts)
}

func (t *topicTraffic) produced(id meta.TopicID, bytes, records int64) {
	c := t.counts(id)
	c.bytesIn.Add(bytes)
	c.recordsIn.Add(records)
}

func (t *topicTraffic) fetched(id meta.TopicID, bytes, records int64) {
	c := t.counts(id)
	c.bytesOut.Add(bytes)
	c.recordsOut.Add(records)
}

func (t *topicTraffic) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.bytesIn
	ch <- t.bytesOut
	ch <- t.recordsIn
	ch <- t.recordsOut
}

func (t *topicTraffic) Collect(ch chan<- prometheus.Metric) {
	v := t.view()
	defer v.Close()
	t.byID.Range(func(k, c any) bool {
		topic, ok, err := v.TopicByID(k.(meta.TopicID))
		if err != nil {
			return true // a read error: keep the counts, skip the scrape's sample
		}
		if !ok {
			t.byID.Delete(k)
			return true
		}
		tc := c.(*topicCounts)
		ch <- prometheus.MustNewConstMetric(t.bytesIn, prometheus.CounterValue, float64(tc.bytesIn.Load()), topic.Name)
		ch <- prometheus.MustNewConstMetric(t.bytesOut, prometheus.CounterValue, float64(tc.bytesOut.Load()), topic.Name)
		ch <- prometheus.MustNewConstMetric(t.recordsIn, prometheus.CounterValue, float64(tc.recordsIn.Load()), topic.Name)
		ch <- prometheus.MustNewConstMetric(t.recordsOut, prometheus.CounterValue, float64(tc.recordsOut.Load()), topic.Name)
		return true
	})
}

// connsCollector is strand_kafka_connections: the connections open now,
// by listener, read from the server at scrape time, every listener of
// the agent reported (0 when none are open).
type connsCollector struct {
	srv       *kafka.Server
	listeners []string
	desc      *prometheus.Desc
}

func newConnsCollector(srv *kafka.Server, listeners []string) *connsCollector {
	return &connsCollector{srv: srv, listeners: listeners,
		desc: prometheus.NewDesc("strand_kafka_connections", "Kafka connections open now, by listener.", []string{"listener"}, nil)}
}

func (c *connsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *connsCollector) Collect(ch chan<- prometheus.Metric) {
	open := c.srv.ConnsByListener()
	names := slices.Clone(c.listeners)
	for name := range open {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(open[name]), name)
	}
}

// registerConnMetrics exports the open connections per listener, and
// starts every listener's opened counter at 0 so rates exist from the
// first scrape.
func (a *Agent) registerConnMetrics() {
	names := make([]string, len(a.listeners))
	for i, l := range a.listeners {
		names[i] = l.name
		a.metrics.connsOpened.WithLabelValues(l.name)
	}
	a.metrics.reg.MustRegister(newConnsCollector(a.server, names))
}
