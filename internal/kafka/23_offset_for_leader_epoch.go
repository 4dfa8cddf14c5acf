// OffsetForLeaderEpoch: v0-4
//   - Every partition has had one leader epoch, 0, since it was created
//     (there are no leader elections), so the answers follow Kafka's
//     LeaderEpochFileCache.endOffsetFor for a cache holding epoch 0 alone:
//     epoch 0 (the current one) ends at the high watermark, which is the
//     log end offset here; -1 (undefined) and any epoch above 0 are
//     unknown, answered with epoch -1 and end offset -1; an epoch below -1
//     precedes every known one, answered with itself and the log start
//     offset.
//   - A consumer validating its position after a metadata change (KIP-320)
//     asks for the epoch of the last record it consumed; records carry
//     epoch 0, so it gets the high watermark and finds no truncation.
//   - v2+: CurrentLeaderEpoch is fenced against epoch 0 (FENCED_ or
//     UNKNOWN_LEADER_EPOCH). v3+: any ReplicaID gets the same answer, as
//     with Kafka; there are no followers.
//   - The answer is read after syncing the local copy with the log (as
//     the transaction handlers do): any agent serves any partition, and a
//     copy that has not applied what another agent acknowledged would end
//     epoch 0 below records the consumer already read, which a client
//     takes for truncation and rewinds. If the sync fails, every
//     partition gets REQUEST_TIMED_OUT (NOT_LEADER_OR_FOLLOWER when this
//     agent is stopping), and the client asks again.
//   - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
//   - ACLs (authz.go): Describe on each topic, else
//     TOPIC_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(23, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	view, syncErr := syncedView(ctx, db)
	if syncErr != nil {
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, syncErr.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	defer view.Close()
	topics := topicCache{view: view}
	z := r.authz()

	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			var ps meta.PartitionState
			var e *kerr.Error
			if z.topic(kmsg.ACLOperationDescribe, rt.Topic) {
				_, ps, e = topics.partition(rt.Topic, rp.Partition)
			} else {
				e = kerr.TopicAuthorizationFailed
			}
			if e == nil && req.Version >= 2 {
				e = checkCurrentLeaderEpoch(rp.CurrentLeaderEpoch)
			}
			switch {
			case e != nil:
				sp.ErrorCode = e.Code
			case rp.LeaderEpoch == partitionLeaderEpoch:
				sp.LeaderEpoch, sp.EndOffset = partitionLeaderEpoch, ps.HighWatermark()
			case rp.LeaderEpoch < -1:
				sp.LeaderEpoch, sp.EndOffset = rp.LeaderEpoch, ps.LogStartOffset
			}
			// Otherwise unknown: the defaults, epoch -1 and offset -1.
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
