// SyncGroup: v0-5
//   - The leader's assignment is stored through the log (the generation's
//     GroupState) before any member gets its part; followers wait for it.
//   - v3+ InstanceID (FENCED_INSTANCE_ID for a replaced static member);
//     v5 ProtocolType and Protocol are checked (INCONSISTENT_GROUP_PROTOCOL)
//     and answered.
//   - REBALANCE_IN_PROGRESS while the group is joining, ILLEGAL_GENERATION
//     and UNKNOWN_MEMBER_ID as Kafka answers them.
//   - A server shutdown ends the wait with NOT_COORDINATOR.
//   - ACLs (authz.go): Read on the group, else GROUP_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.SyncGroupRequest)
	if code := r.authz().groupCode(kmsg.ACLOperationRead, req.Group); code != 0 {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.ErrorCode = code
		return resp, nil
	}
	sr := group.SyncRequest{
		Group:        req.Group,
		MemberID:     req.MemberID,
		InstanceID:   req.InstanceID,
		Generation:   req.Generation,
		ProtocolType: req.ProtocolType,
		Protocol:     req.Protocol,
		Assignments:  make([]group.SyncAssignment, len(req.GroupAssignment)),
	}
	for i, a := range req.GroupAssignment {
		sr.Assignments[i] = group.SyncAssignment{MemberID: a.MemberID, Assignment: a.MemberAssignment}
	}
	// In the connection's order (groups.go); the assignment is waited
	// for outside it.
	var wait func(context.Context) group.SyncResult
	if err := r.InOrder(ctx, func() { wait = g.SyncGroup(ctx, sr) }); err != nil {
		return nil, err
	}
	dctx, cancel := r.untilDrain(ctx)
	defer cancel()
	start := time.Now()
	res := wait(dctx)
	r.waitedSince(start)
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode = res.Code
	if res.Code == 0 {
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
		resp.MemberAssignment = res.Assignment
	}
	return resp, nil
}
