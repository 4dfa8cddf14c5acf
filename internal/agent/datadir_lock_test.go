package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// TestDataDirInUse: a second agent on a data directory in use is
// refused before it binds a port or reads the log, with the holder's
// pid; once the first stops, the directory is free again.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	a := startWith(t, agent.Config{DataDir: dir}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	b, err := agent.Start(ctx, agent.Config{DataDir: dir, KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0"}, quietLogger())
	if err == nil {
		b.Stop(ctx)
		t.Fatal("a second agent started on a data dir in use")
	}
	want := fmt.Sprintf("data dir in use by another agent (pid %d)", os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("second agent: %v, want it to say %q", err, want)
	}
	stop(t, a)
	startWith(t, agent.Config{DataDir: dir}, nil)
}
