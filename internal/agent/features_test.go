package agent_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// startOn starts an agent with cfg's log and lease on dir.
func startOn(t *testing.T, dir, logURL string, lease time.Duration) *agent.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir: dir, KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Log: logURL, Lease: lease,
	}, quietLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stop(t, a) })
	return a
}

// liveFeatures returns the ranges the agent table holds for node.
func liveFeatures(t *testing.T, a *agent.Agent, node int32) []meta.FeatureRange {
	t.Helper()
	v := a.Replica().View()
	defer v.Close()
	as, err := v.LiveAgents()
	if err != nil {
		t.Fatal(err)
	}
	for _, ag := range as {
		if ag.NodeID == node {
			return ag.Features
		}
	}
	t.Fatalf("node %d is not live", node)
	return nil
}

// TestNewClusterFeatures: the first agent on a new log finalizes its
// build's highest levels and registers with its ranges; another agent
// asks it with ApiVersions and gets the same ranges.
func TestNewClusterFeatures(t *testing.T) {
	a := start(t, t.TempDir())
	f := a.Replica().Features()
	want := []meta.FeatureLevel{{Name: meta.FeatureGroup, Level: 1}, {Name: meta.FeatureMetadata, Level: meta.MaxMetadataLevel},
		{Name: meta.FeatureTransaction, Level: 2}}
	if !reflect.DeepEqual(f.Levels, want) || f.Epoch != 1 {
		t.Fatalf("new cluster's features %+v, want %+v at epoch 1", f, want)
	}
	if got := liveFeatures(t, a, 0); !reflect.DeepEqual(got, meta.SupportedFeatures()) {
		t.Fatalf("registered ranges %+v, want %+v", got, meta.SupportedFeatures())
	}
	host, port, _ := net.SplitHostPort(a.KafkaAddr())
	p, _ := strconv.Atoi(port)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	got, err := agent.ProbeFeatures(ctx, host, int32(p))
	if err != nil || !reflect.DeepEqual(got, meta.SupportedFeatures()) {
		t.Fatalf("probe: %+v, %v; want %+v", got, err, meta.SupportedFeatures())
	}
	if _, err := agent.ProbeFeatures(ctx, "127.0.0.1", 1); err == nil {
		t.Fatal("probing a closed port succeeded")
	}
}

// TestUpgradeFromLevel1: an agent of this build on a log that builds
// before feature levels served (an agent registered, no level) stays at
// strand.metadata.version 1 and writes what those builds read, until an
// operator raises the level; its next renewal then carries its ranges.
func TestUpgradeFromLevel1(t *testing.T) {
	dir := t.TempDir()
	logURL := "file://" + filepath.ToSlash(filepath.Join(dir, "log"))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// What an older agent left: a registration and its leave, no level.
	vlog, err := logurl.OpenVirtual(ctx, logURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old, err := replica.Open(ctx, replica.Config{Dir: filepath.Join(dir, "old-meta"), Log: vlog, WriterID: "old", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range []int64{10_000, 0} {
		if _, err := old.Propose(ctx, meta.AgentHeartbeat{NodeID: 5, AgentID: "old", Host: "127.0.0.1", Port: 1, LeaseMs: lease}); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	vlog.Close()

	a := startOn(t, filepath.Join(dir, "agent"), logURL, time.Second)
	if f := a.Replica().Features(); f.Epoch != 0 || f.MetadataLevel() != meta.MetadataLevel1 {
		t.Fatalf("features on a log of older builds: %+v, want none (level 1)", f)
	}
	if got := liveFeatures(t, a, 0); got != nil {
		t.Fatalf("registered at level 1 with ranges %+v: that is heartbeat version 3, which older builds cannot read", got)
	}

	adm := kadm.NewClient(client(t, a.KafkaAddr()))
	res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: meta.FeatureTransaction, MaxVersionLevel: 1, UpgradeType: 2})
	if err != nil || !errors.Is(res.Error(), kerr.InvalidUpdateVersion) {
		t.Fatalf("transaction.version at level 1: %v, %v; want INVALID_UPDATE_VERSION", err, res.Error())
	}
	res, err = adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: meta.FeatureMetadata, MaxVersionLevel: meta.MetadataLevel2, UpgradeType: 1})
	if err != nil || res.Error() != nil {
		t.Fatalf("raising strand.metadata.version: %v, %v", err, res.Error())
	}
	if got := a.Replica().Features().MetadataLevel(); got != meta.MetadataLevel2 {
		t.Fatalf("level %d after the raise, want %d", got, meta.MetadataLevel2)
	}
	// The next renewal (every lease/3) is version 3.
	deadline := time.Now().Add(opTimeout)
	for liveFeatures(t, a, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("no renewal with the agent's ranges after the raise")
		}
		select {
		case <-a.Replica().Changed():
		case <-time.After(time.Second):
		}
	}
}
