package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// TestACLsKafkaPython manages ACLs with kafka-python's admin client
// (CreateAcls, DescribeAcls, DeleteAcls at the versions it picks) against
// an agent with the authorizer on; the client is PLAINTEXT, so
// User:ANONYMOUS, made a super user. Before ACLs existed kafka-python's
// describe_acls failed with IncompatibleBrokerVersion.
func TestACLsKafkaPython(t *testing.T) {
	requirePythonModule(t, "kafka", "python3-kafka")
	a := startAgent(t, agent.Config{Authorizer: "standard", SuperUsers: "User:ANONYMOUS"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "testdata/kafka_python_acls.py", "--bootstrap", a.KafkaAddr(), "--topic", "orders")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		Created   int      `json:"created"`
		Failed    []string `json:"failed"`
		Described []string `json:"described"`
		Deleted   int      `json:"deleted"`
		Remaining []string `json:"remaining"`
		Errors    []string `json:"errors"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("script: %v; output not JSON (%v):\nstdout:\n%s\nstderr:\n%s", err, jerr, out, stderr.String())
	}
	for _, e := range res.Errors {
		t.Error(e)
	}
	alice := "User:alice * orders LITERAL READ ALLOW"
	deny := "User:* * logs- PREFIXED WRITE DENY"
	if res.Created != 2 || len(res.Failed) != 0 {
		t.Errorf("created %d, failed %v; want 2 created", res.Created, res.Failed)
	}
	if !slices.Equal(res.Described, []string{deny, alice}) {
		t.Errorf("described %q, want %q", res.Described, []string{deny, alice})
	}
	if res.Deleted != 1 || !slices.Equal(res.Remaining, []string{deny}) {
		t.Errorf("deleted %d, remaining %q; want 1 deleted, %q left", res.Deleted, res.Remaining, deny)
	}
}
