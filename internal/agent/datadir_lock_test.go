package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// TestFileLogInUse: a second agent on a file log another agent has open
// is told that a file log serves one agent and which logs serve several.
func TestFileLogInUse(t *testing.T) {
	logURL := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "log"))
	startWith(t, agent.Config{DataDir: t.TempDir(), Log: logURL}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	b, err := agent.Start(ctx, agent.Config{DataDir: t.TempDir(), Log: logURL, KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0"}, quietLogger())
	if err == nil {
		b.Stop(ctx)
		t.Fatal("a second agent started on a file log in use")
	}
	if !strings.Contains(err.Error(), "a file log serves one agent; for several agents on one log use PostgreSQL, etcd, DynamoDB or S3") {
		t.Fatalf("second agent: %v, want it to name the logs that serve several agents", err)
	}
}
