package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
)

// opTimeout guards every client call against a hung agent.
const opTimeout = 30 * time.Second

// TestSmoke starts an agent, round-trips records through it with
// franz-go, checks the HTTP endpoints and metrics, then stops it and
// starts a new agent on the same data dir: the records are still there
// and new offsets continue after them.
func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	const (
		topic      = "smoke"
		partitions = 3
		perPart    = 50
	)

	a := start(t, dir)
	createTopic(t, a.KafkaAddr(), topic, partitions)

	var want []*kgo.Record
	wantOffset := make(map[*kgo.Record]int64)
	for p := range int32(partitions) {
		for i := range perPart {
			r := &kgo.Record{
				Topic:     topic,
				Partition: p,
				Key:       fmt.Appendf(nil, "k%d", i),
				Value:     fmt.Appendf(nil, "p%d-v%d", p, i),
				Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}},
			}
			want = append(want, r)
			wantOffset[r] = int64(i)
		}
	}
	produce(t, a.KafkaAddr(), want)
	for _, r := range want {
		// One producer, empty partitions: offsets follow produce order.
		if r.Offset != wantOffset[r] {
			t.Fatalf("record %s acknowledged at %d/%d, want offset %d", r.Value, r.Partition, r.Offset, wantOffset[r])
		}
	}
	checkRecords(t, a.KafkaAddr(), topic, want)

	if code, body := get(t, "http://"+a.HTTPAddr()+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, "http://"+a.HTTPAddr()+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_kafka_requests_total", labels: map[string]string{"api": "Produce", "error": "NONE"}},
		{name: "strand_kafka_requests_total", labels: map[string]string{"api": "Fetch"}},
		{name: "strand_objstore_requests_total", labels: map[string]string{"op": "put"}},
		{name: "strand_flush_bytes"},
		{name: "strand_log_append_seconds"},
	})

	stop(t, a)

	b := start(t, dir)
	checkRecords(t, b.KafkaAddr(), topic, want)
	more := []*kgo.Record{
		{Topic: topic, Partition: 0, Value: []byte("after-restart-0")},
		{Topic: topic, Partition: 2, Value: []byte("after-restart-2")},
	}
	produce(t, b.KafkaAddr(), more)
	for _, r := range more {
		if r.Offset != perPart {
			t.Errorf("first record after restart in partition %d at offset %d, want %d", r.Partition, r.Offset, perPart)
		}
	}
	checkRecords(t, b.KafkaAddr(), topic, append(want, more...))
	if code, body := get(t, "http://"+b.HTTPAddr()+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after restart: %d %s", code, body)
	}
}

// TestStartErrors checks that Start refuses a bad config or a taken
// port, and that what a failed Start opened is closed again: the same
// data dir then starts at once (Pebble holds a lock on it while open).
func TestStartErrors(t *testing.T) {
	tests := []struct {
		name      string
		cfg       agent.Config
		portTaken bool
	}{
		{name: "bad kafka listen", cfg: agent.Config{KafkaListen: "nonsense"}},
		{name: "bad flush bytes", cfg: agent.Config{KafkaListen: "127.0.0.1:0", FlushBytes: 1}},
		{name: "kafka port taken", portTaken: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.DataDir = t.TempDir()
			if tt.portTaken {
				cfg.KafkaListen = start(t, t.TempDir()).KafkaAddr()
			}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			a, err := agent.Start(ctx, cfg, quietLogger())
			if err == nil {
				a.Stop(ctx)
				t.Fatalf("Start(%+v) succeeded", tt.cfg)
			}
			stop(t, start(t, cfg.DataDir))
		})
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start starts an agent on dir with kernel-chosen loopback ports and
// stops it at cleanup unless the test did.
func start(t *testing.T, dir string) *agent.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir:     dir,
		KafkaListen: "127.0.0.1:0",
		HTTPListen:  "127.0.0.1:0",
	}, quietLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if !wasStopped(a) {
			stop(t, a)
		}
	})
	return a
}

// stopped records the agents a test stopped itself, so cleanup does not
// stop them again. Locked: a few tests run their subtests in parallel.
var stopped struct {
	sync.Mutex
	m map[*agent.Agent]bool
}

func markStopped(a *agent.Agent) {
	stopped.Lock()
	defer stopped.Unlock()
	if stopped.m == nil {
		stopped.m = make(map[*agent.Agent]bool)
	}
	stopped.m[a] = true
}

func wasStopped(a *agent.Agent) bool {
	stopped.Lock()
	defer stopped.Unlock()
	return stopped.m[a]
}

func stop(t *testing.T, a *agent.Agent) {
	t.Helper()
	markStopped(a)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	createTopicWith(t, addr, topic, partitions, nil)
}

// createTopicWith creates a topic with configs and returns its id.
func createTopicWith(t *testing.T, addr, topic string, partitions int32, configs map[string]*string) meta.TopicID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := kadm.NewClient(client(t, addr)).CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	return meta.TopicID(resp.ID)
}

// produce sends rs with acks=all and fills in their offsets.
func produce(t *testing.T, addr string, rs []*kgo.Record) {
	t.Helper()
	cl := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// checkRecords consumes topic from the start and compares it with want,
// whose offsets are those the produce acknowledged.
func checkRecords(t *testing.T, addr, topic string, want []*kgo.Record) {
	t.Helper()
	ends := make(map[int32]int64)
	for _, r := range want {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	offsets := make(map[int32]kgo.Offset)
	for p := range ends {
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl := client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	got := make(map[int32]map[int64]*kgo.Record)
	left := len(want)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume: %d records missing", left)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if got[r.Partition] == nil {
				got[r.Partition] = make(map[int64]*kgo.Record)
			}
			if _, dup := got[r.Partition][r.Offset]; !dup && r.Offset < ends[r.Partition] {
				got[r.Partition][r.Offset] = r
				left--
			}
		})
	}
	for _, w := range want {
		g := got[w.Partition][w.Offset]
		switch {
		case g == nil:
			t.Errorf("%d/%d: missing", w.Partition, w.Offset)
		case string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value):
			t.Errorf("%d/%d: got %q=%q, want %q=%q", w.Partition, w.Offset, g.Key, g.Value, w.Key, w.Value)
		case fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers):
			t.Errorf("%d/%d: got headers %v, want %v", w.Partition, w.Offset, g.Headers, w.Headers)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: opTimeout}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// metricCheck names a metric that must have a sample with labels (a
// subset) and a positive value: a counter's value, a histogram's count.
type metricCheck struct {
	name   string
	labels map[string]string
}

// String is the check in Prometheus notation, labels sorted.
func (c metricCheck) String() string {
	var ls []string
	for k, v := range c.labels {
		ls = append(ls, k+"="+strconv.Quote(v))
	}
	slices.Sort(ls)
	return c.name + "{" + strings.Join(ls, ",") + "}"
}

// checkMetrics checks that every metric in checks has a positive total.
// The server counts a request after writing its response, so a client
// can see the response, and scrape, before the count lands: /metrics is
// polled, a few ms apart, until every check passes or opTimeout passes.
func checkMetrics(t *testing.T, httpAddr string, checks []metricCheck) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		failures := metricFailures(t, httpAddr, checks)
		if len(failures) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, f := range failures {
				t.Error(f)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metricFailures scrapes /metrics once and describes each failed check.
func metricFailures(t *testing.T, httpAddr string, checks []metricCheck) []string {
	t.Helper()
	code, body := get(t, "http://"+httpAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	var failures []string
	for _, c := range checks {
		f := families[c.name]
		if f == nil {
			failures = append(failures, "no metric "+c.name)
			continue
		}
		var total float64
		for _, m := range f.GetMetric() {
			if hasLabels(m, c.labels) {
				total += sampleValue(m)
			}
		}
		if total <= 0 {
			failures = append(failures, fmt.Sprintf("%s: total %v, want > 0; samples:\n%v", c, total, f.GetMetric()))
		}
	}
	return failures
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
			n++
		}
	}
	return n == len(want)
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
