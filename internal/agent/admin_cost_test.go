package agent_test

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestCostEndpoint: GET /v1/cost prices the agent's own counters: after
// a produce, the PUTs term is the agent's PUTs per GB it took, at the
// list price.
func TestCostEndpoint(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir()}, nil)
	if code, _ := adminCall(t, http.MethodGet, a.HTTPAddr(), agent.PathCost, ""); code != http.StatusConflict {
		t.Errorf("before anything was produced: status %d, want 409", code)
	}
	createTopic(t, a.KafkaAddr(), "priced", 1)
	produce(t, a.KafkaAddr(), []*kgo.Record{{Topic: "priced", Value: make([]byte, 10_000)}})
	// The server counts a request after answering it: poll until the
	// produce is counted.
	var code int
	var body []byte
	for deadline := time.Now().Add(opTimeout); ; time.Sleep(10 * time.Millisecond) {
		code, body = adminCall(t, http.MethodGet, a.HTTPAddr(), agent.PathCost+"?fan_out=1&retention_days=30&zones=3", "")
		if code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var rep agent.CostReport
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	m := rep.Measured
	if m.IngestBytes <= 0 || m.Puts < 1 || m.LogWrites < 1 || m.LogBackend != "file" {
		t.Fatalf("measured %+v", m)
	}
	puts := rep.Strand.Terms[0]
	if want := m.Puts * 1e9 / m.IngestBytes * 0.005 / 1000; puts.Name != "object store PUTs" || math.Abs(puts.Dollars-want) > 1e-9 {
		t.Errorf("PUTs term %+v, want $%g", puts, want)
	}
	if rep.Workload.FanOut != 1 || rep.Workload.RetentionDays != 30 || rep.KafkaPerGB <= 0 {
		t.Errorf("workload %+v, Kafka $%g", rep.Workload, rep.KafkaPerGB)
	}
	if code, _ := adminCall(t, http.MethodGet, a.HTTPAddr(), agent.PathCost+"?zones=0", ""); code != http.StatusBadRequest {
		t.Errorf("zones=0: status %d, want 400", code)
	}
}
