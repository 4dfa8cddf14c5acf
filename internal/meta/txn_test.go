package meta

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// txnT0 is where the proposer clock of transaction tests starts (unix ms).
const txnT0 = 1_700_000_000_000

// txnTimeoutMs is the transaction timeout tests initialize producers
// with.
const txnTimeoutMs = 60_000

// txnEnv is a replica whose proposer clock the test sets (entry
// timestamps, and so the log clock, follow it), with topics "a" (two
// partitions) and "b" (one).
type txnEnv struct {
	r          *testReplica
	nowMs      *atomic.Int64
	a0, a1, b0 partRef
}

func newTxnEnv(t *testing.T) *txnEnv {
	t.Helper()
	nowMs := new(atomic.Int64)
	nowMs.Store(txnT0)
	return newTxnEnvOn(t, newTestLog(), "w", nowMs)
}

// newTxnEnvOn opens a replica named writer over log with clock nowMs and
// creates the topics unless they exist.
func newTxnEnvOn(t *testing.T, log *testLog, writer string, nowMs *atomic.Int64) *txnEnv {
	t.Helper()
	e := &txnEnv{nowMs: nowMs}
	e.r = openReplica(t, log, nil, writer, func(c *testConfig) {
		c.Now = func() time.Time { return time.UnixMilli(nowMs.Load()) }
	})
	for _, name := range []string{"a", "b"} {
		n := int32(2)
		if name == "b" {
			n = 1
		}
		if res := mustPropose(t, e.r, CreateTopic{Name: name, Partitions: n}); res.Code != 0 && res.Code != kerr.TopicAlreadyExists.Code {
			t.Fatalf("CreateTopic(%s): %v", name, res.Err())
		}
	}
	mustSync(t, e.r)
	a, b := topicID(t, e.r, "a"), topicID(t, e.r, "b")
	e.a0, e.a1, e.b0 = partRef{a, 0}, partRef{a, 1}, partRef{b, 0}
	return e
}

func (e *txnEnv) advance(ms int64) { e.nowMs.Add(ms) }

func (e *txnEnv) init(t *testing.T, id string, pid int64, epoch int16) Result {
	t.Helper()
	return mustPropose(t, e.r, InitTransactionalProducer{TransactionalID: id, TimeoutMs: txnTimeoutMs, ProducerID: pid, ProducerEpoch: epoch})
}

// initOK initializes id and returns its producer id and epoch.
func (e *txnEnv) initOK(t *testing.T, id string, pid int64, epoch int16) (int64, int16) {
	t.Helper()
	res := e.init(t, id, pid, epoch)
	if res.Code != 0 {
		t.Fatalf("InitTransactionalProducer(%s, %d, %d) = %v", id, pid, epoch, res.Err())
	}
	return res.ProducerID, res.ProducerEpoch
}

func (e *txnEnv) add(t *testing.T, id string, pid int64, epoch int16, parts ...partRef) Result {
	t.Helper()
	c := AddPartitionsToTxn{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch}
	for _, p := range parts {
		c.Partitions = append(c.Partitions, TopicPartition{Topic: e.name(t, p), Partition: p.partition})
	}
	return mustPropose(t, e.r, c)
}

func (e *txnEnv) addOK(t *testing.T, id string, pid int64, epoch int16, parts ...partRef) {
	t.Helper()
	res := e.add(t, id, pid, epoch, parts...)
	if res.Code != 0 {
		t.Fatalf("AddPartitionsToTxn(%s) = %v", id, res.Err())
	}
	for i, c := range res.Codes {
		if c != 0 {
			t.Fatalf("AddPartitionsToTxn(%s) partition %d: %v", id, i, kerr.ErrorForCode(c))
		}
	}
}

func (e *txnEnv) name(t *testing.T, p partRef) string {
	t.Helper()
	v := viewOf(t, e.r)
	tp, ok, err := v.TopicByID(p.id)
	if err != nil || !ok {
		t.Fatalf("TopicByID(%v) = %v, %v", p.id, ok, err)
	}
	return tp.Name
}

// produce commits one transactional batch of records records from
// sequence seq and returns its outcome.
func (e *txnEnv) produce(t *testing.T, ref partRef, pid int64, epoch int16, seq, records int32) BatchResult {
	t.Helper()
	co := idemCommit(ref, idem{PID: pid, Epoch: epoch, Seq: seq, Records: records})
	co.Batches[0].Transactional = true
	return mustOK(t, e.r, co).Batches[0]
}

func (e *txnEnv) produceOK(t *testing.T, ref partRef, pid int64, epoch int16, seq, records int32) int64 {
	t.Helper()
	br := e.produce(t, ref, pid, epoch, seq, records)
	if br.Code != 0 {
		t.Fatalf("transactional batch to %v: %v", ref, kerr.ErrorForCode(br.Code))
	}
	return br.BaseOffset
}

// plain commits a non-transactional batch and returns its base offset.
func (e *txnEnv) plain(t *testing.T, ref partRef, records int32) int64 {
	t.Helper()
	br := mustOK(t, e.r, commitTo(records, ref)).Batches[0]
	if br.Code != 0 {
		t.Fatalf("plain batch to %v: %v", ref, kerr.ErrorForCode(br.Code))
	}
	return br.BaseOffset
}

func (e *txnEnv) end(t *testing.T, id string, pid int64, epoch int16, commit bool, seq int64) Result {
	t.Helper()
	return mustPropose(t, e.r, EndTxn{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: commit, Seq: seq})
}

func (e *txnEnv) state(t *testing.T, id string) TxnState {
	t.Helper()
	s, ok, err := viewOf(t, e.r).Txn(id)
	if err != nil || !ok {
		t.Fatalf("Txn(%s) = %v, %v", id, ok, err)
	}
	return s
}

func (e *txnEnv) exists(t *testing.T, id string) bool {
	t.Helper()
	_, ok, err := viewOf(t, e.r).Txn(id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// entries returns every index entry of a partition.
func (e *txnEnv) entries(t *testing.T, ref partRef) []IndexEntry {
	t.Helper()
	it, err := viewOf(t, e.r).Seek(ref.id, ref.partition, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []IndexEntry
	for it.Next() {
		out = append(out, it.Entry())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// entryAt returns the index entry holding offset.
func (e *txnEnv) entryAt(t *testing.T, ref partRef, offset int64) IndexEntry {
	t.Helper()
	it, err := viewOf(t, e.r).Seek(ref.id, ref.partition, offset)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Next() {
		t.Fatalf("no index entry at %v offset %d: %v", ref, offset, it.Err())
	}
	ie := it.Entry()
	if ie.BaseOffset > offset || ie.LastOffset() < offset {
		t.Fatalf("entry at %v offset %d is %+v", ref, offset, ie)
	}
	return ie
}

// stable returns a partition's last stable offset and high watermark.
func (e *txnEnv) stable(t *testing.T, ref partRef) (lso, hwm int64) {
	t.Helper()
	hwm = partitionState(t, e.r, ref.id, ref.partition).HighWatermark()
	lso, err := viewOf(t, e.r).LastStableOffset(ref.id, ref.partition, hwm)
	if err != nil {
		t.Fatal(err)
	}
	return lso, hwm
}

func (e *txnEnv) aborted(t *testing.T, ref partRef) []AbortedTxn {
	t.Helper()
	a, err := viewOf(t, e.r).AbortedTxns(ref.id, ref.partition, 0, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantCode(t *testing.T, what string, res Result, want *kerr.Error) {
	t.Helper()
	var code int16
	if want != nil {
		code = want.Code
	}
	if res.Code != code {
		t.Fatalf("%s: %v, want %v", what, res.Err(), want)
	}
}

func wantBatchCode(t *testing.T, what string, br BatchResult, want *kerr.Error) {
	t.Helper()
	if br.Code != want.Code {
		t.Fatalf("%s: batch code %v, want %v", what, kerr.ErrorForCode(br.Code), want)
	}
}

// wantMarker checks that the entry at offset is a marker of pid.
func (e *txnEnv) wantMarker(t *testing.T, ref partRef, offset, pid int64, epoch int16, commit bool) {
	t.Helper()
	ie := e.entryAt(t, ref, offset)
	if ie.BaseOffset != offset || !ie.Control || !ie.Transactional || ie.Commit != commit || ie.Records != 1 ||
		ie.ProducerID != pid || ie.ProducerEpoch != epoch || ie.ObjectKey != "" || ie.Length != recordbatch.ControlBatchSize {
		t.Fatalf("entry at %v offset %d = %+v, want a marker of %d/%d commit=%v", ref, offset, ie, pid, epoch, commit)
	}
}

func TestInitTransactionalProducer(t *testing.T) {
	e := newTxnEnv(t)
	pid, epoch := e.initOK(t, "tx", -1, -1)
	if epoch != 0 {
		t.Fatalf("first init: epoch %d, want 0", epoch)
	}
	if s := e.state(t, "tx"); s.ProducerID != pid || s.ProducerEpoch != 0 || s.PrevEpoch != -1 || s.Status != TxnEmpty || s.TimeoutMs != txnTimeoutMs {
		t.Fatalf("state after first init: %+v", s)
	}
	other, _ := e.initOK(t, "other", -1, -1)
	if other == pid {
		t.Fatalf("two transactional ids share producer id %d", pid)
	}
	// An idempotent producer's id comes from the same counter.
	if res := mustOK(t, e.r, AllocateProducerID{ProducerID: -1, ProducerEpoch: -1}); res.ProducerID == pid || res.ProducerID == other {
		t.Fatalf("AllocateProducerID handed out transactional producer id %d", res.ProducerID)
	}

	// A new instance (no id named) bumps the epoch and fences the old.
	pid2, epoch2 := e.initOK(t, "tx", -1, -1)
	if pid2 != pid || epoch2 != 1 {
		t.Fatalf("re-init = %d/%d, want %d/1", pid2, epoch2, pid)
	}
	if s := e.state(t, "tx"); s.PrevEpoch != 0 || s.PrevBy != BumpByInit {
		t.Fatalf("state after re-init: %+v", s)
	}
	res := e.add(t, "tx", pid, 0, e.a0)
	wantCode(t, "AddPartitionsToTxn with the fenced epoch", res, kerr.ProducerFenced)
	if len(res.Codes) != 1 || res.Codes[0] != kerr.ProducerFenced.Code {
		t.Fatalf("fenced AddPartitionsToTxn codes %v", res.Codes)
	}
	if s := e.state(t, "tx"); s.Status != TxnEmpty || len(s.Partitions) != 0 {
		t.Fatalf("a fenced AddPartitionsToTxn began a transaction: %+v", s)
	}
	e.addOK(t, "tx", pid, 1, e.a0)

	for _, c := range []struct {
		name string
		cmd  InitTransactionalProducer
		want *kerr.Error
	}{
		{"zero timeout", InitTransactionalProducer{TransactionalID: "tx", TimeoutMs: 0, ProducerID: -1, ProducerEpoch: -1}, kerr.InvalidTransactionTimeout},
		{"timeout over the max", InitTransactionalProducer{TransactionalID: "tx", TimeoutMs: MaxTxnTimeoutMs + 1, ProducerID: -1, ProducerEpoch: -1}, kerr.InvalidTransactionTimeout},
		{"empty id", InitTransactionalProducer{TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, kerr.InvalidRequest},
		{"id too long", InitTransactionalProducer{TransactionalID: strings.Repeat("x", math.MaxInt16+1), TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1}, kerr.InvalidRequest},
		{"another producer id", InitTransactionalProducer{TransactionalID: "tx", TimeoutMs: 1000, ProducerID: other, ProducerEpoch: 1}, kerr.ProducerFenced},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantCode(t, "InitTransactionalProducer", mustPropose(t, e.r, c.cmd), c.want)
			if s := e.state(t, "tx"); s.ProducerEpoch != 1 || s.Status != TxnOngoing {
				t.Fatalf("a refused init changed the state: %+v", s)
			}
		})
	}
}

// TestInitKIP360Retry: a producer naming its epoch gets it bumped once; a
// repeat of that request (its reply was lost) gets the same epoch.
func TestInitKIP360Retry(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	if p, ep := e.initOK(t, "tx", pid, 0); p != pid || ep != 1 {
		t.Fatalf("bump by request = %d/%d, want %d/1", p, ep, pid)
	}
	if s := e.state(t, "tx"); s.PrevEpoch != 0 || s.PrevBy != BumpByRequest {
		t.Fatalf("state after bump by request: %+v", s)
	}
	for range 2 {
		if p, ep := e.initOK(t, "tx", pid, 0); p != pid || ep != 1 {
			t.Fatalf("retry of the bump = %d/%d, want %d/1", p, ep, pid)
		}
	}
	if s := e.state(t, "tx"); s.ProducerEpoch != 1 {
		t.Fatalf("retry bumped again: %+v", s)
	}
	if p, ep := e.initOK(t, "tx", pid, 1); p != pid || ep != 2 {
		t.Fatalf("next bump = %d/%d, want %d/2", p, ep, pid)
	}
	// Epoch 0 is now two bumps back: fenced.
	wantCode(t, "init naming an epoch two bumps back", e.init(t, "tx", pid, 0), kerr.ProducerFenced)
	wantCode(t, "init naming an epoch never handed out", e.init(t, "tx", pid, 7), kerr.ProducerFenced)
	if s := e.state(t, "tx"); s.ProducerEpoch != 2 {
		t.Fatalf("fenced inits changed the epoch: %+v", s)
	}
}

// TestInitZombieFenced: after a new instance bumped the epoch, the old one
// naming its epoch is fenced, not taken for a retry.
func TestInitZombieFenced(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	if _, ep := e.initOK(t, "tx", -1, -1); ep != 1 {
		t.Fatalf("new instance got epoch %d", ep)
	}
	wantCode(t, "zombie init", e.init(t, "tx", pid, 0), kerr.ProducerFenced)
	if s := e.state(t, "tx"); s.ProducerEpoch != 1 || s.PrevEpoch != 0 {
		t.Fatalf("zombie init changed the state: %+v", s)
	}
}

// TestInitAbortsOngoing: re-initializing aborts the ongoing transaction
// with the new epoch: a marker in every partition it added, its ranges in
// the aborted index, the last stable offsets back at the high
// watermarks, and the old epoch fenced in those partitions.
func TestInitAbortsOngoing(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	e.plain(t, e.a0, 2) // offsets 0-1
	e.addOK(t, "tx", pid, 0, e.a0, e.a1, e.b0)
	first := e.produceOK(t, e.a0, pid, 0, 0, 3) // 2-4
	e.produceOK(t, e.a0, pid, 0, 3, 1)          // 5
	e.produceOK(t, e.b0, pid, 0, 0, 2)          // 0-1
	if first != 2 {
		t.Fatalf("first transactional offset %d", first)
	}
	if lso, hwm := e.stable(t, e.a0); lso != 2 || hwm != 6 {
		t.Fatalf("a/0 during the transaction: lso %d hwm %d, want 2 and 6", lso, hwm)
	}

	if _, ep := e.initOK(t, "tx", -1, -1); ep != 1 {
		t.Fatalf("re-init epoch %d", ep)
	}
	e.wantMarker(t, e.a0, 6, pid, 1, false)
	e.wantMarker(t, e.a1, 0, pid, 1, false)
	e.wantMarker(t, e.b0, 2, pid, 1, false)
	for _, c := range []struct {
		ref  partRef
		want []AbortedTxn
	}{
		{e.a0, []AbortedTxn{{ProducerID: pid, FirstOffset: 2, LastOffset: 6}}},
		{e.a1, nil}, // the transaction wrote nothing there
		{e.b0, []AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 2}}},
	} {
		if got := e.aborted(t, c.ref); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("aborted of %v = %+v, want %+v", c.ref, got, c.want)
		}
		if lso, hwm := e.stable(t, c.ref); lso != hwm {
			t.Fatalf("%v after the abort: lso %d, hwm %d", c.ref, lso, hwm)
		}
		if open, err := viewOf(t, e.r).OpenTxns(c.ref.id, c.ref.partition); err != nil || len(open) != 0 {
			t.Fatalf("open transactions left in %v: %+v, %v", c.ref, open, err)
		}
	}
	if s := e.state(t, "tx"); s.Status != TxnEmpty || s.ProducerEpoch != 1 {
		t.Fatalf("state after re-init: %+v", s)
	}
	// The markers fenced the old epoch where it wrote.
	wantBatchCode(t, "old epoch after the abort", e.produce(t, e.a0, pid, 0, 4, 1), kerr.InvalidProducerEpoch)
}

// TestTxnBatchNeedsPartition: KIP-890's first defence. A transactional
// batch is taken only into a partition its producer's ongoing
// transaction added, in that transaction's epoch.
func TestTxnBatchNeedsPartition(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	wantBatchCode(t, "no transaction", e.produce(t, e.a0, pid, 0, 0, 1), kerr.InvalidTxnState)
	e.plain(t, e.a0, 5)
	e.addOK(t, "tx", pid, 0, e.a0)
	wantBatchCode(t, "partition not added", e.produce(t, e.a1, pid, 0, 0, 1), kerr.InvalidTxnState)
	if st := partitionState(t, e.r, e.a1.id, 1); st.NextOffset != 0 {
		t.Fatalf("refused batch took offsets: %+v", st)
	}
	wantBatchCode(t, "epoch newer than the transaction's", e.produce(t, e.a0, pid, 1, 0, 1), kerr.InvalidTxnState)
	co := commitTo(1, e.a0)
	co.Batches[0].Transactional = true
	wantBatchCode(t, "no producer id", mustOK(t, e.r, co).Batches[0], kerr.InvalidRecord)

	if base := e.produceOK(t, e.a0, pid, 0, 0, 3); base != 5 {
		t.Fatalf("base offset %d, want 5", base)
	}
	if ie := e.entryAt(t, e.a0, 5); !ie.Transactional || ie.Control {
		t.Fatalf("transactional batch indexed as %+v", ie)
	}
	e.plain(t, e.a0, 2) // 8-9, after the open transaction
	if lso, hwm := e.stable(t, e.a0); lso != 5 || hwm != 10 {
		t.Fatalf("lso %d hwm %d, want 5 and 10", lso, hwm)
	}
	// A retry of the first batch is a duplicate and moves nothing.
	if base := e.produceOK(t, e.a0, pid, 0, 0, 3); base != 5 {
		t.Fatalf("duplicate base offset %d, want 5", base)
	}
	if lso, _ := e.stable(t, e.a0); lso != 5 {
		t.Fatalf("lso %d after a duplicate", lso)
	}
	open, err := viewOf(t, e.r).OpenTxns(e.a0.id, 0)
	if err != nil || !reflect.DeepEqual(open, []OpenTxn{{ProducerID: pid, ProducerEpoch: 0, FirstOffset: 5}}) {
		t.Fatalf("OpenTxns = %+v, %v", open, err)
	}
}

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

func txnSeedCommands() []Command {
	return []Command{
		InitTransactionalProducer{TransactionalID: "tx", TimeoutMs: 60000, ProducerID: 7, ProducerEpoch: 3},
		InitTransactionalProducer{ProducerID: -1, ProducerEpoch: -1},
		AddPartitionsToTxn{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, Partitions: []TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 5}}},
		AddPartitionsToTxn{},
		AddOffsetsToTxn{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, Group: "g"},
		AddOffsetsToTxn{},
		TxnOffsetCommit{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, Group: "g", Generation: 4, Offsets: []OffsetCommitPartition{
			{Topic: "a", Partition: 1, Offset: 99, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: -1},
		}},
		TxnOffsetCommit{Generation: -1},
		EndTxn{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, Commit: true, Seq: 12},
		EndTxn{Seq: -1},
		TxnSweep{TransactionalIDs: []string{"a", "b"}},
		TxnSweep{},
		CommitObject{ObjectKey: "o", ObjectSize: 10, Batches: []CommitBatch{{TopicID: TopicID{1}, Length: 10, Records: 1, BatchCount: 1,
			ProducerID: 7, ProducerEpoch: 3, BaseSequence: 0, Transactional: true}}},
	}
}

func TestTxnCodecs(t *testing.T) {
	t.Run("commands", func(t *testing.T) {
		for _, c := range txnSeedCommands() {
			rc := EncodeCommand(c)
			got, err := DecodeCommand(rc)
			if err != nil || !reflect.DeepEqual(got, c) {
				t.Fatalf("round trip of %#v = %#v, %v", c, got, err)
			}
			if rc.Version != c.version() {
				t.Fatalf("%v encoded at version %d", c.Type(), rc.Version)
			}
			// Another version is unknown, not guessed at.
			rc.Version++
			if _, err := DecodeCommand(rc); err == nil {
				t.Fatalf("%v decoded at version %d", c.Type(), rc.Version)
			}
		}
	})
	t.Run("commit object version 1", func(t *testing.T) {
		// Entries written before transactions existed have no flag.
		c := CommitObject{ObjectKey: "o", ObjectSize: 100, Batches: []CommitBatch{{Length: 100, Records: 1, BatchCount: 1, Transactional: true}}}
		rc := EncodeCommand(c)
		rc.Version = 1
		rc.Payload = rc.Payload[:len(rc.Payload)-1]
		got, err := DecodeCommand(rc)
		c.Batches[0].Transactional = false
		if err != nil || !reflect.DeepEqual(got, Command(c)) {
			t.Fatalf("version 1 = %#v, %v", got, err)
		}
	})
	t.Run("state", func(t *testing.T) {
		for _, s := range []TxnState{
			{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, PrevEpoch: 2, PrevBy: BumpByTimeout, TimeoutMs: 1000,
				Status: TxnOngoing, Seq: 4, StartMs: txnT0, UpdatedMs: txnT0 + 1,
				Partitions: []TxnPartition{{TopicID{1}, 0}, {TopicID{2}, 3}}, Groups: []string{"g", "h"}},
			{TransactionalID: "e", ProducerID: 0, PrevEpoch: -1},
		} {
			got, err := decodeTxnState(s.TransactionalID, s.encode(nil))
			if err != nil || !reflect.DeepEqual(got, s) {
				t.Fatalf("round trip of %+v = %+v, %v", s, got, err)
			}
		}
		bad := TxnState{Status: TxnCompleteAbort + 1}
		if _, err := decodeTxnState("x", bad.encode(nil)); err == nil {
			t.Fatal("decoded an unknown status")
		}
	})
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
