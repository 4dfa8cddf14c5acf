package kafka

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// The read side of transactions: Fetch under both isolation levels,
// ListOffsets latest under read_committed, OffsetFetch RequireStable.
// Transactions are driven by meta commands and the data path directly, so
// these tests do not depend on the transaction handlers.

// rcTxn is a transactional producer driven through meta commands.
type rcTxn struct {
	id    string
	pid   int64
	epoch int16
	seq   map[int32]int32 // next sequence per partition
}

func rcPropose(t testing.TB, a *testAgent, c meta.Command) meta.Result {
	t.Helper()
	res, err := a.Replica.Propose(a.ctx(t), c)
	if err != nil {
		t.Fatalf("%T: %v", c, err)
	}
	if res.Code != 0 {
		t.Fatalf("%T: %v", c, res.Err())
	}
	for i, code := range res.Codes {
		if code != 0 {
			t.Fatalf("%T: item %d: %v", c, i, kerr.ErrorForCode(code))
		}
	}
	return res
}

func rcInit(t testing.TB, a *testAgent, id string) *rcTxn {
	t.Helper()
	for {
		res := rcPropose(t, a, meta.InitTransactionalProducer{TransactionalID: id, TimeoutMs: 60_000, ProducerID: -1, ProducerEpoch: -1})
		// batchtest reads producer id 0 as "not idempotent".
		if res.ProducerID != 0 {
			return &rcTxn{id: id, pid: res.ProducerID, epoch: res.ProducerEpoch, seq: map[int32]int32{}}
		}
		id += "'"
	}
}

func (x *rcTxn) add(t testing.TB, a *testAgent, topic string, partitions ...int32) {
	t.Helper()
	c := meta.AddPartitionsToTxn{TransactionalID: x.id, ProducerID: x.pid, ProducerEpoch: x.epoch}
	for _, p := range partitions {
		c.Partitions = append(c.Partitions, meta.TopicPartition{Topic: topic, Partition: p})
	}
	rcPropose(t, a, c)
}

func (x *rcTxn) end(t testing.TB, a *testAgent, commit bool) {
	t.Helper()
	rcPropose(t, a, meta.EndTxn{TransactionalID: x.id, ProducerID: x.pid, ProducerEpoch: x.epoch, Commit: commit, Seq: -1})
}

// batch builds a batch of n records of x (nil x: not transactional) whose
// values batchtest.Value(o, i) tell seed apart.
func (x *rcTxn) batch(t testing.TB, partition int32, n int, seed uint64) ([]byte, batchtest.Options) {
	t.Helper()
	return x.batchAt(t, partition, n, seed, 0)
}

// batchAt is batch with records timestamped from firstTs (0: batchtest's
// default).
func (x *rcTxn) batchAt(t testing.TB, partition int32, n int, seed uint64, firstTs int64) ([]byte, batchtest.Options) {
	t.Helper()
	o := batchtest.Options{Records: n, ValueBytes: 16, Seed: seed, FirstTimestamp: firstTs}
	if x != nil {
		o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = x.pid, x.epoch, x.seq[partition], true
		x.seq[partition] += int32(n)
	}
	return batchtest.Build(t, o), o
}

// rcProduce commits data to a partition through the pipeline and returns
// its base offset.
func rcProduce(t testing.TB, a *testAgent, dp *dataPath, id meta.TopicID, partition int32, data []byte) int64 {
	t.Helper()
	b, err := produce.BatchFrom(id, partition, data)
	if err != nil {
		t.Fatal(err)
	}
	res, err := dp.Pipeline.Produce(a.ctx(t), []produce.Batch{b})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(res[0].Code))
	}
	return res[0].BaseOffset
}

// rcBatch is what the tests check of a fetched batch.
type rcBatch struct {
	base    int64
	control bool
	pid     int64
}

func rcBatches(t *testing.T, records []byte) []rcBatch {
	t.Helper()
	var out []rcBatch
	for _, b := range batchesOf(t, records) {
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := recordbatch.CheckCRC(b); err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		out = append(out, rcBatch{base: h.BaseOffset, control: h.IsControl(), pid: h.ProducerID})
	}
	return out
}

type rcAborted struct{ pid, first int64 }

// rcAbortedOf returns a response's AbortedTransactions, nil for null.
func rcAbortedOf(sp *kmsg.FetchResponseTopicPartition) []rcAborted {
	if sp.AbortedTransactions == nil {
		return nil
	}
	out := []rcAborted{}
	for _, at := range sp.AbortedTransactions {
		out = append(out, rcAborted{at.ProducerID, at.FirstOffset})
	}
	return out
}

func rcFetch(t *testing.T, a *testAgent, isolation int8, part fetchPartReq) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(16, 0, 1, 1<<20, part)
	req.IsolationLevel = isolation
	sp := fetchPartitions(a.request(t, req).(*kmsg.FetchResponse))[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp
}

func rcListOffset(t *testing.T, a *testAgent, topic string, isolation int8, ts int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.IsolationLevel, req.ReplicaID = 8, isolation, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := a.request(t, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("ListOffsets: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.Offset
}

func TestFetchReadCommitted(t *testing.T) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	dp := &dataPath{}
	testFetchReadCommitted(t, newTestAgent(t, withSpy(spy), withDataPath(t, dp)), dp, spy)
}

func testFetchReadCommitted(t *testing.T, a *testAgent, dp *dataPath, spy *spyNotifier) {
	id := a.createTopic(t, "rc", 1, nil)
	pa, pb, pc := rcInit(t, a, "a"), rcInit(t, a, "b"), rcInit(t, a, "c")

	// plain 0-1; a's 2-3, commit at 4; b's 5-6, abort at 7; c's 8-9
	// still open; plain 10-11.
	data, _ := (*rcTxn)(nil).batch(t, 0, 2, 1)
	rcProduce(t, a, dp, id, 0, data)
	pa.add(t, a, "rc", 0)
	data, _ = pa.batch(t, 0, 2, 2)
	rcProduce(t, a, dp, id, 0, data)
	pa.end(t, a, true)
	pb.add(t, a, "rc", 0)
	data, _ = pb.batch(t, 0, 2, 3)
	rcProduce(t, a, dp, id, 0, data)
	pb.end(t, a, false)
	pc.add(t, a, "rc", 0)
	// Far in the future, so timestamp lookups land in c's batch.
	const futureTs = 4_000_000_000_000
	data, _ = pc.batchAt(t, 0, 2, 4, futureTs)
	if base := rcProduce(t, a, dp, id, 0, data); base != 8 {
		t.Fatalf("c's batch at %d, want 8", base)
	}
	data, _ = (*rcTxn)(nil).batch(t, 0, 2, 5)
	rcProduce(t, a, dp, id, 0, data)

	all := []rcBatch{{0, false, -1}, {2, false, pa.pid}, {4, true, pa.pid}, {5, false, pb.pid}, {7, true, pb.pid}, {8, false, pc.pid}, {10, false, -1}}
	abortedB := []rcAborted{{pb.pid, 5}}
	for _, tc := range []struct {
		name        string
		isolation   int8
		offset      int64
		wantBatches []rcBatch
		wantAborted []rcAborted // nil: null
	}{
		{"committed from the start", 1, 0, all[:5], abortedB},
		{"uncommitted from the start", 0, 0, all, nil},
		{"committed inside the aborted batch", 1, 6, all[3:5], abortedB},
		{"committed from the abort marker", 1, 7, all[4:5], abortedB},
		{"committed at the LSO", 1, 8, nil, []rcAborted{}},
		{"committed past the LSO", 1, 10, nil, []rcAborted{}},
		{"uncommitted past the LSO", 0, 10, all[6:], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := rcFetch(t, a, tc.isolation, fetchPartReq{id: id, offset: tc.offset, maxBytes: 1 << 20})
			if sp.HighWatermark != 12 || sp.LastStableOffset != 8 || sp.LogStartOffset != 0 {
				t.Fatalf("hwm %d, lso %d, log start %d; want 12, 8, 0", sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset)
			}
			if got := rcBatches(t, sp.RecordBatches); !slices.Equal(got, tc.wantBatches) {
				t.Fatalf("batches\n got %v\nwant %v", got, tc.wantBatches)
			}
			if got := rcAbortedOf(&sp); (got == nil) != (tc.wantAborted == nil) || !slices.Equal(got, tc.wantAborted) {
				t.Fatalf("aborted transactions %v (null %t), want %v", got, got == nil, tc.wantAborted)
			}
		})
	}
	for _, tc := range []struct {
		name      string
		isolation int8
		ts        int64
		want      int64
	}{
		{"latest committed", 1, -1, 8},
		{"latest uncommitted", 0, -1, 12},
		{"timestamp committed", 1, futureTs, -1},
		{"timestamp uncommitted", 0, futureTs, 8},
		{"max timestamp committed", 1, -3, -1},
		{"max timestamp uncommitted", 0, -3, 9},
		{"earliest committed", 1, -2, 0},
	} {
		t.Run("ListOffsets "+tc.name, func(t *testing.T) {
			if got := rcListOffset(t, a, "rc", tc.isolation, tc.ts); got != tc.want {
				t.Fatalf("offset %d, want %d", got, tc.want)
			}
		})
	}

	// A read_committed long poll at the LSO waits, though the partition
	// holds records past it, until c's commit moves the LSO.
	req := fetchReq(16, 30_000, 1, 1<<20, fetchPartReq{id: id, offset: 8, maxBytes: 1 << 20})
	req.IsolationLevel = 1
	if time.Duration(req.MaxWaitMillis)*time.Millisecond <= guard {
		t.Fatal("MaxWait must outlast the guard for this test to mean anything")
	}
	c := dial(t, a.addr)
	drainSignals(spy.calls)
	write(t, c, frameFor(1, req))
	spy.waitCall(t)
	pc.end(t, a, true)
	resp := kmsg.NewPtrFetchResponse()
	decodeResponse(t, readFrame(t, c), resp, req.Version)
	sp := fetchPartitions(resp)[0]
	want := []rcBatch{{8, false, pc.pid}, {10, false, -1}, {12, true, pc.pid}}
	if got := rcBatches(t, sp.RecordBatches); sp.ErrorCode != 0 || !slices.Equal(got, want) {
		t.Fatalf("after the commit: code %d, batches %v; want %v", sp.ErrorCode, got, want)
	}
	if sp.HighWatermark != 13 || sp.LastStableOffset != 13 || len(sp.AbortedTransactions) != 0 {
		t.Fatalf("after the commit: hwm %d, lso %d, aborted %v", sp.HighWatermark, sp.LastStableOffset, sp.AbortedTransactions)
	}
	if got := rcListOffset(t, a, "rc", 1, -1); got != 13 {
		t.Fatalf("ListOffsets latest read_committed = %d, want 13", got)
	}
}

// Past its cap, the aborted-transaction list is complete for the records
// returned because they are cut to their first batch.
func TestAbortedTxnsCap(t *testing.T) {
	a, dp := newDataAgent(t, nil)
	id := a.createTopic(t, "cap", 1, nil)
	x, y := rcInit(t, a, "x"), rcInit(t, a, "y")
	// x's 0-1, abort at 2; y's 3-4, abort at 5; plain 6.
	for _, p := range []*rcTxn{x, y} {
		p.add(t, a, "cap", 0)
		data, _ := p.batch(t, 0, 2, 1)
		rcProduce(t, a, dp, id, 0, data)
		p.end(t, a, false)
	}
	data, _ := (*rcTxn)(nil).batch(t, 0, 1, 2)
	rcProduce(t, a, dp, id, 0, data)

	view := a.Replica.View()
	defer view.Close()
	res, err := dp.Reader.Read(a.ctx(t), view, id, 0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		offset      int64
		maxTxns     int
		wantBatches []int64
		wantAborted []rcAborted
	}{
		{"under the cap", 0, 2, []int64{0, 2, 3, 5, 6}, []rcAborted{{x.pid, 0}, {y.pid, 3}}},
		{"over the cap", 0, 1, []int64{0}, []rcAborted{{x.pid, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fetchPart{id: id, offset: tc.offset}
			aborted, records, err := abortedTxns(view, p, res.Records, tc.maxTxns)
			if err != nil {
				t.Fatal(err)
			}
			var bases []int64
			for _, b := range rcBatches(t, records) {
				bases = append(bases, b.base)
			}
			sp := kmsg.FetchResponseTopicPartition{AbortedTransactions: aborted}
			if got := rcAbortedOf(&sp); !slices.Equal(bases, tc.wantBatches) || !slices.Equal(got, tc.wantAborted) {
				t.Fatalf("batches %v, aborted %v; want %v, %v", bases, got, tc.wantBatches, tc.wantAborted)
			}
		})
	}
}

// A partition whose transactions wrote nothing there holds only markers:
// a fetch still returns them, so a consumer steps over them.
func TestFetchOnlyMarkers(t *testing.T) {
	a, dp := newDataAgent(t, nil)
	id := a.createTopic(t, "markers", 2, nil)
	x := rcInit(t, a, "x")
	x.add(t, a, "markers", 0, 1)
	data, _ := x.batch(t, 1, 1, 1)
	rcProduce(t, a, dp, id, 1, data)
	x.end(t, a, false)
	x.add(t, a, "markers", 0)
	x.end(t, a, true)
	for _, isolation := range []int8{0, 1} {
		sp := rcFetch(t, a, isolation, fetchPartReq{id: id, maxBytes: 1})
		want := []rcBatch{{0, true, x.pid}}
		if got := rcBatches(t, sp.RecordBatches); !slices.Equal(got, want) || sp.HighWatermark != 2 || sp.LastStableOffset != 2 {
			t.Fatalf("isolation %d: batches %v (want %v), hwm %d, lso %d", isolation, got, want, sp.HighWatermark, sp.LastStableOffset)
		}
		sp = rcFetch(t, a, isolation, fetchPartReq{id: id, offset: 1, maxBytes: 1 << 20})
		want = []rcBatch{{1, true, x.pid}}
		if got := rcBatches(t, sp.RecordBatches); !slices.Equal(got, want) {
			t.Fatalf("isolation %d from 1: batches %v, want %v", isolation, got, want)
		}
		// The aborted transaction wrote nothing in partition 0, so
		// nothing there is listed.
		if isolation == 1 && len(sp.AbortedTransactions) != 0 {
			t.Fatalf("aborted %v", sp.AbortedTransactions)
		}
	}
}

// kgo drops aborted batches using AbortedTransactions and skips markers:
// a read_committed consumer sees exactly the committed and plain records,
// a read_uncommitted one every record, over interleaved transactions.
func TestKgoReadCommitted(t *testing.T) {
	a, dp := newDataAgent(t, nil)
	id := a.createTopic(t, "kgo-rc", 1, nil)
	d, e, f := rcInit(t, a, "d"), rcInit(t, a, "e"), rcInit(t, a, "f")

	var all, committed []string
	values := func(keep bool, o batchtest.Options) {
		for i := range o.Records {
			v := string(batchtest.Value(o, i))
			all = append(all, v)
			if keep {
				committed = append(committed, v)
			}
		}
	}
	put := func(x *rcTxn, keep bool, n int, seed uint64) {
		data, o := x.batch(t, 0, n, seed)
		rcProduce(t, a, dp, id, 0, data)
		values(keep, o)
	}
	put(nil, true, 2, 1)
	d.add(t, a, "kgo-rc", 0)
	e.add(t, a, "kgo-rc", 0)
	put(d, true, 3, 2)
	put(e, false, 2, 3)
	put(nil, true, 1, 4)
	put(d, true, 2, 5)
	put(e, false, 3, 6)
	e.end(t, a, false)
	f.add(t, a, "kgo-rc", 0)
	put(f, false, 2, 7)
	put(d, true, 1, 8)
	d.end(t, a, true)
	f.end(t, a, false)
	e.add(t, a, "kgo-rc", 0)
	put(e, true, 2, 9)
	e.end(t, a, true)
	put(nil, true, 1, 10) // last, so a leaked aborted record shows in order

	for _, tc := range []struct {
		name string
		opt  kgo.IsolationLevel
		want []string
	}{
		{"read_committed", kgo.ReadCommitted(), committed},
		{"read_uncommitted", kgo.ReadUncommitted(), all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := a.consume(t, "kgo-rc", 1, len(tc.want), kgo.FetchIsolationLevel(tc.opt))
			got := make([]string, len(recs))
			for i, r := range recs {
				got[i] = string(r.Value)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("consumed\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT for a
// partition whose offset a transaction committed and has not ended.
func TestOffsetFetchRequireStable(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	a.createTopic(t, "stable", 2, nil)
	if codes := commitCodes(a.rawRequest(t, commitReq(8, "g", "", -1, "stable", map[int32]int64{0: 5, 1: 6})).(*kmsg.OffsetCommitResponse)); slices.ContainsFunc(codes, func(c int16) bool { return c != 0 }) {
		t.Fatalf("commit: %v", codes)
	}
	x := rcInit(t, a, "offsets")
	rcPropose(t, a, meta.AddOffsetsToTxn{TransactionalID: x.id, ProducerID: x.pid, ProducerEpoch: x.epoch, Group: "g"})
	rcPropose(t, a, meta.TxnOffsetCommit{
		TransactionalID: x.id, ProducerID: x.pid, ProducerEpoch: x.epoch, Group: "g", Generation: -1,
		Offsets: []meta.OffsetCommitPartition{{Topic: "stable", Partition: 0, Offset: 9, LeaderEpoch: -1, CommitTimestamp: -1}},
	})

	// fetched is "partition:offset:error" per partition of topic stable.
	fetchV7 := func(requireStable bool, topics bool) []string {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = 7, "g", requireStable
		if topics {
			req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "stable", Partitions: []int32{0, 1}}}
		}
		resp := a.rawRequest(t, req).(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("group error %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		var out []string
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s/%d:%d:%d:%d", rt.Topic, rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode))
			}
		}
		return out
	}
	fetchV8 := func(requireStable bool) []string {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.RequireStable = 8, requireStable
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
		resp := a.rawRequest(t, req).(*kmsg.OffsetFetchResponse)
		var out []string
		for _, g := range resp.Groups {
			if g.ErrorCode != 0 {
				t.Fatalf("group error %v", kerr.ErrorForCode(g.ErrorCode))
			}
			for _, rt := range g.Topics {
				for _, rp := range rt.Partitions {
					out = append(out, fmt.Sprintf("%s/%d:%d:%d:%d", rt.Topic, rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode))
				}
			}
		}
		return out
	}
	unstable := kerr.UnstableOffsetCommit.Code
	for _, tc := range []struct {
		name string
		got  func() []string
		want []string
	}{
		{"v7 require stable", func() []string { return fetchV7(true, true) }, []string{fmt.Sprintf("stable/0:-1:-1:%d", unstable), "stable/1:6:-1:0"}},
		{"v7 all topics", func() []string { return fetchV7(true, false) }, []string{fmt.Sprintf("stable/0:-1:-1:%d", unstable), "stable/1:6:-1:0"}},
		{"v7 without require stable", func() []string { return fetchV7(false, true) }, []string{"stable/0:5:-1:0", "stable/1:6:-1:0"}},
		{"v8 require stable", func() []string { return fetchV8(true) }, []string{fmt.Sprintf("stable/0:-1:-1:%d", unstable), "stable/1:6:-1:0"}},
		{"v8 without require stable", func() []string { return fetchV8(false) }, []string{"stable/0:5:-1:0", "stable/1:6:-1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(); !slices.Equal(got, tc.want) {
				t.Fatalf("fetched %v, want %v", got, tc.want)
			}
		})
	}

	x.end(t, a, true)
	want := []string{"stable/0:9:-1:0", "stable/1:6:-1:0"}
	if got := fetchV7(true, true); !slices.Equal(got, want) {
		t.Fatalf("after the commit: fetched %v, want %v", got, want)
	}
	if got := fetchV8(true); !slices.Equal(got, want) {
		t.Fatalf("after the commit (v8): fetched %v, want %v", got, want)
	}
}
