// DescribeTransactions: v0
//   - Per transactional id, its coordinator state from the replicated
//     database (txn.Coordinator.DescribeTransactions) after a Sync with
//     the log, so any agent answers for any id (never NOT_COORDINATOR):
//     State, producer id and epoch, the transaction timeout,
//     StartTimestamp (the log clock when the ongoing transaction began,
//     -1 when none is ongoing) and the ongoing transaction's partitions
//     by topic name, topics sorted by name. A topic deleted since it was
//     added is left out.
//   - States are Kafka's names: Empty, Ongoing, CompleteCommit,
//     CompleteAbort. Strand never shows PrepareCommit, PrepareAbort or
//     PrepareEpochFence: EndTxn and the abort of a fenced or timed-out
//     transaction each complete in one apply.
//   - An unknown id is TRANSACTIONAL_ID_NOT_FOUND; a failed Sync
//     COORDINATOR_NOT_AVAILABLE (this agent is stopping) or
//     REQUEST_TIMED_OUT, both retriable.
//   - ACLs (authz.go): Describe on each transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; partitions of topics the
//     client may not Describe are left out.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	z := r.authz()
	for i, d := range txns.DescribeTransactions(ctx, req.TransactionalIDs) {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = req.TransactionalIDs[i]
		if st.ErrorCode = z.txnCode(kmsg.ACLOperationDescribe, st.TransactionalID); st.ErrorCode != 0 {
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.ErrorCode, st.State = d.Code, d.State
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		st.TimeoutMillis, st.StartTimestamp = d.TimeoutMs, d.StartMs
		for _, t := range d.Topics {
			if !z.topic(kmsg.ACLOperationDescribe, t.Topic) {
				continue // as Kafka, hidden from who may not describe it
			}
			tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			tt.Topic, tt.Partitions = t.Topic, t.Partitions
			st.Topics = append(st.Topics, tt)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
