package gc_test

import (
	"testing"

	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/produce"
)

// DeadBytes counts, per partition, the chunk bytes of dead objects from
// their footers: an object shared with a live topic holds nothing dead;
// once the other topic goes too, both topics' chunks count; a footer is
// read once; what the janitor deleted counts no more.
func TestDeadBytes(t *testing.T) {
	e := newEnv(t)
	counting := objstore.WithCounters(e.mem)
	d := gc.NewDeadBytes(counting)
	byPartition := func() map[meta.TopicID]map[int32]int64 {
		t.Helper()
		v := e.db.View()
		defer v.Close()
		got, err := d.ByPartition(testCtx(t), v)
		if err != nil {
			t.Fatal(err)
		}
		if got.Uncounted != 0 {
			t.Fatalf("%d objects uncounted", got.Uncounted)
		}
		return got.Bytes
	}
	storedBytes := func(id meta.TopicID) int64 {
		t.Helper()
		v := e.db.View()
		defer v.Close()
		s, err := v.PartitionStorage(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s.Bytes
	}

	c := e.collector(1, nil)
	e.step(c) // its grace into the log
	a, b := e.topic("a"), e.topic("b")
	p := e.pipeline(produce.Config{})
	e.produce(p, e.batch(a, 1), e.batch(b, 2)) // one object of both
	e.produce(p, e.batch(a, 3))                // one of a alone
	aBytes, bBytes := storedBytes(a), storedBytes(b)
	if aBytes == 0 || bBytes == 0 {
		t.Fatalf("stored bytes a %d, b %d", aBytes, bBytes)
	}
	if got := byPartition(); len(got) != 0 {
		t.Fatalf("dead bytes %v before any object died", got)
	}

	e.propose(meta.DeleteTopic{Name: "a"})
	own := aBytes - aBytes/2 // the second batch of a: the same size as the first
	if got := byPartition(); len(got) != 1 || got[a][0] != own {
		t.Fatalf("after deleting a: dead bytes %v, want a/0 %d (its own object; the shared one lives)", got, own)
	}
	gets := counting.Snapshot().Op(objstore.OpGet).Requests
	byPartition()
	if again := counting.Snapshot().Op(objstore.OpGet).Requests; again != gets {
		t.Errorf("a second count made %d GETs, want none (footers are kept)", again-gets)
	}

	e.propose(meta.DeleteTopic{Name: "b"})
	if got := byPartition(); got[a][0] != aBytes || got[b][0] != bBytes {
		t.Fatalf("after deleting b: dead bytes %v, want a/0 %d and b/0 %d", got, aBytes, bBytes)
	}

	e.advance(grace)
	if st := e.step(c); st.Deleted != 2 {
		t.Fatalf("deleted %d objects, want 2", st.Deleted)
	}
	if got := byPartition(); len(got) != 0 {
		t.Fatalf("dead bytes %v after the janitor deleted every dead object", got)
	}
}
