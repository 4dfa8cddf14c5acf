package source

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// span is a partition's offsets: where it starts, and its last stable
// offset (where read_committed ends: nothing before it is in an open
// transaction).
type span struct {
	start, end int64
}

// spans lists topic's partitions' spans.
func spans(ctx context.Context, cl *kgo.Client, topic string) (map[int32]span, error) {
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("source: start offsets of %s: %w", topic, err)
	}
	out := map[int32]span{}
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1 // read_committed: the last stable offset
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	starts.Each(func(o kadm.ListedOffset) {
		out[o.Partition] = span{start: o.Offset}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = o.Partition
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("source: topic %s has no partitions", topic)
	}
	req.Topics = append(req.Topics, rt)
	// The client splits the request among the partitions' leaders and
	// merges their answers.
	shards := cl.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("source: end offsets of %s: %w", topic, sh.Err)
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("source: end offset of %s/%d: %w", topic, p.Partition, err)
				}
				s := out[p.Partition]
				s.end = p.Offset
				out[p.Partition] = s
			}
		}
	}
	return out, nil
}

func sortedPartitions[V any](m map[int32]V) []int32 {
	ps := make([]int32, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}
