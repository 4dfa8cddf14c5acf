// EndTxn: v0-4
//   - meta.EndTxn commits or aborts in one apply: a marker in every
//     partition the transaction added, aborted ranges indexed for
//     read_committed, the transaction's offsets committed to their
//     groups. There is no PrepareCommit phase to wait out, so the next
//     transaction may begin at once (no CONCURRENT_TRANSACTIONS).
//   - KAFKA-17754: the handler syncs its copy with the log and names the
//     transaction it found ongoing (TxnState.Seq) in the command; apply
//     refuses the EndTxn if another transaction began since, so an EndTxn
//     delayed anywhere inside Strand (in a queue, in an ambiguous
//     proposal retried later) never ends a later transaction. A delay
//     before the request reaches an agent is covered only by the epoch
//     bump per transaction of KIP-890 part 2, which needs Produce v12 and
//     the transaction.version feature (not served).
//   - Ending a transaction that already ended the same way succeeds (a
//     client's retry); the other way, or with none ongoing, is
//     INVALID_TXN_STATE. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before
//     v2.
//   - Left out: v5 (KIP-890 part 2 epoch bump in the response).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(26, 0, 4, handleEndTxn) }

func handleEndTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if err := db.Sync(ctx); err != nil {
		resp.ErrorCode = proposeErrCode(err).Code
		return resp, nil
	}
	view := db.View()
	s, ok, err := view.Txn(req.TransactionalID)
	view.Close()
	switch {
	case err != nil:
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil
	case !ok:
		resp.ErrorCode = kerr.TransactionalIDNotFound.Code
		return resp, nil
	}
	res, e := proposeTxn(ctx, db, meta.EndTxn{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Commit:          req.Commit,
		Seq:             s.Seq,
	})
	if e != nil {
		resp.ErrorCode = e.Code
	} else {
		resp.ErrorCode = fencedCode(res.Code, req.Version, 2)
	}
	return resp, nil
}
