// OffsetFetch: v0-10
//   - A partition without a committed offset answers offset -1, leader
//     epoch -1 (v5+) and empty metadata; so does a topic that does not
//     exist.
//   - v2+: null Topics means every committed offset of the group, and
//     group errors (NOT_COORDINATOR) are top-level; v0-1 carry them on
//     every partition.
//   - v7 RequireStable (KIP-447): a partition with an offset committed in
//     a transaction that has not ended (TxnOffsetCommit before EndTxn)
//     answers UNSTABLE_OFFSET_COMMIT, offset -1, leader epoch -1 and empty
//     metadata, per partition as Kafka does; the client retries until the
//     transaction ends. The group's answer is read by the group
//     coordinator; the pending offsets are checked on views taken before
//     and after it, so a transaction that commits offsets while the answer
//     is read is seen too. v8+: several groups, each with its own error;
//     v9 MemberID and MemberEpoch are ignored (classic groups).
//   - The answer follows the OffsetCommits sent before it on the same
//     connection, as on a broker that answers a connection's requests in
//     turn.
//   - v10 (KIP-848): topics by id, asked and answered. An id that names
//     no topic answers its partitions UNKNOWN_TOPIC_ID (offset -1); an
//     all-topics answer names each topic by its current id, leaving out
//     offsets of a name no topic has any more (they have no id to give).
//   - ACLs (authz.go): Describe on the group, else
//     GROUP_AUTHORIZATION_FAILED; Describe on each topic, else
//     TOPIC_AUTHORIZATION_FAILED when named and left out when all are asked.

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

func init() { regKey(9, 0, 10, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	if req.Version < 10 {
		return offsetFetch(ctx, r, req)
	}
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	view := db.View()
	defer view.Close()
	named, unknown, err := offsetFetchNames(view, req)
	if err != nil {
		return nil, err
	}
	resp, err := offsetFetch(ctx, r, named)
	if err != nil {
		return nil, err
	}
	if err := offsetFetchIDs(view, resp.(*kmsg.OffsetFetchResponse), unknown); err != nil {
		return nil, err
	}
	return resp, nil
}

// offsetFetchNames returns a copy of v10 request req naming its topics,
// without the topics whose ids name none: those are returned by group.
func offsetFetchNames(view *meta.View, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchRequest, [][]kmsg.OffsetFetchRequestGroupTopic, error) {
	named := *req
	named.Groups = slices.Clone(req.Groups)
	unknown := make([][]kmsg.OffsetFetchRequestGroupTopic, len(req.Groups))
	for i := range named.Groups {
		rg := &named.Groups[i]
		if rg.Topics == nil {
			continue
		}
		topics := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(rg.Topics))
		for _, rt := range rg.Topics {
			t, ok, err := view.TopicByID(meta.TopicID(rt.TopicID))
			if err != nil {
				return nil, nil, fmt.Errorf("kafka: offset fetch: reading topic %v: %w", meta.TopicID(rt.TopicID), err)
			}
			if !ok {
				unknown[i] = append(unknown[i], rt)
				continue
			}
			rt.Topic = t.Name
			topics = append(topics, rt)
		}
		rg.Topics = topics
	}
	return &named, unknown, nil
}

// offsetFetchIDs names resp's topics by id, leaving out those no topic
// has now, and answers the unknown ids of each group without an error.
func offsetFetchIDs(view *meta.View, resp *kmsg.OffsetFetchResponse, unknown [][]kmsg.OffsetFetchRequestGroupTopic) error {
	for i := range resp.Groups {
		rg := &resp.Groups[i]
		topics := rg.Topics[:0]
		for _, rt := range rg.Topics {
			t, ok, err := view.Topic(rt.Topic)
			if err != nil {
				return fmt.Errorf("kafka: offset fetch: reading topic %q: %w", rt.Topic, err)
			}
			if ok {
				rt.TopicID = t.ID
				topics = append(topics, rt)
			}
		}
		rg.Topics = topics
		if rg.ErrorCode != 0 {
			continue
		}
		for _, u := range unknown[i] {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.TopicID = u.TopicID
			for _, p := range u.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
				rp.Metadata, rp.ErrorCode = kmsg.StringPtr(""), kerr.UnknownTopicID.Code
				t.Partitions = append(t.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, t)
		}
	}
	return nil
}

// offsetFetch answers req, whose topics are named.
func offsetFetch(ctx context.Context, r *Request, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	if err := r.awaitEarlierCommits(ctx); err != nil {
		return nil, err
	}
	z := r.authz()
	fetch := func() []group.FetchResult {
		res := g.OffsetFetch(ctx, offsetFetchRequests(req))
		authorizeOffsetFetch(z, req, res)
		return res
	}
	if req.Version < 7 || !req.RequireStable {
		return offsetFetchResponse(req, fetch()), nil
	}
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	before := db.View()
	defer before.Close()
	resp := offsetFetchResponse(req, fetch())
	after := db.View()
	defer after.Close()

	u := unstableOffsets{views: [2]pendingOffsets{{view: before}, {view: after}}}
	mark := func(name, topic string, partition int32, code *int16, offset *int64, epoch *int32, metadata **string) {
		if *code != 0 {
			return
		}
		if *code = u.check(name, topic, partition); *code == kerr.UnstableOffsetCommit.Code {
			*offset, *epoch, *metadata = -1, -1, kmsg.StringPtr("")
		}
	}
	if req.Version >= 8 {
		for i := range resp.Groups {
			rg := &resp.Groups[i]
			for j := range rg.Topics {
				rt := &rg.Topics[j]
				for k := range rt.Partitions {
					p := &rt.Partitions[k]
					if rg.ErrorCode == 0 {
						mark(rg.Group, rt.Topic, p.Partition, &p.ErrorCode, &p.Offset, &p.LeaderEpoch, &p.Metadata)
					}
				}
			}
		}
		return resp, nil
	}
	for j := range resp.Topics {
		rt := &resp.Topics[j]
		for k := range rt.Partitions {
			p := &rt.Partitions[k]
			if resp.ErrorCode == 0 {
				mark(req.Group, rt.Topic, p.Partition, &p.ErrorCode, &p.Offset, &p.LeaderEpoch, &p.Metadata)
			}
		}
	}
	return resp, nil
}

// offsetFetchRequests are the groups req asks about: v8+ several, each
// with null Topics for all its offsets; below, one, with null Topics for
// all from v2.
func offsetFetchRequests(req *kmsg.OffsetFetchRequest) []group.FetchRequest {
	if req.Version >= 8 {
		out := make([]group.FetchRequest, len(req.Groups))
		for i, rg := range req.Groups {
			out[i] = group.FetchRequest{Group: rg.Group, All: rg.Topics == nil}
			for _, t := range rg.Topics {
				out[i].Topics = append(out[i].Topics, group.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		return out
	}
	fr := group.FetchRequest{Group: req.Group, All: req.Topics == nil && req.Version >= 2}
	for _, t := range req.Topics {
		fr.Topics = append(fr.Topics, group.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
	}
	return []group.FetchRequest{fr}
}

// offsetFetchResponse answers req with res, one result per group asked.
// Below v2 there is no group-level error code: every partition asked
// for carries it.
// authorizeOffsetFetch applies the ACLs to what the coordinator found:
// a group the client may not Describe is GROUP_AUTHORIZATION_FAILED; a
// topic it may not Describe is TOPIC_AUTHORIZATION_FAILED when named
// and left out of an all-topics answer.
func authorizeOffsetFetch(z authz, req *kmsg.OffsetFetchRequest, res []group.FetchResult) {
	if z.az == nil {
		return
	}
	for i := range res {
		name, all := req.Group, req.Topics == nil
		if req.Version >= 8 {
			name, all = req.Groups[i].Group, req.Groups[i].Topics == nil
		}
		if !z.group(kmsg.ACLOperationDescribe, name) {
			res[i] = group.FetchResult{Code: kerr.GroupAuthorizationFailed.Code}
			continue
		}
		var kept []group.FetchTopic
		for _, ft := range res[i].Topics {
			if !z.topic(kmsg.ACLOperationDescribe, ft.Topic) {
				if all {
					continue
				}
				parts := make([]group.FetchPartition, len(ft.Partitions))
				for j, fp := range ft.Partitions {
					parts[j] = group.FetchPartition{Partition: fp.Partition, Offset: -1, LeaderEpoch: -1, Code: kerr.TopicAuthorizationFailed.Code}
				}
				ft.Partitions = parts
			}
			kept = append(kept, ft)
		}
		res[i].Topics = kept
	}
}

func offsetFetchResponse(req *kmsg.OffsetFetchRequest, res []group.FetchResult) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for i, rg := range req.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, res[i].Code
			for _, ft := range res[i].Topics {
				t := kmsg.NewOffsetFetchResponseGroupTopic()
				t.Topic = ft.Topic
				for _, fp := range ft.Partitions {
					p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					p.Partition, p.Offset, p.LeaderEpoch = fp.Partition, fp.Offset, fp.LeaderEpoch
					p.Metadata, p.ErrorCode = kmsg.StringPtr(fp.Metadata), fp.Code
					t.Partitions = append(t.Partitions, p)
				}
				g.Topics = append(g.Topics, t)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	got := res[0]
	if got.Code != 0 && req.Version < 2 {
		got.Topics = nil
		for _, t := range req.Topics {
			ft := group.FetchTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				ft.Partitions = append(ft.Partitions, group.FetchPartition{Partition: p, Offset: -1, LeaderEpoch: -1, Code: got.Code})
			}
			got.Topics = append(got.Topics, ft)
		}
	}
	if req.Version >= 2 {
		resp.ErrorCode = got.Code
	}
	for _, ft := range got.Topics {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = ft.Topic
		for _, fp := range ft.Partitions {
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch = fp.Partition, fp.Offset, fp.LeaderEpoch
			p.Metadata, p.ErrorCode = kmsg.StringPtr(fp.Metadata), fp.Code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// unstableOffsets answers whether a group's partition has a pending
// transactional offset in any of its views.
type unstableOffsets struct {
	views [2]pendingOffsets
}

type pendingOffsets struct {
	view   *meta.View
	topics topicCache
}

// check returns UNSTABLE_OFFSET_COMMIT's code for a partition with a
// pending offset, UNKNOWN_SERVER_ERROR's if the copy cannot be read, else 0.
func (u *unstableOffsets) check(name, topic string, partition int32) int16 {
	for i := range u.views {
		po := &u.views[i]
		po.topics.view = po.view
		t, ok, err := po.topics.get(topic)
		if err == nil && ok {
			ok, err = po.view.HasPendingTxnOffset(name, t.ID, partition)
		}
		switch {
		case err != nil:
			return kerr.UnknownServerError.Code
		case ok:
			return kerr.UnstableOffsetCommit.Code
		}
	}
	return 0
}
