// InitProducerId: v0-5
//   - Without a transactional id: a producer id from the transaction
//     coordinator (txn.Coordinator.InitProducerID), through the log, so
//     ids are unique over the cluster and survive restarts; epoch 0. Any
//     agent answers.
//   - v3+ (KIP-360): a request carrying the producer's id and epoch gets
//     the same id with the epoch bumped, which fences its older epoch and
//     restarts its sequences at 0; an exhausted epoch or an id never handed
//     out gets a new id. Kafka's coordinator ignores these fields for
//     non-transactional producers and always hands out a new id; both are
//     valid answers to a client. Before v3 the request cannot name them.
//   - With a transactional id (an empty one is none, as in Kafka): the
//     first call allocates a producer id; later ones bump the epoch
//     (fencing older instances) and abort an ongoing transaction in the
//     same apply, so the answer is never CONCURRENT_TRANSACTIONS. v3+ ids
//     and epochs are checked (KIP-360, KIP-588): a stale pair is
//     PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). A timeout
//     outside (0, transaction.max.timeout.ms] is
//     INVALID_TRANSACTION_TIMEOUT.
//   - Proposal failures: REQUEST_TIMED_OUT (ambiguous or timed out) or
//     COORDINATOR_NOT_AVAILABLE (this agent is stopping), both retriable.
//   - Left out: v6 (KIP-939 two-phase commit).
//   - ACLs (authz.go): Write on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without one, IdempotentWrite on
//     the cluster or Write on some topic, else CLUSTER_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/txn"
)

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	// ACLs: Write on the transactional id; without one, idempotent
	// writes (IdempotentWrite on the cluster or Write on some topic).
	z := r.authz()
	switch {
	case req.TransactionalID != nil:
		resp.ErrorCode = z.txnCode(kmsg.ACLOperationWrite, *req.TransactionalID)
	case !z.idempotentWrite():
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	if resp.ErrorCode != 0 {
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	in := txn.InitRequest{TransactionalID: strOr(req.TransactionalID), TimeoutMs: req.TransactionTimeoutMillis, ProducerID: -1, ProducerEpoch: -1}
	if req.Version >= 3 {
		in.ProducerID, in.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	res := txns.InitProducerID(ctx, in)
	resp.ErrorCode = fencedCode(res.Code, req.Version, 4)
	resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	return resp, nil
}
