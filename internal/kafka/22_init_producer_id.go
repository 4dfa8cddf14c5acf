// InitProducerId: v0-5
//   - Without a transactional id: a producer id comes from
//     meta.AllocateProducerID, through the log, so ids are unique over the
//     cluster and survive restarts; epoch 0. Any agent answers.
//   - v3+ (KIP-360): a request carrying the producer's id and epoch gets
//     the same id with the epoch bumped, which fences its older epoch and
//     restarts its sequences at 0; an exhausted epoch or an id never handed
//     out gets a new id. Kafka's coordinator ignores these fields for
//     non-transactional producers and always hands out a new id; both are
//     valid answers to a client.
//   - With a transactional id: INVALID_REQUEST until transactions exist.
//     That code is not retriable and asks for no coordinator lookup, so
//     franz-go, the Java client and librdkafka fail the producer at once
//     with an error, instead of looping on COORDINATOR_NOT_AVAILABLE or
//     NOT_COORDINATOR, or reporting an authorization failure that sends an
//     operator to ACLs that do not exist.
//   - Proposal failures: REQUEST_TIMED_OUT (ambiguous or timed out) or
//     COORDINATOR_NOT_AVAILABLE (this agent is stopping), both retriable.
//   - Left out: v6 (KIP-939 two-phase commit).

package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	cmd := meta.AllocateProducerID{ProducerID: -1, ProducerEpoch: -1}
	if req.Version >= 3 {
		cmd.ProducerID, cmd.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	res, err := db.ProposeBatch(ctx, []meta.Command{cmd})
	switch {
	case errors.Is(err, meta.ErrClosed):
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case err != nil:
		resp.ErrorCode = proposeErrCode(err).Code
	case len(res) != 1:
		resp.ErrorCode = kerr.UnknownServerError.Code
	case res[0].Code != 0:
		resp.ErrorCode = res[0].Code
	default:
		resp.ProducerID, resp.ProducerEpoch = res[0].ProducerID, res[0].ProducerEpoch
	}
	return resp, nil
}
