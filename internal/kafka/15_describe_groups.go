// DescribeGroups: v0-5
//   - State, protocol type, and members with client id and host; the
//     protocol, subscriptions and assignments only for a Stable group, as
//     Kafka shows them.
//   - An unknown group is state "Dead" with no error (v6 would answer
//     GROUP_ID_NOT_FOUND).
//   - v3+ authorized operations when asked: READ, DELETE and DESCRIBE,
//     since there is no authorizer yet. v4+ InstanceID.
//   - Left out: v6 (KIP-1043).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(15, 0, 5, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	return g.DescribeGroups(ctx, r.Body.(*kmsg.DescribeGroupsRequest)), nil
}
