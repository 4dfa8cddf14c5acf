// Heartbeat: v0-4
//   - Restarts the member's session. REBALANCE_IN_PROGRESS tells it to
//     rejoin; NONE while its generation completes its sync.
//   - v3+ InstanceID for static membership (KIP-345).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	return g.Heartbeat(ctx, r.Body.(*kmsg.HeartbeatRequest)), nil
}
