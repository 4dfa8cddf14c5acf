// TxnOffsetCommit: v0-5
//   - txn.Coordinator.CommitOffsets stores the offsets as pending in the
//     producer's transaction; EndTxn commits or drops them. Before v5 the
//     group must have been added with AddOffsetsToTxn first, else
//     INVALID_TXN_STATE. v5 (KIP-890 part 2) adds the group itself, in
//     the same log entry as the commit; a delayed v5 commit of an ended
//     transaction carries a fenced epoch.
//   - v3+ (KIP-447): the generation is checked against the group's stored
//     generation in apply (ILLEGAL_GENERATION when older); before v3 it
//     is not checked. The member id and group instance id are not
//     checked against the group coordinator's in-memory membership: a
//     zombie consumer with the current generation is fenced by the
//     producer epoch instead.
//   - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; metadata over
//     the limit OFFSET_METADATA_TOO_LARGE; PRODUCER_FENCED is
//     INVALID_PRODUCER_EPOCH before v3.
//   - Left out: v6 (KIP-890 part 2, topic ids).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/txn"
)

func init() { regKey(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	in := txn.CommitRequest{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Group:           req.Group,
		Generation:      -1,
		AddGroup:        req.Version >= 5,
	}
	if req.Version >= 3 {
		in.Generation = req.Generation
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			in.Offsets = append(in.Offsets, txn.CommitOffset{
				Topic: t.Topic, Partition: p.Partition, Offset: p.Offset,
				LeaderEpoch: p.LeaderEpoch, Metadata: strOr(p.Metadata),
			})
		}
	}
	codes := txns.CommitOffsets(ctx, in)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, fencedCode(codes[i], req.Version, 3)
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
