package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// Produce v13 (KIP-516) names topics by id; an unknown id is
// UNKNOWN_TOPIC_ID and creates nothing, even with auto-creation on.
func TestProduceByTopicID(t *testing.T) {
	a, _ := newDataAgent(t, nil, withAutoCreate(1))
	id := a.createTopic(t, "by-id", 2, nil)
	var ghost [16]byte
	ghost[15] = 9

	req := produceReq(13, -1, nil,
		rawPart{"", 1, batchtest.Build(t, batchtest.Options{})},
		rawPart{"x", 0, batchtest.Build(t, batchtest.Options{})})
	req.Topics[0].TopicID, req.Topics[1].TopicID = id, ghost
	resp := a.rawRequest(t, req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].TopicID != id || resp.Topics[1].TopicID != ghost {
		t.Fatalf("answer topics: %+v", resp.Topics)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Partition != 1 || p.BaseOffset != 0 {
		t.Fatalf("by id: %+v %v", p, kerr.ErrorForCode(p.ErrorCode))
	}
	if p := resp.Topics[1].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if _, ok := a.topic(t, "x"); ok {
		t.Fatal("a topic was created for an unknown id")
	}
	// The record is where the id says: partition 1 of by-id.
	if got := a.consume(t, "by-id", 2, 1); got[0].Partition != 1 {
		t.Fatalf("consumed %+v", got[0])
	}
}
