package kafka

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/placement"
)

// The handler files turn each version's OffsetCommit into the commit
// package group works with: v0 has no member, v1 its own commit
// timestamps, v2-4 a retention, v6+ leader epochs.
func TestGroupCommitRequestVersions(t *testing.T) {
	wire := func(version int16) *kmsg.OffsetCommitRequest {
		req := commitReq(version, "g", "m", 3, "t", map[int32]int64{0: 5})
		req.RetentionTimeMillis = 60_000
		p := &req.Topics[0].Partitions[0]
		p.Timestamp, p.LeaderEpoch = 1_700_000_000_000, 7
		return req
	}
	want := func(member string, gen int32, retention int64, epoch int32, ts int64) group.CommitRequest {
		return group.CommitRequest{
			Group: "g", MemberID: member, Generation: gen, RetentionMs: retention,
			Topics: []group.CommitTopic{{Topic: "t", Partitions: []group.CommitPartition{{
				Partition: 0, Offset: 5, LeaderEpoch: epoch, Metadata: "m", Timestamp: ts,
			}}}},
		}
	}
	tests := []struct {
		version int16
		want    group.CommitRequest
	}{
		{0, want("", -1, -1, -1, -1)},
		{1, want("m", 3, -1, -1, 1_700_000_000_000)},
		{2, want("m", 3, 60_000, -1, -1)},
		{4, want("m", 3, 60_000, -1, -1)},
		{5, want("m", 3, -1, -1, -1)},
		{6, want("m", 3, -1, 7, -1)},
		{9, want("m", 3, -1, 7, -1)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("v%d", tt.version), func(t *testing.T) {
			if got := commitRequest(wire(tt.version)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// -1 keeps the group's retention.
	req := wire(2)
	req.RetentionTimeMillis = -1
	if got := commitRequest(req); got.RetentionMs != -1 {
		t.Fatalf("v2 retention -1: %d", got.RetentionMs)
	}
}

// JoinGroup v0 has no rebalance timeout; v4+ clients know
// MEMBER_ID_REQUIRED, v9 clients SkipAssignment.
func TestGroupJoinRequestVersions(t *testing.T) {
	tests := []struct {
		version           int16
		rebalance         time.Duration
		requireID, skipOK bool
	}{
		{0, 10 * time.Second, false, false},
		{3, 30 * time.Second, false, false},
		{4, 30 * time.Second, true, false},
		{9, 30 * time.Second, true, true},
	}
	for _, tt := range tests {
		req := consumerJoin(tt.version, "g", "", 10_000, "t")
		req.RebalanceTimeoutMillis = 30_000
		got := joinRequest(req)
		if got.SessionTimeout != 10*time.Second || got.RebalanceTimeout != tt.rebalance ||
			got.RequireKnownMemberID != tt.requireID || got.SupportSkippingAssignment != tt.skipOK ||
			len(got.Protocols) != 1 || got.Protocols[0].Name != "range" {
			t.Errorf("v%d: %+v", tt.version, got)
		}
	}
}

// A failed join answers no generation and no protocol; a leader's answer
// lists the members, static ones with their instance ids.
func TestGroupJoinResponse(t *testing.T) {
	failed := joinResponse(group.JoinResult{Code: kerr.MemberIDRequired.Code, Generation: -1, MemberID: "m-1"})
	if failed.ErrorCode != kerr.MemberIDRequired.Code || failed.Generation != -1 || failed.MemberID != "m-1" ||
		failed.Protocol != nil || failed.ProtocolType != nil || failed.Members != nil {
		t.Fatalf("failed join: %+v", failed)
	}
	ok := joinResponse(group.JoinResult{
		Generation: 2, ProtocolType: "consumer", Protocol: "range", LeaderID: "a", MemberID: "a", SkipAssignment: true,
		Members: []group.JoinMember{{MemberID: "a", InstanceID: "i-a", Metadata: []byte{1}}, {MemberID: "b", Metadata: []byte{2}}},
	})
	if ok.ErrorCode != 0 || ok.Generation != 2 || *ok.ProtocolType != "consumer" || *ok.Protocol != "range" ||
		ok.LeaderID != "a" || !ok.SkipAssignment || len(ok.Members) != 2 ||
		*ok.Members[0].InstanceID != "i-a" || ok.Members[1].InstanceID != nil || ok.Members[1].ProtocolMetadata[0] != 2 {
		t.Fatalf("leader's join: %+v", ok)
	}
}

// Errors where the versions differ in where they put them: LeaveGroup
// v0-2 and OffsetFetch v0-1 have no per-member or group-level error,
// DescribeGroups v3+ answers authorized operations when asked.
func TestGroupVersionedErrors(t *testing.T) {
	other := int32(testNodeID + 1)
	a := newTestAgent(t, withGroups(t, nil, func(c *group.Config) {
		c.Nodes = func() []int32 { return []int32{testNodeID, other} }
	}))
	a.createTopic(t, "t", 1, nil)
	// Two groups this agent coordinates, one it does not.
	var mine, unknown, foreign string
	for i := 0; unknown == "" || foreign == ""; i++ {
		k := fmt.Sprintf("g-%d", i)
		switch {
		case placement.OwnerOf(k, []int32{testNodeID, other}) == other:
			foreign = k
		case mine == "":
			mine = k
		default:
			unknown = k
		}
	}

	// LeaveGroup: v1 answers its one member at the top level, v3 per
	// member.
	leave1 := kmsg.NewPtrLeaveGroupRequest()
	leave1.Version, leave1.Group, leave1.MemberID = 1, mine, "nobody"
	if resp := a.rawRequest(t, leave1).(*kmsg.LeaveGroupResponse); resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("v1 leave of an unknown member: %+v", resp)
	}
	join := a.rawRequest(t, consumerJoin(3, mine, "", 10_000, "t")).(*kmsg.JoinGroupResponse)
	if join.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(join.ErrorCode))
	}
	leave3 := kmsg.NewPtrLeaveGroupRequest()
	leave3.Version, leave3.Group = 3, mine
	leave3.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "nobody"}, {MemberID: join.MemberID}}
	resp3 := a.rawRequest(t, leave3).(*kmsg.LeaveGroupResponse)
	if resp3.ErrorCode != 0 || len(resp3.Members) != 2 || resp3.Members[0].ErrorCode != kerr.UnknownMemberID.Code ||
		resp3.Members[1].ErrorCode != 0 || resp3.Members[1].MemberID != join.MemberID {
		t.Fatalf("v3 leave: %+v", resp3)
	}

	// OffsetFetch of a group another agent coordinates: v1 puts
	// NOT_COORDINATOR on every partition, v2 at the top.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 1, foreign
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	fr := a.rawRequest(t, fetch).(*kmsg.OffsetFetchResponse)
	if len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].ErrorCode != kerr.NotCoordinator.Code || fr.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("v1 fetch: %+v", fr)
	}
	fetch.Version = 2
	fr = a.rawRequest(t, fetch).(*kmsg.OffsetFetchResponse)
	if fr.ErrorCode != kerr.NotCoordinator.Code || len(fr.Topics) != 0 {
		t.Fatalf("v2 fetch: %+v", fr)
	}

	// DescribeGroups: authorized operations from v3 when asked; an
	// unknown group is Dead without an error.
	for _, v := range []int16{2, 5} {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups, req.IncludeAuthorizedOperations = v, []string{unknown}, true
		d := a.rawRequest(t, req).(*kmsg.DescribeGroupsResponse).Groups[0]
		want := groupAuthorizedOps
		if v < 3 {
			want = math.MinInt32
		}
		if d.ErrorCode != 0 || d.State != "Dead" || d.AuthorizedOperations != want {
			t.Fatalf("v%d describe: %+v", v, d)
		}
	}
}
