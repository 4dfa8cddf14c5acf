// DescribeProducers: v0
//   - Per requested partition, the producers with state in it
//     (meta.View.Producers) after a Sync with the log: producer id and
//     epoch, last sequence (-1 before any batch), LastTimestamp (the log
//     clock of its last write, batch or marker, where Kafka keeps the
//     batch's max timestamp) and the first offset of its ongoing
//     transaction there (-1 if none).
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

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(61, 0, 0, handleDescribeProducers) }

// noCoordinatorEpoch is DescribeProducers' CoordinatorEpoch: none.
const noCoordinatorEpoch = -1

func handleDescribeProducers(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	view, now, e := syncedView(ctx, db, kerr.NotLeaderForPartition)
	if view != nil {
		defer view.Close()
	}
	topics := topicCache{view: view}
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			pe := e
			if pe == nil {
				rp.ActiveProducers, pe = activeProducers(&topics, rt.Topic, p, now)
			}
			if pe != nil {
				rp.ErrorCode = pe.Code
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// activeProducers lists a partition's unexpired producers as of log clock
// now.
func activeProducers(topics *topicCache, topic string, p int32, now int64) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, *kerr.Error) {
	t, _, e := topics.partition(topic, p)
	if e != nil {
		return nil, e
	}
	infos, err := topics.view.Producers(t.ID, p)
	if err != nil {
		return nil, kerr.UnknownServerError
	}
	var out []kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	for _, pi := range infos {
		if now-pi.LastTimestamp >= meta.ProducerIDExpirationMs {
			continue
		}
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID = pi.ProducerID
		ap.ProducerEpoch = int32(pi.ProducerEpoch)
		ap.LastSequence = pi.LastSequence
		ap.LastTimestamp = pi.LastTimestamp
		ap.CoordinatorEpoch = noCoordinatorEpoch
		ap.CurrentTxnStartOffset = pi.CurrentTxnStartOffset
		out = append(out, ap)
	}
	return out, nil
}
