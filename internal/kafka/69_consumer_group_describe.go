// ConsumerGroupDescribe: v0-1 (KIP-848)
//   - Group epoch, assignment epoch, assignor, and per member its epoch,
//     subscription, current and target assignment; v1 MemberType
//     (always consumer: classic members are not mixed into these groups).
//   - An unknown or classic group is GROUP_ID_NOT_FOUND.
//   - IncludeAuthorizedOperations answers what an authorizer-less Kafka
//     allows.
//   - group.version finalized at 0: UNSUPPORTED_VERSION for every group,
//     as Kafka answers without the consumer protocol.
//   - ACLs (authz.go): Describe on each group, else
//     GROUP_AUTHORIZATION_FAILED; authorized operations are the client's.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	if !r.Deps.groupProtocolEnabled() {
		for _, id := range req.Groups {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = id, kerr.UnsupportedVersion.Code
			dg.ErrorMessage = strPtr("group.version is 0: the consumer group protocol (KIP-848) is off")
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil
	}
	z := r.authz()
	for _, d := range g.ConsumerGroupDescribe(ctx, req.Groups) {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group, dg.ErrorCode, dg.ErrorMessage = d.Group, d.Code, strPtr(d.Message)
		if code := z.groupCode(kmsg.ACLOperationDescribe, d.Group); code != 0 {
			dg.ErrorCode, dg.ErrorMessage = code, nil
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = z.groupOps(d.Group)
		}
		dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch = m.MemberID, m.MemberEpoch
			dm.InstanceID, dm.RackID = strPtr(m.InstanceID), strPtr(m.RackID)
			dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
			dm.SubscribedTopics = m.SubscribedTopics
			if dm.SubscribedTopics == nil {
				dm.SubscribedTopics = []string{}
			}
			dm.SubscribedTopicRegex = strPtr(m.SubscribedTopicRegex)
			dm.Assignment = consumerAssignment(m.Assignment)
			dm.TargetAssignment = consumerAssignment(m.TargetAssignment)
			if req.Version >= 1 {
				dm.MemberType = 1 // a KIP-848 consumer
			}
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}

func consumerAssignment(ts []group.ConsumerTopic) kmsg.Assignment {
	var out kmsg.Assignment
	for _, t := range ts {
		at := kmsg.NewAssignmentTopicPartition()
		at.TopicID, at.Topic, at.Partitions = [16]byte(t.TopicID), t.Topic, t.Partitions
		out.TopicPartitions = append(out.TopicPartitions, at)
	}
	return out
}
