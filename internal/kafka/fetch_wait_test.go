package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/fetch"
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
	st := a.obs.waitFetchWaited(t)
	if st.Wakeups != 1 || st.PartitionsRechecked != 1 {
		t.Fatalf("the long poll woke %d times and read %d partitions again; want 1 and 1 (partition 2's commit)",
			st.Wakeups, st.PartitionsRechecked)
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
		if f.waits != (WaitStats{Wakeups: 1, PartitionsRechecked: 1}) {
			t.Fatalf("waits %+v, want one wake-up reading one partition", f.waits)
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
		if err := f.wait(ctx, db, n, time.Minute); err != nil || time.Since(start) != 0 || f.waits.Wakeups != 0 {
			t.Fatalf("wait = %v after %v, %+v", err, time.Since(start), f.waits)
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

// countingFetcher records the partitions read, and can act before a
// read.
type countingFetcher struct {
	Fetcher
	mu     sync.Mutex
	reads  []int32
	before func(partition int32)
}

func (c *countingFetcher) ReadUpTo(ctx context.Context, view *meta.View, id meta.TopicID, partition int32, offset int64, maxBytes int32, upTo int64) (fetch.FetchResult, error) {
	c.mu.Lock()
	c.reads = append(c.reads, partition)
	before := c.before
	c.mu.Unlock()
	if before != nil {
		before(partition)
	}
	return c.Fetcher.ReadUpTo(ctx, view, id, partition, offset, maxBytes, upTo)
}

func (c *countingFetcher) take() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = nil
	return r
}

// After the wait a fetch reads again only the partitions that changed;
// the others keep the answer of the first read, records included.
func TestFetchRereadsOnlyChanged(t *testing.T) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	a, dp := newDataAgent(t, nil, withSpy(spy))
	cf := &countingFetcher{Fetcher: dp.Reader}
	a.Deps.Fetch = cf
	id := a.createTopic(t, "few", 6, nil)
	small := batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 10})
	big := batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 2000, Seed: 1})
	a.produceRaw(t, "few", 1, small)
	var parts []fetchPartReq
	for p := range int32(6) {
		parts = append(parts, fetchPartReq{id: id, partition: p, maxBytes: 1 << 20})
	}
	c := dial(t, a.addr)
	write(t, c, frameFor(1, fetchReq(16, 30_000, int32(len(small)+len(big)), 1<<20, parts...)))
	spy.waitCall(t)
	if got := cf.take(); len(got) != 6 {
		t.Fatalf("first read read %v, want the 6 partitions", got)
	}
	a.produceRaw(t, "few", 4, big)

	resp := kmsg.NewPtrFetchResponse()
	decodeResponse(t, readFrame(t, c), resp, 16)
	if got := cf.take(); len(got) != 1 || got[0] != 4 {
		t.Fatalf("the read after the wait read %v, want partition 4 alone", got)
	}
	for p, sp := range fetchPartitions(resp) {
		wantHWM, wantRecords := int64(0), 0
		switch p {
		case 1:
			wantHWM, wantRecords = 1, len(small)
		case 4:
			wantHWM, wantRecords = 1, len(big)
		}
		if sp.ErrorCode != 0 || sp.HighWatermark != wantHWM || sp.LastStableOffset != wantHWM || len(sp.RecordBatches) != wantRecords {
			t.Fatalf("partition %d: code %d hwm %d lso %d, %d record bytes; want hwm %d, %d bytes",
				p, sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset, len(sp.RecordBatches), wantHWM, wantRecords)
		}
	}
}

// A commit that lands after the first read of its partition but before
// the fetch watches it is not lost: the check after watching sees the
// partition's offsets differ from the answer, and it is read again
// (with the partitions that check did not get to).
func TestFetchChangeBeforeWatch(t *testing.T) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	a, dp := newDataAgent(t, nil, withSpy(spy))
	cf := &countingFetcher{Fetcher: dp.Reader}
	a.Deps.Fetch = cf
	id := a.createTopic(t, "race", 3, nil)
	batch := batchtest.Build(t, batchtest.Options{Records: 3})
	var once sync.Once
	cf.before = func(p int32) {
		if p == 2 {
			// Partition 1 was read; commit to it before the wait.
			once.Do(func() { a.produceRaw(t, "race", 1, batch) })
		}
	}
	c := dial(t, a.addr)
	write(t, c, frameFor(1, fetchReq(16, 30_000, 1, 1<<20,
		fetchPartReq{id: id, partition: 0, maxBytes: 1 << 20},
		fetchPartReq{id: id, partition: 1, maxBytes: 1 << 20},
		fetchPartReq{id: id, partition: 2, maxBytes: 1 << 20})))
	resp := kmsg.NewPtrFetchResponse()
	decodeResponse(t, readFrame(t, c), resp, 16)
	got := fetchPartitions(resp)
	if got[1].HighWatermark != 3 || len(got[1].RecordBatches) == 0 {
		t.Fatalf("partition 1: hwm %d, %d record bytes; want the commit made before the wait", got[1].HighWatermark, len(got[1].RecordBatches))
	}
	if reads := cf.take(); !slices.Equal(reads, []int32{0, 1, 2, 1, 2}) {
		t.Fatalf("reads %v, want the three partitions, then 1 and 2 again", reads)
	}
}
