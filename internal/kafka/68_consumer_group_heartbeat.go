// ConsumerGroupHeartbeat: v0-1 (KIP-848)
//   - The coordinator assigns partitions (ServerAssignor "uniform", the
//     default, or "range"); members revoke before others get what they
//     gave up. Epoch 0 joins, -1 leaves, -2 is a static member's leave.
//   - v1: the member names itself (MemberID required) and may subscribe
//     with SubscribedTopicRegex (RE2 syntax, matched against the whole
//     topic name; an invalid one is INVALID_REGULAR_EXPRESSION).
//   - Session timeout and heartbeat interval are the coordinator's
//     (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms).
//   - A classic group with members is GROUP_ID_NOT_FOUND here, as Kafka
//     answers without online migration; an empty one becomes a consumer
//     group.
//   - Heartbeats reach the coordinator in the connection's request order
//     (groups.go): one never overtakes a commit the member sent first.
//   - Group semantics: package group (consumer.go, reconcile.go).
//   - RackId is the member's client.rack: the connection learns its zone
//     from it as from Fetch's (zones.go).
//   - group.version finalized at 0 (UpdateFeatures) turns the consumer
//     protocol off: UNSUPPORTED_VERSION, as Kafka answers when its
//     group.version does not support it.
//   - ACLs (authz.go): Read on the group (GROUP_AUTHORIZATION_FAILED) and
//     Describe on every topic subscribed by name (TOPIC_AUTHORIZATION_FAILED).

package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(68, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if req.RackID != nil {
		r.Conn.noteRack(*req.RackID)
	}
	if !r.Deps.groupProtocolEnabled() {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ErrorMessage = strPtr("group.version is 0: the consumer group protocol (KIP-848) is off")
		return resp, nil
	}
	// ACLs: Read on the group, Describe on every topic subscribed by
	// name.
	z := r.authz()
	code := z.groupCode(kmsg.ACLOperationRead, req.Group)
	for _, t := range req.SubscribedTopicNames {
		if code == 0 {
			code = z.topicCode(kmsg.ACLOperationDescribe, t)
		}
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	hr := group.ConsumerHeartbeatRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		RequireMemberID:      req.Version >= 1,
		MemberEpoch:          req.MemberEpoch,
		InstanceID:           req.InstanceID,
		RackID:               req.RackID,
		RebalanceTimeoutMs:   req.RebalanceTimeoutMillis,
		SubscribedTopicNames: req.SubscribedTopicNames,
		SubscribedTopicRegex: req.SubscribedTopicRegex,
		ServerAssignor:       req.ServerAssignor,
	}
	if req.Topics != nil {
		hr.Owned = make([]group.ConsumerTopic, len(req.Topics))
		for i, t := range req.Topics {
			hr.Owned[i] = group.ConsumerTopic{TopicID: meta.TopicID(t.TopicID), Partitions: t.Partitions}
		}
	}
	var wait func(context.Context) group.ConsumerHeartbeatResult
	if err := r.InOrder(ctx, func() { wait = g.ConsumerGroupHeartbeat(ctx, r.groupClient(), hr) }); err != nil {
		return nil, err
	}
	dctx, cancel := r.untilDrain(ctx)
	defer cancel()
	res := wait(dctx)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = res.Code
	if res.Code != 0 {
		resp.ErrorMessage = strPtr(res.Message)
		return resp, nil
	}
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(res.MemberID), res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval / time.Millisecond)
	if res.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range res.Assignment {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = [16]byte(t.TopicID), t.Partitions
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp, nil
}
