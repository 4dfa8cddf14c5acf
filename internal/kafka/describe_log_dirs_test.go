package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// raiseToLevel3 finalizes strand.metadata.version 3, from which apply
// keeps the storage numbers DescribeLogDirs reports.
func raiseToLevel3(t *testing.T, a *testAgent) {
	t.Helper()
	raiseMetadataLevel(t, a, meta.MetadataLevel3)
}

// raiseMetadataLevel finalizes strand.metadata.version at level.
func raiseMetadataLevel(t testing.TB, a *testAgent, level int16) {
	t.Helper()
	res, err := a.Replica.Propose(a.ctx(t), meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: level}}})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestDescribeAllLogDirs: kadm's DescribeAllLogDirs sees one log dir on
// the agent, holding every partition with the bytes apply counted.
func TestDescribeAllLogDirs(t *testing.T) {
	a := newTestAgent(t)
	raiseToLevel3(t, a)
	a.createTopic(t, "sized", 2, nil)
	a.createTopic(t, "empty", 1, nil)
	a.commit(t, "sized", 0, testBatch{records: 3}, testBatch{records: 2})
	a.commit(t, "sized", 1, testBatch{records: 1})

	dirs, err := a.Admin.DescribeAllLogDirs(a.ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	broker, ok := dirs[testNodeID]
	if !ok || len(broker) != 1 || broker.Error() != nil {
		t.Fatalf("log dirs %+v, want one on broker %d", dirs, testNodeID)
	}
	for _, d := range broker {
		if d.Dir != LogDirName {
			t.Errorf("dir %q, want %q", d.Dir, LogDirName)
		}
		want := map[string]map[int32]int64{"sized": {0: 200, 1: 100}, "empty": {0: 0}}
		for topic, parts := range want {
			for p, size := range parts {
				got, ok := d.Topics[topic][p]
				if !ok || got.Size != size {
					t.Errorf("%s/%d: %+v (listed %v), want size %d", topic, p, got, ok, size)
				}
			}
		}
		if d.Size() != 300 {
			t.Errorf("dir size %d, want 300", d.Size())
		}
	}
}

// TestDescribeLogDirsVersions round-trips every advertised version:
// a null topic list describes all, a named one only what it names (an
// unknown topic or partition is left out, as Kafka leaves out what a
// broker does not host); v3+ carry a top-level error code, v4 the dir's
// total and usable bytes, unknown (-1) for an object store.
func TestDescribeLogDirsVersions(t *testing.T) {
	a := newTestAgent(t)
	raiseToLevel3(t, a)
	a.createTopic(t, "v", 2, nil)
	a.commit(t, "v", 1, testBatch{records: 4})
	for v := int16(0); v <= 4; v++ {
		t.Run("v"+strconv.Itoa(int(v)), func(t *testing.T) {
			for _, named := range []bool{false, true} {
				req := kmsg.NewPtrDescribeLogDirsRequest()
				req.Version = v
				if named {
					rt := kmsg.NewDescribeLogDirsRequestTopic()
					rt.Topic, rt.Partitions = "v", []int32{1, 7}
					other := kmsg.NewDescribeLogDirsRequestTopic()
					other.Topic, other.Partitions = "missing", []int32{0}
					req.Topics = append(req.Topics, rt, other)
				}
				resp := a.rawRequest(t, req).(*kmsg.DescribeLogDirsResponse)
				if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
					t.Fatalf("named=%v: %+v", named, resp)
				}
				d := resp.Dirs[0]
				if d.ErrorCode != 0 || d.Dir != LogDirName {
					t.Errorf("dir %q error %d", d.Dir, d.ErrorCode)
				}
				if v >= 4 && (d.TotalBytes != -1 || d.UsableBytes != -1) {
					t.Errorf("total %d usable %d, want -1", d.TotalBytes, d.UsableBytes)
				}
				sizes := map[string]int64{}
				for _, dt := range d.Topics {
					for _, p := range dt.Partitions {
						sizes[dt.Topic+"/"+strconv.Itoa(int(p.Partition))] = p.Size
						if p.OffsetLag != 0 || p.IsFuture {
							t.Errorf("%s/%d: lag %d future %v", dt.Topic, p.Partition, p.OffsetLag, p.IsFuture)
						}
					}
				}
				want := map[string]int64{"v/1": 100}
				if !named {
					want["v/0"] = 0
				}
				for k, size := range want {
					if got, ok := sizes[k]; !ok || got != size {
						t.Errorf("named=%v %s: %d (listed %v), want %d", named, k, got, ok, size)
					}
				}
				if named && len(sizes) != 1 {
					t.Errorf("named=%v: listed %v, want only v/1", named, sizes)
				}
			}
		})
	}
}

// TestDescribeLogDirsDead: with Deps.DeadBytes set, a second dir lists
// the bytes dead objects hold for the partitions this agent leads, only
// those with any; its failure is that dir's KAFKA_STORAGE_ERROR and
// leaves the first dir whole.
func TestDescribeLogDirsDead(t *testing.T) {
	var fail atomic.Bool
	a := newTestAgent(t, withDeps(func(d *Deps) {
		d.DeadBytes = func(_ context.Context, v *meta.View) (map[meta.TopicID]map[int32]int64, error) {
			if fail.Load() {
				return nil, errors.New("store down")
			}
			tp, ok, err := v.Topic("expired")
			if err != nil || !ok {
				return nil, fmt.Errorf("topic expired: %v %v", ok, err)
			}
			return map[meta.TopicID]map[int32]int64{tp.ID: {1: 4096}, {0xff}: {0: 1}}, nil
		}
	}))
	raiseToLevel3(t, a)
	a.createTopic(t, "expired", 2, nil)
	a.commit(t, "expired", 0, testBatch{records: 1})

	dirs, err := a.Admin.DescribeAllLogDirs(a.ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	broker := dirs[testNodeID]
	if len(broker) != 2 || broker.Error() != nil {
		t.Fatalf("log dirs %+v, want two", broker)
	}
	live, dead := broker[LogDirName], broker[DeadLogDirName]
	if p, ok := live.Topics["expired"][0]; !ok || p.Size != 100 {
		t.Errorf("live expired/0: %+v %v, want 100 bytes", p, ok)
	}
	if len(dead.Topics) != 1 || len(dead.Topics["expired"]) != 1 || dead.Topics["expired"][1].Size != 4096 {
		t.Errorf("dead dir %+v, want expired/1 with 4096 bytes alone", dead.Topics)
	}

	fail.Store(true)
	dirs, err = a.Admin.DescribeAllLogDirs(a.ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	broker = dirs[testNodeID]
	if d := broker[DeadLogDirName]; !errors.Is(d.Err, kerr.KafkaStorageError) {
		t.Errorf("dead dir error %v, want KAFKA_STORAGE_ERROR", d.Err)
	}
	if d := broker[LogDirName]; d.Err != nil || d.Topics["expired"][0].Size != 100 {
		t.Errorf("live dir after a dead-bytes failure: %+v", d)
	}
}
