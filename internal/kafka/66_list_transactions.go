// ListTransactions: v0-2
//   - The transactional ids in the replicated database (meta.View.Txns),
//     after a Sync with the log, that this agent coordinates (the
//     FindCoordinator mapping, Deps.Groups; all of them without one), so
//     a client that asks every agent, as kadm and kafka-transactions.sh
//     do, sees each id once. While agents disagree on who is live, an id
//     may be listed by two agents or by none.
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

package kafka

import (
	"context"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(66, 0, 2, handleListTransactions) }

// kafkaTxnStates are the transaction state names Kafka knows.
var kafkaTxnStates = []string{
	"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence",
}

func handleListTransactions(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)

	var states map[string]bool
	for _, f := range req.StateFilters {
		if !slices.Contains(kafkaTxnStates, f) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
			continue
		}
		if states == nil {
			states = make(map[string]bool)
		}
		states[f] = true
	}
	var pids map[int64]bool
	if len(req.ProducerIDFilters) > 0 {
		pids = make(map[int64]bool, len(req.ProducerIDFilters))
		for _, p := range req.ProducerIDFilters {
			pids[p] = true
		}
	}
	minRunMs := int64(-1)
	if req.Version >= 1 {
		minRunMs = req.DurationFilterMillis
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		// Go's regexp is RE2, as the field asks; it rejects expressions
		// whose program would be too large, so compiling one is bounded.
		if pattern, err = regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
	}

	view, now, e := syncedView(ctx, db, kerr.CoordinatorNotAvailable)
	if e != nil {
		resp.ErrorCode = e.Code
		return resp, nil
	}
	defer view.Close()
	all, err := view.Txns()
	if err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil
	}
	groups := r.Deps.Groups
	for _, s := range all {
		switch {
		case groups != nil && groups.Coordinator(s.TransactionalID) != r.Deps.Cluster.NodeID:
		case len(req.StateFilters) > 0 && !states[s.Status.String()]:
		case pids != nil && !pids[s.ProducerID]:
		case minRunMs >= 0 && (s.Status != meta.TxnOngoing || now-s.StartMs <= minRunMs):
		case pattern != nil && !pattern.MatchString(s.TransactionalID):
		default:
			ts := kmsg.NewListTransactionsResponseTransactionState()
			ts.TransactionalID = s.TransactionalID
			ts.ProducerID = s.ProducerID
			ts.TransactionState = s.Status.String()
			resp.TransactionStates = append(resp.TransactionStates, ts)
		}
	}
	return resp, nil
}
