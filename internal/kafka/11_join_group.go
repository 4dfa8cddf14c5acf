// JoinGroup: v0-9
//   - v0 has no rebalance timeout: the session timeout stands in.
//   - v4+: a first join without a member id gets MEMBER_ID_REQUIRED and
//     the id to rejoin with (KIP-394); a static member (v5+ InstanceID,
//     KIP-345) skips that round, and rejoining replaces its old member id
//     (FENCED_INSTANCE_ID for the old one) without a rebalance.
//   - v7+ ProtocolType in the answer; v8 Reason is logged; v9
//     SkipAssignment for a static leader rejoining a stable group
//     (KIP-814).
//   - The call waits for the join phase (up to the rebalance timeout);
//     a server shutdown ends the wait with NOT_COORDINATOR, which sends the
//     member to look its coordinator up again.
//   - Group semantics (states, timeouts, errors): package group.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	ctx, cancel := r.untilDrain(ctx)
	defer cancel()
	return g.JoinGroup(ctx, r.groupClient(), r.Body.(*kmsg.JoinGroupRequest)), nil
}
