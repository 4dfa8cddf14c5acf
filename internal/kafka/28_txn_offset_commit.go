// TxnOffsetCommit: v0-5
//   - meta.TxnOffsetCommit stores the offsets as pending in the producer's
//     transaction; EndTxn commits or drops them. Before v5 the group must
//     have been added with AddOffsetsToTxn first, else INVALID_TXN_STATE.
//     v5 (KIP-890 part 2) adds the group itself: the handler proposes
//     AddOffsetsToTxn and the commit in one log entry; a delayed v5
//     commit of an ended transaction carries a fenced epoch.
//   - v3+ (KIP-447): the generation is checked against the group's stored
//     generation in apply (ILLEGAL_GENERATION when older). The member id
//     and group instance id are not checked against the coordinator's
//     in-memory membership: a zombie consumer with the current generation
//     is fenced by the producer epoch instead.
//   - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; metadata over
//     the limit OFFSET_METADATA_TOO_LARGE; PRODUCER_FENCED is
//     INVALID_PRODUCER_EPOCH before v3.
//   - Left out: v6 (KIP-890 part 2, topic ids).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	cmd := meta.TxnOffsetCommit{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Group:           req.Group,
		Generation:      -1,
	}
	if req.Version >= 3 {
		cmd.Generation = req.Generation
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			cmd.Offsets = append(cmd.Offsets, meta.OffsetCommitPartition{
				Topic: t.Topic, Partition: p.Partition, Offset: p.Offset,
				LeaderEpoch: p.LeaderEpoch, Metadata: md, CommitTimestamp: -1,
			})
		}
	}
	var res meta.Result
	var e *kerr.Error
	if req.Version >= 5 {
		res, e = proposeTxnOffsetCommitV5(ctx, db, cmd)
	} else {
		res, e = proposeTxn(ctx, db, cmd)
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case e != nil:
				rp.ErrorCode = e.Code
			case i < len(res.Codes):
				rp.ErrorCode = fencedCode(res.Codes[i], req.Version, 3)
			default:
				rp.ErrorCode = fencedCode(res.Code, req.Version, 3)
			}
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// proposeTxnOffsetCommitV5 adds the group to the transaction and commits
// in one log entry; a failed add answers every partition.
func proposeTxnOffsetCommitV5(ctx context.Context, db MetaDB, cmd meta.TxnOffsetCommit) (meta.Result, *kerr.Error) {
	add := meta.AddOffsetsToTxn{TransactionalID: cmd.TransactionalID, ProducerID: cmd.ProducerID, ProducerEpoch: cmd.ProducerEpoch, Group: cmd.Group}
	res, e := proposeTxns(ctx, db, add, cmd)
	switch {
	case e != nil:
		return meta.Result{}, e
	case res[0].Code != 0:
		return res[0], nil
	}
	return res[1], nil
}
