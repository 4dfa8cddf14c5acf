// OffsetFetch: v0-9
//   - A partition without a committed offset answers offset -1, leader
//     epoch -1 (v5+) and empty metadata; so does a topic that does not
//     exist.
//   - v2+: null Topics means every committed offset of the group, and
//     group errors (NOT_COORDINATOR) are top-level; v0-1 carry them on
//     every partition.
//   - v7 RequireStable is accepted: there are no transactional commits to
//     wait for yet. v8+: several groups, each with its own error; v9
//     MemberID and MemberEpoch are ignored (classic groups).
//   - Left out: v10 (topic ids).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(9, 0, 9, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	return g.OffsetFetch(ctx, r.Body.(*kmsg.OffsetFetchRequest)), nil
}
