// ShareGroupHeartbeat: v0-1 (KIP-932)
//   - The member names itself (a UUID, at most 36 characters), joins with
//     epoch 0 and the topics it subscribes to, leaves with -1, and
//     otherwise heartbeats with its epoch (the current one, or the
//     previous one if it lost the answer that moved it;
//     FENCED_MEMBER_EPOCH else, UNKNOWN_MEMBER_ID for a member the group
//     does not have).
//   - The coordinator assigns with the simple assignor: every subscribed
//     partition, several members per partition when they outnumber the
//     partitions. The assignment is sent on a join, on a full request
//     (SubscribedTopicNames given) and when the member's epoch moved;
//     there is no revocation phase.
//   - Session timeout and heartbeat interval: the group's
//     share.session.timeout.ms and share.heartbeat.interval.ms, else
//     group.share.session.timeout.ms (45 s) and
//     group.share.heartbeat.interval.ms (5 s).
//   - A classic or consumer group's id is GROUP_ID_NOT_FOUND; a new
//     member beyond group.max.size is GROUP_MAX_SIZE_REACHED.
//   - v1: no change of the protocol (Kafka 4.1 made the feature
//     generally available).
//   - Group semantics: package group (share.go, share_assignor.go).
//   - ACLs (authz.go): Read on the group (GROUP_AUTHORIZATION_FAILED) and
//     Describe on every topic subscribed (TOPIC_AUTHORIZATION_FAILED).

package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(76, 0, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ShareGroupHeartbeatRequest)
	if req.RackID != nil {
		r.Conn.noteRack(*req.RackID)
	}
	z := r.authz()
	code := z.groupCode(kmsg.ACLOperationRead, req.GroupID)
	for _, t := range req.SubscribedTopicNames {
		if code == 0 {
			code = z.topicCode(kmsg.ACLOperationDescribe, t)
		}
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	hr := group.ShareHeartbeatRequest{
		Group:                req.GroupID,
		MemberID:             req.MemberID,
		MemberEpoch:          req.MemberEpoch,
		RackID:               req.RackID,
		SubscribedTopicNames: req.SubscribedTopicNames,
	}
	var wait func(context.Context) group.ShareHeartbeatResult
	if err := r.InOrder(ctx, func() { wait = g.ShareGroupHeartbeat(ctx, r.groupClient(), hr) }); err != nil {
		return nil, err
	}
	dctx, cancel := r.untilDrain(ctx)
	defer cancel()
	res := wait(dctx)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = res.Code
	if res.Code != 0 {
		resp.ErrorMessage = strPtr(res.Message)
		return resp, nil
	}
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(res.MemberID), res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval / time.Millisecond)
	if res.Assignment != nil {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, t := range res.Assignment {
			at := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			at.TopicID, at.Partitions = [16]byte(t.TopicID), t.Partitions
			a.TopicPartitions = append(a.TopicPartitions, at)
		}
		resp.Assignment = &a
	}
	return resp, nil
}
