package kafka

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/placement"
)

// groupGuard bounds the waits of group tests, whose rebalances take a few
// heartbeat intervals each; nothing waits it out on purpose.
const groupGuard = 45 * time.Second

// withGroups wires a group coordinator over the agent's replica: no
// initial rebalance delay, a session floor low enough for short sessions,
// no expiry sweep. tune may change that; *out receives the coordinator.
func withGroups(t testing.TB, out **group.Coordinator, tune func(*group.Config)) agentOption {
	return func(c *agentConfig) {
		cfg := group.Config{
			Meta:                         c.Replica,
			NodeID:                       testNodeID,
			InitialRebalanceDelay:        -1,
			MinSessionTimeout:            time.Millisecond,
			OffsetRetentionCheckInterval: -1,
			Logger:                       discardLogger,
		}
		if tune != nil {
			tune(&cfg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		g, err := group.New(ctx, cfg)
		if err != nil {
			t.Fatalf("group.New: %v", err)
		}
		// Registered before the server's Shutdown, so it runs after it.
		t.Cleanup(func() { g.Close() })
		c.Server.Deps.Groups = g
		if out != nil {
			*out = g
		}
	}
}

func groupCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), groupGuard)
	t.Cleanup(cancel)
	return ctx
}

// produceSpread produces n records to topic, record i to partition
// i%partitions with key "from+i", and waits for every ack.
func (a *testAgent) produceSpread(t testing.TB, topic string, partitions int32, from, n int) {
	t.Helper()
	pr := a.kgoClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Partition: int32((from + i) % int(partitions)), Key: fmt.Appendf(nil, "%d", from+i), Value: []byte("v")}
	}
	if err := pr.ProduceSync(groupCtx(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumerJoinV2 is the JoinGroup kafka-python 2.0.2 sends.
func consumerJoin(version int16, group, member string, session int32, topics ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID = version, group, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = session, session
	req.ProtocolType = "consumer"
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = topics
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", md.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	return req
}

// assignAll is a consumer protocol assignment of partitions of topic.
func assignAll(topic string, partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: partitions}}
	return a.AppendTo(nil)
}

func commitReq(version int16, group, member string, gen int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, group, member, gen
	req.RetentionTimeMillis = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range slices.Sorted(func(yield func(int32) bool) {
		for p := range offsets {
			if !yield(p) {
				return
			}
		}
	}) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = p, offsets[p], kmsg.StringPtr("m")
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func commitCodes(resp *kmsg.OffsetCommitResponse) []int16 {
	var codes []int16
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes = append(codes, rp.ErrorCode)
		}
	}
	return codes
}

// The group conversation of kafka-python 2.0.2's consumer: JoinGroup v2
// (no member id round), SyncGroup v1, Heartbeat v1, OffsetCommit v2,
// OffsetFetch v1, LeaveGroup v1; and JoinGroup v0.
func TestGroupKafkaPythonVersions(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	a.createTopic(t, "t", 2, nil)

	join := a.rawRequest(t, consumerJoin(2, "py", "", 10_000, "t")).(*kmsg.JoinGroupResponse)
	if join.ErrorCode != 0 || join.Generation != 1 || join.LeaderID != join.MemberID || len(join.Members) != 1 {
		t.Fatalf("JoinGroup v2: %+v", join)
	}
	me := join.MemberID
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 1, "py", me, 1
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: me, MemberAssignment: assignAll("t", 0, 1)}}
	if resp := a.rawRequest(t, sync).(*kmsg.SyncGroupResponse); resp.ErrorCode != 0 || len(resp.MemberAssignment) == 0 {
		t.Fatalf("SyncGroup v1: %+v", resp)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 1, "py", me, 1
	if resp := a.rawRequest(t, hb).(*kmsg.HeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("Heartbeat v1: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	commit := a.rawRequest(t, commitReq(2, "py", me, 1, "t", map[int32]int64{0: 5, 1: 7})).(*kmsg.OffsetCommitResponse)
	if codes := commitCodes(commit); !reflect.DeepEqual(codes, []int16{0, 0}) {
		t.Fatalf("OffsetCommit v2: %v", codes)
	}
	stale := a.rawRequest(t, commitReq(2, "py", me, 0, "t", map[int32]int64{0: 1})).(*kmsg.OffsetCommitResponse)
	if codes := commitCodes(stale); codes[0] != kerr.IllegalGeneration.Code {
		t.Fatalf("OffsetCommit v2 from an old generation: %v", codes)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 1, "py"
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	fr := a.rawRequest(t, fetch).(*kmsg.OffsetFetchResponse)
	if len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].Offset != 5 || fr.Topics[0].Partitions[1].Offset != 7 ||
		*fr.Topics[0].Partitions[0].Metadata != "m" {
		t.Fatalf("OffsetFetch v1: %+v", fr)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 1, "py", me
	if resp := a.rawRequest(t, leave).(*kmsg.LeaveGroupResponse); resp.ErrorCode != 0 {
		t.Fatalf("LeaveGroup v1: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// JoinGroup v0: no rebalance timeout; the empty group's next
	// generation (2, after the leave) goes to the new member.
	join0 := a.rawRequest(t, consumerJoin(0, "py", "", 10_000, "t")).(*kmsg.JoinGroupResponse)
	if join0.ErrorCode != 0 || join0.Generation != 3 || len(join0.Members) != 1 {
		t.Fatalf("JoinGroup v0: %+v", join0)
	}
}

// KIP-394: JoinGroup v4+ hands out the member id first.
func TestGroupMemberIDRequired(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	first := a.rawRequest(t, consumerJoin(4, "g", "", 10_000, "t")).(*kmsg.JoinGroupResponse)
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" || first.Generation != -1 {
		t.Fatalf("first join: %+v", first)
	}
	second := a.rawRequest(t, consumerJoin(4, "g", first.MemberID, 10_000, "t")).(*kmsg.JoinGroupResponse)
	if second.ErrorCode != 0 || second.MemberID != first.MemberID || second.Generation != 1 {
		t.Fatalf("second join: %+v", second)
	}
}

func TestFindCoordinator(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	for _, v := range []int16{0, 1, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = v, "g"
		resp := a.rawRequest(t, req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 || resp.NodeID != testNodeID || resp.Port == 0 || resp.Host != "127.0.0.1" {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, 1, []string{"txn-a", "txn-b"}
	resp := a.rawRequest(t, req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "txn-b" || resp.Coordinators[1].NodeID != testNodeID || resp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("v4 transaction keys: %+v", resp)
	}
	req.CoordinatorType = 2
	resp = a.rawRequest(t, req).(*kmsg.FindCoordinatorResponse)
	if resp.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown key type: %+v", resp)
	}

	// A group placed on another live agent is answered with that agent.
	other := Broker{NodeID: testNodeID + 1, Host: "10.0.0.2", Port: 9092}
	b := newTestAgent(t,
		withGroups(t, nil, func(c *group.Config) { c.Nodes = func() []int32 { return []int32{testNodeID, other.NodeID} } }),
		withDeps(func(d *Deps) { d.Cluster.Brokers = func() []Broker { return []Broker{{NodeID: testNodeID}, other} } }))
	var foreign string
	for i := 0; foreign == ""; i++ {
		if k := fmt.Sprintf("g-%d", i); placement.OwnerOf(k, []int32{testNodeID, other.NodeID}) == other.NodeID {
			foreign = k
		}
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{foreign}
	resp = b.rawRequest(t, req).(*kmsg.FindCoordinatorResponse)
	if c := resp.Coordinators[0]; c.NodeID != other.NodeID || c.Host != other.Host || c.ErrorCode != 0 {
		t.Fatalf("foreign group: %+v", c)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 4, foreign, "m"
	if code := b.rawRequest(t, hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat at the wrong agent: %d", code)
	}
}

// OffsetFetch v8 answers several groups; a null topic list is every
// committed offset.
func TestOffsetFetchSeveralGroups(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	a.createTopic(t, "a", 2, nil)
	a.createTopic(t, "b", 1, nil)
	for _, c := range []*kmsg.OffsetCommitRequest{
		commitReq(8, "g1", "", -1, "a", map[int32]int64{0: 10, 1: 11}),
		commitReq(8, "g1", "", -1, "b", map[int32]int64{0: 12}),
		commitReq(8, "g2", "", -1, "a", map[int32]int64{1: 21}),
	} {
		if codes := commitCodes(a.request(t, c).(*kmsg.OffsetCommitResponse)); slices.ContainsFunc(codes, func(c int16) bool { return c != 0 }) {
			t.Fatalf("commit: %v", codes)
		}
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g1"}, // every offset
		{Group: "g2", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: []int32{0, 1}}, {Topic: "nope", Partitions: []int32{0}}}},
		{Group: "g3", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: []int32{0}}}},
	}
	resp := a.rawRequest(t, req).(*kmsg.OffsetFetchResponse)
	got := make(map[string]int64)
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			t.Fatalf("group %s: %v", g.Group, kerr.ErrorForCode(g.ErrorCode))
		}
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				got[fmt.Sprintf("%s/%s/%d", g.Group, rt.Topic, rp.Partition)] = rp.Offset
			}
		}
	}
	want := map[string]int64{
		"g1/a/0": 10, "g1/a/1": 11, "g1/b/0": 12,
		"g2/a/0": -1, "g2/a/1": 21, "g2/nope/0": -1,
		"g3/a/0": -1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fetched %v\nwant    %v", got, want)
	}
}

// kadm's group admin calls: list, describe, delete (empty vs not).
func TestGroupAdmin(t *testing.T) {
	a, _ := newDataAgent(t, nil, withProducerIDs(t), withGroups(t, nil, nil))
	a.createTopic(t, "t", 2, nil)
	a.produceSpread(t, "t", 2, 0, 10)
	tr := newTracker()
	tr.start(t, a, "c1", "live", "t", kgo.RangeBalancer())
	tr.waitFor(t, "the consumer's assignment", func() bool { return len(tr.assigned["c1"]) == 2 })
	if code := a.request(t, commitReq(8, "idle", "", -1, "t", map[int32]int64{0: 1})).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %d", code)
	}
	ctx := groupCtx(t)
	listed, err := a.Admin.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.Groups(); !reflect.DeepEqual(got, []string{"idle", "live"}) {
		t.Fatalf("groups %v", got)
	}
	if st := listed["live"].State; st != "Stable" {
		t.Fatalf("live is %s", st)
	}
	described, err := a.Admin.DescribeGroups(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	d := described["live"]
	if d.Err != nil || d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	if as, ok := d.Members[0].Assigned.AsConsumer(); !ok || len(as.Topics) != 1 || len(as.Topics[0].Partitions) != 2 {
		t.Fatalf("described assignment %+v", d.Members[0].Assigned)
	}
	deleted, err := a.Admin.DeleteGroups(ctx, "live", "idle", "nope")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]error{"live": kerr.NonEmptyGroup, "idle": nil, "nope": kerr.GroupIDNotFound} {
		if got := deleted[name].Err; got != want {
			t.Fatalf("delete %s: %v, want %v", name, got, want)
		}
	}
	if listed, _ := a.Admin.ListGroups(ctx); !reflect.DeepEqual(listed.Groups(), []string{"live"}) {
		t.Fatalf("after delete: %v", listed.Groups())
	}
}

// sortedParts returns a set's partitions in order.
func sortedParts(m map[int32]bool) []int32 {
	var ps []int32
	for p := range m {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// The group API files register these versions.
func TestGroupAPIVersions(t *testing.T) {
	want := map[int16]int16{8: 9, 9: 9, 10: 4, 11: 9, 12: 4, 13: 5, 14: 5, 15: 5, 16: 5, 42: 2, 47: 0, 76: 1, 77: 1}
	got := make(map[int16]int16)
	for _, k := range DefaultRegistry().APIVersions() {
		if _, ok := want[k.ApiKey]; ok {
			if k.MinVersion != 0 {
				t.Errorf("key %d: min version %d", k.ApiKey, k.MinVersion)
			}
			got[k.ApiKey] = k.MaxVersion
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}
