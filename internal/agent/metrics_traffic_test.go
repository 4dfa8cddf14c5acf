package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// trafficTopic is the topic scrapeWithTraffic writes: 2 partitions of 10
// records each; group "g" commits 4 and 10 of them, group "h" 7 of
// partition 0.
const trafficTopic = "metrics"

// scrapeWithTraffic produces to and consumes from trafficTopic through
// a, commits the offsets of groups g and h, and returns a scrape of
// /metrics.
func scrapeWithTraffic(t *testing.T, a *agent.Agent) string {
	t.Helper()
	createTopic(t, a.KafkaAddr(), trafficTopic, 2)
	var rs []*kgo.Record
	for i := range 20 {
		rs = append(rs, &kgo.Record{Topic: trafficTopic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produce(t, a.KafkaAddr(), rs)
	checkRecords(t, a.KafkaAddr(), trafficTopic, rs)
	adm := kadm.NewClient(client(t, a.KafkaAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for group, offs := range map[string]map[int32]int64{"g": {0: 4, 1: 10}, "h": {0: 7}} {
		var o kadm.Offsets
		for p, at := range offs {
			o.AddOffset(trafficTopic, p, at, -1)
		}
		resp, err := adm.CommitOffsets(ctx, group, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	// The server counts a request after writing its response: wait for
	// the last commit's count before the scrape the test reads.
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_kafka_requests_total", labels: map[string]string{"api": "OffsetCommit"}},
	})
	code, body := get(t, "http://"+a.HTTPAddr()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	return body
}

// parseScrape parses a /metrics body.
func parseScrape(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// sample is the value of the sample of family name with exactly labels,
// and whether there is one.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range families[name].GetMetric() {
		if len(m.GetLabel()) == len(labels) && hasLabels(m, labels) {
			return sampleValue(m), true
		}
	}
	return 0, false
}

// TestMetricsTraffic checks the values of the operator metrics after
// known traffic: per-topic records in and out, connections, group lag
// and committed offsets, the object store's requests, build info.
func TestMetricsTraffic(t *testing.T) {
	a := start(t, t.TempDir())
	fs := parseScrape(t, scrapeWithTraffic(t, a))
	topic := map[string]string{"topic": trafficTopic}
	part := func(group string, p int) map[string]string {
		return map[string]string{"group": group, "topic": trafficTopic, "partition": fmt.Sprint(p)}
	}
	type want struct {
		name    string
		labels  map[string]string
		value   float64
		atLeast bool
	}
	for _, w := range []want{
		{"strand_topic_records_in_total", topic, 20, false},
		// The consumer may read a batch twice (a retried fetch).
		{"strand_topic_records_out_total", topic, 20, true},
		{"strand_topic_bytes_in_total", topic, 1, true},
		{"strand_topic_bytes_out_total", topic, 1, true},
		{"strand_kafka_connections_opened_total", map[string]string{"listener": "PLAINTEXT"}, 3, true},
		{"strand_kafka_connections", map[string]string{"listener": "PLAINTEXT"}, 1, true},
		{"strand_consumer_group_committed_offset", part("g", 0), 4, false},
		{"strand_consumer_group_lag", part("g", 0), 6, false},
		{"strand_consumer_group_committed_offset", part("g", 1), 10, false},
		{"strand_consumer_group_lag", part("g", 1), 0, false},
		{"strand_consumer_group_lag", part("h", 0), 3, false},
		{"strand_consumer_group_members", map[string]string{"group": "g"}, 0, false},
		{"strand_consumer_group_partitions_omitted", nil, 0, false},
		{"strand_objstore_requests_total", map[string]string{"op": "put", "result": "ok"}, 1, true},
		{"strand_objstore_request_seconds", map[string]string{"op": "put"}, 1, true},
		{"strand_meta_apply_lag_seconds", nil, 0, true},
		{"strand_build_info", nil, 1, false},
	} {
		got, ok := sample(fs, w.name, w.labels)
		if w.name == "strand_build_info" {
			ok = len(fs[w.name].GetMetric()) == 1
			got = sampleValue(fs[w.name].GetMetric()[0])
		}
		switch {
		case !ok:
			t.Errorf("%s%v: no sample; family: %v", w.name, w.labels, fs[w.name].GetMetric())
		case w.atLeast && got < w.value, !w.atLeast && got != w.value:
			t.Errorf("%s%v = %v, want %v (at least: %v)", w.name, w.labels, got, w.value, w.atLeast)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fs[name] == nil {
			t.Errorf("no %s: the Go and process collectors are not registered", name)
		}
	}
}

// TestMetricsGroupPartitionBound starts an agent that reports at most 1
// group partition: group g (2 partitions) is left out whole and counted
// in strand_consumer_group_partitions_omitted, group h (1) fits.
func TestMetricsGroupPartitionBound(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), MetricsMaxGroupPartitions: 1}, nil)
	fs := parseScrape(t, scrapeWithTraffic(t, a))
	for _, m := range fs["strand_consumer_group_lag"].GetMetric() {
		if hasLabels(m, map[string]string{"group": "g"}) {
			t.Errorf("group g reported past the bound: %v", m)
		}
	}
	if got, ok := sample(fs, "strand_consumer_group_lag", map[string]string{"group": "h", "topic": trafficTopic, "partition": "0"}); !ok || got != 3 {
		t.Errorf("group h lag %v (reported: %v), want 3", got, ok)
	}
	if got, _ := sample(fs, "strand_consumer_group_partitions_omitted", nil); got != 2 {
		t.Errorf("partitions omitted %v, want 2", got)
	}
	if got, ok := sample(fs, "strand_consumer_group_members", map[string]string{"group": "g"}); !ok || got != 0 {
		t.Errorf("group g members %v (reported: %v): a group past the bound keeps its members series", got, ok)
	}
}

// TestMetricsGroupMembers: a group with a consumer running shows one
// member, and the lag of the records produced after its commit.
func TestMetricsGroupMembers(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), GroupInitialRebalanceDelay: -1}, nil)
	createTopic(t, a.KafkaAddr(), trafficTopic, 1)
	produce(t, a.KafkaAddr(), []*kgo.Record{{Topic: trafficTopic, Value: []byte("v")}})
	cl := client(t, a.KafkaAddr(), kgo.ConsumerGroup("live"), kgo.ConsumeTopics(trafficTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var consumed []*kgo.Record
	for len(consumed) == 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the group's consumer got no record")
		}
		consumed = fs.Records()
	}
	if err := cl.CommitRecords(ctx, consumed...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Produce acknowledges once this agent's copy holds the records, so
	// the next scrape's high watermark counts them.
	produce(t, a.KafkaAddr(), []*kgo.Record{{Topic: trafficTopic, Value: []byte("v2")}, {Topic: trafficTopic, Value: []byte("v3")}})
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_consumer_group_members", labels: map[string]string{"group": "live"}},
	})
	fs := parseScrape(t, scrapeBody(t, a))
	if got, _ := sample(fs, "strand_consumer_group_members", map[string]string{"group": "live"}); got != 1 {
		t.Errorf("members %v, want 1", got)
	}
	if got, _ := sample(fs, "strand_consumer_group_lag", map[string]string{"group": "live", "topic": trafficTopic, "partition": "0"}); got != 2 {
		t.Errorf("lag %v, want 2 (3 records, 1 committed)", got)
	}
}

func scrapeBody(t *testing.T, a *agent.Agent) string {
	t.Helper()
	code, body := get(t, "http://"+a.HTTPAddr()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	return body
}
