// ShareFetch: v0-2 (KIP-932; v1 KIP-1206 MaxRecords, BatchSize; v2
// ShareAcquireMode, KIP-1222 IsRenewAck)
//   - Share sessions per (group, member) on this agent with Kafka's
//     epochs: 0 opens (no acknowledgements allowed), n continues
//     (Topics add, ForgottenTopicsData remove), -1 closes after the
//     acknowledgements and releases what the member still holds.
//     SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
//     SHARE_SESSION_LIMIT_REACHED as Kafka answers.
//   - Any agent serves any share partition: the state lives in the
//     replicated metadata and every acquisition is decided by apply
//     (package share, meta/share_state.go); no NOT_LEADER, no
//     CurrentLeader hint (-1/-1), no NodeEndpoints.
//   - Piggybacked acknowledgements first (AcknowledgeErrorCode per
//     partition), then records: whole batches with AcquiredRecords,
//     MaxRecords (whole batches, or exactly with ShareAcquireMode 1),
//     BatchSize splitting the ranges (mode 0), MaxWaitMillis long poll.
//     MinBytes is not honoured beyond "at least one record".
//   - A classic or consumer group under the id is GROUP_ID_NOT_FOUND.
//   - ACLs (authz.go): Read on the group (GROUP_AUTHORIZATION_FAILED),
//     Read on each topic (TOPIC_AUTHORIZATION_FAILED per partition).
//   - No quota throttling yet.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(78, 0, 2, handleShareFetch) }

func handleShareFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	s, err := r.Deps.shares()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ShareFetchRequest)
	group := ""
	if req.GroupID != nil {
		group = *req.GroupID
	}
	if code := r.authz().groupCode(kmsg.ACLOperationRead, group); code != 0 {
		resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return s.Fetch(ctx, r.connID(), req, r.shareTopicCheck(int8(kmsg.ACLOperationRead))), nil
}
