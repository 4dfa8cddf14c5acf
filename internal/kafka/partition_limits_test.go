package kafka

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// createTopicsReq asks for one topic of n partitions.
func createTopicsReq(name string, n int32, validateOnly bool) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.ValidateOnly = validateOnly
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, -1
	req.Topics = append(req.Topics, rt)
	return req
}

func createTopicCode(t *testing.T, a *testAgent, name string, n int32, validateOnly bool) int16 {
	t.Helper()
	resp := a.rawRequest(t, createTopicsReq(name, n, validateOnly)).(*kmsg.CreateTopicsResponse)
	return resp.Topics[0].ErrorCode
}

// TestPartitionLimitDefault checks the default bound on one topic: a
// topic of more partitions than DefaultMaxPartitionsPerTopic is refused
// with POLICY_VIOLATION, and nothing is created.
func TestPartitionLimitDefault(t *testing.T) {
	a := newTestAgent(t)
	if code := createTopicCode(t, a, "huge", DefaultMaxPartitionsPerTopic+1, false); code != kerr.PolicyViolation.Code {
		t.Fatalf("a topic of %d partitions: code %d, want POLICY_VIOLATION", DefaultMaxPartitionsPerTopic+1, code)
	}
	if _, ok := a.topic(t, "huge"); ok {
		t.Fatal("the refused topic exists")
	}
}

// TestPartitionLimits checks that every way of making partitions is held
// to the per-topic and cluster limits with POLICY_VIOLATION.
func TestPartitionLimits(t *testing.T) {
	a, _ := newDataAgent(t, nil, withAutoCreate(3), withDeps(func(d *Deps) {
		d.MaxPartitionsPerTopic = 10
		d.MaxPartitions = 25
	}))
	policy := kerr.PolicyViolation.Code
	steps := []struct {
		name string
		do   func() int16
		want int16
	}{
		{"topic over the per-topic limit", func() int16 { return createTopicCode(t, a, "eleven", 11, false) }, policy},
		{"validate-only over the per-topic limit", func() int16 { return createTopicCode(t, a, "eleven", 11, true) }, policy},
		{"first topic", func() int16 { return createTopicCode(t, a, "a", 10, false) }, 0},
		{"second topic", func() int16 { return createTopicCode(t, a, "b", 10, false) }, 0},
		{"third would make 30", func() int16 { return createTopicCode(t, a, "c", 10, false) }, policy},
		{"validate-only third", func() int16 { return createTopicCode(t, a, "c", 10, true) }, policy},
		{"a smaller third fits", func() int16 { return createTopicCode(t, a, "c", 2, false) }, 0},
		{"growing past the per-topic limit", func() int16 { return createPartitionsCode(t, a, "c", 11) }, policy},
		{"growing to 26 in the cluster", func() int16 { return createPartitionsCode(t, a, "c", 6) }, policy},
		{"growing to 25", func() int16 { return createPartitionsCode(t, a, "c", 5) }, 0},
		{"auto-creation by Metadata", func() int16 {
			req := metadataReq(12, []string{"auto-md"})
			req.AllowAutoTopicCreation = true
			return a.rawRequest(t, req).(*kmsg.MetadataResponse).Topics[0].ErrorCode
		}, policy},
		{"auto-creation by Produce", func() int16 {
			batch := batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 10})
			resp := a.rawRequest(t, produceReq(9, -1, nil, rawPart{"auto-produce", 0, batch})).(*kmsg.ProduceResponse)
			return producePartitions(resp)[0].ErrorCode
		}, policy},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: code %d, want %d", s.name, got, s.want)
		}
	}
	for _, name := range []string{"eleven", "auto-md", "auto-produce"} {
		if _, ok := a.topic(t, name); ok {
			t.Errorf("refused topic %q exists", name)
		}
	}
	if tp, _ := a.topic(t, "c"); tp.Partitions != 5 {
		t.Errorf("topic c has %d partitions, want 5", tp.Partitions)
	}
}

// TestPartitionLimitConcurrent checks that creations racing on one agent
// cannot pass the cluster limit together.
func TestPartitionLimitConcurrent(t *testing.T) {
	a := newTestAgent(t, withDeps(func(d *Deps) { d.MaxPartitions = 25 }))
	const racers = 12
	codes := make([]int16, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { codes[i] = createTopicCode(t, a, "race-"+string(rune('a'+i)), 5, false) })
	}
	wg.Wait()
	created := 0
	for _, c := range codes {
		switch c {
		case 0:
			created++
		case kerr.PolicyViolation.Code:
		default:
			t.Fatalf("code %d", c)
		}
	}
	if created != 5 {
		t.Fatalf("%d topics of 5 partitions created under a limit of 25, want 5", created)
	}
}

func createPartitionsCode(t *testing.T, a *testAgent, topic string, total int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, total
	req.Topics = append(req.Topics, rt)
	return a.rawRequest(t, req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
}
