// ShareAcknowledge: v0-2 (KIP-932; v2 KIP-1222 IsRenewAck, type 4 renew)
//   - Shares the member's share session with ShareFetch: epoch 0 is
//     INVALID_SHARE_SESSION_EPOCH, -1 closes the session after the
//     acknowledgements and releases what the member still holds.
//   - Per partition: INVALID_RECORD_STATE unless every offset is held
//     by the member under an unexpired lock (by the log clock); the
//     partition's acknowledgements apply whole or not at all.
//   - A classic or consumer group under the id is GROUP_ID_NOT_FOUND.
//   - ACLs (authz.go): Read on the group, Read on each topic.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(79, 0, 2, handleShareAcknowledge) }

func handleShareAcknowledge(ctx context.Context, r *Request) (kmsg.Response, error) {
	s, err := r.Deps.shares()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ShareAcknowledgeRequest)
	group := ""
	if req.GroupID != nil {
		group = *req.GroupID
	}
	if code := r.authz().groupCode(kmsg.ACLOperationRead, group); code != 0 {
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return s.Acknowledge(ctx, r.connID(), req, r.shareTopicCheck(int8(kmsg.ACLOperationRead))), nil
}
