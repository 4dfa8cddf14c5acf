// EndTxn: v0-5
//   - txn.Coordinator.EndTxn commits or aborts in one apply: a marker in
//     every partition the transaction added, aborted ranges indexed for
//     read_committed, the transaction's offsets committed to their
//     groups. There is no PrepareCommit phase to wait out, so the next
//     transaction may begin at once (no CONCURRENT_TRANSACTIONS).
//   - KAFKA-17754: the coordinator syncs its copy with the log and names
//     the transaction it found ongoing in the command; apply refuses the
//     EndTxn if another transaction began since, so an EndTxn delayed
//     anywhere inside Strand (in a queue, in an ambiguous proposal
//     retried later) never ends a later transaction.
//   - v5 (KIP-890 part 2, clients that saw transaction.version 2 in
//     ApiVersions): the epoch is bumped with every EndTxn and returned,
//     so a request of an ended transaction delayed before it reached any
//     agent is fenced too. A retry naming the previous epoch gets the
//     current pair; aborting with nothing ongoing only bumps the epoch.
//     Before v5 ProducerId and ProducerEpoch are -1.
//   - Ending a transaction that already ended the same way succeeds (a
//     client's retry); the other way, or with none ongoing, is
//     INVALID_TXN_STATE. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before
//     v2.
//   - ACLs (authz.go): Write on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/txn"
)

func init() { regKey(26, 0, 5, handleEndTxn) }

func handleEndTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if resp.ErrorCode = r.authz().txnCode(kmsg.ACLOperationWrite, req.TransactionalID); resp.ErrorCode != 0 {
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	res := txns.EndTxn(ctx, txn.EndRequest{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Commit:          req.Commit,
		BumpEpoch:       req.Version >= 5,
	})
	resp.ErrorCode = fencedCode(res.Code, req.Version, 2)
	resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	return resp, nil
}
