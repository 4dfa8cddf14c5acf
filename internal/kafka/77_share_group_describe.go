// ShareGroupDescribe: v0-1 (KIP-932)
//   - State (Empty or Stable), group epoch, assignment epoch (the same:
//     share groups have no revocation phase), assignor "simple", and per
//     member its epoch, rack, client, subscription and assignment.
//   - An unknown group, or a classic or consumer group, is
//     GROUP_ID_NOT_FOUND; a group another agent coordinates
//     NOT_COORDINATOR.
//   - IncludeAuthorizedOperations answers the client's operations on the
//     group.
//   - ACLs (authz.go): Describe on each group, else
//     GROUP_AUTHORIZATION_FAILED; then Describe on every assigned or
//     subscribed topic, else the group is TOPIC_AUTHORIZATION_FAILED as a
//     whole, as Kafka redacts it.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(77, 0, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	z := r.authz()
	for _, d := range g.ShareGroupDescribe(ctx, req.GroupIDs) {
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID, dg.ErrorCode, dg.ErrorMessage = d.Group, d.Code, strPtr(d.Message)
		if code := z.groupCode(kmsg.ACLOperationDescribe, d.Group); code != 0 {
			dg.ErrorCode, dg.ErrorMessage = code, nil
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if d.Code != 0 {
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if !shareTopicsDescribable(z, d.Members) {
			dg.ErrorCode = kerr.TopicAuthorizationFailed.Code
			dg.ErrorMessage = strPtr("The group has described topic(s) that the client is not authorized to describe.")
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = z.groupOps(d.Group)
		}
		dg.GroupState, dg.GroupEpoch, dg.AssignmentEpoch, dg.Assignor = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			dm := kmsg.NewShareGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch = m.MemberID, m.MemberEpoch
			dm.RackID = strPtr(m.RackID)
			dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
			dm.SubscribedTopicNames = m.SubscribedTopics
			if dm.SubscribedTopicNames == nil {
				dm.SubscribedTopicNames = []string{}
			}
			for _, t := range m.Assignment {
				at := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				at.TopicID, at.Topic, at.Partitions = [16]byte(t.TopicID), t.Topic, t.Partitions
				dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, at)
			}
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}

// shareTopicsDescribable: the client may Describe every topic the
// group's members subscribe to or are assigned.
func shareTopicsDescribable(z authz, ms []group.DescribedShareMember) bool {
	for _, m := range ms {
		for _, t := range m.SubscribedTopics {
			if !z.topic(kmsg.ACLOperationDescribe, t) {
				return false
			}
		}
		for _, t := range m.Assignment {
			if !z.topic(kmsg.ACLOperationDescribe, t.Topic) {
				return false
			}
		}
	}
	return true
}
