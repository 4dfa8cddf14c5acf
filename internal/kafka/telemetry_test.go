package kafka

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandkafka/strand/internal/clientmetrics"
)

func withTelemetry(m *clientmetrics.Manager) agentOption {
	return withDeps(func(d *Deps) { d.Telemetry = m })
}

// telemetryGather returns the metric families m exports.
func telemetryGather(t *testing.T, m *clientmetrics.Manager) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	reg.MustRegister(m.Collectors()...)
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

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A franz-go client pushes its metrics (kgo does by default once it
// sees keys 71 and 72, and has produced): they are exported with its
// client id and instance id.
func TestTelemetryKgoPush(t *testing.T) {
	m := clientmetrics.New(clientmetrics.Config{Metrics: []string{"*"}, PushInterval: time.Second})
	a, _ := newDataAgent(t, nil, withTelemetry(m))
	a.createTopic(t, "telemetry", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.ClientID("telemetry-app"), kgo.DefaultProduceTopic("telemetry"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// kgo's first push comes 0.5 to 1.5 push intervals after it
	// subscribed.
	const name = "org_apache_kafka_producer_connection_creation_total"
	for tick := time.NewTicker(50 * time.Millisecond); ; <-tick.C {
		if f := telemetryGather(t, m)[name]; f != nil {
			if len(f.Metric) != 1 || f.GetType() != dto.MetricType_COUNTER || f.Metric[0].GetCounter().GetValue() < 1 {
				t.Fatalf("%s: %v", name, f)
			}
			if got := labelValue(f.Metric[0], "client_id"); got != "telemetry-app" {
				t.Fatalf("client_id %q", got)
			}
			if got := labelValue(f.Metric[0], "client_instance_id"); len(got) != 36 {
				t.Fatalf("client_instance_id %q", got)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no %s after %v", name, guard)
		}
	}
}

// The protocol as librdkafka drives it: subscribe, push compressed,
// and each refusal with Kafka's code.
func TestTelemetryProtocol(t *testing.T) {
	m := clientmetrics.New(clientmetrics.Config{Metrics: []string{"org.apache.kafka.producer."}, PushInterval: time.Hour, MaxBytes: 4096})
	a := newTestAgent(t, withTelemetry(m))

	get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	sub := a.rawRequest(t, get).(*kmsg.GetTelemetrySubscriptionsResponse)
	if sub.ErrorCode != 0 || sub.ClientInstanceID == ([16]byte{}) || sub.ClientInstanceID[6]>>4 != 4 ||
		sub.PushIntervalMillis != 3600000 || sub.TelemetryMaxBytes != 4096 || sub.DeltaTemporality ||
		len(sub.RequestedMetrics) != 1 || sub.RequestedMetrics[0] != "org.apache.kafka.producer." ||
		!bytes.Equal(int8s(sub.AcceptedCompressionTypes), []byte{4, 3, 1, 2}) {
		t.Fatalf("subscription: %+v", sub)
	}
	get.ClientInstanceID = sub.ClientInstanceID
	if again := a.rawRequest(t, get).(*kmsg.GetTelemetrySubscriptionsResponse); again.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("asking again at once: %v", kerr.ErrorForCode(again.ErrorCode))
	}

	payload := otlpGauge("org.apache.kafka.producer.record.queue.time.avg", 12.5)
	enc, _ := zstd.NewWriter(nil)
	compressed := enc.EncodeAll(payload, nil)
	enc.Close()
	push := func(mod func(*kmsg.PushTelemetryRequest)) int16 {
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
		req.CompressionType, req.Metrics = 4, compressed
		mod(req)
		return a.rawRequest(t, req).(*kmsg.PushTelemetryResponse).ErrorCode
	}
	for _, tc := range []struct {
		name string
		mod  func(*kmsg.PushTelemetryRequest)
		want error
	}{
		{"unknown subscription", func(r *kmsg.PushTelemetryRequest) { r.SubscriptionID++ }, kerr.UnknownSubscriptionID},
		{"too large", func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = 0, make([]byte, 4097) }, kerr.TelemetryTooLarge},
		{"compression", func(r *kmsg.PushTelemetryRequest) { r.CompressionType = 7 }, kerr.UnsupportedCompressionType},
		{"zero instance", func(r *kmsg.PushTelemetryRequest) { r.ClientInstanceID = [16]byte{} }, kerr.InvalidRequest},
		{"ok", func(*kmsg.PushTelemetryRequest) {}, nil},
		{"too soon", func(*kmsg.PushTelemetryRequest) {}, kerr.ThrottlingQuotaExceeded},
		{"terminating", func(r *kmsg.PushTelemetryRequest) { r.Terminating = true }, nil},
		{"after terminating", func(r *kmsg.PushTelemetryRequest) { r.Terminating = true }, kerr.InvalidRequest},
	} {
		if got := kerr.ErrorForCode(push(tc.mod)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	f := telemetryGather(t, m)["org_apache_kafka_producer_record_queue_time_avg"]
	if f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 12.5 {
		t.Fatalf("pushed gauge: %v", f)
	}
}

// Without Deps.Telemetry the keys are served but ask for nothing.
func TestTelemetryOff(t *testing.T) {
	a := newTestAgent(t)
	sub := a.rawRequest(t, kmsg.NewPtrGetTelemetrySubscriptionsRequest()).(*kmsg.GetTelemetrySubscriptionsResponse)
	if sub.ErrorCode != 0 || len(sub.RequestedMetrics) != 0 || sub.PushIntervalMillis <= 0 {
		t.Fatalf("%+v", sub)
	}
}

func int8s(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// otlpGauge is a MetricsData payload of one gauge point (field numbers
// of metrics.proto).
func otlpGauge(name string, v float64) []byte {
	msg := func(num protowire.Number, body []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), body)
	}
	dp := protowire.AppendTag(nil, 4, protowire.Fixed64Type)
	dp = protowire.AppendFixed64(dp, math.Float64bits(v))
	metric := append(msg(1, []byte(name)), msg(5, msg(1, dp))...)
	return msg(1, msg(2, msg(2, metric)))
}
