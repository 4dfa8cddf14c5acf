package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
)

// TestConsoleConnectors: the page lists a connector with its class and
// state; one whose class no agent has fails, and the page shows its
// task FAILED with the trace, escaped.
func TestConsoleConnectors(t *testing.T) {
	a := startAgentWith(t, agent.Config{KafkaListen: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := a.Replica().Propose(ctx, meta.PutConnector{Name: "<i>pg", Config: map[string]string{"connector.class": "org.example.Missing"}, Mode: meta.PutCreate})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(opTimeout)
	for {
		code, body := get(t, a, "/console/connectors")
		if code != http.StatusOK {
			t.Fatalf("status %d:\n%s", code, body)
		}
		if strings.Contains(body, "FAILED") {
			if !strings.Contains(body, "&lt;i&gt;pg") || strings.Contains(body, "<i>pg") {
				t.Errorf("the name is not escaped:\n%s", body)
			}
			if !strings.Contains(body, "org.example.Missing") || !strings.Contains(body, "no connector class") {
				t.Errorf("no class or trace:\n%s", body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the connector never showed FAILED:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
