package agent_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
)

// shareHeartbeat sends one ShareGroupHeartbeat through cl (to the
// group's coordinator, as kgo routes group requests).
func shareHeartbeat(ctx context.Context, t *testing.T, cl *kgo.Client, group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ShareGroupHeartbeat: %v", err)
	}
	return resp
}

// TestShareGroupsAdmin: share groups as kadm sees them (ListGroups with
// types, DescribeShareGroups, DeleteGroups) and group configs set and
// described through the GROUP config resource.
func TestShareGroupsAdmin(t *testing.T) {
	a := start(t, t.TempDir())
	cl := client(t, a.KafkaAddr())
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}

	// franz-go's share tests configure the group before consuming.
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = meta.GroupShareAutoOffsetReset, kmsg.StringPtr("earliest")
	rr.Configs = append(rr.Configs, c)
	ia.Resources = append(ia.Resources, rr)
	iaResp, err := ia.RequestWith(ctx, cl)
	if err != nil || iaResp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, iaResp)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	dr.ConfigNames = []string{meta.GroupShareAutoOffsetReset}
	dc.Resources = append(dc.Resources, dr)
	dcResp, err := dc.RequestWith(ctx, cl)
	if err != nil || dcResp.Resources[0].ErrorCode != 0 || len(dcResp.Resources[0].Configs) != 1 ||
		*dcResp.Resources[0].Configs[0].Value != "earliest" || dcResp.Resources[0].Configs[0].Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("DescribeConfigs: %v %+v", err, dcResp)
	}

	for _, m := range []string{"m1", "m2", "m3"} {
		if r := shareHeartbeat(ctx, t, cl, "sg", m, 0, "work"); r.ErrorCode != 0 {
			t.Fatalf("join %s: %v", m, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// A classic group beside it.
	if _, err := adm.CommitOffsets(ctx, "classic", kadm.OffsetsFromRecords(kgo.Record{Topic: "work", Partition: 0, Offset: 1})); err != nil {
		t.Fatal(err)
	}

	ds, err := adm.DescribeShareGroups(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	d := ds["sg"]
	if d.Err != nil || d.GroupState != "Stable" || d.GroupEpoch != 3 || d.Assignor != "simple" || len(d.Members) != 3 {
		t.Fatalf("DescribeShareGroups: %+v", d)
	}
	// Three members on two partitions: every member has one, every
	// partition is assigned.
	if got := d.AssignedPartitions()["work"]; len(got) != 2 {
		t.Fatalf("assigned %v", d.AssignedPartitions())
	}
	for _, m := range d.Members {
		if n := len(m.Assignment["work"]); n != 1 || !slices0(m.SubscribedTopicNames, "work") {
			t.Fatalf("member %+v", m)
		}
	}

	// The coordinator's metrics count the group and its members.
	if v, ok := metricValue(t, a.HTTPAddr(), "strand_share_group_members", map[string]string{"group": "sg"}); !ok || v != 3 {
		t.Errorf("strand_share_group_members{group=sg} = %v (%v), want 3", v, ok)
	}
	if v, ok := metricValue(t, a.HTTPAddr(), "strand_share_groups", map[string]string{"state": "Stable"}); !ok || v != 1 {
		t.Errorf("strand_share_groups{state=Stable} = %v (%v), want 1", v, ok)
	}

	listed, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed["sg"]; len(listed) != 1 || !ok || l.GroupType != "share" || l.ProtocolType != "share" || l.State != "Stable" {
		t.Fatalf("ListGroupsByType(share): %+v", listed)
	}
	all, err := adm.ListGroups(ctx)
	if err != nil || len(all) != 2 || all["classic"].GroupType != "classic" {
		t.Fatalf("ListGroups: %+v %v", all, err)
	}

	del, err := adm.DeleteGroups(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(del["sg"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete with members: %v", del["sg"].Err)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		if r := shareHeartbeat(ctx, t, cl, "sg", m, -1); r.ErrorCode != 0 {
			t.Fatalf("leave %s: %v", m, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if del, err = adm.DeleteGroups(ctx, "sg"); err != nil || del["sg"].Err != nil {
		t.Fatalf("delete: %v %v", err, del["sg"].Err)
	}
	if ds, err = adm.DescribeShareGroups(ctx, "sg"); err != nil || !errors.Is(ds["sg"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("described after delete: %+v %v", ds["sg"], err)
	}
}

func slices0(s []string, v string) bool { return len(s) == 1 && s[0] == v }

// TestShareGroupHandover: the agent coordinating a share group stops;
// the other takes the group over from the log with its members, epochs
// and assignment, and the members carry on at their epochs.
func TestShareGroupHandover(t *testing.T) {
	// A log of its own per run (mem logs live as long as the process,
	// so -count=2 would meet the first run's topic), and a lease long
	// enough that a loaded machine's pauses do not end agent 2's before
	// both are seen live.
	logURL := "mem://" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var agents []*agent.Agent
	for node := range int32(2) {
		agents = append(agents, startWith(t, agent.Config{DataDir: t.TempDir(), NodeID: node + 1, Log: logURL, Lease: 3 * time.Second}, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl := client(t, agents[0].KafkaAddr())
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}
	// Wait until both agents are live, so the ring spreads groups. A
	// Metadata request of its own each time: kadm's BrokerMetadata
	// answers from kgo's cache, which a request naming no topic never
	// refreshes, so a first answer listing one agent would stay.
	deadline := time.Now().Add(opTimeout)
	for {
		m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err == nil && len(m.Brokers) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("brokers: %v %v", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	epochs := make(map[string]int32)
	for _, m := range []string{"m1", "m2"} {
		r := shareHeartbeat(ctx, t, cl, "sg", m, 0, "work")
		if r.ErrorCode != 0 {
			t.Fatalf("join %s: %v", m, kerr.ErrorForCode(r.ErrorCode))
		}
		epochs[m] = r.MemberEpoch
	}
	for _, m := range []string{"m1", "m2"} {
		r := shareHeartbeat(ctx, t, cl, "sg", m, epochs[m])
		epochs[m] = r.MemberEpoch
	}
	before, err := adm.DescribeShareGroups(ctx, "sg")
	if err != nil || before["sg"].Err != nil {
		t.Fatal(err, before["sg"].Err)
	}
	coord := before["sg"].Coordinator.NodeID
	owner, other := agents[0], agents[1]
	if coord == 2 {
		owner, other = agents[1], agents[0]
	}
	stop(t, owner)

	// The survivor answers once the owner's lease ran out; until then
	// the group is NOT_COORDINATOR there (kgo retries it).
	cl2 := client(t, other.KafkaAddr())
	adm2 := kadm.NewClient(cl2)
	// The stopped agent left the agent table; wait until the survivor
	// applied that, or it may still name the owner as coordinator and
	// the heartbeat below would dial a closed port.
	for {
		m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl2)
		if err == nil && len(m.Brokers) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("brokers after the stop: %v %v", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range []string{"m1", "m2"} {
		r := shareHeartbeat(ctx, t, cl2, "sg", m, epochs[m])
		if r.ErrorCode != 0 || r.MemberEpoch != epochs[m] {
			t.Fatalf("%s after the handover: %v epoch %d, want %d", m, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, epochs[m])
		}
	}
	after, err := adm2.DescribeShareGroups(ctx, "sg")
	if err != nil || after["sg"].Err != nil {
		t.Fatal(err, after["sg"].Err)
	}
	b, a := before["sg"], after["sg"]
	if a.Coordinator.NodeID == coord || a.GroupEpoch != b.GroupEpoch || len(a.Members) != 2 {
		t.Fatalf("after the handover %+v, before %+v", a, b)
	}
	for i := range b.Members {
		if b.Members[i].MemberID != a.Members[i].MemberID || b.Members[i].MemberEpoch != a.Members[i].MemberEpoch ||
			len(b.Members[i].Assignment["work"]) != len(a.Members[i].Assignment["work"]) {
			t.Fatalf("member %d: after %+v, before %+v", i, a.Members[i], b.Members[i])
		}
	}
}

// shareGroupTraffic is the reference traffic of the share group series:
// a share group with one member.
func shareGroupTraffic(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl := client(t, a.KafkaAddr())
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "share-ref"); err != nil {
		t.Fatal(err)
	}
	if r := shareHeartbeat(ctx, t, cl, "share-ref", "m1", 0, "share-ref"); r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{{name: "strand_share_group_members"}})
}
