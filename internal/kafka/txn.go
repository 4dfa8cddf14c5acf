package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/txn"
)

// TxnCoordinator serves the transaction APIs (22, 24, 25, 26, 28, 61,
// 65, 66), FindCoordinator for transactional ids, and the implicit adds
// of Produce v12. *txn.Coordinator implements it in its own types: the
// handler files document the versions and convert each version's
// request and answer to and from them, so the transaction semantics live
// in package txn and the wire in this one.
//
// Unlike the group APIs, nothing here depends on a connection's request
// order: every call is a proposal through the log (or a read after a
// Sync), and apply orders them.
type TxnCoordinator interface {
	// Coordinator is the node id of the agent coordinating a
	// transactional id.
	Coordinator(id string) int32
	InitProducerID(ctx context.Context, req txn.InitRequest) txn.InitResult
	// AddPartitions and CommitOffsets answer a code per partition, in
	// request order.
	AddPartitions(ctx context.Context, req txn.AddPartitionsRequest) []int16
	// AddProduced sets each part's Code.
	AddProduced(ctx context.Context, id string, parts []txn.ProducedPartition)
	AddOffsets(ctx context.Context, req txn.AddOffsetsRequest) int16
	EndTxn(ctx context.Context, req txn.EndRequest) txn.EndResult
	CommitOffsets(ctx context.Context, req txn.CommitRequest) []int16
	DescribeProducers(ctx context.Context, topics []txn.TopicPartitions) [][]txn.PartitionProducers
	DescribeTransactions(ctx context.Context, ids []string) []txn.DescribedTxn
	ListTransactions(ctx context.Context, req txn.ListRequest) txn.ListResult
}

var _ TxnCoordinator = (*txn.Coordinator)(nil)

// txns returns Deps.Txns, or ErrMissingDeps.
func (d *Deps) txns() (TxnCoordinator, error) {
	if d == nil || d.Txns == nil {
		return nil, ErrMissingDeps
	}
	return d.Txns, nil
}

// fencedCode converts PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for a
// request version older than fencedSince, the version KIP-588 introduced
// the code in, as Kafka's handlers do: older clients know only the
// latter.
func fencedCode(code int16, version, fencedSince int16) int16 {
	if code == kerr.ProducerFenced.Code && version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
