// DescribeProducers: v0
//   - Per requested partition, the producers with state in it
//     (txn.Coordinator.DescribeProducers) after a Sync with the log:
//     producer id and epoch, last sequence (-1 before any batch),
//     LastTimestamp (the log clock of its last write, batch or marker,
//     where Kafka keeps the batch's max timestamp) and the first offset
//     of its ongoing transaction there (-1 if none).
//   - State unwritten for producer.id.expiration.ms of log clock is left
//     out: apply treats it as forgotten, though it deletes it only when it
//     next touches it (Kafka's broker drops it on a timer).
//   - CoordinatorEpoch is -1: Strand has no coordinator epochs, since any
//     agent serves any transaction and EndTxn writes every marker in one
//     apply.
//   - Any agent answers for any partition (there are no leaders). An
//     unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a failed
//     Sync NOT_LEADER_OR_FOLLOWER (this agent is stopping) or
//     REQUEST_TIMED_OUT, both retriable.
//   - ACLs (authz.go): Read on each topic, else TOPIC_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/txn"
)

func init() { regKey(61, 0, 0, handleDescribeProducers) }

// noCoordinatorEpoch is DescribeProducers' CoordinatorEpoch: none.
const noCoordinatorEpoch = -1

func handleDescribeProducers(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	// ACLs: Read on each topic; the others are not looked up.
	z := r.authz()
	ask := make([]txn.TopicPartitions, len(req.Topics))
	for i, rt := range req.Topics {
		ask[i] = txn.TopicPartitions{Topic: rt.Topic}
		if z.topic(kmsg.ACLOperationRead, rt.Topic) {
			ask[i].Partitions = rt.Partitions
		}
	}
	described := txns.DescribeProducers(ctx, ask)
	for i, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for j, p := range rt.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			if ask[i].Partitions == nil {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				t.Partitions = append(t.Partitions, rp)
				continue
			}
			d := described[i][j]
			rp.ErrorCode = d.Code
			for _, pi := range d.Producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = pi.ProducerID
				ap.ProducerEpoch = int32(pi.ProducerEpoch)
				ap.LastSequence = pi.LastSequence
				ap.LastTimestamp = pi.LastTimestamp
				ap.CoordinatorEpoch = noCoordinatorEpoch
				ap.CurrentTxnStartOffset = pi.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
