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
//   - Group semantics: package group (consumer.go).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(68, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	ctx, cancel := r.untilDrain(ctx)
	defer cancel()
	return g.ConsumerGroupHeartbeat(ctx, r.groupClient(), r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)), nil
}
