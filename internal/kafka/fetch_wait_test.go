package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/partwatch"
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

// haltingNotifier is a registry whose replica halted once err is set.
type haltingNotifier struct {
	*partwatch.Registry
	err atomic.Pointer[error]
}

func (h *haltingNotifier) Err() error {
	if p := h.err.Load(); p != nil {
		return *p
	}
	return nil
}

// The long poll waits on notifications only (no timer loop): it returns
// after exactly MaxWait when nothing it watches gets ready, at the
// notification that makes it ready, when ctx ends, and when the replica
// halts. Run on synctest's clock over an in-memory copy, with the
// registry notified by hand.
func TestLongPollWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := metatest.New(time.Now)
		ctx := context.Background()
		res, err := db.Propose(ctx, meta.CreateTopic{Name: "t", Partitions: 2})
		if err != nil || res.Code != 0 {
			t.Fatalf("CreateTopic: %v %v", err, res.Err())
		}
		id := res.TopicID
		p0, p1 := meta.PartitionRef{TopicID: id, Partition: 0}, meta.PartitionRef{TopicID: id, Partition: 1}
		objects := 0
		commit := func(p int32) {
			objects++
			co := meta.CommitObject{ObjectKey: fmt.Sprintf("o%d", objects), ObjectSize: 100, Batches: []meta.CommitBatch{{
				TopicID: id, Partition: p, Length: 100, Records: 1, BatchCount: 1,
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}}
			if res, err := db.Propose(ctx, co); err != nil || res.Code != 0 {
				t.Errorf("commit: %v %v", err, res.Err())
			}
		}
		answer := func(minBytes int32, offset0, offset1 int64) *fetchAnswer {
			req := fetchReq(16, 60_000, minBytes, 1<<20,
				fetchPartReq{id: id, partition: 0, offset: offset0, maxBytes: 1 << 20},
				fetchPartReq{id: id, partition: 1, offset: offset1, maxBytes: 1 << 20})
			f := &fetchAnswer{r: &Request{Deps: &Deps{}}, req: req}
			v := db.View()
			defer v.Close()
			f.plan(v, req.ResponseKind().(*kmsg.FetchResponse))
			return f
		}
		n := &haltingNotifier{Registry: partwatch.New()}

		// Never ready: a change to partition 1 that does not make it
		// ready wakes it once, to read partition 1 alone; it returns
		// after exactly MaxWait.
		f := answer(1000, 0, 0)
		go func() {
			time.Sleep(10 * time.Second)
			commit(1)
			n.Notify(meta.Changes{Partitions: []meta.PartitionRef{p1}})
		}()
		start := time.Now()
		if err := f.wait(ctx, db, n, time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Fatalf("wait = %v after %v", err, time.Since(start))
		}
		if f.r.waits != (WaitStats{Wakeups: 1, PartitionsRechecked: 1}) {
			t.Fatalf("waits %+v, want one wake-up reading one partition", f.r.waits)
		}

		// Ready at the notification of a commit to partition 0.
		f = answer(1, 0, 1)
		go func() {
			time.Sleep(time.Second)
			commit(0)
			commit(0)
			n.Notify(meta.Changes{Partitions: []meta.PartitionRef{p0}})
		}()
		start = time.Now()
		if err := f.wait(ctx, db, n, time.Minute); err != nil || time.Since(start) != time.Second {
			t.Fatalf("wait = %v after %v", err, time.Since(start))
		}

		// Ready at once: no wait, no wake-up.
		f = answer(1, 0, 0)
		start = time.Now()
		if err := f.wait(ctx, db, n, time.Minute); err != nil || time.Since(start) != 0 || f.r.waits.Wakeups != 0 {
			t.Fatalf("wait = %v after %v, %+v", err, time.Since(start), f.r.waits)
		}

		// ctx ends the wait.
		f = answer(1000, 2, 1)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := f.wait(cctx, db, n, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait = %v, want DeadlineExceeded", err)
		}

		// A halt wakes every watch and ends the wait with its error.
		halted := errors.New("halted")
		go func() {
			time.Sleep(time.Second)
			n.err.Store(&halted)
			n.NotifyAll()
		}()
		start = time.Now()
		if err := f.wait(ctx, db, n, time.Minute); err != halted || time.Since(start) != time.Second {
			t.Fatalf("wait = %v after %v, want the halt after 1s", err, time.Since(start))
		}
		if n.Len() != 0 {
			t.Fatalf("%d slots left registered", n.Len())
		}
	})
}
