package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeTP asks for topics (none: all) from cursor, at most limit
// partitions, and renders the answer: topic[error]:partitions..., then
// the next cursor.
func describeTP(t *testing.T, a *testAgent, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	resp := a.rawRequest(t, req).(*kmsg.DescribeTopicPartitionsResponse)
	var b strings.Builder
	for _, rt := range resp.Topics {
		fmt.Fprintf(&b, "%s", *rt.Topic)
		if rt.ErrorCode != 0 {
			fmt.Fprintf(&b, "[%s]", kerr.ErrorForCode(rt.ErrorCode).(*kerr.Error).Message)
		} else if rt.TopicID == ([16]byte{}) || rt.AuthorizedOperations == authorizedOpsOmitted {
			t.Errorf("%s: id %v, ops %d", *rt.Topic, rt.TopicID, rt.AuthorizedOperations)
		}
		b.WriteString(":")
		for _, p := range rt.Partitions {
			if p.LeaderID != testNodeID || p.LeaderEpoch != 0 || len(p.ISR) != 1 {
				t.Errorf("%s/%d: %+v", *rt.Topic, p.Partition, p)
			}
			fmt.Fprintf(&b, "%d", p.Partition)
		}
		b.WriteString(" ")
	}
	if c := resp.NextCursor; c != nil {
		fmt.Fprintf(&b, "next=%s/%d", c.Topic, c.Partition)
	}
	return strings.TrimSpace(b.String())
}

func TestDescribeTopicPartitions(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "a", 3, nil)
	a.createTopic(t, "b", 2, nil)
	a.createTopic(t, "c", 1, nil)
	cur := func(topic string, p int32) *kmsg.DescribeTopicPartitionsRequestCursor {
		return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: p}
	}
	for _, tc := range []struct {
		name   string
		limit  int32
		cursor *kmsg.DescribeTopicPartitionsRequestCursor
		topics []string
		want   string
	}{
		{"all", 2000, nil, nil, "a:012 b:01 c:0"},
		{"all, first page", 4, nil, nil, "a:012 b:0 next=b/1"},
		{"all, second page", 4, cur("b", 1), nil, "b:1 c:0"},
		{"page ends with a topic", 3, nil, nil, "a:012 next=b/0"},
		{"limit below 1 is 1", 0, nil, nil, "a:0 next=a/1"},
		{"named, sorted, once", 2000, nil, []string{"c", "a", "c", "nope"}, "a:012 c:0 nope[UNKNOWN_TOPIC_OR_PARTITION]:"},
		{"named from a cursor", 2000, cur("a", 2), []string{"c", "a"}, "a:2 c:0"},
		{"cursor topic not named", 2000, cur("b", 0), []string{"a"}, "a[INVALID_REQUEST]:"},
		{"negative cursor partition", 2000, cur("a", -1), []string{"a"}, "a[INVALID_REQUEST]:"},
	} {
		if got := describeTP(t, a, tc.limit, tc.cursor, tc.topics...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
