// Heartbeat: v0-4
//   - Restarts the member's session. REBALANCE_IN_PROGRESS tells it to
//     rejoin; NONE while its generation completes its sync.
//   - v3+ InstanceID for static membership (KIP-345).
//   - ACLs (authz.go): Read on the group, else GROUP_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if resp.ErrorCode = r.authz().groupCode(kmsg.ACLOperationRead, req.Group); resp.ErrorCode != 0 {
		return resp, nil
	}
	hr := group.HeartbeatRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation}
	// In the connection's order (groups.go).
	if err := r.InOrder(ctx, func() { resp.ErrorCode = g.Heartbeat(ctx, hr) }); err != nil {
		return nil, err
	}
	return resp, nil
}
