package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/faultlog"
)

// syncSpy is a MetaDB over a replica that tells when a handler asks it
// to Sync, before the Sync runs.
type syncSpy struct {
	*replica.Replica
	syncing chan struct{}
}

func (s *syncSpy) Sync(ctx context.Context) error {
	select {
	case s.syncing <- struct{}{}:
	default:
	}
	return s.Replica.Sync(ctx)
}

// laggingAgent is a test agent whose handlers answer from a second copy
// of its log, one the test holds behind (its reads paused) while the
// first copy, standing in for another agent, commits: what an agent
// serves before it has applied the commits another agent acknowledged.
// Any agent serves any partition, so a consumer meets such an agent
// whenever Metadata moves a partition (an agent died, came back, or
// its lease ran out).
type laggingAgent struct {
	*testAgent
	dp     *dataPath
	lag    *syncSpy
	paused *faultlog.PausedLog
	id     meta.TopicID
}

func newLaggingAgent(t *testing.T, topic string) *laggingAgent {
	t.Helper()
	l := &laggingAgent{}
	l.testAgent, l.dp = newDataAgent(t, nil, func(c *agentConfig) {
		l.paused = faultlog.Paused(c.Log)
		r, err := replica.Open(context.Background(), replica.Config{Dir: t.TempDir(), Log: l.paused, WriterID: "agent-lagging", Logger: discardLogger})
		if err != nil {
			t.Fatalf("replica.Open: %v", err)
		}
		// Resumed before the copy closes (cleanups run last first), so
		// Close does not wait on a held read.
		t.Cleanup(func() { r.Close() })
		t.Cleanup(l.paused.Resume)
		l.lag = &syncSpy{Replica: r, syncing: make(chan struct{}, 1)}
		c.Server.Deps.Meta = l.lag
	})
	l.id = l.createTopic(t, topic, 1, nil)
	return l
}

// produce commits n records to partition 0 through the other copy.
func (l *laggingAgent) produce(t *testing.T, n int) {
	t.Helper()
	rcProduce(t, l.testAgent, l.dp, l.id, 0, batchtest.Build(t, batchtest.Options{Records: n, ValueBytes: 8}))
}

// fallBehind leaves the lagging copy with `applied` records of
// partition 0 while the log holds `applied+ahead`.
func (l *laggingAgent) fallBehind(t *testing.T, applied, ahead int) {
	t.Helper()
	l.produce(t, applied)
	if err := l.lag.Replica.Sync(l.ctx(t)); err != nil {
		t.Fatal(err)
	}
	l.paused.Pause()
	l.produce(t, ahead)
}

// ask sends req and returns its response. A handler that syncs its copy
// with the log first finds the reads held: the copy is let go on then,
// and the answer awaited.
func (l *laggingAgent) ask(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	got := make(chan kmsg.Response, 1)
	go func() {
		resp, err := l.Client.SeedBrokers()[0].Request(l.ctx(t), req)
		if err != nil {
			t.Errorf("%T: %v", req, err)
		}
		got <- resp
	}()
	select {
	case resp := <-got:
		return resp
	case <-l.lag.syncing:
		l.paused.Resume()
		return <-got
	}
}

// TestOffsetForLeaderEpochOnLaggingAgent: a consumer that moves to an
// agent after a metadata change validates its position with
// OffsetForLeaderEpoch. An agent that answered from a copy behind the log
// gave an end offset below records the consumer had already read, which
// kgo takes as truncation: it reports data loss and rewinds, re-reading
// records within one assignment. The history tests found it on etcd
// (nonmonotonic-poll). The answer must reflect every record acknowledged
// before the request.
func TestOffsetForLeaderEpochOnLaggingAgent(t *testing.T) {
	const topic = "lagging"
	l := newLaggingAgent(t, topic)
	l.fallBehind(t, 3, 3)

	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, 0, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := l.ask(t, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 || sp.EndOffset != 6 {
		t.Fatalf("epoch 0 ends at %d (%v); 6 records were acknowledged", sp.EndOffset, kerr.ErrorForCode(sp.ErrorCode))
	}
}

// TestFetchOnLaggingAgent: a consumer that read offsets 0-4 through one
// agent fetches offset 4 from another that has applied only 0-2. That
// agent answered OFFSET_OUT_OF_RANGE, which makes a consumer reset (kgo
// reports data loss). It must answer with the records from 4 on.
func TestFetchOnLaggingAgent(t *testing.T) {
	const topic = "lagging"
	l := newLaggingAgent(t, topic)
	l.fallBehind(t, 3, 3)

	resp := l.ask(t, fetchReq(16, 0, 1, 1<<20, fetchPartReq{topic: topic, id: l.id, partition: 0, offset: 4, maxBytes: 1 << 20}))
	sp := fetchPartitions(resp.(*kmsg.FetchResponse))[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch at 4 with 6 records acknowledged: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(sp.RecordBatches); err != nil || sp.HighWatermark != 6 || b.FirstOffset > 4 || b.FirstOffset+int64(b.LastOffsetDelta) < 4 {
		t.Fatalf("fetch at 4: high watermark %d, first batch %d-%d (%v); want 6 and a batch holding 4",
			sp.HighWatermark, b.FirstOffset, b.FirstOffset+int64(b.LastOffsetDelta), err)
	}
}
