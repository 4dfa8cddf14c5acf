// OffsetDelete: v0
//   - Deletes committed offsets of an empty group, or of topics no member
//     of a consumer-protocol group subscribes to; a subscribed topic is
//     GROUP_SUBSCRIBED_TO_TOPIC, any other non-empty group NON_EMPTY_GROUP.
//   - An unknown group is GROUP_ID_NOT_FOUND, an unknown topic or
//     partition UNKNOWN_TOPIC_OR_PARTITION.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	return g.OffsetDelete(ctx, r.Body.(*kmsg.OffsetDeleteRequest)), nil
}
