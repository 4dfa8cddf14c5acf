// DeleteShareGroupOffsets: v0 (KIP-932)
//   - Deletes the share-partition states of the named topics (one
//     ShareStateDelete): the group starts those partitions again from
//     share.auto.offset.reset.
//   - Only for an empty share group that exists: GROUP_ID_NOT_FOUND,
//     NON_EMPTY_GROUP, NOT_COORDINATOR from the group coordinator.
//   - ACLs (authz.go): Delete on the group (Kafka's KafkaApis asks
//     DELETE), Read on each topic (TOPIC_AUTHORIZATION_FAILED).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	m, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	z := r.authz()
	if resp.ErrorCode = z.groupCode(kmsg.ACLOperationDelete, req.GroupID); resp.ErrorCode != 0 {
		return resp, nil
	}
	if resp.ErrorCode = emptyShareGroupCode(ctx, r, req.GroupID, true); resp.ErrorCode != 0 {
		return resp, nil
	}
	view := m.View()
	var ids []meta.TopicID
	var slots []int
	for i, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		t.ErrorCode = z.topicCode(kmsg.ACLOperationRead, rt.Topic)
		topic, known, err := view.Topic(rt.Topic)
		switch {
		case err != nil:
			t.ErrorCode = kerr.UnknownServerError.Code
		case t.ErrorCode == 0 && !known:
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case known:
			t.TopicID = topic.ID
		}
		if t.ErrorCode == 0 {
			ids = append(ids, topic.ID)
			slots = append(slots, i)
		}
		resp.Topics = append(resp.Topics, t)
	}
	view.Close()
	if len(ids) == 0 {
		return resp, nil
	}
	res, err := m.ProposeBatch(ctx, []meta.Command{meta.ShareStateDelete{Group: req.GroupID, Topics: ids}})
	code := int16(0)
	switch {
	case err != nil:
		code = shareProposeCode(err)
	case res[0].Code != 0:
		code = res[0].Code
	}
	for _, i := range slots {
		resp.Topics[i].ErrorCode = code
	}
	return resp, nil
}
