package fetch_test

import (
	"bytes"
	"log/slog"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// fastVerify verifies at a rate no test waits on.
var fastVerify = fetch.VerifyOptions{BytesPerSecond: 1 << 40}

// TestVerifyClean: a store the index agrees with verifies clean, and
// every entry with bytes (not the transaction marker) is counted.
func TestVerifyClean(t *testing.T) {
	e := newEnv(t, memobj.New(), 3, nil)
	for i := range 9 {
		e.produce(t, int32(i%3), build(t, 3, 50, uint64(i)))
	}
	p := e.initTxn(t, "x")
	e.addPartitions(t, p, 2)
	e.produceTxn(t, p, 2, 2, 10)
	e.endTxn(t, p, true)
	var entries, bytes, markers int64
	for part := range int32(3) {
		for _, en := range e.entries(t, part) {
			if en.Control {
				markers++
				continue
			}
			entries++
			bytes += en.Length
		}
	}
	if markers != 1 || entries != 10 {
		t.Fatalf("%d markers and %d data entries, want 1 and 10", markers, entries)
	}

	rep, err := fetch.Verify(testCtx(t), e.replica, e.store, fastVerify)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DamagedObjects != 0 || len(rep.Damaged) != 0 {
		t.Fatalf("clean store: %+v", rep.Damaged)
	}
	if rep.Partitions != 3 || rep.Entries != entries || rep.Bytes != bytes {
		t.Fatalf("checked %d partitions, %d entries, %d bytes; want 3, %d, %d", rep.Partitions, rep.Entries, rep.Bytes, entries, bytes)
	}
}

// TestVerifyFindsDamage damages three objects three ways: a flipped value
// byte, a deleted object holding two partitions' batches, and an object
// cut short. The report names each object, its kind and the offset
// ranges it held; the missing object costs one GET, not one per entry;
// and the damage log hears of all three.
func TestVerifyFindsDamage(t *testing.T) {
	store := objstore.WithCounters(memobj.New())
	e := newEnv(t, store, 2, nil)
	opts := batchtest.Options{Records: 4, ValueBytes: 60, Seed: 1}
	e.produce(t, 0, batchtest.Build(t, opts)) // 0/0-3: corrupt
	e.produce(t, 1, build(t, 2, 60, 2))       // 1/0-1: fine
	e.produce(t, 0, build(t, 2, 60, 3))       // 0/4-5: fine
	var both []produce.Batch                  // 0/6-7, 1/2-4, 0/8-9: missing
	for _, d := range []struct {
		p int32
		n int
	}{{0, 2}, {1, 3}, {0, 2}} {
		b, err := produce.BatchFrom(e.topic, d.p, build(t, d.n, 60, 4))
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, b)
	}
	if _, err := e.p.Produce(testCtx(t), both); err != nil {
		t.Fatal(err)
	}
	e.produce(t, 1, build(t, 2, 60, 5)) // 1/5-6: cut short

	p0, p1 := e.entries(t, 0), e.entries(t, 1)
	corrupt, missing, short := p0[0].ObjectKey, p0[2].ObjectKey, p1[2].ObjectKey
	damage(t, store, corrupt, func(obj []byte) { flipInside(t, obj, p0[0].Position, batchtest.Value(opts, 3)) })
	if err := store.Delete(testCtx(t), missing); err != nil {
		t.Fatal(err)
	}
	orig, err := store.Get(testCtx(t), short, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(testCtx(t), short, orig[:p1[2].Position+p1[2].Length/2]); err != nil {
		t.Fatal(err)
	}

	logs := new(logCounter)
	o := fastVerify
	o.Damage = fetch.NewDamageLog(slog.New(logs))
	before := store.Snapshot().Op(objstore.OpGet).Requests
	rep, err := fetch.Verify(testCtx(t), e.replica, store, o)
	if err != nil {
		t.Fatal(err)
	}
	// Every entry costs a GET but the missing object's second and
	// third.
	if gets := store.Snapshot().Op(objstore.OpGet).Requests - before; gets != rep.Entries-2 {
		t.Errorf("%d GETs for %d entries, want one less for each further entry of the missing object", gets, rep.Entries)
	}
	if rep.DamagedObjects != 3 || rep.Missing != 1 || rep.Corrupt != 2 || len(rep.Damaged) != 3 {
		t.Fatalf("report %+v, want 3 damaged objects, 1 missing", rep)
	}
	want := map[string]struct {
		kind   string
		ranges []fetch.DamagedRange
	}{
		corrupt: {"corrupt", []fetch.DamagedRange{{Topic: "t", Partition: 0, FirstOffset: 0, LastOffset: 3}}},
		missing: {"missing", []fetch.DamagedRange{
			{Topic: "t", Partition: 0, FirstOffset: 6, LastOffset: 9},
			{Topic: "t", Partition: 1, FirstOffset: 2, LastOffset: 4},
		}},
		short: {"corrupt", []fetch.DamagedRange{{Topic: "t", Partition: 1, FirstOffset: 5, LastOffset: 6}}},
	}
	for _, d := range rep.Damaged {
		w, ok := want[d.Key]
		if !ok || d.Kind != w.kind || !slices.Equal(d.Ranges, w.ranges) || d.Error == "" {
			t.Errorf("damaged %+v, want %+v", d, w)
		}
	}
	if st := o.Damage.Stats(); st.Objects[fetch.DamageMissing] != 1 || st.Objects[fetch.DamageCorrupt] != 2 || logs.total() != 3 {
		t.Errorf("damage log: %+v, %d lines", st, logs.total())
	}
}

// TestVerifyBoundsReport: past MaxObjects damaged objects are counted,
// not listed.
func TestVerifyBoundsReport(t *testing.T) {
	e := newEnv(t, memobj.New(), 1, nil)
	for i := range 5 {
		e.produce(t, 0, build(t, 1, 10, uint64(i)))
	}
	for _, en := range e.entries(t, 0) {
		if err := e.store.Delete(testCtx(t), en.ObjectKey); err != nil {
			t.Fatal(err)
		}
	}
	o := fastVerify
	o.MaxObjects = 2
	rep, err := fetch.Verify(testCtx(t), e.replica, e.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DamagedObjects != 5 || rep.Missing != 5 || len(rep.Damaged) != 2 {
		t.Fatalf("report: %d damaged, %d missing, %d listed; want 5, 5, 2", rep.DamagedObjects, rep.Missing, len(rep.Damaged))
	}
	if !bytes.HasPrefix([]byte(rep.Damaged[0].Error), []byte(fetch.ErrMissing.Error())) {
		t.Fatalf("error %q", rep.Damaged[0].Error)
	}
}
