package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// TestInternalTopic: __consumer_offsets is listed as internal, and no
// client may write to it or delete it.
func TestInternalTopic(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	res, err := a.Replica.ProposeBatch(a.ctx(t), []meta.Command{ConsumerOffsetsCommand()})
	if err != nil || res[0].Code != 0 {
		t.Fatalf("creating %s: %v %v", ConsumerOffsetsTopic, err, res)
	}
	a.createTopic(t, "plain", 1, nil)

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	resp := a.request(t, md).(*kmsg.MetadataResponse)
	internal := map[string]bool{}
	parts := map[string]int{}
	for _, tp := range resp.Topics {
		internal[*tp.Topic] = tp.IsInternal
		parts[*tp.Topic] = len(tp.Partitions)
	}
	if !internal[ConsumerOffsetsTopic] || internal["plain"] || parts[ConsumerOffsetsTopic] != ConsumerOffsetsPartitions {
		t.Errorf("Metadata: internal %v, partitions %v", internal, parts)
	}

	batch := batchtest.Build(t, batchtest.Options{Records: 1})
	pr := a.rawRequest(t, produceReq(9, -1, nil, rawPart{ConsumerOffsetsTopic, 0, batch}, rawPart{"plain", 0, batch})).(*kmsg.ProduceResponse)
	got := producePartitions(pr)
	if got[0].ErrorCode != kerr.InvalidTopicException.Code || got[1].ErrorCode != 0 {
		t.Errorf("produce: internal topic %v, plain %v", kerr.ErrorForCode(got[0].ErrorCode), kerr.ErrorForCode(got[1].ErrorCode))
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(ConsumerOffsetsTopic)
	del.Topics = append(del.Topics, dt)
	dresp := a.request(t, del).(*kmsg.DeleteTopicsResponse)
	if code := dresp.Topics[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Errorf("delete: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(code))
	}
	if _, ok := a.topic(t, ConsumerOffsetsTopic); !ok {
		t.Error("the internal topic was deleted")
	}
}
