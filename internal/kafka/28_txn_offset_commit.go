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
//   - ACLs (authz.go): Write on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group
//     (GROUP_AUTHORIZATION_FAILED), Read on each topic
//     (TOPIC_AUTHORIZATION_FAILED); what fails is not committed.

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
	// ACLs: Write on the transactional id, Read on the group, then Read
	// on each topic; what fails is not committed.
	z := r.authz()
	code := z.txnCode(kmsg.ACLOperationWrite, req.TransactionalID)
	if code == 0 {
		code = z.groupCode(kmsg.ACLOperationRead, req.Group)
	}
	partCode := func(topic string) int16 {
		if code != 0 {
			return code
		}
		return z.topicCode(kmsg.ACLOperationRead, topic)
	}
	for _, t := range req.Topics {
		if partCode(t.Topic) != 0 {
			continue
		}
		for _, p := range t.Partitions {
			in.Offsets = append(in.Offsets, txn.CommitOffset{
				Topic: t.Topic, Partition: p.Partition, Offset: p.Offset,
				LeaderEpoch: p.LeaderEpoch, Metadata: strOr(p.Metadata),
			})
		}
	}
	var codes []int16
	if len(in.Offsets) > 0 {
		codes = txns.CommitOffsets(ctx, in)
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		denied := partCode(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if rp.ErrorCode = denied; denied == 0 {
				rp.ErrorCode = fencedCode(codes[i], req.Version, 3)
				i++
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
