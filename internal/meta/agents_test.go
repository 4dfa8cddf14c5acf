package meta

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func liveNodes(t *testing.T, r *testReplica) []int32 {
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

// TestAgentHeartbeatRoundTrip: at strand.metadata.version 1 a heartbeat
// is written as version 2, without its features, which builds before
// feature levels read; at levels 2 and 3 as version 3, without its
// endpoints; from level 4 as version 4.
func TestAgentHeartbeatRoundTrip(t *testing.T) {
	for _, c := range []AgentHeartbeat{
		{NodeID: 7, AgentID: "a1", Host: "10.0.0.1", Port: 9092, Rack: "r1", LeaseMs: 10000, Applied: 1 << 40, Features: SupportedFeatures(),
			Endpoints: []AgentEndpoint{{Listener: "PLAINTEXT", Host: "10.0.0.1", Port: 9092}, {Listener: "SSL", Port: 9093}}},
		{NodeID: 7, AgentID: "a1", LeaseMs: 10000},
		{},
	} {
		for _, tc := range []struct {
			level   int16
			version uint16
			want    AgentHeartbeat
		}{
			{MetadataLevel1, 2, AgentHeartbeat{NodeID: c.NodeID, AgentID: c.AgentID, Host: c.Host, Port: c.Port, Rack: c.Rack, LeaseMs: c.LeaseMs, Applied: c.Applied}},
			{MetadataLevel2, 3, AgentHeartbeat{NodeID: c.NodeID, AgentID: c.AgentID, Host: c.Host, Port: c.Port, Rack: c.Rack, LeaseMs: c.LeaseMs, Applied: c.Applied, Features: c.Features}},
			{MetadataLevel3, 3, AgentHeartbeat{NodeID: c.NodeID, AgentID: c.AgentID, Host: c.Host, Port: c.Port, Rack: c.Rack, LeaseMs: c.LeaseMs, Applied: c.Applied, Features: c.Features}},
			{MetadataLevel4, 4, c},
		} {
			rc, err := EncodeCommandAt(c, tc.level)
			if err != nil || rc.Version != tc.version {
				t.Fatalf("level %d: wrote version %d (%v), want %d", tc.level, rc.Version, err, tc.version)
			}
			got, err := DecodeCommand(rc)
			if err != nil {
				t.Fatalf("DecodeCommand(%+v): %v", c, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("level %d round trip: got %+v, want %+v", tc.level, got, tc.want)
			}
		}
	}
}

// heartbeatV1 is an AgentHeartbeat as builds before version 2 wrote it,
// field by field, independent of the version 2 encoder.
type heartbeatV1 AgentHeartbeat

func (heartbeatV1) Type() CommandType { return TypeAgentHeartbeat }
func (heartbeatV1) version() uint16   { return 1 }

// forged: the harness writes it as it is, as the older build did.
func (heartbeatV1) forged() {}

func (c heartbeatV1) appendPayload(b []byte) []byte {
	b = appendVarint(b, int64(c.NodeID))
	b = appendString(b, c.AgentID)
	b = appendString(b, c.Host)
	b = appendVarint(b, int64(c.Port))
	b = appendString(b, c.Rack)
	return appendVarint(b, c.LeaseMs)
}

func TestAgentHeartbeatVersions(t *testing.T) {
	v1 := heartbeatV1{NodeID: 3, AgentID: "old", Host: "h", Port: 9092, Rack: "r", LeaseMs: 5000}
	got, err := DecodeCommand(EncodeCommand(v1))
	want := AgentHeartbeat(v1) // Applied 0: unknown
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoding version 1: %+v, %v; want %+v", got, err, want)
	}
	// A version 2 envelope around a version 1 payload lacks Applied.
	rc := EncodeCommand(v1)
	rc.Version = 2
	if _, err := DecodeCommand(rc); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2 without Applied: %v, want ErrCorrupt", err)
	}
	rc.Version = 5
	if _, err := DecodeCommand(rc); !errors.Is(err, ErrUnknownCommand) {
		t.Fatalf("version 5: %v, want ErrUnknownCommand", err)
	}
}

// TestAgentRecord: the stored record keeps the version 1 layout when it
// holds no applied position, so version 1 heartbeats build the state
// (and digest) they built before version 2.
func TestAgentRecord(t *testing.T) {
	key := agentKey(4)
	base := AgentInfo{NodeID: 4, AgentID: "a", Host: "h", Port: 1, Rack: "r", LeaseMs: 10, RegisteredAt: 100, Expires: 110}
	v1 := []byte{recordV1}
	v1 = appendString(v1, "a")
	v1 = appendString(v1, "h")
	v1 = appendVarint(v1, 1)
	v1 = appendString(v1, "r")
	v1 = appendVarint(v1, 10)
	v1 = appendVarint(v1, 100)
	v1 = appendVarint(v1, 110)
	if got := base.encode(); !bytes.Equal(got, v1) {
		t.Fatalf("record without applied position: %x, want the version 1 layout %x", got, v1)
	}
	withApplied := base
	withApplied.Applied = 77
	enc := withApplied.encode()
	if enc[0] != agentRecordV2 {
		t.Fatalf("record with applied position has version %d, want %d", enc[0], agentRecordV2)
	}
	withFeatures := base
	withFeatures.Features = SupportedFeatures()
	if enc := withFeatures.encode(); enc[0] != agentRecordV3 {
		t.Fatalf("record with features has version %d, want %d", enc[0], agentRecordV3)
	}
	both := withApplied
	both.Features = withFeatures.Features
	withEndpoints := base
	withEndpoints.Endpoints = []AgentEndpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}, {Listener: "SSL", Port: 2}}
	if enc := withEndpoints.encode(); enc[0] != agentRecordV4 {
		t.Fatalf("record with endpoints has version %d, want %d", enc[0], agentRecordV4)
	}
	all := both
	all.Endpoints = withEndpoints.Endpoints
	for _, want := range []AgentInfo{base, withApplied, withFeatures, both, withEndpoints, all} {
		got, err := decodeAgentInfo(key, want.encode())
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("record round trip: %+v, %v; want %+v", got, err, want)
		}
	}
	// Version 3 without features is not what encode writes.
	noFeatures := append(append([]byte{agentRecordV3}, v1[1:]...), 0, 0)
	if _, err := decodeAgentInfo(key, noFeatures); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3 record without features: %v, want ErrCorrupt", err)
	}
	// Nor is version 4 without endpoints.
	noEndpoints := append(append([]byte{agentRecordV4}, v1[1:]...), 0, 0, 0)
	if _, err := decodeAgentInfo(key, noEndpoints); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 4 record without endpoints: %v, want ErrCorrupt", err)
	}
	// Version 2 with Applied 0 is not what encode writes.
	bad := append(append([]byte{agentRecordV2}, v1[1:]...), 0)
	if _, err := decodeAgentInfo(key, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2 record with applied 0: %v, want ErrCorrupt", err)
	}
	if _, err := decodeAgentInfo(key, enc[:len(enc)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2 record without applied: %v, want ErrCorrupt", err)
	}
}

// TestLowestLiveApplied walks the agent table through renewals, a
// version 1 heartbeat, leases running out and a leave, and checks which
// agent holds the trim back after each.
func TestLowestLiveApplied(t *testing.T) {
	log := newTestLog()
	clk := new(fakeClock)
	r := openReplica(t, log, nil, "w", withClock(clk))
	const lease = 3000
	hb := func(node int32, applied uint64) AgentHeartbeat {
		return AgentHeartbeat{NodeID: node, AgentID: fmt.Sprint("a", node), LeaseMs: lease, Applied: applied}
	}
	const none = -1
	steps := []struct {
		name string
		at   int64
		cmd  Command
		// except is the agent asking; wantNode the agent holding the
		// trim (none: no other live agent), at wantApplied.
		except      string
		wantNode    int32
		wantApplied uint64
	}{
		{"alone", 1000, hb(1, 0), "a1", none, 0},
		{"second agent", 1100, hb(2, 1), "a1", 2, 1},
		{"asking agent is skipped", 1200, hb(1, 2), "a2", 1, 2},
		{"renewal moves it", 1300, hb(2, 3), "a1", 2, 3},
		{"lowest of three", 1400, hb(3, 2), "a1", 3, 2},
		// A claim past the heartbeat's own position (5) is clamped.
		{"claim past its position", 1500, hb(3, 1000), "a1", 2, 3},
		{"version 1 holds at 0", 1600, heartbeatV1{NodeID: 4, AgentID: "a4", LeaseMs: lease}, "a1", 4, 0},
		{"version 2 renewal releases it", 1700, hb(4, 7), "a1", 2, 3},
		// Node 2's lease ends at 1300+3000; an entry at 4300 moves the
		// log clock there.
		{"lease ran out", 4300, hb(1, 8), "a1", 3, 5},
		{"leave", 4400, AgentHeartbeat{NodeID: 3, AgentID: "a3"}, "a1", 4, 7},
		{"everyone else gone", 8000, hb(1, 11), "a1", none, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.set(s.at)
			mustOK(t, r, s.cmd)
			low, ok, err := viewOf(t, r).LowestLiveApplied(s.except)
			switch {
			case err != nil:
				t.Fatalf("LowestLiveApplied: %v", err)
			case s.wantNode == none && ok:
				t.Fatalf("LowestLiveApplied(%s) = %+v, want no live agent", s.except, low)
			case s.wantNode != none && (!ok || low.NodeID != s.wantNode || low.Applied != s.wantApplied):
				t.Fatalf("LowestLiveApplied(%s) = %+v, %v; want node %d at %d", s.except, low, ok, s.wantNode, s.wantApplied)
			}
		})
	}
	// Another copy replays the same table.
	other := openReplica(t, log, nil, "other")
	mustSync(t, r)
	if mustDigest(t, other) != mustDigest(t, r) {
		t.Fatal("a replayed copy differs")
	}
}

func TestAgentLeases(t *testing.T) {
	log := newTestLog()
	clk := new(fakeClock)
	clk.set(1_000_000)
	r1 := openReplica(t, log, nil, "w1", withClock(clk))
	r2 := openReplica(t, log, nil, "w2", withClock(clk))

	cid, err := viewOf(t, r1).ClusterID()
	if err != nil || cid != "" {
		t.Fatalf("ClusterID before any heartbeat = %q, %v; want empty", cid, err)
	}

	steps := []struct {
		name    string
		at      int64
		by      *testReplica
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
			for _, r := range []*testReplica{r1, r2} {
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
	if len(as) != 1 || !reflect.DeepEqual(as[0], want) {
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
	log := newTestLog()
	r1 := openReplica(t, log, nil, "w1")
	mustOK(t, r1, CreateTopic{Name: "t", Partitions: 1})
	mustOK(t, r1, AgentHeartbeat{NodeID: 0, AgentID: "a", LeaseMs: 1000})
	mustOK(t, r1, AgentHeartbeat{NodeID: 1, AgentID: "b", LeaseMs: 1000})
	want, err := viewOf(t, r1).ClusterID()
	if err != nil || want == "" {
		t.Fatalf("ClusterID = %q, %v", want, err)
	}
	r2 := openReplica(t, log, nil, "w2")
	mustSync(t, r2)
	got, err := viewOf(t, r2).ClusterID()
	if err != nil || got != want {
		t.Fatalf("replayed ClusterID = %q, %v; want %q", got, err, want)
	}

	other := openReplica(t, newTestLog(), nil, "w3")
	mustOK(t, other, AgentHeartbeat{NodeID: 0, AgentID: "a", LeaseMs: 1000})
	if id, _ := viewOf(t, other).ClusterID(); id == want {
		t.Fatalf("a first heartbeat at another position got the same cluster id %q", id)
	}
}
