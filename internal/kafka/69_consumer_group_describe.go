// ConsumerGroupDescribe: v0-1 (KIP-848)
//   - Group epoch, assignment epoch, assignor, and per member its epoch,
//     subscription, current and target assignment; v1 MemberType
//     (always consumer: classic members are not mixed into these groups).
//   - An unknown or classic group is GROUP_ID_NOT_FOUND.
//   - IncludeAuthorizedOperations answers what an authorizer-less Kafka
//     allows.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	return g.ConsumerGroupDescribe(ctx, r.Body.(*kmsg.ConsumerGroupDescribeRequest)), nil
}
