package compact_test

import (
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
)

// Level-0 objects, each holding every partition, become one object per
// partition: a fetch returns the same bytes from every offset, the index
// holds one entry per partition, and the old objects die.
func TestCompactsLevel0IntoPerPartitionObjects(t *testing.T) {
	e := newEnv(t)
	a, b := e.topic("a", 2), e.topic("b", 1)
	parts := []tp{{a, 0}, {a, 1}, {b, 0}}
	for i := range 20 {
		e.produce(uint64(i), 1+i%3, parts...)
	}
	before := map[tp][]byte{}
	for _, p := range parts {
		before[p] = e.read(nil, p, 0)
	}
	c := e.compactor(compact.Config{})
	if st := e.pass(c); st.Swaps != 0 {
		t.Fatalf("compacted %d runs of entries younger than MinAge", st.Swaps)
	}
	levels := func() []compact.PartitionLevels {
		v := e.db.View()
		defer v.Close()
		tp, _, err := v.Topic("a")
		if err != nil {
			t.Fatal(err)
		}
		l, err := compact.Describe(v, tp)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := levels(); l[1] != (compact.PartitionLevels{Partition: 1, Entries: 20, Objects: 20, Level0Entries: 20, Level0Objects: 20}) {
		t.Fatalf("levels before: %+v", l[1])
	}
	e.advance(compact.DefaultMaxLag)
	st := e.pass(c)
	if l := levels(); l[1] != (compact.PartitionLevels{Partition: 1, Entries: 1, Objects: 1, CompactedEntries: 1, CompactedObjects: 1}) {
		t.Fatalf("levels after: %+v", l[1])
	}
	if st.Swaps != len(parts) || st.Lost != 0 {
		t.Fatalf("pass: %+v, want %d swaps", st, len(parts))
	}
	for _, p := range parts {
		if l0, l1 := e.levels(p); l0 != 0 || l1 != 1 {
			t.Fatalf("%v: %d level-0 and %d compacted entries, want 0 and 1", p, l0, l1)
		}
		mustEqual(t, "read after compaction", e.read(nil, p, 0), before[p])
		// From an offset inside the compacted entry: the batch holding
		// it and the rest, as before.
		mustEqual(t, "read from offset 7", e.read(nil, p, 7), e.readAt(before[p], 7))
	}
	if st.BytesWritten <= st.BytesRead {
		t.Fatalf("wrote %d bytes for %d read: an object's header and footer are missing", st.BytesWritten, st.BytesRead)
	}
	// Every level-0 object lost its last entry: all dead, none deleted yet.
	g := e.gcState()
	if g.LiveObjects != int64(len(parts)) || g.DeadObjects != 20 {
		t.Fatalf("gc: %d live and %d dead objects, want %d and 20", g.LiveObjects, g.DeadObjects, len(parts))
	}
	if st := e.pass(c); st.Swaps != 0 {
		t.Fatalf("a second pass swapped %d runs", st.Swaps)
	}
}

// A run is at most the target bytes; the next run starts where it
// stopped, and the index stays in offset order.
func TestTargetBytesBoundsObjects(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a", 1)
	p := tp{a, 0}
	for i := range 30 {
		e.produce(uint64(i), 2, p)
	}
	before := e.read(nil, p, 0)
	entryBytes := e.entries(p)[0].Length
	c := e.compactor(compact.Config{TargetBytes: 4 * entryBytes})
	e.advance(compact.DefaultMinAge)
	st := e.pass(c)
	// Full runs are compacted at once; the 2 entries left wait for
	// MaxLag.
	if st.Swaps != 7 {
		t.Fatalf("pass: %+v, want 7 swaps", st)
	}
	if l0, l1 := e.levels(p); l0 != 2 || l1 != 7 {
		t.Fatalf("%d level-0 and %d compacted entries, want 2 and 7", l0, l1)
	}
	e.advance(compact.DefaultMaxLag)
	if st := e.pass(c); st.Swaps != 1 {
		t.Fatalf("pass after MaxLag: %+v, want the short run", st)
	}
	for _, en := range e.entries(p) {
		if en.Length > 4*entryBytes {
			t.Fatalf("entry of %d bytes, target %d", en.Length, 4*entryBytes)
		}
	}
	mustEqual(t, "read", e.read(nil, p, 0), before)
}

func (e *env) gcState() meta.GCState {
	e.t.Helper()
	v := e.db.View()
	defer v.Close()
	g, ok, err := v.GC()
	if err != nil || !ok {
		e.t.Fatalf("GC state: %v, %v", ok, err)
	}
	return g
}

// readAt cuts a whole-partition read down to the batches a read from
// offset returns: the batch holding offset and those after it.
func (e *env) readAt(all []byte, offset int64) []byte {
	e.t.Helper()
	for rest := all; len(rest) > 0; {
		one := rest[:len(rest)]
		next := nextOffset(e.t, firstBatch(e.t, one))
		if next > offset {
			return rest
		}
		rest = rest[len(firstBatch(e.t, one)):]
	}
	return nil
}

var _ = time.Second

// One object holds several entries of at most EntryBytes, and a read
// that wants them all gets them with one GET (fetch coalesces
// neighbours of one object).
func TestEntryBytesSplitsEntriesOfOneObject(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a", 1)
	p := tp{a, 0}
	for i := range 10 {
		e.produce(uint64(i), 2, p)
	}
	before := e.read(nil, p, 0)
	c := e.compactor(compact.Config{EntryBytes: 2 * e.entries(p)[0].Length})
	e.advance(compact.DefaultMaxLag)
	if st := e.pass(c); st.Swaps != 1 {
		t.Fatalf("pass: %+v, want one swap", st)
	}
	es := e.entries(p)
	if len(es) != 5 {
		t.Fatalf("%d entries, want 5 of 2 batches each", len(es))
	}
	for _, en := range es {
		if en.ObjectKey != es[0].ObjectKey || en.BatchCount != 2 {
			t.Fatalf("entry %+v: want 2 batches in %s", en, es[0].ObjectKey)
		}
	}
	gets := e.store.Snapshot().Op(objstore.OpGet).Requests
	mustEqual(t, "read", e.read(nil, p, 0), before)
	if n := e.store.Snapshot().Op(objstore.OpGet).Requests - gets; n != 1 {
		t.Fatalf("a read of the partition made %d GETs, want 1", n)
	}
}

// A pass compacts at most 8 runs of one partition before the next
// partition's turn, so one written faster than it is compacted cannot
// keep the others waiting.
func TestPassTakesTurns(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a", 2)
	p0, p1 := tp{a, 0}, tp{a, 1}
	for i := range 30 {
		e.produce(uint64(i), 2, p0, p1)
	}
	c := e.compactor(compact.Config{TargetBytes: 2 * e.entries(p0)[0].Length})
	e.advance(compact.DefaultMaxLag)
	if st := e.pass(c); st.Swaps != 16 {
		t.Fatalf("pass: %+v, want 8 runs of each partition", st)
	}
	for _, p := range []tp{p0, p1} {
		if _, l1 := e.levels(p); l1 != 8 {
			t.Fatalf("%v: %d compacted entries after one pass, want 8", p, l1)
		}
	}
}
