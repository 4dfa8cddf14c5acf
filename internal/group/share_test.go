package group

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// checkShareCovered fails unless every partition of every subscribed
// topic is assigned to at least one member that subscribes to it, each
// member holds floor or ceil of its fair count, and each partition has
// floor or ceil of its fair number of members.
func checkShareCovered(t *testing.T, ms []assignMember, parts map[string]int32, out map[string]assignment) {
	t.Helper()
	for topic, n := range parts {
		var subs []string
		for _, m := range ms {
			if m.subscribes(topic) {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		perPart := make([]int, n)
		for _, id := range subs {
			got := len(out[id][topic])
			lo, hi := int(n)/len(subs), (int(n)+len(subs)-1)/len(subs)
			if len(subs) > int(n) {
				lo, hi = 1, 1
			}
			if got < lo || got > hi {
				t.Errorf("%s has %d partitions of %s, want %d..%d (%v)", id, got, topic, lo, hi, out)
			}
			for _, p := range out[id][topic] {
				perPart[p]++
			}
		}
		lo, hi := 1, 1
		if len(subs) > int(n) {
			lo, hi = len(subs)/int(n), (len(subs)+int(n)-1)/int(n)
		}
		for p, c := range perPart {
			if c < lo || c > hi {
				t.Errorf("%s[%d] has %d members, want %d..%d (%v)", topic, p, c, lo, hi, out)
			}
		}
	}
	for _, m := range ms {
		for topic := range out[m.id] {
			if !m.subscribes(topic) {
				t.Errorf("%s got %s, which it does not subscribe to", m.id, topic)
			}
		}
	}
}

func TestAssignShareBalance(t *testing.T) {
	tests := []struct {
		name  string
		subs  map[string][]string
		parts map[string]int32
		want  []int // partitions per member, by member id
	}{
		{"six over three", map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 6}, []int{2, 2, 2}},
		{"seven over three", map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 7}, []int{3, 2, 2}},
		// Unlike a consumer group, every member gets a partition.
		{"eight members on two partitions", map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}, "d": {"t"}, "e": {"t"}, "f": {"t"}, "g": {"t"}, "h": {"t"}},
			map[string]int32{"t": 2}, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{"three members on two partitions", map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 2}, []int{1, 1, 1}},
		{"different subscriptions", map[string][]string{"a": {"t"}, "b": {"t", "u"}, "c": {"u"}}, map[string]int32{"t": 4, "u": 1}, []int{2, 3, 1}},
		{"no topics", map[string][]string{"a": {"x"}}, map[string]int32{}, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := members(tt.subs)
			out := assignShare(slices.Clone(ms), tt.parts)
			checkShareCovered(t, ms, tt.parts, out)
			if got := counts(out); !slices.Equal(got, tt.want) {
				t.Fatalf("counts %v, want %v (%v)", got, tt.want, out)
			}
		})
	}
}

// TestAssignShareDeterministicSticky: the input order does not matter,
// and members that stay keep what balance lets them keep.
func TestAssignShareDeterministicSticky(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int32{1, 2, 3, 7, 16} {
		for _, m := range []int{1, 2, 3, 5, 8, 20} {
			subs := make(map[string][]string)
			for i := range m {
				subs[fmt.Sprintf("m%02d", i)] = []string{"t"}
			}
			parts := map[string]int32{"t": n}
			ms := members(subs)
			first := assignShare(slices.Clone(ms), parts)
			checkShareCovered(t, ms, parts, first)
			shuffled := slices.Clone(ms)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			again := assignShare(shuffled, parts)
			for id := range first {
				if !first[id].equal(again[id]) {
					t.Fatalf("n=%d m=%d: %s got %v, then %v from another order", n, m, id, first[id], again[id])
				}
			}
			if m < 2 {
				continue
			}
			// The last member leaves. With no more members than
			// partitions, each keeps all it had when that is no more
			// than its new share; with more, only the members over a
			// partition's new room move.
			rest := slices.Clone(ms[:m-1])
			for i := range rest {
				rest[i].previous = first[rest[i].id]
			}
			after := assignShare(slices.Clone(rest), parts)
			checkShareCovered(t, rest, parts, after)
			moved, mayMove := 0, 0
			holders := make(map[int32]int)
			for _, r := range rest {
				for _, p := range first[r.id]["t"] {
					holders[p]++
				}
			}
			for _, r := range rest {
				if !first[r.id].equal(after[r.id]) {
					moved++
				}
				alone := true
				for _, p := range first[r.id]["t"] {
					alone = alone && holders[p] == 1
				}
				if m-1 <= int(n) && alone && first[r.id].count() <= int(n)/(m-1) && first[r.id].minus(after[r.id]).count() != 0 {
					t.Errorf("n=%d m=%d: %s lost partitions: %v -> %v", n, m, r.id, first[r.id], after[r.id])
				}
			}
			if m-1 > int(n) {
				// The fewest moves: the partitions most held keep the
				// ceil rooms, the others move their excess.
				hs := make([]int, n)
				for p := range n {
					hs[p] = holders[p]
				}
				slices.SortFunc(hs, func(a, b int) int { return b - a })
				base, extra := (m-1)/int(n), (m-1)%int(n)
				for i, h := range hs {
					room := base
					if i < extra {
						room++
					}
					mayMove += max(0, h-room)
				}
				if moved > mayMove {
					t.Errorf("n=%d m=%d: %d members moved, at most %d had to", n, m, moved, mayMove)
				}
			}
		}
	}
}

func shareEnv(t *testing.T, opts ...func(*Config)) *env {
	t.Helper()
	e := newEnv(t, opts...)
	res, err := e.rep.Propose(testCtx(t), meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MaxMetadataLevel}}})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) shb(group, member string, epoch int32, topics ...string) ShareHeartbeatResult {
	e.t.Helper()
	req := ShareHeartbeatRequest{Group: group, MemberID: member, MemberEpoch: epoch}
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	ctx := testCtx(e.t)
	return e.c.ShareGroupHeartbeat(ctx, Client{ID: "cl", Host: "/127.0.0.1"}, req)(ctx)
}

func shareCount(res ShareHeartbeatResult) int {
	n := 0
	for _, t := range res.Assignment {
		n += len(t.Partitions)
	}
	return n
}

func TestShareGroupJoinHeartbeatLeave(t *testing.T) {
	e := shareEnv(t)
	e.createTopic("t", 2)

	a := e.shb("sg", "a", 0, "t")
	if a.Code != 0 || a.MemberEpoch != 1 || shareCount(a) != 2 || a.HeartbeatInterval != DefaultShareHeartbeatInterval {
		t.Fatalf("first join: %+v", a)
	}
	b := e.shb("sg", "b", 0, "t")
	if b.Code != 0 || b.MemberEpoch != 2 || shareCount(b) != 1 {
		t.Fatalf("second join: %+v", b)
	}
	// a's next heartbeat moves it to epoch 2 with one partition, at
	// once: no revocation phase.
	a = e.shb("sg", "a", 1)
	if a.Code != 0 || a.MemberEpoch != 2 || shareCount(a) != 1 {
		t.Fatalf("a after b joined: %+v", a)
	}
	// The previous epoch is still accepted, an older or newer not.
	if r := e.shb("sg", "a", 1); r.Code != 0 || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch: %+v", r)
	}
	for _, epoch := range []int32{3, 7} {
		if r := e.shb("sg", "a", epoch); r.Code != kerr.FencedMemberEpoch.Code {
			t.Fatalf("epoch %d: %+v", epoch, r)
		}
	}
	if r := e.shb("sg", "nobody", 2); r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %+v", r)
	}
	for _, bad := range []ShareHeartbeatRequest{
		{Group: "sg", MemberEpoch: 0, SubscribedTopicNames: []string{"t"}},
		{Group: "sg", MemberID: "x", MemberEpoch: 0},
		{Group: "sg", MemberID: "x", MemberEpoch: -2},
		{Group: "sg", MemberID: "0123456789012345678901234567890123456", MemberEpoch: 0, SubscribedTopicNames: []string{"t"}},
	} {
		ctx := testCtx(t)
		if r := e.c.ShareGroupHeartbeat(ctx, Client{}, bad)(ctx); r.Code != kerr.InvalidRequest.Code {
			t.Errorf("%+v: %+v", bad, r)
		}
	}

	if r := e.shb("sg", "b", -1); r.Code != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	a = e.shb("sg", "a", 2)
	if a.Code != 0 || a.MemberEpoch != 3 || shareCount(a) != 2 {
		t.Fatalf("a after b left: %+v", a)
	}
	if r := e.shb("sg", "b", -1); r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave: %+v", r)
	}
	g, ok := e.stored("sg")
	if !ok || g.Kind != meta.GroupShare || g.Generation != 3 || len(g.Members) != 1 || g.Members[0].MemberID != "a" {
		t.Fatalf("stored %+v", g)
	}
}

func TestShareGroupMaxSize(t *testing.T) {
	e := shareEnv(t, func(c *Config) { c.MaxGroupSize = 2 })
	e.createTopic("t", 1)
	e.shb("sg", "a", 0, "t")
	e.shb("sg", "b", 0, "t")
	if r := e.shb("sg", "c", 0, "t"); r.Code != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member: %+v", r)
	}
}

func TestShareGroupSessionExpiry(t *testing.T) {
	e := shareEnv(t)
	e.createTopic("t", 4)
	e.shb("sg", "a", 0, "t")
	b := e.shb("sg", "b", 0, "t")
	// b keeps heartbeating, a does not.
	for range 5 {
		e.clock.Advance(10 * time.Second)
		b = e.shb("sg", "b", b.MemberEpoch)
		if b.Code != 0 {
			t.Fatalf("b: %+v", b)
		}
	}
	waitShare(t, e, "sg", func(d DescribedShareGroup) bool { return len(d.Members) == 1 })
	b = e.shb("sg", "b", b.MemberEpoch, "t") // a full request gets the assignment
	if b.Code != 0 || b.MemberEpoch != 3 || shareCount(b) != 4 {
		t.Fatalf("b after a expired: %+v", b)
	}
	if r := e.shb("sg", "a", 2); r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired a: %+v", r)
	}
}

// TestShareGroupSessionConfig: share.session.timeout.ms set on the group
// is the session of its members.
func TestShareGroupSessionConfig(t *testing.T) {
	e := shareEnv(t)
	e.createTopic("t", 1)
	res, err := e.rep.Propose(testCtx(t), meta.AlterGroupConfigs{Group: "sg", Set: map[string]string{meta.GroupShareSessionTimeoutMs: "60000", meta.GroupShareHeartbeatIntervalMs: "7000"}})
	if err != nil || res.Code != 0 {
		t.Fatal(err, res.Err())
	}
	if r := e.shb("sg", "a", 0, "t"); r.HeartbeatInterval != 7*time.Second {
		t.Fatalf("heartbeat interval %v", r.HeartbeatInterval)
	}
	e.clock.Advance(50 * time.Second) // past the default 45 s
	if d := e.c.ShareGroupDescribe(testCtx(t), []string{"sg"})[0]; len(d.Members) != 1 {
		t.Fatalf("removed before its configured session: %+v", d)
	}
	e.clock.Advance(11 * time.Second)
	waitShare(t, e, "sg", func(d DescribedShareGroup) bool { return len(d.Members) == 0 })
}

func waitShare(t *testing.T, e *env, group string, cond func(DescribedShareGroup) bool) DescribedShareGroup {
	t.Helper()
	deadline := time.After(guard)
	for {
		ch := e.c.Changed()
		d := e.c.ShareGroupDescribe(testCtx(t), []string{group})[0]
		if cond(d) {
			return d
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out; group %s is %+v", group, d)
		}
	}
}

// TestShareGroupTypeExclusive: one id, one kind.
func TestShareGroupTypeExclusive(t *testing.T) {
	e := shareEnv(t)
	e.createTopic("t", 1)
	// A classic group, even with only offsets, keeps its id.
	if code := e.commit("classic", "", -1, "t", 0, 5); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if r := e.shb("classic", "a", 0, "t"); r.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat to a classic group: %+v", r)
	}
	// A share group's id is not a classic or consumer group's, even
	// once empty.
	e.shb("sg", "a", 0, "t")
	e.shb("sg", "a", -1)
	if r := e.joinNow(e.req("sg", "", "t")); r.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("JoinGroup to a share group: %+v", r)
	}
	ctx := testCtx(t)
	cr := e.c.ConsumerGroupHeartbeat(ctx, Client{}, ConsumerHeartbeatRequest{Group: "sg", MemberID: "c", MemberEpoch: 0,
		RebalanceTimeoutMs: 1000, SubscribedTopicNames: []string{"t"}, Owned: []ConsumerTopic{}})(ctx)
	if cr.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupHeartbeat to a share group: %+v", cr)
	}
	if code := e.commit("sg", "", -1, "t", 0, 5); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("commit to a share group: %d", code)
	}
	if d := e.c.ShareGroupDescribe(ctx, []string{"classic", "none"}); d[0].Code != kerr.GroupIDNotFound.Code || d[1].Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe: %+v", d)
	}
	exists, isShare, n, err := e.c.ShareGroupState(ctx, "sg")
	if err != nil || !exists || !isShare || n != 0 {
		t.Fatalf("ShareGroupState(sg) = %v %v %d %v", exists, isShare, n, err)
	}
	exists, isShare, _, err = e.c.ShareGroupState(ctx, "classic")
	if err != nil || !exists || isShare {
		t.Fatalf("ShareGroupState(classic) = %v %v %v", exists, isShare, err)
	}
	if exists, _, _, err = e.c.ShareGroupState(ctx, "none"); err != nil || exists {
		t.Fatalf("ShareGroupState(none) = %v %v", exists, err)
	}
	listed, _ := e.c.ListGroups(ctx, nil, []string{"share"})
	if len(listed) != 1 || listed[0].Group != "sg" || listed[0].Type != "share" || listed[0].ProtocolType != "share" || listed[0].State != "Empty" {
		t.Fatalf("ListGroups(share): %+v", listed)
	}
}

// TestShareGroupFailover: a coordinator that loads the group from the
// log has its members, epochs and assignment; members carry on.
func TestShareGroupFailover(t *testing.T) {
	e := shareEnv(t)
	e.createTopic("t", 3)
	e.shb("sg", "a", 0, "t")
	b := e.shb("sg", "b", 0, "t")
	a := e.shb("sg", "a", 1)
	before := e.c.ShareGroupDescribe(testCtx(t), []string{"sg"})[0]

	e.restart()
	after := e.c.ShareGroupDescribe(testCtx(t), []string{"sg"})[0]
	if after.Code != 0 || after.Epoch != before.Epoch || len(after.Members) != 2 {
		t.Fatalf("loaded %+v, was %+v", after, before)
	}
	for i := range before.Members {
		bm, am := before.Members[i], after.Members[i]
		if bm.MemberID != am.MemberID || bm.MemberEpoch != am.MemberEpoch || fmt.Sprint(bm.Assignment) != fmt.Sprint(am.Assignment) {
			t.Fatalf("member %d: loaded %+v, was %+v", i, am, bm)
		}
	}
	// Heartbeats at the stored epochs go on without a new epoch.
	if r := e.shb("sg", "a", a.MemberEpoch); r.Code != 0 || r.MemberEpoch != a.MemberEpoch {
		t.Fatalf("a after failover: %+v", r)
	}
	if r := e.shb("sg", "b", b.MemberEpoch); r.Code != 0 || r.MemberEpoch != b.MemberEpoch {
		t.Fatalf("b after failover: %+v", r)
	}
	// A member that never comes back is removed after its session.
	e.clock.Advance(30 * time.Second)
	e.shb("sg", "a", a.MemberEpoch)
	e.clock.Advance(20 * time.Second)
	waitShare(t, e, "sg", func(d DescribedShareGroup) bool { return len(d.Members) == 1 })
}

func TestShareGroupDelete(t *testing.T) {
	var deleted []string
	e := shareEnv(t, func(c *Config) {
		c.DeleteShareState = func(_ context.Context, g string) error { deleted = append(deleted, g); return nil }
	})
	e.createTopic("t", 1)
	e.shb("sg", "a", 0, "t")
	if codes := e.c.DeleteGroups(testCtx(t), []string{"sg"}); codes[0] != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %v", codes)
	}
	e.shb("sg", "a", -1)
	if codes := e.c.DeleteGroups(testCtx(t), []string{"sg"}); codes[0] != 0 {
		t.Fatalf("delete: %v", codes)
	}
	if _, ok := e.stored("sg"); ok || !slices.Equal(deleted, []string{"sg"}) {
		t.Fatalf("after delete: stored %v, share state deleted for %v", ok, deleted)
	}
}

func TestShareGroupBelowLevel(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	if r := e.shb("sg", "a", 0, "t"); r.Code != kerr.UnsupportedVersion.Code {
		t.Fatalf("below level 9: %+v", r)
	}
}

// TestConsumerGroupConfigs: consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms set on a KIP-848 group are its
// members' session and heartbeat interval.
func TestConsumerGroupConfigs(t *testing.T) {
	e := shareEnv(t)
	e.createTopic("t", 1)
	res, err := e.rep.Propose(testCtx(t), meta.AlterGroupConfigs{Group: "cg", Set: map[string]string{
		meta.GroupConsumerSessionTimeoutMs: "60000", meta.GroupConsumerHeartbeatIntervalMs: "8000"}})
	if err != nil || res.Code != 0 {
		t.Fatal(err, res.Err())
	}
	ctx := testCtx(t)
	r := e.c.ConsumerGroupHeartbeat(ctx, Client{}, ConsumerHeartbeatRequest{Group: "cg", MemberID: "c", MemberEpoch: 0,
		RebalanceTimeoutMs: 1000, SubscribedTopicNames: []string{"t"}, Owned: []ConsumerTopic{}})(ctx)
	if r.Code != 0 || r.HeartbeatInterval != 8*time.Second {
		t.Fatalf("join: %+v", r)
	}
	if g, _ := e.stored("cg"); len(g.Members) != 1 || g.Members[0].SessionTimeoutMs != 60000 {
		t.Fatalf("stored %+v", g)
	}
	e.clock.Advance(50 * time.Second) // past the default 45 s
	if d := e.c.ConsumerGroupDescribe(testCtx(t), []string{"cg"})[0]; len(d.Members) != 1 {
		t.Fatalf("removed before its configured session: %+v", d)
	}
}

// TestShareGroupStateOnly: share partitions' state without a group
// record (AlterShareGroupOffsets before any member joined) is an empty
// share group: ShareGroupState says so, DeleteGroups deletes it.
func TestShareGroupStateOnly(t *testing.T) {
	var deleted []string
	e := shareEnv(t, func(c *Config) {
		c.DeleteShareState = func(_ context.Context, g string) error { deleted = append(deleted, g); return nil }
	})
	e.createTopic("t", 1)
	v := e.rep.View()
	tp, _, err := v.Topic("t")
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.rep.Propose(testCtx(t), meta.ShareInit{Group: "q", TopicID: tp.ID, Partition: 0, StartOffset: 3})
	if err != nil || res.Code != 0 {
		t.Fatal(err, res.Err())
	}
	exists, isShare, n, err := e.c.ShareGroupState(testCtx(t), "q")
	if err != nil || !exists || !isShare || n != 0 {
		t.Fatalf("ShareGroupState(q) = %v %v %d %v", exists, isShare, n, err)
	}
	codes := e.c.DeleteGroups(testCtx(t), []string{"q", "none"})
	if codes[0] != 0 || codes[1] != kerr.GroupIDNotFound.Code || !slices.Equal(deleted, []string{"q"}) {
		t.Fatalf("DeleteGroups: %v, share state deleted for %v", codes, deleted)
	}
}

// TestCreateShareGroup: AlterShareGroupOffsets' creation of an empty
// share group, stored, then joined as any share group.
func TestCreateShareGroup(t *testing.T) {
	e := shareEnv(t)
	e.createTopic("t", 1)
	ctx := testCtx(t)
	if err := e.c.CreateShareGroup(ctx, "sg"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.CreateShareGroup(ctx, "sg"); err != nil {
		t.Fatalf("again: %v", err)
	}
	if g, ok := e.stored("sg"); !ok || g.Kind != meta.GroupShare || len(g.Members) != 0 {
		t.Fatalf("stored %+v %v", g, ok)
	}
	if code := e.commit("classic", "", -1, "t", 0, 1); code != 0 {
		t.Fatal(code)
	}
	if err := e.c.CreateShareGroup(ctx, "classic"); err != kerr.GroupIDNotFound {
		t.Fatalf("classic: %v", err)
	}
	if r := e.shb("sg", "a", 0, "t"); r.Code != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %+v", r)
	}
	e.restart()
	if r := e.shb("sg", "a", 1); r.Code != 0 || r.MemberEpoch != 1 {
		t.Fatalf("after restart: %+v", r)
	}
}

// BenchmarkAssignShare: one assignment of a group epoch, with each
// member's previous assignment (the sticky path).
func BenchmarkAssignShare(b *testing.B) {
	for _, sz := range []struct{ members, partitions int }{{8, 2}, {200, 1000}, {1000, 64}} {
		b.Run(fmt.Sprintf("members=%d/partitions=%d", sz.members, sz.partitions), func(b *testing.B) {
			subs := make(map[string][]string)
			for i := range sz.members {
				subs[fmt.Sprintf("m%04d", i)] = []string{"t"}
			}
			parts := map[string]int32{"t": int32(sz.partitions)}
			ms := members(subs)
			prev := assignShare(slices.Clone(ms), parts)
			for i := range ms {
				ms[i].previous = prev[ms[i].id]
			}
			b.ReportAllocs()
			for b.Loop() {
				assignShare(slices.Clone(ms), parts)
			}
		})
	}
}
