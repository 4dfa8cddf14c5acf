// OffsetDelete: v0
//   - Deletes committed offsets of an empty group, or of topics no member
//     of a consumer-protocol group subscribes to; a subscribed topic is
//     GROUP_SUBSCRIBED_TO_TOPIC, any other non-empty group NON_EMPTY_GROUP.
//   - An unknown group is GROUP_ID_NOT_FOUND, an unknown topic or
//     partition UNKNOWN_TOPIC_OR_PARTITION.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	// ACLs: Delete on the group, then Read on each topic; a topic that
	// fails keeps its offsets.
	z := r.authz()
	if resp.ErrorCode = z.groupCode(kmsg.ACLOperationDelete, req.Group); resp.ErrorCode != 0 {
		return resp, nil
	}
	var topics []group.TopicPartitions
	for _, rt := range req.Topics {
		if !z.topic(kmsg.ACLOperationRead, rt.Topic) {
			continue
		}
		tp := group.TopicPartitions{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			tp.Partitions = append(tp.Partitions, rp.Partition)
		}
		topics = append(topics, tp)
	}
	res := g.OffsetDelete(ctx, req.Group, topics)
	resp.ErrorCode = res.Code
	if res.Code != 0 {
		return resp, nil
	}
	k := 0
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if sp.ErrorCode = z.topicCode(kmsg.ACLOperationRead, rt.Topic); sp.ErrorCode == 0 {
				sp.ErrorCode = res.Codes[k]
				k++
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
