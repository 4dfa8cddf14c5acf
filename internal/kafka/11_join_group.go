// JoinGroup: v0-9
//   - v0 has no rebalance timeout: the session timeout stands in.
//   - v4+: a first join without a member id gets MEMBER_ID_REQUIRED and
//     the id to rejoin with (KIP-394); a static member (v5+ InstanceID,
//     KIP-345) skips that round, and rejoining replaces its old member id
//     (FENCED_INSTANCE_ID for the old one) without a rebalance. Below v4 a
//     first join is a member at once.
//   - v7+ ProtocolType in the answer; v8 Reason is not used; v9
//     SkipAssignment for a static leader rejoining a stable group
//     (KIP-814): below v9 that leader is answered with its old member id
//     as the leader's, which makes it skip assigning too.
//   - The call waits for the join phase (up to the rebalance timeout);
//     a server shutdown ends the wait with NOT_COORDINATOR, which sends the
//     member to look its coordinator up again.
//   - Group semantics (states, timeouts, errors): package group.
//   - ACLs (authz.go): Read on the group, else GROUP_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.JoinGroupRequest)
	if code := r.authz().groupCode(kmsg.ACLOperationRead, req.Group); code != 0 {
		return joinResponse(group.JoinResult{Code: code, Generation: -1}), nil
	}
	// In the connection's order (groups.go); the join phase is waited
	// for outside it.
	var wait func(context.Context) group.JoinResult
	if err := r.InOrder(ctx, func() { wait = g.JoinGroup(ctx, r.groupClient(), joinRequest(req)) }); err != nil {
		return nil, err
	}
	dctx, cancel := r.untilDrain(ctx)
	defer cancel()
	start := time.Now()
	res := wait(dctx)
	r.waitedSince(start)
	return joinResponse(res), nil
}

func joinRequest(req *kmsg.JoinGroupRequest) group.JoinRequest {
	jr := group.JoinRequest{
		Group:                     req.Group,
		MemberID:                  req.MemberID,
		InstanceID:                req.InstanceID,
		ProtocolType:              req.ProtocolType,
		Protocols:                 make([]group.Protocol, len(req.Protocols)),
		SessionTimeout:            millis(req.SessionTimeoutMillis),
		RebalanceTimeout:          millis(req.RebalanceTimeoutMillis),
		RequireKnownMemberID:      req.Version >= 4,
		SupportSkippingAssignment: req.Version >= 9,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for i, p := range req.Protocols {
		jr.Protocols[i] = group.Protocol{Name: p.Name, Metadata: p.Metadata}
	}
	return jr
}

func joinResponse(res group.JoinResult) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.ErrorCode, resp.Generation, resp.MemberID = res.Code, res.Generation, res.MemberID
	if res.Code != 0 {
		return resp
	}
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	resp.LeaderID, resp.SkipAssignment = res.LeaderID, res.SkipAssignment
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, strPtr(m.InstanceID), m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp
}
