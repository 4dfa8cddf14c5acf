package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
)

// TestSnapshotKeep: every snapshot the agent takes is followed by a GC
// that keeps the newest --snapshot-keep; what it deleted shows in the
// answer of POST /v1/snapshot and in /metrics, and the object store ends
// with that many manifests. The agent, wiped, restores the newest (the
// log is trimmed below it, so nothing else could bring it back).
func TestSnapshotKeep(t *testing.T) {
	dir := t.TempDir()
	cfg := agent.Config{DataDir: dir, SnapshotInterval: agent.SnapshotsOff, SnapshotKeep: 2}
	a := startWith(t, cfg, nil)
	createTopic(t, a.KafkaAddr(), "keep", 1)
	var deleted int
	var all []*kgo.Record
	for i := range 5 {
		rs := records("keep", 1, 5, fmt.Sprint("v", i))
		produce(t, a.KafkaAddr(), rs)
		all = append(all, rs...)
		st := takeSnapshot(t, a.HTTPAddr())
		deleted += st.GC.ManifestsDeleted
		if got := manifests(t, dir); got != min(i+1, 2) {
			t.Fatalf("after snapshot %d: %d manifests in the store, want %d", i+1, got, min(i+1, 2))
		}
	}
	if deleted != 3 {
		t.Fatalf("GC reported %d manifests deleted, want 3", deleted)
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_snapshot_gc_manifests_deleted_total"},
		{name: "strand_snapshot_gc_files_deleted_total"},
		{name: "strand_snapshot_gc_bytes_deleted_total"},
	})

	stop(t, a)
	if err := os.RemoveAll(filepath.Join(dir, "meta")); err != nil {
		t.Fatal(err)
	}
	a = startWith(t, cfg, nil)
	checkRecords(t, a.KafkaAddr(), "keep", all)
}

// manifests counts the snapshot manifests in an agent's file object store.
func manifests(t *testing.T, dataDir string) int {
	t.Helper()
	store, err := fileobj.Open(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(context.Background(), agent.SnapshotPrefix+"snap/")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".json") {
			n++
		}
	}
	return n
}

func TestSnapshotKeepConfig(t *testing.T) {
	var c agent.Config
	c.SetDefaults()
	if c.SnapshotKeep != agent.DefaultSnapshotKeep || agent.DefaultSnapshotKeep != 3 {
		t.Fatalf("default snapshot keep %d, want 3", c.SnapshotKeep)
	}
	c.SnapshotKeep = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "snapshot-keep -1") {
		t.Fatalf("Validate with keep -1: %v", err)
	}
}
