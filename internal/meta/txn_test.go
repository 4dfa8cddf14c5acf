package meta

import (
	"math"
	"reflect"
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
