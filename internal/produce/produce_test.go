package produce_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// sentBatch is what a test produced, to compare with what it fetches.
type sentBatch struct {
	opts batchtest.Options
	data []byte
}

// checkPartition walks a partition's fetched batches: offsets dense from
// 0 to hwm, each batch byte-identical to the one produced at its base
// offset (after the patched baseOffset), and its records decoding to the
// produced keys and values at the right offsets.
func checkPartition(t *testing.T, fetched []byte, sent map[int64]sentBatch, hwm int64) {
	t.Helper()
	next := int64(0)
	n := 0
	for rest := fetched; len(rest) > 0; n++ {
		b, r, err := recordbatch.Next(rest)
		if err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		rest = r
		if err := recordbatch.CheckCRC(b); err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		s, ok := sent[next]
		if !ok {
			t.Fatalf("batch %d at offset %d: nothing was produced with that base offset", n, next)
		}
		if !bytes.Equal(b[8:], s.data[8:]) {
			t.Fatalf("batch at offset %d differs from the one produced", next)
		}
		rb, recs := batchtest.Decode(t, b)
		if rb.FirstOffset != next {
			t.Fatalf("batch %d: base offset %d, want %d", n, rb.FirstOffset, next)
		}
		for i, rec := range recs {
			if int(rec.OffsetDelta) != i || !bytes.Equal(rec.Value, batchtest.Value(s.opts, i)) {
				t.Fatalf("offset %d: record %d (delta %d) value %q, want %q", next+int64(i), i, rec.OffsetDelta, rec.Value, batchtest.Value(s.opts, i))
			}
		}
		next += int64(len(recs))
	}
	if next != hwm || n != len(sent) {
		t.Fatalf("fetched %d batches up to offset %d; produced %d batches, high watermark %d", n, next, len(sent), hwm)
	}
}

func TestProduceFetchRoundTrip(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) objstore.Store
	}{
		{"memobj", func(t *testing.T) objstore.Store { return memobj.New() }},
		{"memobj-slow", func(t *testing.T) objstore.Store {
			return objstore.WithLatency(memobj.New(), objstore.FixedLatency(2*time.Millisecond))
		}},
		{"fileobj", func(t *testing.T) objstore.Store {
			s, err := fileobj.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			const producers, calls, partitions = 8, 25, 4
			counting := objstore.WithCounters(tc.open(t))
			e := newEnv(t, counting, partitions)
			cache := fetch.NewCache(64 << 20)
			p := e.pipeline(t, produce.Config{Cache: cache})

			var mu sync.Mutex
			sent := make([]map[int64]sentBatch, partitions)
			for i := range sent {
				sent[i] = make(map[int64]sentBatch)
			}
			var wg sync.WaitGroup
			errs := make(chan error, producers)
			for g := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					last := make(map[int32]int64)
					for c := range calls {
						// Each call spans two partitions, so calls are
						// multi-partition units.
						var batches []produce.Batch
						var opts []batchtest.Options
						for k := range 2 {
							part := int32((g + c + k) % partitions)
							b, o := e.batch(t, part, c%5+1, 100+c, uint64(g*10000+c*10+k))
							batches = append(batches, b)
							opts = append(opts, o)
						}
						res, err := p.Produce(testCtx(t), batches)
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						for i, r := range res {
							b := batches[i]
							if r.Code != 0 {
								errs <- fmt.Errorf("producer %d call %d: code %d", g, c, r.Code)
							}
							if prev, ok := last[b.Partition]; ok && r.BaseOffset <= prev {
								errs <- fmt.Errorf("producer %d: partition %d offset %d after %d", g, b.Partition, r.BaseOffset, prev)
							}
							last[b.Partition] = r.BaseOffset
							sent[b.Partition][r.BaseOffset] = sentBatch{opts: opts[i], data: b.Data}
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}

			puts := counting.Snapshot().Op(objstore.OpPut).Requests
			t.Logf("%d calls in %d objects, %d log entries with commits", producers*calls, puts, len(logCommits(t, e.log)))
			warm := fetch.NewReader(counting, cache)
			cold := fetch.NewReader(counting, nil)
			for part := range int32(partitions) {
				hwm := highWatermark(t, e.replica, e.topic, part)
				got := e.readAll(t, warm, part)
				checkPartition(t, got, sent[part], hwm)
				if coldGot := e.readAll(t, cold, part); !bytes.Equal(coldGot, got) {
					t.Fatalf("partition %d: cold read differs from warm read", part)
				}
			}
		})
	}
}

// TestGroupCommit holds the first upload so that every call submitted
// meanwhile joins one flush, then holds two uploads so that they end out
// of cut order: the committer still commits them in cut order, both in
// one log entry.
func TestGroupCommit(t *testing.T) {
	g := newGateStore(memobj.New())
	e := newEnv(t, g, 2)
	obs := &chanObserver{uploads: make(chan int, 64)}
	p := e.pipeline(t, produce.Config{FlushInterval: time.Hour, MaxConcurrentUploads: 2, FlushBytes: 1 << 20, Observer: obs})

	g.arm(true)
	const calls = 20
	var acks []*produce.Ack
	b, _ := e.batch(t, 0, 1, 10, 0)
	acks = append(acks, submit(t, p, b))
	first := g.next(t) // cut at once: nothing was uploading
	for i := 1; i < calls; i++ {
		b, _ := e.batch(t, int32(i%2), 1, 10, uint64(i))
		acks = append(acks, submit(t, p, b))
	}
	// The other calls wait in the open flush: the interval is an hour and
	// the first upload holds.
	if st := p.Stats(); st.Uploading != 1 {
		t.Fatalf("Stats = %+v, want one upload", st)
	}
	g.release(first)
	second := g.next(t) // the first upload ended, so the rest were cut
	g.release(second)
	for _, a := range acks {
		waitAck(t, a)
	}
	if puts := g.puts.Load(); puts != 2 {
		t.Fatalf("%d calls took %d PUTs, want 2", calls, puts)
	}

	// Two uploads in flight, ending in reverse order.
	big, _ := e.batch(t, 0, 1, 1<<20, 100) // reaches FlushBytes: cut while A uploads
	small, _ := e.batch(t, 0, 1, 10, 101)
	ackA := submit(t, p, small)
	keyA := g.next(t)
	ackB := submit(t, p, big)
	keyB := g.next(t)
	g.release(keyB)
	for size := 0; size < 1<<20; {
		size = recvUpload(t, obs.uploads)
	}
	// B is uploaded and ready; A still uploads.
	select {
	case <-ackB.Done():
		t.Fatal("the later flush was answered before the earlier one committed")
	default:
	}
	g.release(keyA)
	resA, resB := waitAck(t, ackA), waitAck(t, ackB)
	if resA[0].BaseOffset >= resB[0].BaseOffset {
		t.Fatalf("cut order lost: first flush at offset %d, second at %d", resA[0].BaseOffset, resB[0].BaseOffset)
	}
	commits := logCommits(t, e.log)
	if last := commits[len(commits)-1]; last != 2 {
		t.Fatalf("log entries carry %v commits, want the last to carry 2", commits)
	}
}

func TestUploadRetried(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		mode     objstore.FaultMode
		wantErr  error
	}{
		{"reply lost once", 1, objstore.FaultAfter, nil},
		{"failed once", 1, objstore.FaultBefore, nil},
		{"reply lost until the last try", produce.DefaultUploadAttempts - 1, objstore.FaultAfter, nil},
		{"failed every try", produce.DefaultUploadAttempts, objstore.FaultBefore, produce.ErrUpload},
		{"reply lost every try", produce.DefaultUploadAttempts, objstore.FaultAfter, produce.ErrUpload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := objstore.NewFaults(1)
			counting := objstore.WithCounters(objstore.WithFaults(memobj.New(), faults))
			e := newEnv(t, counting, 1)
			p := e.pipeline(t, produce.Config{})

			faults.FailNext(tc.failures, tc.mode, objstore.OpPut)
			b, o := e.batch(t, 0, 3, 50, 7)
			res, err := p.Produce(testCtx(t), []produce.Batch{b})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Produce = %v, want %v", err, tc.wantErr)
			}
			if puts := counting.Snapshot().Op(objstore.OpPut).Requests; puts != int64(tc.failures+1) && tc.wantErr == nil {
				t.Fatalf("%d PUTs, want %d", puts, tc.failures+1)
			}

			// A later flush commits whatever happened to this one.
			b2, o2 := e.batch(t, 0, 2, 50, 8)
			res2, err := p.Produce(testCtx(t), []produce.Batch{b2})
			if err != nil {
				t.Fatalf("second Produce: %v", err)
			}
			sent := map[int64]sentBatch{res2[0].BaseOffset: {o2, b2.Data}}
			if tc.wantErr == nil {
				sent[res[0].BaseOffset] = sentBatch{o, b.Data}
			}
			// Exactly once: the retried object is committed once, a
			// failed one not at all.
			hwm := highWatermark(t, e.replica, e.topic, 0)
			checkPartition(t, e.readAll(t, fetch.NewReader(counting, nil), 0), sent, hwm)
		})
	}
}

func TestBackpressure(t *testing.T) {
	g := newGateStore(memobj.New())
	e := newEnv(t, g, 1)
	b1, o1 := e.batch(t, 0, 4, 1000, 1)
	b2, o2 := e.batch(t, 0, 4, 1000, 2)
	p := e.pipeline(t, produce.Config{MaxBufferedBytes: len(b1.Data) + len(b2.Data)/2})

	g.arm(true)
	a1 := submit(t, p, b1)
	key := g.next(t)

	// The buffer is full until the first flush is answered.
	short, cancel := context.WithTimeout(testCtx(t), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Submit(short, []produce.Batch{b2}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit over MaxBufferedBytes = %v, want it to block until its deadline", err)
	}
	if st := p.Stats(); st.BufferedBytes != len(b1.Data) {
		t.Fatalf("Stats = %+v: a refused call left bytes behind", st)
	}

	admitted := make(chan *produce.Ack, 1)
	go func() {
		a, err := p.Submit(testCtx(t), []produce.Batch{b2})
		if err != nil {
			t.Error(err)
		}
		admitted <- a
	}()
	g.arm(false)
	g.release(key)
	r1 := waitAck(t, a1)
	a2 := <-admitted
	if a2 == nil {
		t.FailNow()
	}
	r2 := waitAck(t, a2)
	sent := map[int64]sentBatch{r1[0].BaseOffset: {o1, b1.Data}, r2[0].BaseOffset: {o2, b2.Data}}
	checkPartition(t, e.readAll(t, fetch.NewReader(g, nil), 0), sent, highWatermark(t, e.replica, e.topic, 0))
}

func TestCloseFlushesPending(t *testing.T) {
	g := newGateStore(memobj.New())
	e := newEnv(t, g, 1)
	p := e.pipeline(t, produce.Config{FlushInterval: time.Hour})

	g.arm(true)
	b1, o1 := e.batch(t, 0, 2, 10, 1)
	b2, o2 := e.batch(t, 0, 2, 10, 2)
	a1 := submit(t, p, b1)
	key := g.next(t)
	a2 := submit(t, p, b2) // waits in the open flush: the interval is an hour

	closed := make(chan error, 1)
	go func() { closed <- p.Close(testCtx(t)) }()
	g.arm(false)
	g.release(key)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-a2.Done():
	default:
		t.Fatal("Close returned before a buffered call was answered")
	}
	r1, r2 := waitAck(t, a1), waitAck(t, a2)
	if _, err := p.Submit(testCtx(t), []produce.Batch{b1}); !errors.Is(err, produce.ErrClosed) {
		t.Fatalf("Submit after Close = %v, want ErrClosed", err)
	}
	sent := map[int64]sentBatch{r1[0].BaseOffset: {o1, b1.Data}, r2[0].BaseOffset: {o2, b2.Data}}
	checkPartition(t, e.readAll(t, fetch.NewReader(g, nil), 0), sent, highWatermark(t, e.replica, e.topic, 0))
}

func TestCloseGivesUp(t *testing.T) {
	g := newGateStore(memobj.New())
	e := newEnv(t, g, 1)
	p := e.pipeline(t, produce.Config{})
	g.arm(true)
	b, _ := e.batch(t, 0, 1, 10, 1)
	a := submit(t, p, b)
	g.next(t) // held for good

	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if err := p.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	if _, err := a.Wait(testCtx(t)); !errors.Is(err, produce.ErrUpload) {
		t.Fatalf("abandoned call = %v, want ErrUpload", err)
	}
	if hwm := highWatermark(t, e.replica, e.topic, 0); hwm != 0 {
		t.Fatalf("high watermark %d after an abandoned upload", hwm)
	}
}

func TestSubmitRejects(t *testing.T) {
	e := newMemEnv(t, memobj.New(), 1)
	p := e.pipeline(t, produce.Config{MaxFlushBatches: 2})
	good, _ := e.batch(t, 0, 3, 10, 1)
	for _, tc := range []struct {
		name    string
		batches []produce.Batch
		want    error
	}{
		{"records mismatch", []produce.Batch{func() produce.Batch { b := good; b.Records++; return b }()}, produce.ErrInvalidBatch},
		{"batch count mismatch", []produce.Batch{func() produce.Batch { b := good; b.BatchCount = 2; return b }()}, produce.ErrInvalidBatch},
		{"no data", []produce.Batch{{TopicID: e.topic}}, produce.ErrInvalidBatch},
		{"truncated", []produce.Batch{func() produce.Batch { b := good; b.Data = b.Data[:len(b.Data)-1]; return b }()}, produce.ErrInvalidBatch},
		{"more batches than a flush", []produce.Batch{good, good, good}, produce.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.Produce(testCtx(t), tc.batches); !errors.Is(err, tc.want) {
				t.Fatalf("Produce = %v, want %v", err, tc.want)
			}
		})
	}
	if st := p.Stats(); st.BufferedBytes != 0 {
		t.Fatalf("rejected calls left %d bytes buffered", st.BufferedBytes)
	}
	if res, err := p.Produce(testCtx(t), nil); err != nil || res != nil {
		t.Fatalf("Produce(nil) = %v, %v", res, err)
	}
}

// TestPartialResults: a batch for a partition that does not exist fails
// alone; the call's other batches commit. Apply decides that, so a copy
// in memory serves.
func TestPartialResults(t *testing.T) {
	e := newMemEnv(t, memobj.New(), 1)
	p := e.pipeline(t, produce.Config{})
	good, _ := e.batch(t, 0, 2, 10, 1)
	bad, _ := e.batch(t, 5, 2, 10, 2)
	unknownTopic := good
	unknownTopic.TopicID = meta.TopicID{1}
	res, err := p.Produce(testCtx(t), []produce.Batch{bad, good, unknownTopic})
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{kerr.UnknownTopicOrPartition.Code, 0, kerr.UnknownTopicOrPartition.Code}
	for i, r := range res {
		if r.Code != want[i] {
			t.Fatalf("result %d: code %d, want %d", i, r.Code, want[i])
		}
	}
	if res[1].BaseOffset != 0 || highWatermark(t, e.db, e.topic, 0) != 2 {
		t.Fatalf("good batch at %d, high watermark %d", res[1].BaseOffset, highWatermark(t, e.db, e.topic, 0))
	}
}

func TestConfigValidate(t *testing.T) {
	e := newMemEnv(t, memobj.New(), 1)
	for _, tc := range []struct {
		name string
		cfg  produce.Config
	}{
		{"no store", produce.Config{Replica: e.db, AgentID: "a"}},
		{"no replica", produce.Config{Store: e.store, AgentID: "a"}},
		{"no agent id", produce.Config{Store: e.store, Replica: e.db}},
		{"negative interval", produce.Config{Store: e.store, Replica: e.db, AgentID: "a", FlushInterval: -1}},
		{"commit bytes below a flush", produce.Config{Store: e.store, Replica: e.db, AgentID: "a", MaxCommitBytes: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := produce.New(tc.cfg); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

// TestCommitFails: a proposal that fails answers its calls with ErrCommit
// wrapping the replica's error.
func TestCommitFails(t *testing.T) {
	e := newEnv(t, memobj.New(), 1)
	p := e.pipeline(t, produce.Config{})
	b, _ := e.batch(t, 0, 1, 10, 1)
	e.replica.Close()
	_, err := p.Produce(testCtx(t), []produce.Batch{b})
	if !errors.Is(err, produce.ErrCommit) || !errors.Is(err, replica.ErrClosed) {
		t.Fatalf("Produce on a closed replica = %v, want ErrCommit and replica.ErrClosed", err)
	}
}

// TestCommitSplitsTooLargeGroup: when the replica's entries cannot hold
// every finished flush at once, the committer proposes them one by one,
// still in cut order.
func TestCommitSplitsTooLargeGroup(t *testing.T) {
	log := memlog.New()
	r, err := replica.Open(testCtx(t), replica.Config{Dir: t.TempDir(), Log: log, WriterID: "agent-1", Logger: quietLogger(), MaxEntryBytes: 2200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	g := newGateStore(memobj.New())
	e := &env{log: log, replica: r, topic: createTopic(t, r, "t", 1), store: g}
	obs := &chanObserver{uploads: make(chan int, 64)}
	p := e.pipeline(t, produce.Config{MaxConcurrentUploads: 2, MaxFlushBatches: 30, MaxCommitBytes: 1 << 20, Observer: obs})

	calls := func(seed uint64) []produce.Batch {
		var bs []produce.Batch
		for i := range 30 {
			b, _ := e.batch(t, 0, 1, 10, seed+uint64(i))
			bs = append(bs, b)
		}
		return bs
	}
	g.arm(true)
	ackA := submit(t, p, calls(0)...)
	keyA := g.next(t)
	ackB := submit(t, p, calls(100)...) // a full flush: cut at once
	keyB := g.next(t)
	g.release(keyB)
	recvUpload(t, obs.uploads)
	g.release(keyA)
	resA, resB := waitAck(t, ackA), waitAck(t, ackB)
	if resA[0].BaseOffset != 0 || resB[0].BaseOffset != 30 {
		t.Fatalf("flushes at offsets %d and %d, want 0 and 30", resA[0].BaseOffset, resB[0].BaseOffset)
	}
	if commits := logCommits(t, log); !slices.Equal(commits, []int{1, 1}) {
		t.Fatalf("log entries carry %v commits, want [1 1]", commits)
	}
}
