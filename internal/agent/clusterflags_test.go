package agent_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
)

// TestClusterFlags: the retention defaults and the GC grace are the
// log's, one value for every agent. The first agent started with the
// flags writes them there; a second agent with other values goes by the
// log's and says so; the grace in force is the log's.
func TestClusterFlags(t *testing.T) {
	shared := t.TempDir()
	logURL := "mem://" + strings.ReplaceAll(t.Name(), "/", "-")
	start := func(node int32, retention int64, grace time.Duration, logs *logBuffer) *agent.Agent {
		return startWith(t, agent.Config{
			DataDir: t.TempDir(), NodeID: node, Log: logURL,
			ObjStore:       "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			LogRetentionMs: retention, GCGrace: grace,
		}, logs.logger())
	}
	first, second := new(logBuffer), new(logBuffer)
	a := start(1, 3_600_000, 5*time.Minute, first)
	b := start(2, 7_200_000, 4*time.Minute, second)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := a.Replica().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ag := range []*agent.Agent{a, b} {
		v := ag.Replica().View()
		cluster, err := v.BrokerConfigs("")
		g, on, gerr := v.GC()
		v.Close()
		if err != nil || gerr != nil || !on {
			t.Fatal(err, gerr, on)
		}
		if cluster["log.retention.ms"] != "3600000" || cluster[meta.GCGraceConfig] != strconv.Itoa(5*60*1000) {
			t.Errorf("cluster-wide configs %v, want the first agent's flags", cluster)
		}
		if g.GraceMs != 5*60*1000 {
			t.Errorf("grace in force %d ms, want the first agent's 5 min", g.GraceMs)
		}
	}
	for _, flag := range []string{"--log-retention-ms", "--gc-grace"} {
		if !strings.Contains(second.String(), "flag="+flag) || strings.Contains(first.String(), "flag="+flag) {
			t.Errorf("only the second agent should warn that its %s differs from the log's:\nfirst: %s\nsecond: %s", flag, first, second)
		}
	}
}
