// DescribeTransactions: v0
//   - Per transactional id, its coordinator state from the replicated
//     database (meta.View.Txn) after a Sync with the log, so any agent
//     answers for any id (never NOT_COORDINATOR): State, producer id and
//     epoch, the transaction timeout, StartTimestamp (the log clock when
//     the ongoing transaction began, -1 when none is ongoing) and the
//     ongoing transaction's partitions by topic name, topics sorted by
//     name. A topic deleted since it was added is left out.
//   - States are Kafka's names: Empty, Ongoing, CompleteCommit,
//     CompleteAbort. Strand never shows PrepareCommit, PrepareAbort or
//     PrepareEpochFence: EndTxn and the abort of a fenced or timed-out
//     transaction each complete in one apply.
//   - An unknown id is TRANSACTIONAL_ID_NOT_FOUND; a failed Sync
//     COORDINATOR_NOT_AVAILABLE (this agent is stopping) or
//     REQUEST_TIMED_OUT, both retriable.

package kafka

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	if len(req.TransactionalIDs) == 0 {
		return resp, nil
	}
	view, _, syncErr := syncedView(ctx, db, kerr.CoordinatorNotAvailable)
	if view != nil {
		defer view.Close()
	}
	names := make(map[meta.TopicID]string)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		e := syncErr
		if e == nil {
			e = describeTxn(view, id, &st, names)
		}
		if e != nil {
			st.ErrorCode = e.Code
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

// describeTxn fills st with id's state. names caches topic names by id
// over the request.
func describeTxn(view *meta.View, id string, st *kmsg.DescribeTransactionsResponseTransactionState, names map[meta.TopicID]string) *kerr.Error {
	s, ok, err := view.Txn(id)
	switch {
	case err != nil:
		return kerr.UnknownServerError
	case !ok:
		return kerr.TransactionalIDNotFound
	}
	st.State = s.Status.String()
	st.ProducerID, st.ProducerEpoch = s.ProducerID, s.ProducerEpoch
	st.TimeoutMillis = s.TimeoutMs
	st.StartTimestamp = -1
	if s.Status != meta.TxnOngoing {
		return nil
	}
	st.StartTimestamp = s.StartMs
	// s.Partitions is sorted by topic id, so each topic's partitions are
	// consecutive.
	for i := 0; i < len(s.Partitions); {
		tid := s.Partitions[i].TopicID
		j := i
		var parts []int32
		for ; j < len(s.Partitions) && s.Partitions[j].TopicID == tid; j++ {
			parts = append(parts, s.Partitions[j].Partition)
		}
		i = j
		name, seen := names[tid]
		if !seen {
			t, ok, err := view.TopicByID(tid)
			if err != nil {
				return kerr.UnknownServerError
			}
			if ok {
				name = t.Name
			}
			names[tid] = name
		}
		if name == "" {
			continue
		}
		tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		tt.Topic, tt.Partitions = name, parts
		st.Topics = append(st.Topics, tt)
	}
	slices.SortFunc(st.Topics, func(x, y kmsg.DescribeTransactionsResponseTransactionStateTopic) int {
		return cmp.Compare(x.Topic, y.Topic)
	})
	return nil
}
