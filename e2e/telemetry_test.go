package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/agent"
)

// nodeRdkafkaDirEnv names the npm prefix node-rdkafka is installed
// under (scripts/test installs it); librdkafka 2.0 from Debian (kcat,
// python3-confluent-kafka) predates KIP-714, which came in 2.5.
const nodeRdkafkaDirEnv = "STRAND_NODE_RDKAFKA_DIR"

func nodeRdkafkaDir() string {
	if d := os.Getenv(nodeRdkafkaDirEnv); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "strand", "node-rdkafka-3.6.1")
}

// TestLibrdkafkaTelemetry: a librdkafka producer pushes its metrics
// (KIP-714) by default, and the agent re-exports them on /metrics with
// the client's id. Part of the long run (scripts/long): no librdkafka
// Debian ships has KIP-714 (2.5+), and node-rdkafka builds its own from
// source in about 10 minutes; the suite checks franz-go's pushes
// (internal/kafka TestTelemetryKgoPush, internal/agent TestClientTelemetry).
func TestLibrdkafkaTelemetry(t *testing.T) {
	if os.Getenv("STRAND_E2E_LONG") == "" {
		t.Skip("the long run's (scripts/long, STRAND_E2E_LONG=1): librdkafka 2.5+ is built from source")
	}
	node := requireCommand(t, "node")
	dir := nodeRdkafkaDir()
	requireTool(t, "node-rdkafka", func() error {
		_, err := os.Stat(filepath.Join(dir, "node_modules", "node-rdkafka", "package.json"))
		return err
	})
	a := startAgent(t, agent.Config{HTTPListen: "127.0.0.1:0", ClientTelemetryPushInterval: time.Second})
	createTopic(t, a.KafkaAddr(), "telemetry", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/rdkafka_telemetry.js",
		"--bootstrap", a.KafkaAddr(), "--topic", "telemetry", "--client-id", "rdkafka-telemetry")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			select {
			case lines <- sc.Text():
			default: // a chatty client must not block it
			}
		}
	}()
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()

	// librdkafka asks for its subscription once connected, then pushes
	// within 0.5 to 1.5 push intervals.
	var got []string
	for tick := time.NewTicker(100 * time.Millisecond); ; {
		select {
		case l, ok := <-lines:
			if ok {
				got = append(got, l)
			}
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no pushed librdkafka metric on /metrics; client said %q, stderr %q", got, stderr.String())
		}
		_, body := httpGet(t, "http://"+a.HTTPAddr()+"/metrics")
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "org_apache_kafka_") && strings.Contains(line, `client_id="rdkafka-telemetry"`) &&
				strings.Contains(line, `client_instance_id="`) {
				t.Logf("client said %q; first series: %s", got, line)
				if !strings.Contains(body, `strand_client_telemetry_pushes_total{result="ok"} `) ||
					strings.Contains(body, `strand_client_telemetry_pushes_total{result="ok"} 0`+"\n") {
					t.Fatal("a series came without an ok push counted")
				}
				return
			}
		}
	}
}
