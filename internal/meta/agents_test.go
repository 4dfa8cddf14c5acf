package meta

import (
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// fakeClock is a proposer clock a test moves by hand; replicas share it.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time        { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) set(ms int64)          { c.ms.Store(ms) }
func withClock(c *fakeClock) func(*Config) { return func(cfg *Config) { cfg.Now = c.now } }

func liveNodes(t *testing.T, r *Replica) []int32 {
	t.Helper()
	as, err := viewOf(t, r).LiveAgents()
	if err != nil {
		t.Fatalf("LiveAgents: %v", err)
	}
	var ids []int32
	for _, a := range as {
		ids = append(ids, a.NodeID)
	}
	return ids
}

func TestAgentHeartbeatRoundTrip(t *testing.T) {
	for _, c := range []AgentHeartbeat{
		{NodeID: 7, AgentID: "a1", Host: "10.0.0.1", Port: 9092, Rack: "r1", LeaseMs: 10000},
		{},
	} {
		got, err := DecodeCommand(EncodeCommand(c))
		if err != nil {
			t.Fatalf("DecodeCommand(%+v): %v", c, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip: got %+v, want %+v", got, c)
		}
	}
}

func TestAgentLeases(t *testing.T) {
	log := memlog.New()
	clk := new(fakeClock)
	clk.set(1_000_000)
	r1 := openReplica(t, log, "", "w1", withClock(clk))
	r2 := openReplica(t, log, "", "w2", withClock(clk))

	cid, err := viewOf(t, r1).ClusterID()
	if err != nil || cid != "" {
		t.Fatalf("ClusterID before any heartbeat = %q, %v; want empty", cid, err)
	}

	steps := []struct {
		name    string
		at      int64
		by      *Replica
		hb      AgentHeartbeat
		code    int16
		wantIDs []int32
	}{
		{"first registers", 1_000_000, r1, AgentHeartbeat{NodeID: 2, AgentID: "a2", Host: "h2", Port: 2, LeaseMs: 3000}, 0, []int32{2}},
		{"second registers", 1_001_000, r2, AgentHeartbeat{NodeID: 1, AgentID: "a1", Host: "h1", Port: 1, LeaseMs: 3000}, 0, []int32{1, 2}},
		{"node 2 renews", 1_002_500, r1, AgentHeartbeat{NodeID: 2, AgentID: "a2", Host: "h2", Port: 2, LeaseMs: 3000}, 0, []int32{1, 2}},
		// Node 1 expires at 1_004_000; an entry at that time moves the clock
		// past it.
		{"node 1 expires", 1_004_000, r1, AgentHeartbeat{NodeID: 2, AgentID: "a2", Host: "h2", Port: 2, LeaseMs: 3000}, 0, []int32{2}},
		{"bad lease", 1_004_100, r1, AgentHeartbeat{NodeID: 3, AgentID: "a3", LeaseMs: -1}, kerr.InvalidRequest.Code, []int32{2}},
		{"empty agent id", 1_004_100, r1, AgentHeartbeat{NodeID: 3, LeaseMs: 1}, kerr.InvalidRequest.Code, []int32{2}},
		{"takeover of a live node id", 1_004_200, r2, AgentHeartbeat{NodeID: 2, AgentID: "impostor", Host: "hx", Port: 9, LeaseMs: 3000}, kerr.DuplicateBrokerRegistration.Code, []int32{2}},
		{"takeover of an expired node id", 1_004_300, r2, AgentHeartbeat{NodeID: 1, AgentID: "a1b", Host: "h1", Port: 1, LeaseMs: 3000}, 0, []int32{1, 2}},
		{"leave by another agent is ignored", 1_004_400, r1, AgentHeartbeat{NodeID: 1, AgentID: "a1", LeaseMs: 0}, 0, []int32{1, 2}},
		{"leave", 1_004_500, r2, AgentHeartbeat{NodeID: 1, AgentID: "a1b", LeaseMs: 0}, 0, []int32{2}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.set(s.at)
			res := mustPropose(t, s.by, s.hb)
			if res.Code != s.code {
				t.Fatalf("result %v, want code %d", res.Err(), s.code)
			}
			mustSync(t, r1)
			mustSync(t, r2)
			for _, r := range []*Replica{r1, r2} {
				if got := liveNodes(t, r); !reflect.DeepEqual(got, s.wantIDs) {
					t.Fatalf("%s: live nodes %v, want %v", r.WriterID(), got, s.wantIDs)
				}
			}
			if mustDigest(t, r1) != mustDigest(t, r2) {
				t.Fatal("replicas diverged")
			}
		})
	}

	v := viewOf(t, r2)
	as, err := v.LiveAgents()
	if err != nil {
		t.Fatal(err)
	}
	want := AgentInfo{NodeID: 2, AgentID: "impostor", Host: "hx", Port: 9, LeaseMs: 3000, RegisteredAt: 1_004_200, Expires: 1_007_200}
	if len(as) != 1 || as[0] != want {
		t.Fatalf("live agents %+v, want [%+v]", as, want)
	}
	c1, err1 := viewOf(t, r1).ClusterID()
	c2, err2 := v.ClusterID()
	if err1 != nil || err2 != nil || c1 == "" || c1 != c2 || len(c1) != 22 {
		t.Fatalf("cluster ids %q (%v) and %q (%v): want one 22-char id", c1, err1, c2, err2)
	}
}

// A cluster id depends on the log, not on the agent: a second log gets a
// different one only if its first heartbeat sits elsewhere, and the same
// log replayed gives the same one.
func TestClusterIDReplays(t *testing.T) {
	log := memlog.New()
	r1 := openReplica(t, log, "", "w1")
	mustOK(t, r1, CreateTopic{Name: "t", Partitions: 1})
	mustOK(t, r1, AgentHeartbeat{NodeID: 0, AgentID: "a", LeaseMs: 1000})
	mustOK(t, r1, AgentHeartbeat{NodeID: 1, AgentID: "b", LeaseMs: 1000})
	want, err := viewOf(t, r1).ClusterID()
	if err != nil || want == "" {
		t.Fatalf("ClusterID = %q, %v", want, err)
	}
	r2 := openReplica(t, log, "", "w2")
	mustSync(t, r2)
	got, err := viewOf(t, r2).ClusterID()
	if err != nil || got != want {
		t.Fatalf("replayed ClusterID = %q, %v; want %q", got, err, want)
	}

	other := openReplica(t, memlog.New(), "", "w3")
	mustOK(t, other, AgentHeartbeat{NodeID: 0, AgentID: "a", LeaseMs: 1000})
	if id, _ := viewOf(t, other).ClusterID(); id == want {
		t.Fatalf("a first heartbeat at another position got the same cluster id %q", id)
	}
}
