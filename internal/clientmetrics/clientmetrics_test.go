package clientmetrics

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandkafka/strand/internal/clock"
)

// testMetric is one OTLP metric the tests encode.
type testMetric struct {
	name  string
	sum   bool // a monotonic cumulative sum, else a gauge
	value float64
	attrs [][2]string
}

// encodeOTLP builds a MetricsData payload as clients send it, field
// numbers from metrics.proto.
func encodeOTLP(ms ...testMetric) []byte {
	msg := func(num protowire.Number, body []byte) []byte {
		b := protowire.AppendTag(nil, num, protowire.BytesType)
		return protowire.AppendBytes(b, body)
	}
	var metrics []byte
	for _, m := range ms {
		var dp []byte
		for _, a := range m.attrs {
			kv := msg(1, []byte(a[0]))
			kv = append(kv, msg(2, msg(1, []byte(a[1])))...)
			dp = append(dp, msg(7, kv)...)
		}
		dp = protowire.AppendTag(dp, 4, protowire.Fixed64Type)
		dp = protowire.AppendFixed64(dp, math.Float64bits(m.value))
		data := msg(1, dp)
		num := protowire.Number(5)
		if m.sum {
			num = 7
			data = protowire.AppendTag(data, 2, protowire.VarintType)
			data = protowire.AppendVarint(data, 2)
			data = protowire.AppendTag(data, 3, protowire.VarintType)
			data = protowire.AppendVarint(data, 1)
		}
		metric := msg(1, []byte(m.name))
		metric = append(metric, msg(num, data)...)
		metrics = append(metrics, msg(2, metric)...)
	}
	return msg(1, msg(2, metrics))
}

var newID = func() [16]byte { return [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16} }

func newTest(t *testing.T, cfg Config) (*Manager, *clock.Fake, *prometheus.Registry) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	cfg.Clock = clk
	if cfg.Metrics == nil {
		cfg.Metrics = []string{"*"}
	}
	m := New(cfg)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	reg.MustRegister(m.Collectors()...)
	return m, clk, reg
}

func TestSubscribeAndPush(t *testing.T) {
	m, clk, reg := newTest(t, Config{PushInterval: 10 * time.Second})
	sub, err := m.Subscribe([16]byte{}, newID)
	if err != nil {
		t.Fatal(err)
	}
	if sub.InstanceID != newID() || sub.PushInterval != 10*time.Second || len(sub.RequestedMetrics) != 1 || sub.RequestedMetrics[0] != "" || sub.DeltaTemporality {
		t.Fatalf("subscription %+v", sub)
	}
	payload := encodeOTLP(
		testMetric{name: "org.apache.kafka.producer.node.request.latency.avg", value: 1.5, attrs: [][2]string{{"node.id", "3"}}},
		testMetric{name: "org.apache.kafka.producer.connection.creation.total", sum: true, value: 7},
	)
	if err := m.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: payload, ClientID: "app"}); err != nil {
		t.Fatal(err)
	}
	fams := gather(t, reg)
	lat := fams["org_apache_kafka_producer_node_request_latency_avg"]
	if lat == nil || lat.GetType() != dto.MetricType_GAUGE || len(lat.Metric) != 1 || lat.Metric[0].GetGauge().GetValue() != 1.5 ||
		labelsOf(lat.Metric[0]) != "client_id=app,client_instance_id=01020304-0506-0708-090a-0b0c0d0e0f10,node_id=3" {
		t.Fatalf("latency family: %v", lat)
	}
	total := fams["org_apache_kafka_producer_connection_creation_total"]
	if total == nil || total.GetType() != dto.MetricType_COUNTER || len(total.Metric) != 1 || total.Metric[0].GetCounter().GetValue() != 7 ||
		!strings.Contains(total.GetHelp(), "org.apache.kafka.producer.connection.creation.total") {
		t.Fatalf("counter family: %v", total)
	}
	if got := fams["strand_client_telemetry_series"].Metric[0].GetGauge().GetValue(); got != 2 {
		t.Fatalf("series gauge %v, want 2", got)
	}

	// Too soon after the last push, unless terminating.
	clk.Advance(time.Second)
	if err := m.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: payload}); !errors.Is(err, ErrThrottled) {
		t.Fatalf("early push: %v", err)
	}
	clk.Advance(10 * time.Second)
	if err := m.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID + 1, Metrics: payload}); !errors.Is(err, ErrUnknownSubscription) {
		t.Fatalf("wrong subscription: %v", err)
	}
	if err := m.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: payload, Terminating: true}); err != nil {
		t.Fatalf("terminating push: %v", err)
	}
	clk.Advance(10 * time.Second)
	if err := m.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: payload}); !errors.Is(err, ErrTerminated) {
		t.Fatalf("push after terminating: %v", err)
	}
	if got := value(m.counters.pushes.WithLabelValues(resultOK)); got != 2 {
		t.Fatalf("ok pushes %v, want 2", got)
	}
	// Three intervals without a word: the client's series go.
	clk.Advance(30 * time.Second)
	if f := gather(t, reg)["org_apache_kafka_producer_node_request_latency_avg"]; f != nil {
		t.Fatalf("series of a silent client: %v", f)
	}
}

func TestPushRefusals(t *testing.T) {
	m, _, _ := newTest(t, Config{MaxBytes: 200})
	sub, _ := m.Subscribe([16]byte{}, newID)
	ok := encodeOTLP(testMetric{name: "m", value: 1})
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(ok)
	w.Close()
	for _, tc := range []struct {
		name string
		p    Push
		want error
	}{
		{"zero instance", Push{SubscriptionID: sub.ID, Metrics: ok}, ErrInstanceID},
		{"too large", Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: make([]byte, 201)}, ErrTooLarge},
		{"compression", Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: ok, Compression: 9}, ErrCompression},
		{"garbage", Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: []byte{0xff, 0xff, 0xff}}, ErrPayload},
		{"bad gzip", Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: ok, Compression: 1}, ErrPayload},
	} {
		if err := m.push(tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		m.mu.Lock()
		m.mu.clients[sub.InstanceID].lastPush = time.Time{} // not throttled
		m.mu.Unlock()
	}
	if err := m.push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: gz.Bytes(), Compression: 1}); err != nil {
		t.Fatalf("gzip push: %v", err)
	}
	// Small compressed, too large decompressed.
	var bomb bytes.Buffer
	w = gzip.NewWriter(&bomb)
	w.Write(make([]byte, 10_000))
	w.Close()
	m.mu.Lock()
	m.mu.clients[sub.InstanceID].lastPush = time.Time{}
	m.mu.Unlock()
	if err := m.push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: bomb.Bytes(), Compression: 1}); !errors.Is(err, ErrTooLarge) || bomb.Len() > 200 {
		t.Fatalf("push decompressing past the bound (%d bytes compressed): %v", bomb.Len(), err)
	}
	// A subscription id is this configuration's: another one refuses it.
	other := New(Config{Metrics: []string{"org.apache.kafka.consumer."}, Clock: clock.NewFake(time.Unix(0, 0))})
	if err := other.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: ok}); !errors.Is(err, ErrUnknownSubscription) {
		t.Fatalf("push to a differently configured agent: %v", err)
	}
	same := New(Config{Metrics: []string{""}, MaxBytes: 200, Clock: clock.NewFake(time.Unix(0, 0))})
	if err := same.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: ok}); err != nil {
		t.Fatalf("push to an agent configured alike: %v", err)
	}
}

func TestBounds(t *testing.T) {
	m, clk, reg := newTest(t, Config{MaxClients: 2, MaxSeries: 3})
	push := func(id byte, ms ...testMetric) {
		t.Helper()
		instance := [16]byte{id}
		sub, err := m.Subscribe(instance, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Push(Push{InstanceID: instance, SubscriptionID: sub.ID, Metrics: encodeOTLP(ms...), ClientID: string('a' + id)}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	push(1, testMetric{name: "x", value: 1})
	push(2, testMetric{name: "x", value: 2}, testMetric{name: "y", value: 2})
	// A third client evicts the first (the cap on clients) ...
	push(3, testMetric{name: "x", value: 3})
	if n := count(t, reg, "x"); n != 2 {
		t.Fatalf("x series after a third client: %d, want 2", n)
	}
	// ... and a client over the series cap evicts the oldest other.
	push(3, testMetric{name: "x", value: 3}, testMetric{name: "y", value: 3}, testMetric{name: "z", value: 3})
	if n := count(t, reg, "x", "y", "z"); n != 3 {
		t.Fatalf("series: %d, want 3", n)
	}
	if got := value(m.counters.evicted); got != 2 {
		t.Fatalf("evicted %v, want 2", got)
	}
	// One client alone past the cap keeps what fits.
	push(3, testMetric{name: "a", value: 1}, testMetric{name: "b", value: 1}, testMetric{name: "c", value: 1}, testMetric{name: "d", value: 1})
	if got := value(m.counters.droppedPoints.WithLabelValues(dropCap)); got != 1 {
		t.Fatalf("dropped at the cap %v, want 1", got)
	}
	// A name another client pushed as a gauge is not a counter, and the
	// agent's own names are not for clients.
	push(4, testMetric{name: "a", sum: true, value: 1}, testMetric{name: "strand.kafka.requests", value: 1})
	if got := value(m.counters.droppedPoints.WithLabelValues(dropConflict)); got != 1 {
		t.Fatalf("type conflicts %v, want 1", got)
	}
	if got := value(m.counters.droppedPoints.WithLabelValues(dropReserved)); got != 1 {
		t.Fatalf("reserved names %v, want 1", got)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}

func TestSubscribeThrottled(t *testing.T) {
	m, clk, _ := newTest(t, Config{PushInterval: time.Minute})
	sub, _ := m.Subscribe([16]byte{}, newID)
	if _, err := m.Subscribe(sub.InstanceID, nil); !errors.Is(err, ErrThrottled) {
		t.Fatalf("second subscribe at once: %v", err)
	}
	clk.Advance(time.Minute)
	if _, err := m.Subscribe(sub.InstanceID, nil); err != nil {
		t.Fatalf("subscribe after the interval: %v", err)
	}
	// After a push, asking again is fine (UNKNOWN_SUBSCRIPTION_ID sends clients back).
	if err := m.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: encodeOTLP()}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Subscribe(sub.InstanceID, nil); err != nil {
		t.Fatalf("subscribe after a push: %v", err)
	}
}

func TestNoMetricsRequested(t *testing.T) {
	m := New(Config{})
	sub, err := m.Subscribe([16]byte{}, newID)
	if err != nil || len(sub.RequestedMetrics) != 0 {
		t.Fatalf("%v %v", sub.RequestedMetrics, err)
	}
}

func FuzzDecodeMetrics(f *testing.F) {
	f.Add(encodeOTLP(testMetric{name: "a.b", value: 1, attrs: [][2]string{{"k", "v"}}}, testMetric{name: "c", sum: true, value: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeMetrics(b)
		if err == nil && len(d.Points) > maxPointsPerPush {
			t.Fatalf("%d points", len(d.Points))
		}
	})
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fs {
		out[f.GetName()] = f
	}
	return out
}

func count(t *testing.T, reg *prometheus.Registry, names ...string) int {
	t.Helper()
	fs := gather(t, reg)
	n := 0
	for _, name := range names {
		if f := fs[name]; f != nil {
			n += len(f.Metric)
		}
	}
	return n
}

func labelsOf(m *dto.Metric) string {
	var ls []string
	for _, l := range m.Label {
		ls = append(ls, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(ls, ",")
}

// value reads a counter's value.
func value(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// BenchmarkPush takes a push of 60 points (a librdkafka producer with
// three brokers pushes about that many), replacing the client's series.
func BenchmarkPush(b *testing.B) {
	var ms []testMetric
	for i := range 20 {
		for _, node := range []string{"1", "2", "3"} {
			ms = append(ms, testMetric{name: "org.apache.kafka.producer.node.request.latency.m" + string(rune('a'+i)), value: float64(i), attrs: [][2]string{{"node.id", node}}})
		}
	}
	payload := encodeOTLP(ms...)
	clk := clock.NewFake(time.Unix(0, 0))
	m := New(Config{Metrics: []string{"*"}, PushInterval: time.Second, Clock: clk})
	sub, _ := m.Subscribe([16]byte{}, newID)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		clk.Advance(time.Second)
		if err := m.Push(Push{InstanceID: sub.InstanceID, SubscriptionID: sub.ID, Metrics: payload, ClientID: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCollect scrapes 300 clients of 60 series each (18,000, near
// the default cap) through a registry, as /metrics does.
func BenchmarkCollect(b *testing.B) {
	var ms []testMetric
	for i := range 20 {
		for _, node := range []string{"1", "2", "3"} {
			ms = append(ms, testMetric{name: "org.apache.kafka.producer.node.request.latency.m" + string(rune('a'+i)), value: float64(i), attrs: [][2]string{{"node.id", node}}})
		}
	}
	payload := encodeOTLP(ms...)
	m := New(Config{Metrics: []string{"*"}, Clock: clock.NewFake(time.Unix(0, 0))})
	for c := range 300 {
		id := [16]byte{byte(c), byte(c >> 8), 1}
		sub, _ := m.Subscribe(id, nil)
		if err := m.Push(Push{InstanceID: id, SubscriptionID: sub.ID, Metrics: payload, ClientID: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
