// ListGroups: v0-4
//   - The groups this agent coordinates: those in memory and those only
//     stored (offsets only, or empty), sorted by id. A group of only
//     committed offsets has an empty protocol type, as in Kafka.
//   - v4: StatesFilter, case-insensitive; GroupState in the answer.
//   - Left out: v5 (TypesFilter, KIP-848).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(16, 0, 4, handleListGroups) }

func handleListGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	return g.ListGroups(ctx, r.Body.(*kmsg.ListGroupsRequest)), nil
}
