// AlterShareGroupOffsets: v0 (KIP-932)
//   - Sets the share-partition start offset of each partition (a new
//     SPSO, clamped to the partition's log start and high watermark;
//     in-flight records and delivery counts dropped, the state epoch
//     raised): one ShareStateAlter per partition, in one log entry.
//   - Only for an empty group: NON_EMPTY_GROUP while it has members; a
//     classic or consumer group under the id is GROUP_ID_NOT_FOUND; a
//     group that does not exist yet is created by its first state, as
//     Kafka creates it. NOT_COORDINATOR from the group coordinator.
//   - A negative StartOffset is INVALID_REQUEST for its partition.
//   - ACLs (authz.go): Read on the group, Read on each topic.

package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	m, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	z := r.authz()
	if resp.ErrorCode = z.groupCode(kmsg.ACLOperationRead, req.GroupID); resp.ErrorCode != 0 {
		return resp, nil
	}
	if resp.ErrorCode = emptyShareGroupCode(ctx, r, req.GroupID, false); resp.ErrorCode != 0 {
		return resp, nil
	}
	// Kafka creates the group here: it is then listed, described and
	// deleted as an empty share group.
	if cr, ok := r.Deps.ShareGroups.(shareGroupCreator); ok {
		if err := cr.CreateShareGroup(ctx, req.GroupID); err != nil {
			resp.ErrorCode = shareGroupErrCode(err)
			return resp, nil
		}
	}
	view := m.View()
	type slot struct{ t, p int }
	var cmds []meta.Command
	var slots []slot
	for i, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		code := z.topicCode(kmsg.ACLOperationRead, rt.Topic)
		topic, known, err := view.Topic(rt.Topic)
		switch {
		case err != nil:
			code = kerr.UnknownServerError.Code
		case code == 0 && !known:
			code = kerr.UnknownTopicOrPartition.Code
		case known:
			t.TopicID = topic.ID
		}
		for j, rp := range rt.Partitions {
			p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			if code == 0 && rp.StartOffset < 0 {
				p.ErrorCode = kerr.InvalidRequest.Code
			}
			if p.ErrorCode == 0 {
				cmds = append(cmds, meta.ShareStateAlter{Group: req.GroupID, TopicID: topic.ID, Partition: rp.Partition, StartOffset: rp.StartOffset})
				slots = append(slots, slot{i, j})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	view.Close()
	if len(cmds) == 0 {
		return resp, nil
	}
	res, err := m.ProposeBatch(ctx, cmds)
	for k, s := range slots {
		p := &resp.Topics[s.t].Partitions[s.p]
		switch {
		case err != nil:
			p.ErrorCode = shareProposeCode(err)
		default:
			p.ErrorCode = res[k].Code
		}
	}
	return resp, nil
}

// emptyShareGroupCode checks that group may have its share offsets
// changed: a share group (or none yet, unless mustExist) without
// members.
func emptyShareGroupCode(ctx context.Context, r *Request, group string, mustExist bool) int16 {
	exists, isShare, members, err := r.Deps.shareGroups().ShareGroupState(ctx, group)
	if err == nil && !exists && mustExist {
		// AlterShareGroupOffsets makes a group with share state and no
		// group record (no member ever joined): it exists for Kafka,
		// which creates the group there.
		exists, isShare, _, err = metaShareGroups{r.Deps.Meta}.ShareGroupState(ctx, group)
	}
	switch {
	case err != nil:
		return shareGroupErrCode(err)
	case exists && !isShare, !exists && mustExist:
		return kerr.GroupIDNotFound.Code
	case members > 0:
		return kerr.NonEmptyGroup.Code
	}
	return 0
}

// shareProposeCode is the code of a failed proposal: a log below
// metadata level 9 cannot hold share state.
func shareProposeCode(err error) int16 {
	if errors.Is(err, meta.ErrNotAtLevel) {
		return kerr.UnsupportedVersion.Code
	}
	return kerr.UnknownServerError.Code
}
