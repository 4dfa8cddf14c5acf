// DescribeShareGroupOffsets: v0-1 (KIP-932; v1 Lag, KIP-1226)
//   - StartOffset is the share-partition start offset (SPSO), -1 (and
//     Lag -1) for a partition the group never fetched; Lag is the high
//     watermark less the SPSO less the window's acknowledged and
//     archived records. Topics null describes every topic the group has
//     state for, leaving out those the client may not describe.
//   - NOT_COORDINATOR from the group coordinator (Deps.ShareGroups)
//     when this agent does not coordinate the group; the state itself
//     is read from this agent's copy of the metadata.
//   - ACLs (authz.go): Describe on the group, Describe on each topic.

package kafka

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	if _, err := r.Deps.meta(); err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	z := r.authz()
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if g.ErrorCode = z.groupCode(kmsg.ACLOperationDescribe, rg.GroupID); g.ErrorCode == 0 {
			g.ErrorCode = describeShareOffsets(ctx, r, z, rg, &g)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func describeShareOffsets(ctx context.Context, r *Request, z authz, rg kmsg.DescribeShareGroupOffsetsRequestGroup, g *kmsg.DescribeShareGroupOffsetsResponseGroup) int16 {
	exists, isShare, _, err := r.Deps.shareGroups().ShareGroupState(ctx, rg.GroupID)
	switch {
	case err != nil:
		return shareGroupErrCode(err)
	case exists && !isShare:
		return kerr.GroupIDNotFound.Code
	}
	view := r.Deps.Meta.View()
	defer view.Close()
	states, err := view.ShareStates(rg.GroupID)
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	type key struct {
		id meta.TopicID
		p  int32
	}
	byPart := make(map[key]meta.ShareState, len(states))
	for _, s := range states {
		byPart[key{s.TopicID, s.Partition}] = s
	}
	topics := rg.Topics
	all := topics == nil
	if all {
		// Every topic the group has state for, by name.
		parts := map[string][]int32{}
		for _, s := range states {
			t, ok, err := view.TopicByID(s.TopicID)
			if err != nil || !ok {
				continue
			}
			parts[t.Name] = append(parts[t.Name], s.Partition)
		}
		for _, name := range slices.Sorted(mapsKeys(parts)) {
			topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: parts[name]})
		}
	}
	for _, rt := range topics {
		code := z.topicCode(kmsg.ACLOperationDescribe, rt.Topic)
		if code != 0 && all {
			continue
		}
		t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		t.Topic = rt.Topic
		topic, known, err := view.Topic(rt.Topic)
		if err != nil {
			return kerr.UnknownServerError.Code
		}
		if known {
			t.TopicID = topic.ID
		}
		for _, p := range rt.Partitions {
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset, rp.Lag, rp.ErrorCode = p, -1, -1, code
			if code == 0 && known {
				if st, ok := byPart[key{topic.ID, p}]; ok {
					rp.StartOffset = st.StartOffset
					if ps, ok, err := view.Partition(topic.ID, p); err == nil && ok {
						rp.Lag = shareLag(st, ps.HighWatermark())
					}
				}
			}
			t.Partitions = append(t.Partitions, rp)
		}
		g.Topics = append(g.Topics, t)
	}
	return 0
}

// shareLag is Kafka's share-partition lag: the high watermark less the
// SPSO less the records of the window already acknowledged or archived.
func shareLag(st meta.ShareState, hw int64) int64 {
	done := int64(0)
	for _, r := range st.Runs {
		if r.State != meta.ShareAcknowledged && r.State != meta.ShareArchived {
			continue
		}
		if hi := min(r.Last, hw-1); hi >= r.First {
			done += hi - r.First + 1
		}
	}
	return max(0, hw-st.StartOffset-done)
}

// shareGroupErrCode is the group error code of a ShareGroupState error.
func shareGroupErrCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

func mapsKeys[V any](m map[string]V) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
