package txn

import (
	"context"

	"github.com/strandkafka/strand/internal/meta"
)

// InitRequest is an InitProducerId.
type InitRequest struct {
	// TransactionalID is empty for a producer without one.
	TransactionalID string
	// TimeoutMs is the transaction timeout of a transactional producer.
	TimeoutMs int32
	// ProducerID and ProducerEpoch are the pair the producer holds
	// (KIP-360), -1 when it holds none or its request cannot say.
	ProducerID    int64
	ProducerEpoch int16
}

// InitResult answers an InitRequest: the producer's id and epoch, -1
// with an error.
type InitResult struct {
	Code          int16
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID hands a producer its id and epoch, through the log so
// ids are unique over the cluster and survive restarts. Without a
// transactional id it is meta.AllocateProducerID: a new id, or the held
// one with its epoch bumped. With one it is
// meta.InitTransactionalProducer, which allocates the id the first time,
// and later bumps the epoch (fencing older instances) and aborts an
// ongoing transaction in the same apply, so the answer is never
// CONCURRENT_TRANSACTIONS.
func (c *Coordinator) InitProducerID(ctx context.Context, req InitRequest) InitResult {
	var cmd meta.Command = meta.AllocateProducerID{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
	if req.TransactionalID != "" {
		cmd = meta.InitTransactionalProducer{
			TransactionalID: req.TransactionalID,
			TimeoutMs:       req.TimeoutMs,
			ProducerID:      req.ProducerID,
			ProducerEpoch:   req.ProducerEpoch,
		}
	}
	out := InitResult{ProducerID: -1, ProducerEpoch: -1}
	res, e := c.propose(ctx, cmd)
	switch {
	case e != nil:
		out.Code = e.Code
	case res.Code != 0:
		out.Code = res.Code
	default:
		out.ProducerID, out.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	}
	return out
}
