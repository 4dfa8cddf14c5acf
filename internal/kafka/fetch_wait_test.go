package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// A long poll wakes only for the partitions it fetches, and a wake-up
// reads again only the partitions that changed. Counted by the
// request's WaitStats, not timed.
func TestFetchWaitsOnItsPartitions(t *testing.T) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	a, _ := newDataAgent(t, nil, withSpy(spy))
	id := a.createTopic(t, "mine", 4, nil)
	a.createTopic(t, "other", 1, nil)
	batch := batchtest.Build(t, batchtest.Options{Records: 2})

	c := dial(t, a.addr)
	write(t, c, frameFor(1, fetchReq(16, 30_000, 1, 1<<20,
		fetchPartReq{id: id, partition: 0, maxBytes: 1 << 20},
		fetchPartReq{id: id, partition: 1, maxBytes: 1 << 20},
		fetchPartReq{id: id, partition: 2, maxBytes: 1 << 20})))
	spy.waitCall(t)
	// Commits to a partition of the same topic the fetch does not ask
	// for, and to another topic, each applied before the next.
	for range 3 {
		a.produceRaw(t, "mine", 3, batch)
		a.produceRaw(t, "other", 0, batch)
	}
	a.produceRaw(t, "mine", 2, batch)

	resp := kmsg.NewPtrFetchResponse()
	decodeResponse(t, readFrame(t, c), resp, 16)
	got := fetchPartitions(resp)
	if len(got) != 3 || got[2].HighWatermark != 2 || len(got[2].RecordBatches) == 0 {
		t.Fatalf("response: %+v", got)
	}
	st := a.obs.waitRequest(t, 1, func(RequestStats) bool { return true })
	if st.Waits.Wakeups != 1 || st.Waits.PartitionsRechecked != 1 {
		t.Fatalf("the long poll woke %d times and read %d partitions again; want 1 and 1 (partition 2's commit)",
			st.Waits.Wakeups, st.Waits.PartitionsRechecked)
	}
}

// Deleting a topic ends a long poll on it at once, with the error its
// partitions now get.
func TestFetchWaitTopicDeleted(t *testing.T) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	a, _ := newDataAgent(t, nil, withSpy(spy))
	id := a.createTopic(t, "doomed", 2, nil)
	a.createTopic(t, "kept", 1, nil)

	c := dial(t, a.addr)
	write(t, c, frameFor(1, fetchReq(16, 30_000, 1, 1<<20,
		fetchPartReq{id: id, partition: 1, maxBytes: 1 << 20})))
	spy.waitCall(t)
	resps, err := a.Admin.DeleteTopics(a.ctx(t), "doomed")
	if err != nil || resps["doomed"].Err != nil {
		t.Fatalf("DeleteTopics: %v %v", err, resps["doomed"].Err)
	}
	resp := kmsg.NewPtrFetchResponse()
	decodeResponse(t, readFrame(t, c), resp, 16)
	got := fetchPartitions(resp)
	if len(got) != 1 || got[0].ErrorCode == 0 {
		t.Fatalf("response: %+v", got)
	}
	if e := kerr.ErrorForCode(got[0].ErrorCode); e != kerr.UnknownTopicID && e != kerr.UnknownTopicOrPartition {
		t.Fatalf("error %v, want UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION", e)
	}
}
