package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// A franz-go producer pushes its KIP-714 metrics by default; the agent
// serves them on /metrics with the client's id.
func TestClientTelemetryOnMetrics(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), ClientTelemetryPushInterval: time.Second}, nil)
	createTopic(t, a.KafkaAddr(), "telemetry", 1)
	cl := client(t, a.KafkaAddr(), kgo.ClientID("pushing-app"), kgo.DefaultProduceTopic("telemetry"))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	const name = "org_apache_kafka_producer_connection_creation_total"
	for tick := time.NewTicker(50 * time.Millisecond); ; <-tick.C {
		fs := parseScrape(t, scrapeBody(t, a))
		if f := fs[name]; f != nil {
			m := f.GetMetric()[0]
			if !hasLabels(m, map[string]string{"client_id": "pushing-app"}) || sampleValue(m) < 1 {
				t.Fatalf("%s: %v", name, m)
			}
			if v, ok := sample(fs, "strand_client_telemetry_clients", map[string]string{}); !ok || v < 1 {
				t.Fatalf("strand_client_telemetry_clients %v %v", v, ok)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no %s on /metrics within %v", name, opTimeout)
		}
	}
}
