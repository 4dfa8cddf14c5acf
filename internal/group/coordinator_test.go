package group

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

func noDelay(c *Config) { c.InitialRebalanceDelay = -1 }

// stableGroup brings group to generation 1 with one member per entry of
// topics, the first the leader, each assigned its index as one byte.
func (e *env) stableGroup(group string, n int) []string {
	e.t.Helper()
	var ids []string
	var joins []<-chan JoinResult
	for range n {
		id, j := e.newMember(group, "t")
		ids = append(ids, id)
		joins = append(joins, j)
		if len(ids) == 1 {
			// With no initial delay the first member completes a
			// generation alone; make it rejoin with the rest.
			r := recv(e.t, j, "first join")
			e.syncAll(group, r.Generation, ids)
			joins = joins[:0]
		}
	}
	if n == 1 {
		return ids
	}
	e.waitFor(group, "the others to join", func(s snap) bool {
		return s.state == statePreparingRebalance && s.joining == n-1
	})
	// The first member learns of the rebalance and rejoins.
	if code := e.heartbeat(group, ids[0], 1); code != kerr.RebalanceInProgress.Code {
		e.t.Fatalf("leader heartbeat: %d, want REBALANCE_IN_PROGRESS", code)
	}
	joins = append([]<-chan JoinResult{e.join(e.req(group, ids[0], "t"))}, joins...)
	var gen int32
	for i, j := range joins {
		r := recv(e.t, j, "join")
		if r.Code != 0 {
			e.t.Fatalf("join %d: %v", i, kerr.ErrorForCode(r.Code))
		}
		gen = r.Generation
	}
	e.syncAll(group, gen, ids)
	return ids
}

// syncAll syncs ids (ids[0] the leader) and checks each gets its index.
func (e *env) syncAll(group string, gen int32, ids []string) {
	e.t.Helper()
	assign := make(map[string][]byte)
	for i, id := range ids {
		assign[id] = []byte{byte(i)}
	}
	var chans []<-chan SyncResult
	for i, id := range ids {
		var a map[string][]byte
		if i == 0 {
			a = assign
		}
		chans = append(chans, e.sync(group, id, gen, a))
	}
	for i, ch := range chans {
		r := recv(e.t, ch, "sync")
		if r.Code != 0 || !bytes.Equal(r.Assignment, []byte{byte(i)}) {
			e.t.Fatalf("sync of member %d: code %d, assignment %v", i, r.Code, r.Assignment)
		}
	}
}

func TestJoinSyncStable(t *testing.T) {
	e := newEnv(t) // the default 3s initial rebalance delay
	id1, j1 := e.newMember("g", "t")
	e.waitFor("g", "the first member to wait", func(s snap) bool { return s.joining == 1 })
	noRecv(t, j1, "a join inside the initial delay")
	id2, j2 := e.newMember("g", "t")
	e.waitFor("g", "both to wait", func(s snap) bool { return s.joining == 2 })
	e.clock.Advance(DefaultInitialRebalanceDelay)
	// A member arrived during the delay: it is extended once more.
	noRecv(t, j1, "a join inside the extended delay")
	e.clock.Advance(DefaultInitialRebalanceDelay)
	r1, r2 := recv(t, j1, "join 1"), recv(t, j2, "join 2")
	for i, r := range []JoinResult{r1, r2} {
		if r.Code != 0 || r.Generation != 1 || r.LeaderID != id1 || r.Protocol != "range" || r.ProtocolType != "consumer" {
			t.Fatalf("join %d: %+v", i+1, r)
		}
	}
	if len(r1.Members) != 2 || len(r2.Members) != 0 || r1.MemberID != id1 || r2.MemberID != id2 {
		t.Fatalf("leader got %d members, follower %d", len(r1.Members), len(r2.Members))
	}
	for _, m := range r1.Members {
		if !bytes.Equal(m.Metadata, consumerMeta("t")) {
			t.Fatalf("member %s metadata %x", m.MemberID, m.Metadata)
		}
	}

	// The follower waits for the leader's assignment.
	s2 := e.sync("g", id2, 1, nil)
	e.waitFor("g", "the follower to wait in sync", func(s snap) bool { return s.syncing == 1 })
	noRecv(t, s2, "the follower's sync")
	s1 := e.sync("g", id1, 1, map[string][]byte{id1: []byte("a1"), id2: []byte("a2")})
	if r := recv(t, s1, "sync 1"); r.Code != 0 || string(r.Assignment) != "a1" || r.Protocol != "range" {
		t.Fatalf("leader sync: %+v", r)
	}
	if r := recv(t, s2, "sync 2"); r.Code != 0 || string(r.Assignment) != "a2" {
		t.Fatalf("follower sync: %+v", r)
	}
	if s := e.c.snapshot("g"); s.state != stateStable || s.generation != 1 {
		t.Fatalf("group %+v", s)
	}
	st, ok := e.stored("g")
	if !ok || st.Generation != 1 || st.Leader != id1 || st.Protocol != "range" || len(st.Members) != 2 ||
		!st.SubscribedKnown || !reflect.DeepEqual(st.Subscribed, []string{"t"}) {
		t.Fatalf("stored %+v", st)
	}
	for _, m := range st.Members {
		want := map[string]string{id1: "a1", id2: "a2"}[m.MemberID]
		if string(m.Assignment) != want || m.ClientID != "client" || m.SessionTimeoutMs != 10_000 {
			t.Fatalf("stored member %+v", m)
		}
	}
	if code := e.heartbeat("g", id2, 1); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
}

// A member that keeps heartbeating but does not rejoin is dropped when the
// rebalance timeout ends the join phase.
func TestRebalanceTimeoutDropsLaggard(t *testing.T) {
	e := newEnv(t, noDelay)
	ids := e.stableGroup("g", 1)
	id2, j2 := e.newMember("g", "t")
	e.waitFor("g", "a rebalance", func(s snap) bool { return s.state == statePreparingRebalance })
	for range 6 {
		if code := e.heartbeat("g", ids[0], 1); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("heartbeat during the join phase: %d", code)
		}
		noRecv(t, j2, "the join before the rebalance timeout")
		e.clock.Advance(5 * time.Second)
	}
	r := recv(t, j2, "join after the rebalance timeout")
	if r.Generation != 2 || r.LeaderID != id2 || len(r.Members) != 1 {
		t.Fatalf("join %+v", r)
	}
	if code := e.heartbeat("g", ids[0], 1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("dropped member's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, noDelay)
	ids := e.stableGroup("g", 2)
	// Only the first member heartbeats.
	for range 3 {
		e.clock.Advance(4 * time.Second)
		if s := e.c.snapshot("g"); s.state != stateStable {
			break
		}
		if code := e.heartbeat("g", ids[0], 2); code != 0 {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	s := e.waitFor("g", "the silent member to expire", func(s snap) bool { return len(s.members) == 1 })
	if s.state != statePreparingRebalance || s.members[0] != ids[0] {
		t.Fatalf("group %+v", s)
	}
	if code := e.heartbeat("g", ids[0], 2); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat: %d, want REBALANCE_IN_PROGRESS", code)
	}
	r := recv(t, e.join(joinReq("g", ids[0], "t")), "rejoin")
	if r.Generation != 3 || len(r.Members) != 1 {
		t.Fatalf("rejoin %+v", r)
	}
}

func TestStaticMemberRejoin(t *testing.T) {
	e := newEnv(t, noDelay)
	ra := e.joinNow(withInstance(joinReq("g", "", "t"), "i-a"))
	if ra.Code != 0 || ra.Generation != 1 {
		t.Fatalf("static join needs no member id round: %+v", ra)
	}
	a := ra.MemberID
	e.syncAll("g", 1, []string{a})
	jb := e.join(withInstance(joinReq("g", "", "t"), "i-b"))
	e.waitFor("g", "a rebalance", func(s snap) bool { return s.state == statePreparingRebalance })
	ja := e.join(withInstance(joinReq("g", a, "t"), "i-a"))
	ra, rb := recv(t, ja, "join a"), recv(t, jb, "join b")
	b := rb.MemberID
	e.syncAll("g", 2, []string{a, b})

	// b restarts: same instance, no member id. No rebalance.
	rb2 := e.joinNow(withInstance(joinReq("g", "", "t"), "i-b"))
	b2 := rb2.MemberID
	if rb2.Code != 0 || rb2.Generation != 2 || b2 == b || rb2.LeaderID != a || len(rb2.Members) != 0 || rb2.SkipAssignment {
		t.Fatalf("static rejoin: %+v", rb2)
	}
	if s := e.c.snapshot("g"); s.state != stateStable || s.generation != 2 {
		t.Fatalf("group after a static rejoin: %+v", s)
	}
	hb := HeartbeatRequest{Group: "g", MemberID: b, Generation: 2, InstanceID: kmsg.StringPtr("i-b")}
	if code := e.c.Heartbeat(testCtx(t), hb); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old id's heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	if r := recv(t, e.sync("g", b2, 2, nil), "sync"); r.Code != 0 || !bytes.Equal(r.Assignment, []byte{1}) {
		t.Fatalf("the new id's sync: %+v", r)
	}
	st, _ := e.stored("g")
	var storedIDs []string
	for _, m := range st.Members {
		storedIDs = append(storedIDs, m.MemberID)
	}
	if st.Generation != 2 || !slices.Contains(storedIDs, b2) || slices.Contains(storedIDs, b) {
		t.Fatalf("stored generation %d, members %v; want 2 with %s", st.Generation, storedIDs, b2)
	}

	// The leader restarts: it is told to skip assigning (KIP-814).
	ra2 := e.joinNow(withInstance(joinReq("g", "", "t"), "i-a"))
	if ra2.Code != 0 || ra2.LeaderID != ra2.MemberID || !ra2.SkipAssignment || len(ra2.Members) != 2 || ra2.Generation != 2 {
		t.Fatalf("static leader rejoin: %+v", ra2)
	}
	if s := e.c.snapshot("g"); s.state != stateStable || s.generation != 2 {
		t.Fatalf("group %+v", s)
	}
}

func TestMemberIDRequired(t *testing.T) {
	e := newEnv(t, noDelay)
	ids := e.stableGroup("g", 1)
	// Without RequireKnownMemberID (JoinGroup v3 and below) a member
	// joins at once with a generated id.
	old := joinReq("g", "", "t")
	old.RequireKnownMemberID = false
	r3 := e.join(old)
	e.waitFor("g", "the old-style member", func(s snap) bool { return len(s.members) == 2 })
	// With it, a first join only gets an id: the group stays as it is
	// until the member comes back, and a join phase waits for it.
	first := e.joinNow(joinReq("g", "", "t"))
	if first.Code != kerr.MemberIDRequired.Code || first.MemberID == "" || first.Generation != -1 {
		t.Fatalf("first join: %+v", first)
	}
	if s := e.c.snapshot("g"); s.pending != 1 {
		t.Fatalf("group %+v", s)
	}
	ja := e.join(joinReq("g", ids[0], "t"))
	e.waitFor("g", "two joined", func(s snap) bool { return s.joining == 2 })
	noRecv(t, ja, "a join phase with a member id pending")
	// The pending id expires after its session timeout.
	e.clock.Advance(10 * time.Second)
	if r := recv(t, ja, "join"); r.Code != 0 || r.Generation != 2 || len(r.Members) != 2 {
		t.Fatalf("join: %+v", r)
	}
	if r := recv(t, r3, "old-style join"); r.Code != 0 || r.Generation != 2 {
		t.Fatalf("old-style join: %+v", r)
	}
	// The expired id is unknown now.
	if r := e.joinNow(joinReq("g", first.MemberID, "t")); r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("join with an expired id: %+v", r)
	}
}

func TestJoinErrors(t *testing.T) {
	e := newEnv(t, noDelay, func(c *Config) { c.MaxGroupSize = 2 })
	e.stableGroup("g", 1)
	other := joinReq("g", "", "t")
	other.ProtocolType = "connect"
	noProto := joinReq("g", "", "t")
	noProto.Protocols[0].Name = "sticky"
	short := joinReq("g", "", "t")
	short.SessionTimeout = 0
	tests := []struct {
		name string
		req  JoinRequest
		code int16
	}{
		{"empty group id", joinReq("", "", "t"), kerr.InvalidGroupID.Code},
		{"session timeout below the minimum", short, kerr.InvalidSessionTimeout.Code},
		{"other protocol type", other, kerr.InconsistentGroupProtocol.Code},
		{"no common protocol", noProto, kerr.InconsistentGroupProtocol.Code},
		{"unknown member", joinReq("g", "nobody", "t"), kerr.UnknownMemberID.Code},
		{"group full", joinReq("g", "", "t"), kerr.MemberIDRequired.Code},
		{"group full, second", joinReq("g", "", "t"), kerr.GroupMaxSizeReached.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.joinNow(tt.req); r.Code != tt.code {
				t.Fatalf("code %d, want %d", r.Code, tt.code)
			}
		})
	}
	// A static member's instance held by another id fences the id.
	e2 := newEnv(t, noDelay)
	ra := e2.joinNow(withInstance(joinReq("h", "", "t"), "i"))
	if r := e2.joinNow(withInstance(joinReq("h", "stale-id", "t"), "i")); r.Code != kerr.FencedInstanceID.Code {
		t.Fatalf("stale static id: %+v (owner %s)", r, ra.MemberID)
	}
}

func TestSyncAndHeartbeatErrors(t *testing.T) {
	e := newEnv(t, noDelay)
	ids := e.stableGroup("g", 2)
	syncReq := func(member string, gen int32, mod func(*SyncRequest)) int16 {
		req := SyncRequest{Group: "g", MemberID: member, Generation: gen}
		if mod != nil {
			mod(&req)
		}
		return e.c.SyncGroup(testCtx(t), req)(testCtx(t)).Code
	}
	tests := []struct {
		name string
		got  func() int16
		want int16
	}{
		{"sync, stable", func() int16 { return syncReq(ids[1], 2, nil) }, 0},
		{"sync, old generation", func() int16 { return syncReq(ids[1], 1, nil) }, kerr.IllegalGeneration.Code},
		{"sync, unknown member", func() int16 { return syncReq("nobody", 2, nil) }, kerr.UnknownMemberID.Code},
		{"sync, unknown group", func() int16 {
			return e.c.SyncGroup(testCtx(t), SyncRequest{Group: "nope", MemberID: "x"})(testCtx(t)).Code
		}, kerr.UnknownMemberID.Code},
		{"sync, other protocol", func() int16 {
			return syncReq(ids[1], 2, func(r *SyncRequest) { r.Protocol = kmsg.StringPtr("sticky") })
		}, kerr.InconsistentGroupProtocol.Code},
		{"heartbeat, old generation", func() int16 { return e.heartbeat("g", ids[1], 1) }, kerr.IllegalGeneration.Code},
		{"heartbeat, unknown member", func() int16 { return e.heartbeat("g", "nobody", 2) }, kerr.UnknownMemberID.Code},
		{"heartbeat, unknown group", func() int16 { return e.heartbeat("nope", "x", 1) }, kerr.UnknownMemberID.Code},
		{"heartbeat, empty group id", func() int16 { return e.heartbeat("", "x", 1) }, kerr.InvalidGroupID.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got(); got != tt.want {
				t.Fatalf("code %d, want %d", got, tt.want)
			}
		})
	}
	// During a join phase a sync is REBALANCE_IN_PROGRESS.
	e.newMember("g", "t")
	e.waitFor("g", "a rebalance", func(s snap) bool { return s.state == statePreparingRebalance })
	if code := syncReq(ids[1], 2, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync during a rebalance: %d", code)
	}
}

func TestLeaveGroup(t *testing.T) {
	e := newEnv(t, noDelay)
	ids := e.stableGroup("g", 2)
	rs := e.joinNow(withInstance(joinReq("s", "", "t"), "i"))
	e.syncAll("s", rs.Generation, []string{rs.MemberID})

	leave := func(group string, members ...LeaveMember) LeaveResult {
		return e.c.LeaveGroup(testCtx(t), group, members)
	}
	byID := func(id string) LeaveMember { return LeaveMember{MemberID: id} }
	byInstance := func(id, inst string) LeaveMember {
		return LeaveMember{MemberID: id, InstanceID: &inst}
	}

	resp := leave("s", byInstance("wrong-id", "i"), byInstance("", "unknown"), byID("nobody"))
	if want := []int16{kerr.FencedInstanceID.Code, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code}; resp.Code != 0 || !reflect.DeepEqual(resp.Codes, want) {
		t.Fatalf("code %d, codes %v, want %v", resp.Code, resp.Codes, want)
	}
	if resp := leave("s", byInstance("", "i")); resp.Code != 0 || resp.Codes[0] != 0 {
		t.Fatalf("leave by instance: %+v", resp)
	}
	s := e.waitFor("s", "the static group to empty", func(s snap) bool { return s.state == stateEmpty && s.storing == 0 })
	if s.generation != 2 {
		t.Fatalf("group %+v; an emptied group moves to the next generation", s)
	}
	if st, _ := e.stored("s"); st.Generation != 2 || len(st.Members) != 0 {
		t.Fatalf("stored %+v", st)
	}

	// One member by member id (all LeaveGroup v0-2 can say).
	if resp := leave("g", byID("nobody")); resp.Code != 0 || resp.Codes[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("leave of an unknown member: %+v", resp)
	}
	if resp := leave("g", byID(ids[1])); resp.Code != 0 || resp.Codes[0] != 0 {
		t.Fatalf("leave: %+v", resp)
	}
	e.waitFor("g", "a rebalance", func(s snap) bool { return s.state == statePreparingRebalance && len(s.members) == 1 })
}

func TestOffsetCommitValidation(t *testing.T) {
	e := newEnv(t, noDelay)
	e.createTopic("t", 2)
	ids := e.stableGroup("g", 2)
	tests := []struct {
		name                 string
		group, member, topic string
		gen                  int32
		partition            int32
		want                 int16
	}{
		{"member, current generation", "g", ids[1], "t", 2, 0, 0},
		{"member, old generation", "g", ids[1], "t", 1, 0, kerr.IllegalGeneration.Code},
		{"unknown member", "g", "nobody", "t", 2, 0, kerr.UnknownMemberID.Code},
		{"outside group management, group has members", "g", "", "t", -1, 0, kerr.UnknownMemberID.Code},
		{"unknown topic", "g", ids[1], "nope", 2, 0, kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", "g", ids[1], "t", 2, 2, kerr.UnknownTopicOrPartition.Code},
		{"standalone, new group", "solo", "", "t", -1, 1, 0},
		{"generation for a group that does not exist", "ghost", "m", "t", 3, 0, kerr.IllegalGeneration.Code},
		{"empty group id", "", "", "t", -1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.commit(tt.group, tt.member, tt.gen, tt.topic, tt.partition, 42); got != tt.want {
				t.Fatalf("code %d, want %d", got, tt.want)
			}
		})
	}
	if got := e.fetched("g", "t", 0); got != 42 {
		t.Fatalf("fetched %d", got)
	}
	if got := e.fetched("solo", "t", 1); got != 42 {
		t.Fatalf("fetched %d", got)
	}
	if got := e.fetched("g", "t", 1); got != -1 {
		t.Fatalf("fetched %d for no commit", got)
	}

	// Metadata over offset.metadata.max.bytes.
	req := commitReq("solo", "", -1, "t", 0, 0)
	req.Topics[0].Partitions[0].Metadata = string(make([]byte, DefaultMaxOffsetMetadataBytes+1))
	ctx := testCtx(t)
	if code := e.c.OffsetCommit(ctx, req)(ctx)[0]; code != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("big metadata: %d", code)
	}

	// A generation that completed its join but not its sync.
	e.newMember("g", "t")
	e.waitFor("g", "a rebalance", func(s snap) bool { return s.state == statePreparingRebalance })
	for _, id := range ids {
		e.join(joinReq("g", id, "t"))
	}
	e.waitFor("g", "a sync phase", func(s snap) bool { return s.state == stateCompletingRebalance })
	if got := e.commit("g", ids[0], 3, "t", 0, 43); got != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit while completing the rebalance: %d", got)
	}
}

// A coordinator restarted on the same replica and log finds its groups:
// the generation goes on, members keep heartbeating, offsets are there,
// and members that do not come back expire.
func TestRestartLoadsGroup(t *testing.T) {
	e := newEnv(t, noDelay)
	e.createTopic("t", 1)
	ids := e.stableGroup("g", 2)
	if code := e.commit("g", ids[0], 2, "t", 0, 7); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	e.restart()
	s := e.c.snapshot("g")
	if !s.exists || s.state != stateStable || s.generation != 2 || !reflect.DeepEqual(s.members, slices.Sorted(slices.Values(ids))) {
		t.Fatalf("loaded %+v", s)
	}
	if got := e.fetched("g", "t", 0); got != 7 {
		t.Fatalf("fetched %d", got)
	}
	if r := recv(t, e.sync("g", ids[1], 2, nil), "sync"); r.Code != 0 || !bytes.Equal(r.Assignment, []byte{1}) {
		t.Fatalf("sync after restart: %+v", r)
	}
	// Only ids[0] is alive.
	for range 3 {
		e.clock.Advance(4 * time.Second)
		if e.c.snapshot("g").state != stateStable {
			break
		}
		if code := e.heartbeat("g", ids[0], 2); code != 0 {
			t.Fatalf("heartbeat after restart: %d", code)
		}
	}
	e.waitFor("g", "the member that did not come back to expire", func(s snap) bool { return len(s.members) == 1 })
	r := recv(t, e.join(joinReq("g", ids[0], "t")), "rejoin")
	if r.Generation != 3 {
		t.Fatalf("generation %d after restart, want 3", r.Generation)
	}
}

func TestOffsetExpirySweep(t *testing.T) {
	e := newEnv(t, noDelay, func(c *Config) {
		c.OffsetRetention = time.Hour
		c.OffsetRetentionCheckInterval = 10 * time.Minute
	})
	e.createTopic("t", 1)
	e.createTopic("u", 1)
	if code := e.commit("solo", "", -1, "t", 0, 5); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	// A live group subscribed to t keeps t's offset, loses u's.
	e.session = DefaultMaxSessionTimeout
	ids := e.stableGroup("g", 1)
	e.commit("g", ids[0], 1, "t", 0, 1)
	e.commit("g", ids[0], 1, "u", 0, 1)
	for range 5 {
		e.clock.Advance(10 * time.Minute)
		e.heartbeat("g", ids[0], 1)
	}
	if e.fetched("solo", "t", 0) != 5 || e.fetched("g", "u", 0) != 1 {
		t.Fatal("offsets expired before the retention")
	}
	e.clock.Advance(10 * time.Minute)
	if got := e.fetched("solo", "t", 0); got != -1 {
		t.Fatalf("standalone offset %d after the retention, want expired", got)
	}
	if _, ok := e.stored("solo"); ok {
		t.Fatal("standalone group left without offsets still stored")
	}
	if e.fetched("g", "t", 0) != 1 || e.fetched("g", "u", 0) != -1 {
		t.Fatalf("live group: t %d (subscribed, kept), u %d (expired)", e.fetched("g", "t", 0), e.fetched("g", "u", 0))
	}
}

func TestDeleteGroups(t *testing.T) {
	e := newEnv(t, noDelay)
	e.createTopic("t", 1)
	ids := e.stableGroup("live", 1)
	e.commit("live", ids[0], 1, "t", 0, 3)
	e.commit("solo", "", -1, "t", 0, 3)
	got := e.c.DeleteGroups(testCtx(t), []string{"live", "solo", "nope"})
	if want := []int16{kerr.NonEmptyGroup.Code, 0, kerr.GroupIDNotFound.Code}; !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if _, ok := e.stored("solo"); ok || e.fetched("solo", "t", 0) != -1 {
		t.Fatal("solo still stored")
	}
	if e.fetched("live", "t", 0) != 3 {
		t.Fatal("live lost its offset")
	}
}

func TestOffsetDelete(t *testing.T) {
	e := newEnv(t, noDelay)
	e.createTopic("t", 1)
	e.createTopic("u", 1)
	ids := e.stableGroup("g", 1)
	e.commit("g", ids[0], 1, "t", 0, 1)
	e.commit("g", ids[0], 1, "u", 0, 1)
	var topics []TopicPartitions
	for _, topic := range []string{"t", "u", "nope"} {
		topics = append(topics, TopicPartitions{Topic: topic, Partitions: []int32{0}})
	}
	resp := e.c.OffsetDelete(testCtx(t), "g", topics)
	if want := []int16{kerr.GroupSubscribedToTopic.Code, 0, kerr.UnknownTopicOrPartition.Code}; resp.Code != 0 || !reflect.DeepEqual(resp.Codes, want) {
		t.Fatalf("top %d, codes %v, want %v", resp.Code, resp.Codes, want)
	}
	if e.fetched("g", "t", 0) != 1 || e.fetched("g", "u", 0) != -1 {
		t.Fatal("wrong offsets deleted")
	}
	if resp := e.c.OffsetDelete(testCtx(t), "nope", topics); resp.Code != kerr.GroupIDNotFound.Code || resp.Codes != nil {
		t.Fatalf("unknown group: %d", resp.Code)
	}
}

func TestListAndDescribe(t *testing.T) {
	e := newEnv(t, noDelay)
	e.createTopic("t", 1)
	e.stableGroup("live", 2)
	e.commit("solo", "", -1, "t", 0, 1)
	e.newMember("joining", "t")
	e.waitFor("joining", "a join phase", func(s snap) bool { return s.state != stateEmpty })

	list := func(states ...string) map[string]string {
		listed, code := e.c.ListGroups(testCtx(t), states, nil)
		if code != 0 {
			t.Fatalf("ListGroups: %d", code)
		}
		out := make(map[string]string)
		for _, g := range listed {
			out[g.Group] = g.ProtocolType + "/" + g.State
		}
		return out
	}
	all := list()
	want := map[string]string{"live": "consumer/Stable", "solo": "/Empty", "joining": "consumer/CompletingRebalance"}
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("groups %v, want %v", all, want)
	}
	if got := list("stable", "EMPTY"); len(got) != 2 || got["joining"] != "" {
		t.Fatalf("filtered %v", got)
	}

	resp := e.c.DescribeGroups(testCtx(t), []string{"live", "nope"})
	live, nope := resp[0], resp[1]
	if live.State != "Stable" || live.Protocol != "range" || len(live.Members) != 2 {
		t.Fatalf("live: %+v", live)
	}
	for _, m := range live.Members {
		if !bytes.Equal(m.Metadata, consumerMeta("t")) || len(m.Assignment) != 1 || m.ClientHost != "/127.0.0.1" {
			t.Fatalf("member %+v", m)
		}
	}
	if nope.State != "Dead" || nope.Code != 0 {
		t.Fatalf("unknown group: %+v", nope)
	}
}

// A group this agent does not own (placement.OwnerOf, whose spread
// package placement tests) is NOT_COORDINATOR everywhere.
func TestNotCoordinator(t *testing.T) {
	nodes := []int32{3, 1, 2}
	var foreign string
	for i := 0; foreign == ""; i++ {
		if name := fmt.Sprintf("group-%d", i); placement.OwnerOf(name, nodes) != 1 {
			foreign = name
		}
	}

	e := newEnv(t, noDelay, func(c *Config) { c.Nodes = func() []int32 { return nodes } })
	e.createTopic("t", 1)
	nc := kerr.NotCoordinator.Code
	if r := e.joinNow(joinReq(foreign, "", "t")); r.Code != nc {
		t.Fatalf("join: %d", r.Code)
	}
	if code := e.heartbeat(foreign, "m", 1); code != nc {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := e.commit(foreign, "", -1, "t", 0, 1); code != nc {
		t.Fatalf("commit: %d", code)
	}
	if _, code := fetchOne(testCtx(t), e.c, foreign, "t", 0); code != nc {
		t.Fatalf("fetch: %d", code)
	}
	if e.c.Coordinator(foreign) == 1 {
		t.Fatal("Coordinator disagrees with placement.OwnerOf")
	}
}

// Commits of many groups queued while an append is in flight share one
// log entry.
func TestOffsetCommitsShareEntries(t *testing.T) {
	const groups = 50
	clock := newFakeClock()
	log := &gatedLog{Loglet: memlog.New()}
	rep, err := replica.Open(testCtx(t), replica.Config{Dir: t.TempDir(), Log: log, WriterID: "w", Logger: quiet, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close() })
	cfg := testConfig()
	cfg.Meta, cfg.Clock = rep, clock
	c, err := New(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if res, err := rep.Propose(testCtx(t), meta.CreateTopic{Name: "t", Partitions: 1}); err != nil || res.Code != 0 {
		t.Fatal(err, res)
	}
	commit := func(group string) func(context.Context) []int16 {
		return c.OffsetCommit(testCtx(t), commitReq(group, "", -1, "t", 0, 9))
	}
	before := log.count()
	entered := log.arm()
	waits := []func(context.Context) []int16{commit("g-0")}
	recv(t, entered, "the first append")
	for i := 1; i < groups; i++ {
		waits = append(waits, commit(fmt.Sprintf("g-%d", i)))
	}
	log.release()
	for i, w := range waits {
		if code := w(testCtx(t))[0]; code != 0 {
			t.Fatalf("commit %d: %d", i, code)
		}
	}
	if n := log.count() - before; n != 2 {
		t.Fatalf("%d commits took %d appends, want 2", groups, n)
	}
	v := rep.View()
	defer v.Close()
	gs, err := v.Groups()
	if err != nil || len(gs) != groups {
		t.Fatalf("%d groups stored, %v", len(gs), err)
	}
}

// A leader's store of one generation still in flight when the next
// generation's leader syncs must not hold that sync up.
func TestSyncWhileOlderStoreInFlight(t *testing.T) {
	e := newEnv(t, noDelay)
	id1, j1 := e.newMember("g", "t")
	if r := recv(t, j1, "join"); r.Generation != 1 {
		t.Fatalf("join %+v", r)
	}
	entered := e.log.arm()
	s1 := e.sync("g", id1, 1, map[string][]byte{id1: {1}})
	recv(t, entered, "the generation 1 store's append")
	// A new member: the group rebalances while generation 1's store is
	// stuck in the log.
	id2, j2 := e.newMember("g", "t")
	if r := recv(t, s1, "generation 1 sync"); r.Code != kerr.RebalanceInProgress.Code {
		t.Fatalf("generation 1 sync: %+v", r)
	}
	j1 = e.join(joinReq("g", id1, "t"))
	if r := recv(t, j1, "rejoin"); r.Generation != 2 {
		t.Fatalf("rejoin %+v", r)
	}
	recv(t, j2, "join 2")
	s1 = e.sync("g", id1, 2, map[string][]byte{id1: {1}, id2: {2}})
	s2 := e.sync("g", id2, 2, nil)
	e.waitFor("g", "both to wait in sync", func(s snap) bool { return s.syncing == 2 })
	e.log.release()
	if r := recv(t, s1, "leader sync"); r.Code != 0 || !bytes.Equal(r.Assignment, []byte{1}) {
		t.Fatalf("leader sync %+v", r)
	}
	if r := recv(t, s2, "follower sync"); r.Code != 0 || !bytes.Equal(r.Assignment, []byte{2}) {
		t.Fatalf("follower sync %+v", r)
	}
}

// Memory holds at most MaxGroups groups: an idle empty one makes room, a
// live one does not.
func TestMaxGroups(t *testing.T) {
	e := newEnv(t, noDelay, func(c *Config) { c.MaxGroups = 1 })
	ids := e.stableGroup("live", 1)
	if r := e.joinNow(joinReq("other", "", "t")); r.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join with memory full of live groups: %+v", r)
	}
	if resp := e.c.LeaveGroup(testCtx(t), "live", []LeaveMember{{MemberID: ids[0]}}); resp.Code != 0 || resp.Codes[0] != 0 {
		t.Fatalf("leave: %+v", resp)
	}
	e.waitFor("live", "the group to empty and store", func(s snap) bool { return s.state == stateEmpty && s.storing == 0 })
	if r := e.joinNow(joinReq("other", "", "t")); r.Code != kerr.MemberIDRequired.Code {
		t.Fatalf("join after the live group emptied: %+v", r)
	}
	if s := e.c.snapshot("live"); s.exists {
		t.Fatalf("live still in memory: %+v", s)
	}
	// Its state is stored: loading it again finds the generation.
	if st, ok := e.stored("live"); !ok || st.Generation != 2 {
		t.Fatalf("stored %+v, %v", st, ok)
	}
}
