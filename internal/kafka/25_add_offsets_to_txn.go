// AddOffsetsToTxn: v0-4
//   - txn.Coordinator.AddOffsets adds the group to the producer's
//     transaction (beginning one if none is ongoing), which
//     TxnOffsetCommit requires before it stores the group's offsets in
//     the transaction.
//   - Errors: TRANSACTIONAL_ID_NOT_FOUND, INVALID_PRODUCER_ID_MAPPING,
//     PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), INVALID_GROUP_ID,
//     and the retriable proposal failures (REQUEST_TIMED_OUT,
//     COORDINATOR_NOT_AVAILABLE).
//   - ACLs (authz.go): Write on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; Read on the group, else
//     GROUP_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/txn"
)

func init() { regKey(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	z := r.authz()
	if resp.ErrorCode = z.txnCode(kmsg.ACLOperationWrite, req.TransactionalID); resp.ErrorCode == 0 {
		resp.ErrorCode = z.groupCode(kmsg.ACLOperationRead, req.Group)
	}
	if resp.ErrorCode != 0 {
		return resp, nil
	}
	code := txns.AddOffsets(ctx, txn.AddOffsetsRequest{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Group:           req.Group,
	})
	resp.ErrorCode = fencedCode(code, req.Version, 2)
	return resp, nil
}
