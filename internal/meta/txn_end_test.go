package meta

import (
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Ending transactions: commit, abort, the sweep, and what ending does to
// offsets, markers and epochs. The environment is txnEnv (txn_test.go).

// TestEndTxnCommit: a commit writes a commit marker in every added
// partition and releases the last stable offsets.
func TestEndTxnCommit(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	e.addOK(t, "tx", pid, 0, e.a0, e.b0)
	e.produceOK(t, e.a0, pid, 0, 0, 3) // 0-2
	s := e.state(t, "tx")
	if s.Status != TxnOngoing || s.Seq != 1 || s.StartMs != txnT0 || len(s.Partitions) != 2 {
		t.Fatalf("state of the ongoing transaction: %+v", s)
	}
	e.advance(10)
	wantCode(t, "commit", e.end(t, "tx", pid, 0, true, s.Seq), nil)
	e.wantMarker(t, e.a0, 3, pid, 0, true)
	e.wantMarker(t, e.b0, 0, pid, 0, true)
	if ie := e.entryAt(t, e.a0, 3); ie.FirstTimestamp != txnT0+10 {
		t.Fatalf("marker timestamp %d, want the log clock %d", ie.FirstTimestamp, txnT0+10)
	}
	for _, ref := range []partRef{e.a0, e.b0} {
		if lso, hwm := e.stable(t, ref); lso != hwm {
			t.Fatalf("%v after commit: lso %d, hwm %d", ref, lso, hwm)
		}
		if a := e.aborted(t, ref); len(a) != 0 {
			t.Fatalf("a commit indexed aborted ranges in %v: %+v", ref, a)
		}
	}
	if st := partitionState(t, e.r, e.a0.id, 0); st.NextOffset != 4 {
		t.Fatalf("a/0 next offset %d, want 4", st.NextOffset)
	}
	if s := e.state(t, "tx"); s.Status != TxnCompleteCommit {
		t.Fatalf("state after commit: %+v", s)
	}
	// The producer keeps its sequence in the next transaction.
	e.addOK(t, "tx", pid, 0, e.a0)
	if base := e.produceOK(t, e.a0, pid, 0, 3, 1); base != 4 {
		t.Fatalf("next transaction's base %d", base)
	}
	if s := e.state(t, "tx"); s.Seq != 2 || len(s.Partitions) != 1 {
		t.Fatalf("second transaction: %+v", s)
	}
}

// TestEndTxnAbort: an abort indexes the transaction's range in each
// partition it wrote, from its first offset to its marker.
func TestEndTxnAbort(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	e.plain(t, e.a0, 4) // 0-3
	e.addOK(t, "tx", pid, 0, e.a0)
	e.produceOK(t, e.a0, pid, 0, 0, 2) // 4-5
	e.plain(t, e.a0, 1)                // 6
	e.produceOK(t, e.a0, pid, 0, 2, 2) // 7-8
	wantCode(t, "abort", e.end(t, "tx", pid, 0, false, e.state(t, "tx").Seq), nil)
	e.wantMarker(t, e.a0, 9, pid, 0, false)
	want := AbortedTxn{ProducerID: pid, FirstOffset: 4, LastOffset: 9}
	if got := e.aborted(t, e.a0); !reflect.DeepEqual(got, []AbortedTxn{want}) {
		t.Fatalf("aborted = %+v, want %+v", got, want)
	}
	if lso, hwm := e.stable(t, e.a0); lso != 10 || hwm != 10 {
		t.Fatalf("lso %d hwm %d after abort", lso, hwm)
	}
	if s := e.state(t, "tx"); s.Status != TxnCompleteAbort {
		t.Fatalf("state after abort: %+v", s)
	}
	v := viewOf(t, e.r)
	for _, c := range []struct {
		from, to int64
		n        int
	}{
		{0, 100, 1},
		{9, 10, 1},  // the marker is at from
		{10, 20, 0}, // the marker is before from
		{0, 4, 0},   // the range starts at to
		{0, 5, 1},
	} {
		got, err := v.AbortedTxns(e.a0.id, 0, c.from, c.to, 0)
		if err != nil || len(got) != c.n {
			t.Fatalf("AbortedTxns(%d, %d) = %+v, %v; want %d", c.from, c.to, got, err, c.n)
		}
	}
}

// TestEndTxnStaleSeq is KAFKA-17754: an EndTxn naming an earlier
// transaction of the id fails and leaves the later one ongoing.
func TestEndTxnStaleSeq(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	e.addOK(t, "tx", pid, 0, e.a0)
	e.produceOK(t, e.a0, pid, 0, 0, 1)
	seq1 := e.state(t, "tx").Seq
	wantCode(t, "commit of transaction 1", e.end(t, "tx", pid, 0, true, seq1), nil)

	e.addOK(t, "tx", pid, 0, e.a0)
	e.produceOK(t, e.a0, pid, 0, 1, 1) // offset 2
	seq2 := e.state(t, "tx").Seq
	if seq2 == seq1 {
		t.Fatalf("both transactions have seq %d", seq1)
	}
	before := partitionState(t, e.r, e.a0.id, 0)
	for _, commit := range []bool{true, false} {
		wantCode(t, "delayed EndTxn of transaction 1", e.end(t, "tx", pid, 0, commit, seq1), kerr.InvalidTxnState)
	}
	if s := e.state(t, "tx"); s.Status != TxnOngoing || s.Seq != seq2 {
		t.Fatalf("transaction 2 after the stale EndTxn: %+v", s)
	}
	if after := partitionState(t, e.r, e.a0.id, 0); after != before {
		t.Fatalf("the stale EndTxn wrote a marker: %+v -> %+v", before, after)
	}
	if lso, _ := e.stable(t, e.a0); lso != 2 {
		t.Fatalf("lso %d, want transaction 2's first offset 2", lso)
	}
	wantCode(t, "abort of transaction 2", e.end(t, "tx", pid, 0, false, seq2), nil)
	e.wantMarker(t, e.a0, 3, pid, 0, false)
}

func TestEndTxnRetryAndErrors(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	wantCode(t, "EndTxn with none begun", e.end(t, "tx", pid, 0, true, -1), kerr.InvalidTxnState)
	e.addOK(t, "tx", pid, 0, e.a0)
	wantCode(t, "EndTxn of an unknown id", e.end(t, "nope", pid, 0, true, -1), kerr.TransactionalIDNotFound)
	wantCode(t, "EndTxn of another producer id", e.end(t, "tx", pid+100, 0, true, -1), kerr.InvalidProducerIDMapping)
	wantCode(t, "EndTxn of a newer epoch", e.end(t, "tx", pid, 1, true, -1), kerr.ProducerFenced)
	seq := e.state(t, "tx").Seq
	wantCode(t, "commit", e.end(t, "tx", pid, 0, true, seq), nil)
	next := partitionState(t, e.r, e.a0.id, 0).NextOffset
	wantCode(t, "retried commit", e.end(t, "tx", pid, 0, true, seq), nil)
	wantCode(t, "retried commit without seq", e.end(t, "tx", pid, 0, true, -1), nil)
	if got := partitionState(t, e.r, e.a0.id, 0).NextOffset; got != next {
		t.Fatalf("a retried commit wrote another marker: next offset %d -> %d", next, got)
	}
	wantCode(t, "abort after commit", e.end(t, "tx", pid, 0, false, seq), kerr.InvalidTxnState)
}

// TestTxnOffsetCommit: offsets committed in a transaction are pending
// until it ends: committed by a commit, dropped by an abort.
func TestTxnOffsetCommit(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	commit := func(offset int64, parts ...OffsetCommitPartition) Result {
		t.Helper()
		if len(parts) == 0 {
			parts = []OffsetCommitPartition{{Topic: "a", Partition: 1, Offset: offset, LeaderEpoch: -1, CommitTimestamp: -1}}
		}
		return mustPropose(t, e.r, TxnOffsetCommit{TransactionalID: "tx", ProducerID: pid, Group: "g", Generation: -1, Offsets: parts})
	}
	pending := func() bool {
		t.Helper()
		ok, err := viewOf(t, e.r).HasPendingTxnOffset("g", e.a1.id, 1)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	committed := func() (int64, bool) {
		t.Helper()
		o, ok, err := viewOf(t, e.r).CommittedOffset("g", e.a1.id, 1)
		if err != nil {
			t.Fatal(err)
		}
		return o.Offset, ok
	}

	res := commit(10)
	wantCode(t, "TxnOffsetCommit before AddOffsetsToTxn", res, kerr.InvalidTxnState)
	if !slices.Equal(res.Codes, []int16{kerr.InvalidTxnState.Code}) {
		t.Fatalf("codes %v", res.Codes)
	}
	wantCode(t, "AddOffsetsToTxn", mustPropose(t, e.r, AddOffsetsToTxn{TransactionalID: "tx", ProducerID: pid, Group: "g"}), nil)
	res = commit(0,
		OffsetCommitPartition{Topic: "a", Partition: 1, Offset: 42, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: -1},
		OffsetCommitPartition{Topic: "a", Partition: 9, Offset: 1, CommitTimestamp: -1},
		OffsetCommitPartition{Topic: "zz", Partition: 0, Offset: 1, CommitTimestamp: -1},
	)
	wantCode(t, "TxnOffsetCommit", res, nil)
	if want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}; !slices.Equal(res.Codes, want) {
		t.Fatalf("codes %v, want %v", res.Codes, want)
	}
	if _, ok := committed(); ok || !pending() {
		t.Fatalf("during the transaction: committed %v, pending %v", ok, pending())
	}
	e.advance(5)
	wantCode(t, "commit", e.end(t, "tx", pid, 0, true, -1), nil)
	o, ok, err := viewOf(t, e.r).CommittedOffset("g", e.a1.id, 1)
	if err != nil || !ok || o.Offset != 42 || o.LeaderEpoch != 3 || o.Metadata != "m" || o.CommitTimestamp != txnT0 || o.ExpireTimestamp != -1 {
		t.Fatalf("committed after commit: %+v, %v, %v", o, ok, err)
	}
	if pending() {
		t.Fatal("offset still pending after commit")
	}
	if _, ok, err := viewOf(t, e.r).Group("g"); err != nil || !ok {
		t.Fatalf("the commit made no group record: %v, %v", ok, err)
	}

	// Second transaction: aborted, so its offset vanishes.
	wantCode(t, "AddOffsetsToTxn", mustPropose(t, e.r, AddOffsetsToTxn{TransactionalID: "tx", ProducerID: pid, Group: "g"}), nil)
	wantCode(t, "TxnOffsetCommit", commit(50), nil)
	if !pending() {
		t.Fatal("offset not pending")
	}
	wantCode(t, "abort", e.end(t, "tx", pid, 0, false, -1), nil)
	if off, ok := committed(); !ok || off != 42 || pending() {
		t.Fatalf("after abort: committed %d/%v, pending %v", off, ok, pending())
	}
	// The transaction has ended: its group is no longer in one.
	wantCode(t, "TxnOffsetCommit after the end", commit(60), kerr.InvalidTxnState)

	// A commit from an older generation than the group's is refused.
	mustOK(t, e.r, GroupState{Group: "g", Kind: GroupClassic, Generation: 5})
	wantCode(t, "AddOffsetsToTxn", mustPropose(t, e.r, AddOffsetsToTxn{TransactionalID: "tx", ProducerID: pid, Group: "g"}), nil)
	res = mustPropose(t, e.r, TxnOffsetCommit{TransactionalID: "tx", ProducerID: pid, Group: "g", Generation: 4,
		Offsets: []OffsetCommitPartition{{Topic: "a", Partition: 1, Offset: 70, CommitTimestamp: -1}}})
	wantCode(t, "TxnOffsetCommit of an old generation", res, kerr.IllegalGeneration)
	if pending() {
		t.Fatal("a refused commit left a pending offset")
	}
}

// TestTxnSweepTimeout: a transaction ongoing past its timeout, by the
// log clock, is aborted with the epoch bumped (KIP-588); its producer may
// re-initialize naming its old epoch, an older instance may not.
func TestTxnSweepTimeout(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	pid, epoch := e.initOK(t, "tx", -1, -1) // epoch 1; epoch 0 is a zombie
	e.addOK(t, "tx", pid, epoch, e.a0)
	start := e.nowMs.Load()
	e.produceOK(t, e.a0, pid, epoch, 0, 2)
	sweep := func() {
		t.Helper()
		mustOK(t, e.r, TxnSweep{TransactionalIDs: []string{"tx", "unknown"}})
	}
	due := func(now int64) []string {
		t.Helper()
		ids, err := viewOf(t, e.r).TxnsDue(now)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}

	if ids := due(start + txnTimeoutMs - 1); len(ids) != 0 {
		t.Fatalf("due before the timeout: %v", ids)
	}
	if ids := due(start + txnTimeoutMs); !slices.Equal(ids, []string{"tx"}) {
		t.Fatalf("due at the timeout: %v", ids)
	}
	e.nowMs.Store(start + txnTimeoutMs - 1)
	sweep()
	if s := e.state(t, "tx"); s.Status != TxnOngoing || s.ProducerEpoch != epoch {
		t.Fatalf("swept before the timeout: %+v", s)
	}
	e.nowMs.Store(start + txnTimeoutMs)
	sweep()
	s := e.state(t, "tx")
	if s.Status != TxnCompleteAbort || s.ProducerEpoch != epoch+1 || s.PrevEpoch != epoch || s.PrevBy != BumpByTimeout {
		t.Fatalf("state after the timeout: %+v", s)
	}
	e.wantMarker(t, e.a0, 2, pid, epoch+1, false)
	if got := e.aborted(t, e.a0); !reflect.DeepEqual(got, []AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 2}}) {
		t.Fatalf("aborted = %+v", got)
	}
	// A second sweep finds nothing due.
	sweep()
	if got := partitionState(t, e.r, e.a0.id, 0).NextOffset; got != 3 {
		t.Fatalf("next offset %d after a second sweep", got)
	}

	// The producer learns it was fenced.
	wantBatchCode(t, "batch after the timeout", e.produce(t, e.a0, pid, epoch, 2, 1), kerr.InvalidProducerEpoch)
	wantCode(t, "AddPartitionsToTxn after the timeout", e.add(t, "tx", pid, epoch, e.a0), kerr.ProducerFenced)
	wantCode(t, "zombie init after the timeout", e.init(t, "tx", pid, epoch-1), kerr.ProducerFenced)
	p2, e2 := e.initOK(t, "tx", pid, epoch)
	if p2 != pid || e2 <= epoch {
		t.Fatalf("KIP-588 re-init = %d/%d", p2, e2)
	}
	// Its reply may be lost: the retry gets the same answer.
	if p3, e3 := e.initOK(t, "tx", pid, epoch); p3 != p2 || e3 != e2 {
		t.Fatalf("retried KIP-588 re-init = %d/%d, want %d/%d", p3, e3, p2, e2)
	}
	e.addOK(t, "tx", pid, e2, e.a0)
	if base := e.produceOK(t, e.a0, pid, e2, 0, 1); base != 3 {
		t.Fatalf("batch after re-init at %d", base)
	}
	wantCode(t, "zombie init after the re-init", e.init(t, "tx", pid, epoch-1), kerr.ProducerFenced)
}

// TestTxnSweepExpiresID: an id idle for TxnIDExpirationMs of log clock is
// deleted; a later init starts over with a new producer id.
func TestTxnSweepExpiresID(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	e.addOK(t, "tx", pid, 0, e.a0)
	wantCode(t, "commit", e.end(t, "tx", pid, 0, true, -1), nil)
	idle := e.nowMs.Load()
	e.nowMs.Store(idle + TxnIDExpirationMs - 1)
	mustOK(t, e.r, TxnSweep{TransactionalIDs: []string{"tx"}})
	if !e.exists(t, "tx") {
		t.Fatal("expired early")
	}
	e.nowMs.Store(idle + TxnIDExpirationMs)
	mustOK(t, e.r, TxnSweep{TransactionalIDs: []string{"tx"}})
	if e.exists(t, "tx") {
		t.Fatal("not expired")
	}
	if p, ep := e.initOK(t, "tx", -1, -1); p == pid || ep != 0 {
		t.Fatalf("init after expiry = %d/%d, want a new id at epoch 0", p, ep)
	}

	ids := make([]string, MaxTxnSweepIDs+1)
	for i := range ids {
		ids[i] = "x"
	}
	wantCode(t, "sweep of too many ids", mustPropose(t, e.r, TxnSweep{TransactionalIDs: ids}), kerr.InvalidRequest)
}

// TestTxnTooManyPartitions: one transaction adds at most
// maxTxnPartitions, whether or not one is ongoing when the request comes.
func TestTxnTooManyPartitions(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	parts := make([]TopicPartition, maxTxnPartitions+1)
	for i := range parts {
		parts[i] = TopicPartition{Topic: "a", Partition: 0}
	}
	res := mustPropose(t, e.r, AddPartitionsToTxn{TransactionalID: "tx", ProducerID: pid, Partitions: parts})
	wantCode(t, "too many partitions", res, kerr.InvalidRequest)
	if len(res.Codes) != len(parts) {
		t.Fatalf("%d codes for %d partitions", len(res.Codes), len(parts))
	}
	if s := e.state(t, "tx"); s.Status != TxnEmpty {
		t.Fatalf("a refused add began a transaction: %+v", s)
	}
}

// TestTxnDeleteTopic: a topic deleted during a transaction is skipped by
// its end, and leaves nothing of the transaction behind.
func TestTxnDeleteTopic(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	e.addOK(t, "tx", pid, 0, e.a0, e.b0)
	e.produceOK(t, e.a0, pid, 0, 0, 1)
	e.produceOK(t, e.b0, pid, 0, 0, 1)
	mustOK(t, e.r, DeleteTopic{Name: "b"})
	wantCode(t, "abort", e.end(t, "tx", pid, 0, false, -1), nil)
	e.wantMarker(t, e.a0, 1, pid, 0, false)
	v := viewOf(t, e.r)
	if _, ok, err := v.Partition(e.b0.id, 0); ok || err != nil {
		t.Fatalf("the end recreated a deleted partition: %v, %v", ok, err)
	}
	for _, p := range []byte{prefixPartition, prefixIndex, prefixProducerState, prefixOpenTxn, prefixAbortedTxn} {
		start, end := topicSpan(p, e.b0.id)
		it, err := v.r.NewIter(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if it.SeekGE(start) && string(it.Key()) < string(end) {
			t.Errorf("key %x of the deleted topic is left", it.Key())
		}
		it.Close()
	}
	// A new topic of the same name starts empty.
	mustOK(t, e.r, CreateTopic{Name: "b", Partitions: 1})
	nb := partRef{topicID(t, e.r, "b"), 0}
	if st := partitionState(t, e.r, nb.id, 0); st.NextOffset != 0 {
		t.Fatalf("recreated topic: %+v", st)
	}
}

// TestTxnProducersView: DescribeProducers' source shows each producer's
// epoch, last sequence and open transaction start.
func TestTxnProducersView(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	e.addOK(t, "tx", pid, 0, e.a0)
	e.plain(t, e.a0, 1)
	e.advance(7)
	e.produceOK(t, e.a0, pid, 0, 0, 4) // 1-4, sequences 0-3
	mustOK(t, e.r, idemCommit(e.a0, idem{PID: 99, Epoch: 2, Seq: 10, Records: 1}))
	got, err := viewOf(t, e.r).Producers(e.a0.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []ProducerInfo{
		{ProducerID: pid, ProducerEpoch: 0, LastSequence: 3, LastTimestamp: txnT0 + 7, CurrentTxnStartOffset: 1},
		{ProducerID: 99, ProducerEpoch: 2, LastSequence: 10, LastTimestamp: txnT0 + 7, CurrentTxnStartOffset: -1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Producers = %+v, want %+v", got, want)
	}
	wantCode(t, "commit", e.end(t, "tx", pid, 0, true, -1), nil)
	got, err = viewOf(t, e.r).Producers(e.a0.id, 0)
	if err != nil || len(got) != 2 || got[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("Producers after commit = %+v, %v", got, err)
	}
}

// TestTxnReplicasAgree: replicas proposing transaction commands to one
// log, and one replaying it from scratch, reach the same state.
func TestTxnReplicasAgree(t *testing.T) {
	log := newTestLog()
	nowMs := new(atomic.Int64)
	nowMs.Store(txnT0)
	a := newTxnEnvOn(t, log, "a", nowMs)
	b := newTxnEnvOn(t, log, "b", nowMs)

	pid, _ := a.initOK(t, "t1", -1, -1)
	mustSync(t, b.r)
	b.addOK(t, "t1", pid, 0, b.a0, b.b0)
	a.produceOK(t, a.a0, pid, 0, 0, 3)
	mustSync(t, b.r)
	b.produceOK(t, b.b0, pid, 0, 0, 1)
	wantCode(t, "AddOffsetsToTxn", mustPropose(t, a.r, AddOffsetsToTxn{TransactionalID: "t1", ProducerID: pid, Group: "g"}), nil)
	mustOK(t, b.r, TxnOffsetCommit{TransactionalID: "t1", ProducerID: pid, Group: "g", Generation: -1,
		Offsets: []OffsetCommitPartition{{Topic: "a", Partition: 0, Offset: 3, CommitTimestamp: -1}}})
	wantCode(t, "commit", a.end(t, "t1", pid, 0, true, -1), nil)

	pid2, _ := b.initOK(t, "t2", -1, -1)
	mustSync(t, a.r)
	a.addOK(t, "t2", pid2, 0, a.a1)
	b.produceOK(t, b.a1, pid2, 0, 0, 2)
	nowMs.Add(txnTimeoutMs)
	mustOK(t, a.r, TxnSweep{TransactionalIDs: []string{"t1", "t2"}})
	pid3, _ := a.initOK(t, "t3", -1, -1)
	mustSync(t, b.r)
	b.addOK(t, "t3", pid3, 0, b.a0)
	b.produceOK(t, b.a0, pid3, 0, 0, 1) // left open

	mustSync(t, a.r)
	mustSync(t, b.r)
	c := openReplica(t, log, nil, "c")
	mustSync(t, c)
	da, db, dc := mustDigest(t, a.r), mustDigest(t, b.r), mustDigest(t, c)
	if da != db || da != dc {
		t.Fatalf("digests differ: %x %x %x", da, db, dc)
	}
	// The digest covers transaction state: the sweep above aborted t2.
	for _, r := range []*testReplica{a.r, b.r, c} {
		s, ok, err := viewOf(t, r).Txn("t2")
		if err != nil || !ok || s.Status != TxnCompleteAbort || s.PrevBy != BumpByTimeout {
			t.Fatalf("t2 = %+v, %v, %v", s, ok, err)
		}
	}
	if lso, hwm := a.stable(t, a.a0); lso != 4 || hwm != 5 {
		t.Fatalf("a/0 lso %d hwm %d, want t3's first offset 4 and 5", lso, hwm)
	}
}

// TestTxnOffsetsPerProducer: two transactional producers commit offsets of
// the same group partition; each commit or abort settles only its own,
// and deleting the group drops what is still pending.
func TestTxnOffsetsPerProducer(t *testing.T) {
	e := newTxnEnv(t)
	apid, _ := e.initOK(t, "ta", -1, -1)
	bpid, _ := e.initOK(t, "tb", -1, -1)
	commit := func(tx string, pid, off int64) {
		t.Helper()
		if res := mustPropose(t, e.r, AddOffsetsToTxn{TransactionalID: tx, ProducerID: pid, Group: "g"}); res.Code != 0 {
			t.Fatalf("AddOffsetsToTxn(%s): %v", tx, res.Err())
		}
		res := mustPropose(t, e.r, TxnOffsetCommit{TransactionalID: tx, ProducerID: pid, Group: "g", Generation: -1,
			Offsets: []OffsetCommitPartition{{Topic: "a", Partition: 0, Offset: off, LeaderEpoch: -1, CommitTimestamp: -1}}})
		if res.Code != 0 || res.Codes[0] != 0 {
			t.Fatalf("TxnOffsetCommit(%s): %+v", tx, res)
		}
	}
	pending := func() bool {
		v := e.r.View()
		defer v.Close()
		ok, err := v.HasPendingTxnOffset("g", e.a0.id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	commit("ta", apid, 10)
	commit("tb", bpid, 20)
	wantCode(t, "abort tb", e.end(t, "tb", bpid, 0, false, -1), nil)
	if !pending() {
		t.Fatal("aborting tb dropped ta's pending offset")
	}
	wantCode(t, "commit ta", e.end(t, "ta", apid, 0, true, -1), nil)
	v := e.r.View()
	o, ok, err := v.CommittedOffset("g", e.a0.id, 0)
	v.Close()
	if err != nil || !ok || o.Offset != 10 {
		t.Fatalf("committed offset %+v (%v, %v), want ta's 10", o, ok, err)
	}
	if pending() {
		t.Error("pending offsets left after both transactions ended")
	}

	// A pending offset of a deleted group does not bring it back.
	commit("ta", apid, 30)
	if res := mustPropose(t, e.r, DeleteGroup{Group: "g"}); res.Code != 0 {
		t.Fatal(res.Err())
	}
	wantCode(t, "commit after delete", e.end(t, "ta", apid, 0, true, -1), nil)
	v = e.r.View()
	_, exists, err := v.Group("g")
	v.Close()
	if err != nil || exists {
		t.Errorf("the deleted group came back with a transaction's commit (%v)", err)
	}
}

// TestEndTxnBumpEpoch covers EndTxn v5 (KIP-890 part 2): every EndTxn
// bumps the epoch and its markers carry the new one, a retry naming the
// previous epoch gets the current pair, and requests of an ended
// transaction — a delayed EndTxn, a late batch — are fenced even after
// the next transaction began (KAFKA-17754).
func TestEndTxnBumpEpoch(t *testing.T) {
	e := newTxnEnv(t)
	pid, epoch := e.initOK(t, "tv2", -1, -1)
	end := func(epoch int16, commit bool) Result {
		t.Helper()
		return mustPropose(t, e.r, EndTxn{TransactionalID: "tv2", ProducerID: pid, ProducerEpoch: epoch, Commit: commit, Seq: -1, BumpEpoch: true})
	}

	e.addOK(t, "tv2", pid, epoch, e.a0)
	e.produceOK(t, e.a0, pid, epoch, 0, 2)
	res := end(epoch, true)
	wantCode(t, "EndTxn v5 commit", res, nil)
	if res.ProducerID != pid || res.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5 answered %d/%d, want %d/%d", res.ProducerID, res.ProducerEpoch, pid, epoch+1)
	}
	e.wantMarker(t, e.a0, 2, pid, epoch+1, true)

	// The client lost the answer and retries with its old epoch.
	again := end(epoch, true)
	wantCode(t, "retry of EndTxn v5", again, nil)
	if again.ProducerEpoch != epoch+1 {
		t.Errorf("retry answered epoch %d, want %d", again.ProducerEpoch, epoch+1)
	}
	if got := len(e.entries(t, e.a0)); got != 2 {
		t.Errorf("the retry wrote more markers: %d index entries, want 2", got)
	}

	// Transaction 2 with the new epoch, starting again at sequence 0.
	next := epoch + 1
	e.addOK(t, "tv2", pid, next, e.a0)
	e.produceOK(t, e.a0, pid, next, 0, 1)
	// The first transaction's EndTxn and a batch of it, delayed: fenced.
	wantCode(t, "delayed abort of transaction 1", end(epoch, false), kerr.ProducerFenced)
	wantBatchCode(t, "delayed batch of transaction 1", e.produce(t, e.a0, pid, epoch, 2, 1), kerr.InvalidProducerEpoch)
	if s := e.state(t, "tv2"); s.Status != TxnOngoing || s.ProducerEpoch != next {
		t.Fatalf("transaction 2 after the delayed requests: %v at epoch %d", s.Status, s.ProducerEpoch)
	}
	wantCode(t, "abort transaction 2", end(next, false), nil)

	// Aborting with nothing ongoing only moves the epoch on; committing
	// nothing is still an error.
	before := len(e.entries(t, e.a0))
	res = end(next+1, false)
	wantCode(t, "abort of an empty transaction", res, nil)
	if res.ProducerEpoch != next+2 || len(e.entries(t, e.a0)) != before {
		t.Errorf("empty abort: epoch %d (want %d), %d entries (want %d)", res.ProducerEpoch, next+2, len(e.entries(t, e.a0)), before)
	}
	wantCode(t, "commit of an empty transaction", end(next+2, true), kerr.InvalidTxnState)
}

// TestEndTxnBumpExhausted: an EndTxn v5 at the last epoch moves the
// producer to a new id; the markers keep the old pair, and a retry naming
// it still gets the new pair.
func TestEndTxnBumpExhausted(t *testing.T) {
	e := newTxnEnv(t)
	pid, epoch := e.initOK(t, "ex", -1, -1)
	for epoch < maxBumpableEpoch {
		res := mustPropose(t, e.r, EndTxn{TransactionalID: "ex", ProducerID: pid, ProducerEpoch: epoch, Commit: false, Seq: -1, BumpEpoch: true})
		wantCode(t, "empty abort", res, nil)
		epoch = res.ProducerEpoch
	}
	e.addOK(t, "ex", pid, epoch, e.b0)
	end := EndTxn{TransactionalID: "ex", ProducerID: pid, ProducerEpoch: epoch, Commit: true, Seq: -1, BumpEpoch: true}
	res := mustPropose(t, e.r, end)
	wantCode(t, "EndTxn at the last epoch", res, nil)
	if res.ProducerID == pid || res.ProducerEpoch != 0 {
		t.Fatalf("answered %d/%d, want a new producer id at epoch 0", res.ProducerID, res.ProducerEpoch)
	}
	e.wantMarker(t, e.b0, 0, pid, epoch, true)
	again := mustPropose(t, e.r, end)
	if again.Code != 0 || again.ProducerID != res.ProducerID || again.ProducerEpoch != 0 {
		t.Errorf("retry answered %+v, want %d/0", again, res.ProducerID)
	}
}
