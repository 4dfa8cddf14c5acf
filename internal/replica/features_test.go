package replica

import (
	"errors"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// lastVersions returns the command versions of the log's last entry.
func lastVersions(t *testing.T, log *memlog.Loglet) []uint16 {
	t.Helper()
	es := rawEntries(t, log)
	e, err := meta.DecodeEntry(es[len(es)-1].Data)
	if err != nil {
		t.Fatal(err)
	}
	var vs []uint16
	for _, rc := range e.Commands {
		vs = append(vs, rc.Version)
	}
	return vs
}

// TestProposeAtFeatureLevel: a replica encodes what it proposes at the
// metadata level its copy finalized, whoever raised it, and keeps the
// level across a restart; a level this build does not support never
// reaches the log.
func TestProposeAtFeatureLevel(t *testing.T) {
	log := memlog.New()
	t.Cleanup(func() { log.Close() })
	dir := t.TempDir()
	r1 := openReplica(t, log, "", "w1")
	r2 := openReplica(t, log, dir, "w2")
	hb := meta.AgentHeartbeat{NodeID: 2, AgentID: "w2", LeaseMs: 10_000, Features: meta.SupportedFeatures()}

	mustOK(t, r2, hb)
	if vs := lastVersions(t, log); len(vs) != 1 || vs[0] != 2 {
		t.Fatalf("heartbeat on a log without levels written at versions %v, want [2]", vs)
	}
	_, err := r1.Propose(testCtx(t), meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureTransaction, Level: 2}}})
	if !errors.Is(err, meta.ErrNotAtLevel) {
		t.Fatalf("FinalizeFeatures of transaction.version at level 1: %v, want ErrNotAtLevel", err)
	}
	_, err = r1.Propose(testCtx(t), meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MaxMetadataLevel + 1}}})
	if !errors.Is(err, meta.ErrUnsupportedFeature) {
		t.Fatalf("FinalizeFeatures above this build's levels: %v, want ErrUnsupportedFeature", err)
	}

	mustOK(t, r1, meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel2}}})
	mustSync(t, r2)
	if got := r2.Features().MetadataLevel(); got != meta.MetadataLevel2 {
		t.Fatalf("r2 at level %d after r1 raised it, want %d", got, meta.MetadataLevel2)
	}
	mustOK(t, r2, hb)
	if vs := lastVersions(t, log); len(vs) != 1 || vs[0] != 3 {
		t.Fatalf("heartbeat at level 2 written at versions %v, want [3]", vs)
	}

	r2.Close()
	r2 = openReplica(t, log, dir, "w2")
	if f := r2.Features(); f.MetadataLevel() != meta.MetadataLevel2 || f.Epoch == 0 {
		t.Fatalf("reopened replica's features %+v, want level %d", f, meta.MetadataLevel2)
	}
}
