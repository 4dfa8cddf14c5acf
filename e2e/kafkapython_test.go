package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// TestKafkaPython round-trips records with kafka-python 2.0.2, which
// auto-detects the broker version from ApiVersions v0 and then sends
// Metadata v0/v1/v5, Produce v7, ListOffsets v1 and Fetch v4: old
// versions no other client here uses. The script does the checking and
// the test reads its verdict. Group consumption is TestGroupKafkaPython.
func TestKafkaPython(t *testing.T) {
	requirePythonModule(t, "kafka", "python3-kafka")
	a := startAgent(t, agent.Config{})
	const topic, partitions, count = "kp", 3, 2000
	createTopic(t, a.KafkaAddr(), topic, partitions)

	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "testdata/kafka_python_roundtrip.py",
		"--bootstrap", a.KafkaAddr(), "--topic", topic, "--count", strconv.Itoa(count))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		APIVersion []int            `json:"api_version"`
		Sent       int              `json:"sent"`
		Acked      int              `json:"acked"`
		Received   int              `json:"received"`
		Partitions []int32          `json:"partitions"`
		EndOffsets map[string]int64 `json:"end_offsets"`
		Errors     []string         `json:"errors"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("script: %v; output not JSON (%v):\nstdout:\n%s\nstderr:\n%s", err, jerr, out, stderr.String())
	}
	t.Logf("kafka-python detected broker version %v; sent %d, acked %d, read back %d", res.APIVersion, res.Sent, res.Acked, res.Received)
	for _, e := range res.Errors {
		t.Error(e)
	}
	if err != nil {
		t.Fatalf("script failed: %v\nstderr:\n%s", err, stderr.String())
	}
	// The script's own checks passed; check its numbers against what the
	// test asked for, so a script that checked nothing cannot pass.
	if res.Sent != count || res.Acked != count || res.Received != count || len(res.Partitions) != partitions {
		t.Errorf("script result %+v: want %d sent, acked and received over %d partitions", res, count, partitions)
	}
	var total int64
	for _, off := range res.EndOffsets {
		total += off
	}
	if total != count {
		t.Errorf("end offsets %v sum to %d, want %d", res.EndOffsets, total, count)
	}
	if len(res.APIVersion) == 0 || res.APIVersion[0] < 1 {
		// Below 0.11 (here: below 1.0, the first version it infers from
		// ApiVersions keys alone) kafka-python sends magic 0/1 messages,
		// which the agent does not take.
		t.Errorf("kafka-python inferred broker version %v", res.APIVersion)
	}
}
