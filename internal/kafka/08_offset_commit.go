// OffsetCommit: v0-10
//   - Group commits are checked against the member and generation
//     (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while
//     the generation syncs, FENCED_INSTANCE_ID v7+); generation -1 from an
//     empty or unknown group is a standalone commit. v0 has neither.
//   - A topic or partition that does not exist is
//     UNKNOWN_TOPIC_OR_PARTITION; metadata above offset.metadata.max.bytes
//     OFFSET_METADATA_TOO_LARGE.
//   - v1 per-partition Timestamp is stored as the commit time; otherwise
//     the commit time is the log's. v2-4 RetentionTimeMillis (other than
//     -1) gives the offsets their own expiry. v6+ LeaderEpoch is stored.
//   - A connection's commits are queued in request order (InOrder), so a
//     later commit is never overwritten by an earlier one; commits of all
//     connections share log entries. An OffsetFetch waits for the commits
//     its connection sent before it (commitsInFlight).
//   - v10 (KIP-848): topics by id; an id that names no topic is
//     UNKNOWN_TOPIC_ID for each of its partitions, and the answer names
//     topics by the ids asked. Committed offsets are still kept by topic
//     name, so a topic deleted and made again under its name does not
//     inherit them through an id (Kafka keys them by name too).
//   - ACLs (authz.go): Read on the group (else GROUP_AUTHORIZATION_FAILED
//     for every partition), Read on each topic (else
//     TOPIC_AUTHORIZATION_FAILED); what fails is not committed.

package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(8, 0, 10, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.OffsetCommitRequest)
	// v10 names topics by id: name them, in a copy (the request stays
	// as the client sent it, for the answer).
	topics := req.Topics
	var unknownID []bool
	if req.Version >= 10 {
		topics, unknownID, err = commitTopicNames(r, req.Topics)
		if err != nil {
			return nil, err
		}
	}
	// ACLs: Read on the group, then Read on each topic; what fails is
	// not committed.
	z := r.authz()
	groupCode := z.groupCode(kmsg.ACLOperationRead, req.Group)
	denied := z.deniedTopics(kmsg.ACLOperationRead, func(yield func(string) bool) {
		for i, rt := range topics {
			if (unknownID == nil || !unknownID[i]) && !yield(rt.Topic) {
				return
			}
		}
	})
	allowed := *req
	allowed.Topics = nil
	for i, rt := range topics {
		if groupCode == 0 && (unknownID == nil || !unknownID[i]) && !denied[rt.Topic] {
			allowed.Topics = append(allowed.Topics, rt)
		}
	}
	var codes []int16
	if len(allowed.Topics) > 0 {
		cr := commitRequest(&allowed)
		var wait func(context.Context) []int16
		finish := func() {}
		if err := r.InOrder(ctx, func() {
			wait = g.OffsetCommit(ctx, cr)
			if r.Conn != nil {
				finish = r.Conn.commits.start()
			}
		}); err != nil {
			return nil, err
		}
		codes = wait(ctx)
		finish()
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	k := 0
	for i, rt := range topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case groupCode != 0:
				sp.ErrorCode = groupCode
			case unknownID != nil && unknownID[i]:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case denied[rt.Topic]:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			default:
				sp.ErrorCode = codes[k]
				k++
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// commitRequest is the commit req asks for in its version's terms.
func commitRequest(req *kmsg.OffsetCommitRequest) group.CommitRequest {
	cr := group.CommitRequest{
		Group:       req.Group,
		MemberID:    req.MemberID,
		InstanceID:  req.InstanceID,
		Generation:  req.Generation,
		RetentionMs: -1,
		Topics:      make([]group.CommitTopic, len(req.Topics)),
	}
	if req.Version == 0 {
		cr.MemberID, cr.Generation = "", -1
	}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		cr.RetentionMs = req.RetentionTimeMillis
	}
	for i, rt := range req.Topics {
		ct := group.CommitTopic{Topic: rt.Topic, Partitions: make([]group.CommitPartition, len(rt.Partitions))}
		for j, rp := range rt.Partitions {
			cp := group.CommitPartition{
				Partition:   rp.Partition,
				Offset:      rp.Offset,
				LeaderEpoch: -1,
				Metadata:    strOr(rp.Metadata),
				Timestamp:   -1,
			}
			if req.Version >= 6 {
				cp.LeaderEpoch = rp.LeaderEpoch
			}
			if req.Version == 1 && rp.Timestamp != -1 {
				cp.Timestamp = rp.Timestamp
			}
			ct.Partitions[j] = cp
		}
		cr.Topics[i] = ct
	}
	return cr
}

// commitTopicNames returns a copy of v10 topics with their names filled
// in from their ids, and which ids name no topic.
func commitTopicNames(r *Request, topics []kmsg.OffsetCommitRequestTopic) ([]kmsg.OffsetCommitRequestTopic, []bool, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, nil, err
	}
	view := db.View()
	defer view.Close()
	named := slices.Clone(topics)
	unknown := make([]bool, len(topics))
	for i := range named {
		t, ok, err := view.TopicByID(meta.TopicID(named[i].TopicID))
		if err != nil {
			return nil, nil, fmt.Errorf("kafka: offset commit: reading topic %v: %w", meta.TopicID(named[i].TopicID), err)
		}
		if ok {
			named[i].Topic = t.Name
		} else {
			unknown[i] = true
		}
	}
	return named, unknown, nil
}
