// LeaveGroup: v0-5
//   - v0-2: one member id, answered in the top-level error code.
//   - v3+: several members, by member id or by instance id (a static
//     member leaves for good only this way), each with its own error;
//     FENCED_INSTANCE_ID when the member id does not own the instance.
//   - v5 Reason is logged.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	return g.LeaveGroup(ctx, r.Body.(*kmsg.LeaveGroupRequest)), nil
}
