// OffsetCommit: v0-9
//   - Group commits are checked against the member and generation
//     (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while
//     the generation syncs, FENCED_INSTANCE_ID v7+); generation -1 from an
//     empty or unknown group is a standalone commit. v0 has neither.
//   - A topic or partition that does not exist is
//     UNKNOWN_TOPIC_OR_PARTITION; metadata above offset.metadata.max.bytes
//     OFFSET_METADATA_TOO_LARGE.
//   - v1 per-partition Timestamp is stored as the commit time; otherwise
//     the commit time is the log's. v2-4 RetentionTimeMillis (other than
//     -1) gives the offsets their own expiry. v6+ LeaderEpoch is stored.
//   - A connection's commits are queued in request order (InOrder), so a
//     later commit is never overwritten by an earlier one; commits of all
//     connections share log entries.
//   - Left out: v10 (topic ids, KIP-848's OffsetCommit).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(8, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.OffsetCommitRequest)
	var wait func(context.Context) *kmsg.OffsetCommitResponse
	if err := r.InOrder(ctx, func() { wait = g.OffsetCommit(ctx, req) }); err != nil {
		return nil, err
	}
	return wait(ctx), nil
}
