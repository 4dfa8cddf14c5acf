package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func members(subs map[string][]string) []assignMember {
	var ms []assignMember
	for _, id := range sortedKeys(subs) {
		ms = append(ms, assignMember{id: id, topics: slices.Sorted(slices.Values(subs[id]))})
	}
	return ms
}

// checkCovered fails unless every partition of every subscribed topic is
// assigned exactly once, to a member that subscribes to it.
func checkCovered(t *testing.T, ms []assignMember, parts map[string]int32, out map[string]assignment) {
	t.Helper()
	seen := make(map[tp]string)
	for _, m := range ms {
		for topic, ps := range out[m.id] {
			if !m.subscribes(topic) {
				t.Errorf("%s got %s, which it does not subscribe to", m.id, topic)
			}
			for _, p := range ps {
				if prev, ok := seen[tp{topic, p}]; ok {
					t.Errorf("%s[%d] assigned to %s and %s", topic, p, prev, m.id)
				}
				seen[tp{topic, p}] = m.id
			}
		}
	}
	for topic, n := range parts {
		subscribed := slices.ContainsFunc(ms, func(m assignMember) bool { return m.subscribes(topic) })
		for p := range n {
			if _, ok := seen[tp{topic, p}]; !ok && subscribed {
				t.Errorf("%s[%d] unassigned", topic, p)
			}
		}
	}
}

func counts(out map[string]assignment) []int {
	var cs []int
	for _, id := range sortedKeys(out) {
		cs = append(cs, out[id].count())
	}
	return cs
}

func TestAssignUniformBalance(t *testing.T) {
	tests := []struct {
		name  string
		subs  map[string][]string
		parts map[string]int32
		want  []int // partitions per member, by member id
	}{
		{"six over three", map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 6}, []int{2, 2, 2}},
		{"seven over three", map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 7}, []int{3, 2, 2}},
		{"two topics", map[string][]string{"a": {"t", "u"}, "b": {"t", "u"}}, map[string]int32{"t": 3, "u": 3}, []int{3, 3}},
		{"more members than partitions", map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 2}, []int{1, 1, 0}},
		// c can only take u: a and b share t, and u is c's alone.
		{"different subscriptions", map[string][]string{"a": {"t"}, "b": {"t", "u"}, "c": {"u"}}, map[string]int32{"t": 4, "u": 2}, []int{2, 2, 2}},
		{"no topics", map[string][]string{"a": {"x"}}, map[string]int32{}, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := members(tt.subs)
			out := assign(UniformAssignor, ms, tt.parts)
			checkCovered(t, ms, tt.parts, out)
			if got := counts(out); !slices.Equal(got, tt.want) {
				t.Fatalf("counts %v, want %v (%v)", got, tt.want, out)
			}
		})
	}
}

func TestAssignUniformSticky(t *testing.T) {
	parts := map[string]int32{"t": 6}
	ms := members(map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}})
	first := assign(UniformAssignor, ms, parts)
	withPrevious := func(ms []assignMember, prev map[string]assignment) []assignMember {
		out := slices.Clone(ms)
		for i := range out {
			out[i].previous = prev[out[i].id]
		}
		return out
	}

	t.Run("unchanged members keep everything", func(t *testing.T) {
		again := assign(UniformAssignor, withPrevious(ms, first), parts)
		for id, a := range first {
			if !a.equal(again[id]) {
				t.Fatalf("%s: %v, then %v", id, a, again[id])
			}
		}
	})
	t.Run("a member leaves: the others keep theirs", func(t *testing.T) {
		two := withPrevious(ms[:2], first)
		after := assign(UniformAssignor, two, parts)
		checkCovered(t, two, parts, after)
		for _, m := range two {
			if got := first[m.id].minus(after[m.id]).count(); got != 0 {
				t.Fatalf("%s lost %d partitions: %v -> %v", m.id, got, first[m.id], after[m.id])
			}
			if after[m.id].count() != 3 {
				t.Fatalf("%s has %d partitions, want 3", m.id, after[m.id].count())
			}
		}
	})
	t.Run("a member joins: each moves at most what it must", func(t *testing.T) {
		four := withPrevious(members(map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}, "d": {"t"}}), first)
		after := assign(UniformAssignor, four, parts)
		checkCovered(t, four, parts, after)
		moved := 0
		for _, m := range four[:3] {
			moved += first[m.id].minus(after[m.id]).count()
		}
		if moved != after["d"].count() || moved != 1 {
			t.Fatalf("moved %d partitions, d got %d: %v", moved, after["d"].count(), after)
		}
	})
}

func TestAssignRange(t *testing.T) {
	tests := []struct {
		name  string
		subs  map[string][]string
		parts map[string]int32
		want  map[string]assignment
	}{
		{
			"co-partitioned",
			map[string][]string{"a": {"t", "u"}, "b": {"t", "u"}},
			map[string]int32{"t": 5, "u": 5},
			map[string]assignment{"a": {"t": {0, 1, 2}, "u": {0, 1, 2}}, "b": {"t": {3, 4}, "u": {3, 4}}},
		},
		{
			"per topic subscribers",
			map[string][]string{"a": {"t"}, "b": {"t", "u"}},
			map[string]int32{"t": 4, "u": 2},
			map[string]assignment{"a": {"t": {0, 1}}, "b": {"t": {2, 3}, "u": {0, 1}}},
		},
		{
			"more members than partitions",
			map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}},
			map[string]int32{"t": 2},
			map[string]assignment{"a": {"t": {0}}, "b": {"t": {1}}, "c": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := members(tt.subs)
			out := assign(RangeAssignor, ms, tt.parts)
			checkCovered(t, ms, tt.parts, out)
			for id, want := range tt.want {
				if !out[id].equal(want) {
					t.Fatalf("%s: %v, want %v", id, out[id], want)
				}
			}
		})
	}
}

// cgh is a ConsumerGroupHeartbeat v1.
type cgh struct {
	e       *env
	group   string
	member  string
	epoch   int32
	owned   map[string][]int32 // by topic name; nil sends null Topics
	topics  []string
	assign  string
	instant *string
}

func (e *env) topicIDOf(name string) meta.TopicID {
	e.t.Helper()
	v := e.rep.View()
	defer v.Close()
	tp, ok, err := v.Topic(name)
	if err != nil || !ok {
		e.t.Fatalf("topic %s: %v %v", name, ok, err)
	}
	return tp.ID
}

func (e *env) cgHeartbeat(h cgh) ConsumerHeartbeatResult {
	e.t.Helper()
	req := ConsumerHeartbeatRequest{
		Group: h.group, MemberID: h.member, RequireMemberID: true, MemberEpoch: h.epoch,
		RebalanceTimeoutMs: -1,
	}
	if h.epoch == epochJoin {
		req.RebalanceTimeoutMs = 10_000
		req.SubscribedTopicNames = h.topics
		req.Owned = []ConsumerTopic{}
	}
	if h.assign != "" {
		req.ServerAssignor = &h.assign
	}
	req.InstanceID = h.instant
	if h.owned != nil {
		req.Owned = []ConsumerTopic{}
		for _, name := range sortedKeys(h.owned) {
			req.Owned = append(req.Owned, ConsumerTopic{TopicID: e.topicIDOf(name), Partitions: h.owned[name]})
		}
	}
	ctx := testCtx(e.t)
	return e.c.ConsumerGroupHeartbeat(ctx, Client{ID: "cl", Host: "/127.0.0.1"}, req)(ctx)
}

// assigned is an answer's assignment by topic name; nil when it has none.
func (e *env) assigned(resp ConsumerHeartbeatResult) map[string][]int32 {
	e.t.Helper()
	if resp.Assignment == nil {
		return nil
	}
	v := e.rep.View()
	defer v.Close()
	out := make(map[string][]int32)
	for _, at := range resp.Assignment {
		tp, ok, err := v.TopicByID(at.TopicID)
		if err != nil || !ok {
			e.t.Fatalf("assigned topic id %x unknown", at.TopicID)
		}
		out[tp.Name] = at.Partitions
	}
	return out
}

func mustOK(t *testing.T, resp ConsumerHeartbeatResult) {
	t.Helper()
	if resp.Code != 0 {
		t.Fatalf("heartbeat: %v (%s)", kerr.ErrorForCode(resp.Code), resp.Message)
	}
}

func parts(resp map[string][]int32, topic string) []int32 { return resp[topic] }

// Two members share a topic: the second gets partitions only once the
// first revoked them, epochs move as KIP-848 says, and a member whose
// session runs out (fake clock) leaves its partitions to the other.
func TestConsumerGroupReconcile(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ConsumerSessionTimeout = 45 * time.Second
		c.ConsumerHeartbeatInterval = time.Second
	})
	e.createTopic("t", 4)

	a := e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 0, topics: []string{"t"}})
	mustOK(t, a)
	if a.MemberEpoch != 1 || a.HeartbeatInterval != time.Second || !slices.Equal(parts(e.assigned(a), "t"), []int32{0, 1, 2, 3}) {
		t.Fatalf("A joined: epoch %d, interval %v, assigned %v", a.MemberEpoch, a.HeartbeatInterval, e.assigned(a))
	}

	b := e.cgHeartbeat(cgh{e: e, group: "g", member: "B", epoch: 0, topics: []string{"t"}})
	mustOK(t, b)
	if b.MemberEpoch != 2 || len(parts(e.assigned(b), "t")) != 0 {
		t.Fatalf("B joined: epoch %d, assigned %v; want epoch 2 and nothing while A owns all", b.MemberEpoch, e.assigned(b))
	}

	// A is told to revoke two, at its old epoch.
	a = e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 1, owned: map[string][]int32{"t": {0, 1, 2, 3}}})
	mustOK(t, a)
	kept := parts(e.assigned(a), "t")
	if a.MemberEpoch != 1 || len(kept) != 2 {
		t.Fatalf("A revoking: epoch %d, assigned %v", a.MemberEpoch, e.assigned(a))
	}
	// Until A says it let go, B gets nothing.
	b = e.cgHeartbeat(cgh{e: e, group: "g", member: "B", epoch: 2, owned: map[string][]int32{}})
	mustOK(t, b)
	if len(parts(e.assigned(b), "t")) != 0 {
		t.Fatalf("B got %v before A revoked", e.assigned(b))
	}
	if s := e.describe("g"); s.State != "Reconciling" || s.Epoch != 2 || s.AssignmentEpoch != 2 {
		t.Fatalf("describe while reconciling: %+v", s)
	}
	a = e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 1, owned: map[string][]int32{"t": kept}})
	mustOK(t, a)
	if a.MemberEpoch != 2 {
		t.Fatalf("A after revoking: epoch %d, want 2", a.MemberEpoch)
	}
	b = e.cgHeartbeat(cgh{e: e, group: "g", member: "B", epoch: 2, owned: map[string][]int32{}})
	mustOK(t, b)
	bParts := parts(e.assigned(b), "t")
	if len(bParts) != 2 || slices.ContainsFunc(bParts, func(p int32) bool { return slices.Contains(kept, p) }) {
		t.Fatalf("B got %v, A kept %v", bParts, kept)
	}
	if s := e.describe("g"); s.State != "Stable" || len(s.Members) != 2 || s.Assignor != UniformAssignor {
		t.Fatalf("describe when stable: %+v", s)
	}

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name string
			h    cgh
			want *kerr.Error
		}{
			{"epoch ahead", cgh{group: "g", member: "A", epoch: 5}, kerr.FencedMemberEpoch},
			{"old epoch owning more", cgh{group: "g", member: "A", epoch: 1, owned: map[string][]int32{"t": {0, 1, 2, 3}}}, kerr.FencedMemberEpoch},
			{"unknown member", cgh{group: "g", member: "Z", epoch: 3}, kerr.UnknownMemberID},
			{"unknown group", cgh{group: "nope", member: "Z", epoch: 3}, kerr.GroupIDNotFound},
			{"unknown assignor", cgh{group: "g", member: "C", epoch: 0, topics: []string{"t"}, assign: "sticky"}, kerr.UnsupportedAssignor},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.h.e = e
				if got := e.cgHeartbeat(tt.h); got.Code != tt.want.Code {
					t.Fatalf("got %v, want %v", kerr.ErrorForCode(got.Code), tt.want)
				}
			})
		}
	})

	t.Run("classic join is refused", func(t *testing.T) {
		if resp := e.joinNow(e.req("g", "", "t")); resp.Code != kerr.InconsistentGroupProtocol.Code {
			t.Fatalf("JoinGroup: %v", kerr.ErrorForCode(resp.Code))
		}
	})

	t.Run("offset commits use the member epoch", func(t *testing.T) {
		if code := e.commit("g", "A", 2, "t", kept[0], 10); code != 0 {
			t.Fatalf("commit at the current epoch: %v", kerr.ErrorForCode(code))
		}
		if code := e.commit("g", "A", 3, "t", kept[0], 11); code != kerr.StaleMemberEpoch.Code {
			t.Fatalf("commit ahead of the epoch: %v", kerr.ErrorForCode(code))
		}
		if code := e.commit("g", "A", 1, "t", bParts[0], 11); code != kerr.StaleMemberEpoch.Code {
			t.Fatalf("old-epoch commit of a partition A no longer owns: %v", kerr.ErrorForCode(code))
		}
		if got := e.fetched("g", "t", kept[0]); got != 10 {
			t.Fatalf("fetched %d, want 10", got)
		}
	})

	stored, ok := e.stored("g")
	if !ok || stored.Kind != meta.GroupConsumer || stored.Generation != 2 || len(stored.Members) != 2 {
		t.Fatalf("stored: %v %+v", ok, stored)
	}

	t.Run("session expiry hands B's partitions to A", func(t *testing.T) {
		e.clock.Advance(30 * time.Second)
		mustOK(t, e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 2, owned: map[string][]int32{"t": kept}}))
		e.clock.Advance(20 * time.Second) // B's 45s session is over
		e.waitFor("g", "B removed", func(s snap) bool { return s.generation == 3 })
		a := e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 2, owned: map[string][]int32{"t": kept}})
		mustOK(t, a)
		if a.MemberEpoch != 3 || !slices.Equal(parts(e.assigned(a), "t"), []int32{0, 1, 2, 3}) {
			t.Fatalf("A after B expired: epoch %d, assigned %v", a.MemberEpoch, e.assigned(a))
		}
		if b := e.cgHeartbeat(cgh{e: e, group: "g", member: "B", epoch: 2}); b.Code != kerr.UnknownMemberID.Code {
			t.Fatalf("expired B: %v", kerr.ErrorForCode(b.Code))
		}
	})

	t.Run("a restarted coordinator keeps members and epochs", func(t *testing.T) {
		e.restart()
		a := e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 3, owned: map[string][]int32{"t": {0, 1, 2, 3}}})
		mustOK(t, a)
		if a.MemberEpoch != 3 {
			t.Fatalf("A after restart: epoch %d", a.MemberEpoch)
		}
		leave := e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: epochLeave})
		mustOK(t, leave)
		if s := e.describe("g"); s.State != "Empty" || len(s.Members) != 0 {
			t.Fatalf("after leave: %+v", s)
		}
	})
}

// The range assignor is used when members ask for it.
func TestConsumerGroupRangeAssignor(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 3)
	e.createTopic("u", 3)
	a := e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 0, topics: []string{"t", "u"}, assign: RangeAssignor})
	mustOK(t, a)
	b := e.cgHeartbeat(cgh{e: e, group: "g", member: "B", epoch: 0, topics: []string{"t", "u"}, assign: RangeAssignor})
	mustOK(t, b)
	s := e.describe("g")
	if s.Assignor != RangeAssignor {
		t.Fatalf("assignor %q", s.Assignor)
	}
	for _, m := range s.Members {
		want := map[string][]int32{"A": {0, 1}, "B": {2}}[m.MemberID]
		for _, at := range m.TargetAssignment {
			if !slices.Equal(at.Partitions, want) {
				t.Fatalf("%s target %s: %v, want %v", m.MemberID, at.Topic, at.Partitions, want)
			}
		}
	}
}

// A classic group with members refuses KIP-848 members.
func TestConsumerGroupClassicConflict(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelay = -1 })
	e.createTopic("t", 1)
	_, ch := e.newMember("g", "t")
	recv(t, ch, "join")
	resp := e.cgHeartbeat(cgh{e: e, group: "g", member: "A", epoch: 0, topics: []string{"t"}})
	if resp.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat to a classic group: %v", kerr.ErrorForCode(resp.Code))
	}
	d := e.describe("g")
	if d.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %v", kerr.ErrorForCode(d.Code))
	}
}

func TestConsumerGroupRegex(t *testing.T) {
	e := newEnv(t)
	e.createTopic("orders-1", 1)
	e.createTopic("orders-2", 1)
	e.createTopic("other", 1)
	req := ConsumerHeartbeatRequest{Group: "g", MemberID: "A", RequireMemberID: true, RebalanceTimeoutMs: 1000}
	req.SubscribedTopicRegex = kmsg.StringPtr("orders-.*")
	req.Owned = []ConsumerTopic{}
	resp := e.c.ConsumerGroupHeartbeat(testCtx(t), Client{}, req)(testCtx(t))
	mustOK(t, resp)
	if got := sortedKeys(e.assigned(resp)); !slices.Equal(got, []string{"orders-1", "orders-2"}) {
		t.Fatalf("regex assigned %v", got)
	}
	req.MemberID = "B"
	req.SubscribedTopicRegex = kmsg.StringPtr("(")
	if resp := e.c.ConsumerGroupHeartbeat(testCtx(t), Client{}, req)(testCtx(t)); resp.Code != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %v", kerr.ErrorForCode(resp.Code))
	}
}

func (e *env) describe(group string) DescribedConsumerGroup {
	e.t.Helper()
	resp := e.c.ConsumerGroupDescribe(testCtx(e.t), []string{group})
	if len(resp) != 1 {
		e.t.Fatalf("describe: %d groups", len(resp))
	}
	return resp[0]
}
