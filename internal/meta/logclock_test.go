package meta

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// clockCluster is n agents on one log, each proposing with its own
// clock, so a test can skew any of them.
type clockCluster struct {
	t      *testing.T
	clocks []*fakeClock
	reps   []*testReplica
	lease  int64
}

const (
	clockT0    int64 = 1_700_000_000_000
	clockLease int64 = 9000 // a heartbeat every 3 s
	day        int64 = 24 * 60 * 60 * 1000
)

// newClockCluster registers n agents a0..a(n-1) at clockT0 on a log at
// level.
func newClockCluster(t *testing.T, n int, level int16) *clockCluster {
	t.Helper()
	return newClockClusterLease(t, n, level, clockLease)
}

func newClockClusterLease(t *testing.T, n int, level int16, lease int64) *clockCluster {
	t.Helper()
	log := newTestLog()
	c := &clockCluster{t: t, lease: lease}
	for i := range n {
		clk := new(fakeClock)
		clk.set(clockT0)
		c.clocks = append(c.clocks, clk)
		c.reps = append(c.reps, openReplica(t, log, nil, fmt.Sprintf("a%d", i), withClock(clk)))
	}
	mustOK(t, c.reps[0], FinalizeFeatures{Bootstrap: true, Features: []FeatureLevel{{Name: FeatureMetadata, Level: level}}})
	for i := range n {
		c.beat(i)
	}
	return c
}

// beat proposes agent i's lease renewal.
func (c *clockCluster) beat(i int) {
	c.t.Helper()
	id := c.reps[i].WriterID()
	mustOK(c.t, c.reps[i], AgentHeartbeat{NodeID: int32(i), AgentID: id, Host: "h", Port: 1, LeaseMs: c.lease})
}

// run moves every clock in live forward by d in steps of a third of a
// lease, each live agent renewing at every step.
func (c *clockCluster) run(d int64, live ...int) {
	c.t.Helper()
	for step := int64(0); step < d; step += c.lease / 3 {
		for _, i := range live {
			c.clocks[i].set(c.clocks[i].now().UnixMilli() + c.lease/3)
			c.beat(i)
		}
	}
}

// logClock is the log clock of every copy, which must agree.
func (c *clockCluster) logClock() int64 {
	c.t.Helper()
	var clock int64
	for i, r := range c.reps {
		mustSync(c.t, r)
		lc, err := viewOf(c.t, r).LogClock()
		if err != nil {
			c.t.Fatal(err)
		}
		if i > 0 && lc != clock {
			c.t.Fatalf("%s's log clock %d, %s's %d", r.WriterID(), lc, c.reps[0].WriterID(), clock)
		}
		if i > 0 && mustDigest(c.t, r) != mustDigest(c.t, c.reps[0]) {
			c.t.Fatal("copies diverged")
		}
		clock = lc
	}
	return clock
}

// within fails unless the log clock is within [lo, hi].
func (c *clockCluster) within(what string, lo, hi int64) {
	c.t.Helper()
	if lc := c.logClock(); lc < lo || lc > hi {
		c.t.Fatalf("%s: log clock %+d ms from T0, want %+d to %+d", what, lc-clockT0, lo-clockT0, hi-clockT0)
	}
}

func TestLogClockVote(t *testing.T) {
	t.Run("one agent a day ahead moves it by the lead at most", func(t *testing.T) {
		c := newClockCluster(t, 3, MetadataLevel5)
		c.clocks[2].set(clockT0 + day)
		c.run(60_000, 0, 1, 2)
		now := clockT0 + 60_000
		c.within("after a minute", now-clockLease, now+ClockLeadMs)
		// The others fall silent for less than a lease: they still
		// count, and their reports age by the skewed agent's rate.
		c.run(clockLease-clockLease/3, 2)
		now += clockLease - clockLease/3
		c.within("the skewed agent alone writing", now-clockLease, now+ClockLeadMs)
		// Once their leases end they are dead: the one left rules, as
		// a single agent does.
		c.run(2*clockLease, 2)
		c.within("the others dead", clockT0+day, clockT0+2*day)
	})
	t.Run("an agent ahead writing between short leases' renewals ends none", func(t *testing.T) {
		const lease = 900
		c := newClockClusterLease(t, 3, MetadataLevel5, lease)
		c.clocks[2].set(clockT0 + day)
		for range 20 {
			c.run(lease/3, 0, 1, 2)
			// A burst of the skewed agent's entries between the
			// others' renewals (its clock runs at their rate).
			for range 20 {
				mustPropose(t, c.reps[2], AlterConfigs{Name: "no-such-topic"})
			}
		}
		now := c.clocks[0].now().UnixMilli()
		c.within("after the bursts", now-lease, now+lease/4)
		live, err := viewOf(t, c.reps[0]).LiveAgents()
		if err != nil || len(live) != 3 {
			t.Fatalf("live agents %+v, %v: want all three", live, err)
		}
	})
	t.Run("an agent whose clock jumps ends no lease the others renew", func(t *testing.T) {
		// Two agents: the lower median is the slower. b renews; a's
		// clock jumps eleven minutes (a resume, an NTP step) and it
		// writes at once, and then at every renewal of its own. b's
		// report may age by what a's entries measured, but never so
		// far that its lease, renewed every third of it, ends.
		c := newClockCluster(t, 2, MetadataLevel5)
		for range 6 {
			c.run(clockLease/3, 1, 0) // b renews before a
			// a's entry after b's, then its jump: b is credited for
			// what the jump measured.
			mustPropose(t, c.reps[0], AlterConfigs{Name: "no-such-topic"})
			c.clocks[0].set(c.clocks[0].now().UnixMilli() + 11*60_000)
			c.beat(0)
			for range 3 {
				mustPropose(t, c.reps[0], AlterConfigs{Name: "no-such-topic"})
			}
			live, err := viewOf(t, c.reps[0]).LiveAgents()
			if err != nil || len(live) != 2 {
				t.Fatalf("live agents %+v, %v: want both", live, err)
			}
		}
	})
	t.Run("after a log outage longer than the leases an agent ahead does not take it", func(t *testing.T) {
		// Nothing is written for two leases (the log was down). The
		// first entry after is one of an agent's own (not a renewal):
		// it moves the clock to its time, past every lease renewed
		// before the outage, its own included. The agent ahead must
		// not then be the only voice left.
		c := newClockCluster(t, 3, MetadataLevel5)
		c.clocks[2].set(clockT0 + day)
		c.run(clockLease, 0, 1, 2)
		for i := range c.clocks {
			c.clocks[i].set(c.clocks[i].now().UnixMilli() + 2*clockLease)
		}
		mustPropose(t, c.reps[0], AlterConfigs{Name: "no-such-topic"})
		mustPropose(t, c.reps[1], AlterConfigs{Name: "no-such-topic"})
		for range 3 {
			mustPropose(t, c.reps[2], AlterConfigs{Name: "no-such-topic"})
		}
		now := c.clocks[0].now().UnixMilli()
		c.within("after the outage", now-clockLease, now+ClockLeadMs)
		c.run(clockLease, 0, 1, 2)
		now = c.clocks[0].now().UnixMilli()
		c.within("renewing again", now-clockLease, now+ClockLeadMs)
	})
	t.Run("one agent a day behind cannot hold it back", func(t *testing.T) {
		c := newClockCluster(t, 3, MetadataLevel5)
		c.clocks[0].set(clockT0 - day)
		c.run(60_000, 0, 1, 2)
		now := clockT0 + 60_000
		c.within("after a minute", now-clockLease, now+ClockLeadMs)
	})
	t.Run("one ahead and one behind", func(t *testing.T) {
		c := newClockCluster(t, 3, MetadataLevel5)
		c.clocks[0].set(clockT0 - day)
		c.clocks[2].set(clockT0 + day)
		c.run(60_000, 0, 1, 2)
		now := clockT0 + 60_000
		c.within("after a minute", now-clockLease, now+ClockLeadMs)
	})
	t.Run("two agents, one ahead", func(t *testing.T) {
		c := newClockCluster(t, 2, MetadataLevel5)
		c.clocks[1].set(clockT0 + day)
		c.run(60_000, 0, 1)
		now := clockT0 + 60_000
		c.within("after a minute", now-clockLease, now+ClockLeadMs)
	})
	t.Run("two agents, one behind: the clock waits", func(t *testing.T) {
		c := newClockCluster(t, 2, MetadataLevel5)
		c.run(30_000, 0, 1)
		before := c.logClock()
		c.clocks[0].set(c.clocks[0].now().UnixMilli() - day)
		c.run(60_000, 0, 1)
		c.within("after a minute", before, before+ClockLeadMs)
	})
	t.Run("a dead agent does not stop it", func(t *testing.T) {
		c := newClockCluster(t, 2, MetadataLevel5)
		c.run(30_000, 0, 1)
		c.run(60_000, 1) // agent 0 is dead
		now := clockT0 + 90_000
		c.within("a minute after a death", now-clockLease, now+ClockLeadMs)
		live, err := viewOf(t, c.reps[1]).LiveAgents()
		if err != nil || len(live) != 1 || live[0].AgentID != "a1" {
			t.Fatalf("live agents %+v, %v: want the dead one's lease ended", live, err)
		}
	})
	t.Run("a dead agent that was behind does not stop it", func(t *testing.T) {
		c := newClockCluster(t, 2, MetadataLevel5)
		c.run(30_000, 0, 1)
		c.clocks[0].set(c.clocks[0].now().UnixMilli() - day)
		c.run(30_000, 0, 1)
		c.run(90_000, 1) // agent 0, behind, dies
		live, err := viewOf(t, c.reps[1]).LiveAgents()
		if err != nil || len(live) != 1 || live[0].AgentID != "a1" {
			t.Fatalf("live agents %+v, %v: want the dead one's lease ended", live, err)
		}
		now := c.clocks[1].now().UnixMilli()
		c.run(30_000, 1)
		c.within("once it is gone", now, now+30_000+ClockLeadMs)
	})
	t.Run("one agent alone rules", func(t *testing.T) {
		c := newClockCluster(t, 1, MetadataLevel5)
		c.clocks[0].set(clockT0 + day)
		c.beat(0)
		c.within("a day ahead", clockT0+day, clockT0+day)
	})
	t.Run("below level 5 the largest timestamp rules", func(t *testing.T) {
		c := newClockCluster(t, 3, MetadataLevel4)
		c.clocks[2].set(clockT0 + day)
		c.beat(2)
		c.within("a day ahead", clockT0+day, clockT0+day)
	})
	t.Run("a leaving agent's voice goes", func(t *testing.T) {
		c := newClockCluster(t, 2, MetadataLevel5)
		mustOK(t, c.reps[0], AgentHeartbeat{NodeID: 0, AgentID: "a0", LeaseMs: 0})
		mustSync(t, c.reps[1])
		vs, err := viewOf(t, c.reps[1]).ClockVoices()
		if err != nil || len(vs) != 1 || vs[0].AgentID != "a1" || !vs[0].Counts {
			t.Fatalf("voices %+v, %v: want a1's alone", vs, err)
		}
	})
}

func TestClockVoicesRecord(t *testing.T) {
	vs := []clockVoice{{AgentID: "a", T: 1, Pos: 7, QuietMs: 2, LeaseMs: 3, Expires: 4}, {AgentID: "b", T: -5, QuietMs: 0, LeaseMs: 1 << 40, Expires: 1 << 50}}
	got, err := decodeClockVoices(encodeClockVoices(vs), nil)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(vs) {
		t.Fatalf("round trip %+v, %v; want %+v", got, err, vs)
	}
	b := encodeClockVoices(vs)
	for n := range len(b) - 1 {
		if _, err := decodeClockVoices(b[:n], nil); err == nil {
			t.Fatalf("%d of %d bytes decoded", n, len(b))
		}
	}
}

// From level 5 the grace period is one cluster-wide config with a floor:
// no agent's flag (GCProgress) moves it, a node's value and one below
// MinGCGraceMs are refused.
func TestGCGraceConfig(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	mustOK(t, r, FinalizeFeatures{Bootstrap: true, Features: []FeatureLevel{{Name: FeatureMetadata, Level: MetadataLevel5}}})
	grace := func() int64 {
		t.Helper()
		g, on, err := viewOf(t, r).GC()
		if err != nil || !on {
			t.Fatalf("GC state: %v, %v", on, err)
		}
		return g.GraceMs
	}
	set := func(resource, v string) int16 {
		t.Helper()
		return mustPropose(t, r, AlterBrokerConfigs{Resource: resource, Set: map[string]string{GCGraceConfig: v}}).Code
	}
	if got := grace(); got != DefaultGCGrace {
		t.Fatalf("grace %d, want the default %d", got, DefaultGCGrace)
	}
	for _, bad := range []string{"1", fmt.Sprint(MinGCGraceMs - 1), "ten minutes", "-1"} {
		if code := set("", bad); code != kerr.InvalidConfig.Code {
			t.Errorf("grace %q: code %d, want INVALID_CONFIG", bad, code)
		}
	}
	if code := set("1", fmt.Sprint(MinGCGraceMs)); code != kerr.InvalidConfig.Code {
		t.Errorf("a node's grace: code %d, want INVALID_CONFIG", code)
	}
	mustOK(t, r, GCProgress{GraceMs: 1})
	if got := grace(); got != DefaultGCGrace {
		t.Fatalf("after refused values and a janitor's 1 ms: grace %d, want %d", got, DefaultGCGrace)
	}
	if code := set("", fmt.Sprint(MinGCGraceMs)); code != 0 {
		t.Fatalf("the floor refused: code %d", code)
	}
	if got := grace(); got != MinGCGraceMs {
		t.Fatalf("grace %d, want %d", got, MinGCGraceMs)
	}
	mustOK(t, r, AlterBrokerConfigs{Delete: []string{GCGraceConfig}})
	if got := grace(); got != DefaultGCGrace {
		t.Fatalf("grace %d after the config's deletion, want the default %d", got, DefaultGCGrace)
	}
}
