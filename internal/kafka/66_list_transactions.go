// ListTransactions: v0-2
//   - The transactional ids in the replicated database
//     (txn.Coordinator.ListTransactions), after a Sync with the log, that
//     this agent coordinates (the FindCoordinator mapping), so a client
//     that asks every agent, as kadm and kafka-transactions.sh do, sees
//     each id once. While agents disagree on who is live, an id may be
//     listed by two agents or by none.
//   - StateFilters by Kafka state name; names Kafka knows that Strand
//     never enters (PrepareCommit, PrepareAbort, PrepareEpochFence, Dead)
//     match nothing, other names are returned in UnknownStateFilters (a
//     request naming only those lists nothing).
//     ProducerIDFilters by producer id. Empty filters match everything.
//   - v1 DurationFilterMillis >= 0: only transactions ongoing for longer
//     than that by the log clock. Kafka compares its wall clock with the
//     start of the last transaction in any state; only an ongoing
//     transaction is running here.
//   - v2 TransactionalIDPattern (KIP-1152): an RE2 expression the whole
//     id must match; one that does not compile is
//     INVALID_REGULAR_EXPRESSION.
//   - A failed Sync is COORDINATOR_NOT_AVAILABLE (this agent is stopping)
//     or REQUEST_TIMED_OUT, both retriable.
//   - ACLs (authz.go): only the transactional ids the client may Describe.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/txn"
)

func init() { regKey(66, 0, 2, handleListTransactions) }

func handleListTransactions(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	in := txn.ListRequest{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, MinDurationMs: -1}
	if req.Version >= 1 {
		in.MinDurationMs = req.DurationFilterMillis
	}
	if req.Version >= 2 {
		in.Pattern = strOr(req.TransactionalIDPattern)
	}
	res := txns.ListTransactions(ctx, in)
	resp.ErrorCode, resp.UnknownStateFilters = res.Code, res.UnknownStates
	z := r.authz().quiet() // a filter: the client is not refused
	for _, l := range res.Txns {
		if !z.txnID(kmsg.ACLOperationDescribe, l.TransactionalID) {
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = l.TransactionalID, l.ProducerID, l.State
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}
