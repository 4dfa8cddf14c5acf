package compact_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// Each race lands between the compactor's read of a run and its swap
// (hookRewriter): the swap must lose, the index must be what the other
// change alone makes it, and no record may be lost or read twice.

// raceEnv is a partition of 10 level-0 entries (3 records each), old
// enough to compact, and what a fetch read of it before.
func raceEnv(t *testing.T, configs map[string]string) (*env, tp, []byte) {
	e := newEnv(t)
	id := e.propose(meta.CreateTopic{Name: "a", Partitions: 1, Configs: configs}).TopicID
	p := tp{id, 0}
	for i := range 10 {
		e.produce(uint64(i), 3, p)
	}
	e.advance(compact.DefaultMaxLag)
	return e, p, e.read(nil, p, 0)
}

// lostOnce runs a pass whose rewrite does race, and checks that the swap
// lost and that the loser's object is known and dead (the janitor
// deletes it, whatever the reconciler's sweep).
func (e *env) lostOnce(race func()) {
	e.t.Helper()
	c := e.compactor(compact.Config{RewriterFor: func(meta.Topic) compact.Rewriter { return hookRewriter{race} }})
	dead := e.gcState().DeadObjects
	st := e.pass(c)
	if st.Lost != 1 || st.Swaps != 0 {
		e.t.Fatalf("pass: %+v, want one lost swap", st)
	}
	if got := e.gcState().DeadObjects; got <= dead {
		e.t.Fatalf("dead objects %d after a lost swap, %d before: its object is not queued", got, dead)
	}
}

// Retention (retention.bytes: half the partition) trims the run's
// first entries first.
func TestRaceRetention(t *testing.T) {
	e, p, before := raceEnv(t, nil)
	half := 5 * e.entries(p)[0].Length
	e.lostOnce(func() {
		res := e.propose(meta.ApplyRetention{DefaultRetentionMs: -1, DefaultRetentionBytes: half,
			Partitions: []meta.RetentionPartition{{TopicID: p.id}}})
		if res.Batches[0].LogStartOffset != 15 {
			t.Fatalf("retention moved the log start to %d, want 15", res.Batches[0].LogStartOffset)
		}
	})
	if es := e.entries(p); len(es) != 5 || es[0].BaseOffset != 15 {
		t.Fatalf("index after retention: %d entries from %d, want 5 from 15", len(es), es[0].BaseOffset)
	}
	want := e.readAt(before, 15)
	mustEqual(t, "read after retention", e.read(nil, p, 15), want)
	if st := e.pass(e.compactor(compact.Config{AgentID: "agent-1-2"})); st.Swaps != 1 {
		t.Fatalf("second pass: %+v, want one swap", st)
	}
	mustEqual(t, "read after compaction", e.read(nil, p, 15), want)
}

// DeleteRecords trims part of the run first: what is left reads as
// before from the new log start, then compacts on the next pass.
func TestRaceDeleteRecords(t *testing.T) {
	e, p, before := raceEnv(t, nil)
	e.lostOnce(func() {
		e.propose(meta.DeleteRecords{Partitions: []meta.DeleteRecordsPartition{{TopicID: p.id, Offset: 9}}})
	})
	want := e.readAt(before, 9)
	mustEqual(t, "read after DeleteRecords", e.read(nil, p, 9), want)
	if st := e.pass(e.compactor(compact.Config{AgentID: "agent-1-2"})); st.Swaps != 1 {
		t.Fatalf("second pass: %+v, want one swap", st)
	}
	mustEqual(t, "read after compaction", e.read(nil, p, 9), want)
	if es := e.entries(p); len(es) != 1 || es[0].BaseOffset != 9 {
		t.Fatalf("index after compaction: %+v, want one entry at 9", es)
	}
}

// The topic is deleted and created again under its name: the swap names
// the old id and loses; the new topic is left as it is.
func TestRaceTopicRecreated(t *testing.T) {
	e, p, _ := raceEnv(t, nil)
	var again tp
	var want []byte
	e.lostOnce(func() {
		e.propose(meta.DeleteTopic{Name: "a"})
		again = tp{e.topic("a", 1), 0}
		e.produce(99, 2, again)
		want = e.read(nil, again, 0)
	})
	if again.id == p.id {
		t.Fatal("re-created topic has the old id")
	}
	mustEqual(t, "read of the new topic", e.read(nil, again, 0), want)
	if es := e.entries(again); len(es) != 1 || compact.Compacted(es[0].ObjectKey) {
		t.Fatalf("new topic's index: %+v", es)
	}
	g := e.gcState()
	if g.LiveObjects != 1 {
		t.Fatalf("%d live objects, want the new topic's one", g.LiveObjects)
	}
}

// Another compactor (two agents that both think they own the partition)
// swaps the run first.
func TestRaceAnotherCompactor(t *testing.T) {
	e, p, before := raceEnv(t, nil)
	other := e.compactor(compact.Config{AgentID: "agent-2-1"})
	e.lostOnce(func() {
		if st := e.pass(other); st.Swaps != 1 {
			t.Fatalf("the other compactor: %+v, want one swap", st)
		}
	})
	mustEqual(t, "read", e.read(nil, p, 0), before)
	if l0, l1 := e.levels(p); l0 != 0 || l1 != 1 {
		t.Fatalf("%d level-0 and %d compacted entries, want 0 and 1", l0, l1)
	}
}

// A transaction is open over the run, then aborted over the next one:
// its batches and its marker are copied, and the last stable offset and
// the aborted ranges a read_committed fetch uses are unchanged.
func TestCompactOpenAndAbortedTransaction(t *testing.T) {
	e := newEnv(t)
	id := e.topic("a", 1)
	p := tp{id, 0}
	// Producer id 0 is batchtest's "not idempotent": take it first.
	e.propose(meta.AllocateProducerID{ProducerID: -1, ProducerEpoch: -1})
	pid := e.propose(meta.InitTransactionalProducer{TransactionalID: "tx", TimeoutMs: 900000, ProducerID: -1, ProducerEpoch: -1}).ProducerID
	e.produce(1, 2, p)
	e.propose(meta.AddPartitionsToTxn{TransactionalID: "tx", ProducerID: pid, Partitions: []meta.TopicPartition{{Topic: "a"}}})
	txnBatch := func(seq int32) produce.Batch {
		b, err := produce.BatchFrom(id, 0, batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 50,
			ProducerID: pid, BaseSequence: seq, Transactional: true, Seed: uint64(seq)}))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range 3 {
		if res, err := e.p.Produce(testCtx(t), []produce.Batch{txnBatch(int32(2 * i))}); err != nil || res[0].Code != 0 {
			t.Fatalf("transactional produce: %v, %+v", err, res)
		}
		e.produce(uint64(10+i), 1, p) // not transactional, interleaved
	}
	type txnView struct {
		lso     int64
		aborted []meta.AbortedTxn
		read    []byte
	}
	look := func() txnView {
		v := e.db.View()
		defer v.Close()
		st, _, err := v.Partition(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		lso, err := v.LastStableOffset(id, 0, st.HighWatermark())
		if err != nil {
			t.Fatal(err)
		}
		ab, err := v.AbortedTxns(id, 0, 0, st.HighWatermark(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return txnView{lso, ab, e.read(v, p, 0)}
	}
	check := func(what string, before txnView) {
		t.Helper()
		after := look()
		if after.lso != before.lso || !slices.Equal(after.aborted, before.aborted) {
			t.Fatalf("%s: last stable %d, aborted %v; before %d, %v", what, after.lso, after.aborted, before.lso, before.aborted)
		}
		mustEqual(t, what, after.read, before.read)
	}

	open := look()
	if open.lso != 2 {
		t.Fatalf("last stable offset %d with the transaction open, want 2", open.lso)
	}
	c := e.compactor(compact.Config{})
	e.advance(compact.DefaultMaxLag)
	if st := e.pass(c); st.Swaps != 1 {
		t.Fatalf("pass: %+v", st)
	}
	check("open transaction", open)

	e.propose(meta.EndTxn{TransactionalID: "tx", ProducerID: pid, Commit: false, Seq: -1})
	e.produce(20, 1, p)
	aborted := look()
	if len(aborted.aborted) != 1 {
		t.Fatalf("aborted ranges %v, want one", aborted.aborted)
	}
	e.advance(compact.DefaultMaxLag)
	if st := e.pass(c); st.Swaps != 1 {
		t.Fatalf("pass over the marker: %+v", st)
	}
	check("aborted transaction", aborted)
	var markers int
	for _, en := range e.entries(p) {
		if en.Control {
			markers++
		}
	}
	if markers != 1 {
		t.Fatalf("%d markers in the index, want 1", markers)
	}
}

// A fetch that planned from a View before the swap still reads the old
// objects until the grace period has passed: the janitor deletes them
// only then.
func TestOlderViewReadsUntilGrace(t *testing.T) {
	e, p, before := raceEnv(t, nil)
	const grace = 10 * time.Second
	janitor, err := gc.New(gc.Config{Store: e.store, Meta: e.db, Grace: grace, Logger: quiet(), Placement: placement.Ring{Self: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := janitor.Step(testCtx(t)); err != nil { // proposes the grace
		t.Fatal(err)
	}
	old := e.db.View()
	defer old.Close()
	if st := e.pass(e.compactor(compact.Config{})); st.Swaps != 1 {
		t.Fatalf("pass: %+v", st)
	}
	e.advance(grace - time.Millisecond)
	if st, err := janitor.Step(testCtx(t)); err != nil || st.Deleted != 0 {
		t.Fatalf("janitor within the grace period: %+v, %v", st, err)
	}
	mustEqual(t, "read from the older view within grace", e.read(old, p, 0), before)
	e.advance(time.Millisecond)
	if st, err := janitor.Step(testCtx(t)); err != nil || st.Deleted != 10 {
		t.Fatalf("janitor after the grace period: %+v, %v; want the 10 old objects", st, err)
	}
	mustEqual(t, "read from a new view", e.read(nil, p, 0), before)
	// Past the grace period the older view's objects are gone: the bound
	// a fetch's plan must keep to (meta.DefaultGCGrace).
	r := fetch.NewReader(e.store, nil)
	if _, err := r.Read(testCtx(t), old, p.id, 0, 0, 1<<20); !errors.Is(err, fetch.ErrMissing) {
		t.Fatalf("read from the older view after grace: %v, want ErrMissing", err)
	}
}

// An entry that straddles the log start (DeleteRecords into its middle)
// is left alone: a swap of it could put its first batch in a new entry
// of its own, below the log start, which apply refuses, pass after pass.
func TestStraddlingEntryIsLeft(t *testing.T) {
	e := newEnv(t)
	p := tp{e.topic("a", 1), 0}
	// One entry of two batches (offsets 0..1 and 2..3), then more.
	two := append(batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 50, Seed: 1}),
		batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 50, Seed: 2})...)
	b, err := produce.BatchFrom(p.id, 0, two)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := e.p.Produce(testCtx(t), []produce.Batch{b}); err != nil || res[0].Code != 0 {
		t.Fatalf("produce: %v, %+v", err, res)
	}
	for i := range 4 {
		e.produce(uint64(10+i), 3, p)
	}
	before := e.read(nil, p, 2)
	e.propose(meta.DeleteRecords{Partitions: []meta.DeleteRecordsPartition{{TopicID: p.id, Offset: 2}}})
	e.advance(compact.DefaultMaxLag)
	c := e.compactor(compact.Config{EntryBytes: 1}) // an entry per batch
	for range 2 {
		if st := e.pass(c); st.Lost != 0 || st.Swaps != 1 && st.Swaps != 0 {
			t.Fatalf("pass: %+v, want no lost swap", st)
		}
	}
	es := e.entries(p)
	if es[0].BaseOffset != 0 || es[0].BatchCount != 2 || compact.Compacted(es[0].ObjectKey) {
		t.Fatalf("first entry %+v, want the level-0 one at 0", es[0])
	}
	if l0, l1 := e.levels(p); l0 != 1 || l1 != 4 {
		t.Fatalf("%d level-0 and %d compacted entries, want 1 and 4", l0, l1)
	}
	mustEqual(t, "read", e.read(nil, p, 2), before)
}
