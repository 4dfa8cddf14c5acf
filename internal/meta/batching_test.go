package meta

import (
	"reflect"
	"testing"
)

// TestApplyBatchingAgrees applies one sequence of entries in batches of
// every size from 1 to all of them: results and final state must not
// depend on how entries share batches (which the partition cache and the
// batch's read-your-writes make non-trivial). Package replica checks
// that Pebble agrees with MemStore.
func TestApplyBatchingAgrees(t *testing.T) {
	idOf := func(name string, pos uint64, idx int) TopicID {
		// Apply derives ids from the log; replay the derivation to
		// address the topics below.
		a := NewApplier(NewMemStore())
		a.pos, a.idx = pos, idx
		id, _, err := a.newTopicID(name)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a0 := idOf("a", 0, 0)
	a1 := idOf("a", 3, 0) // recreated at position 3
	b0 := idOf("b", 0, 1)
	cmds := [][]Command{
		{CreateTopic{Name: "a", Partitions: 2}, CreateTopic{Name: "b", Partitions: 1}},
		{commitTo(5, partRef{a0, 0}, partRef{a0, 1}, partRef{b0, 0}), commitOf("g", -1, off("a", 0, 3), off("b", 0, 1)), commitTo(3, partRef{a0, 0})},
		{commitTo(2, partRef{a0, 1}), DeleteTopic{Name: "a"}, commitTo(1, partRef{a0, 0}, partRef{b0, 0}), commitOf("g", -1, off("a", 0, 4))},
		{CreateTopic{Name: "a", Partitions: 1}, commitTo(4, partRef{a1, 0}, partRef{a1, 1}), commitOf("g", -1, off("a", 0, 5))},
		{CreatePartitions{Name: "a", NewTotal: 3}, commitTo(4, partRef{a1, 2}, partRef{a1, 0}), OffsetDelete{Group: "g", Partitions: []TopicPartition{{"b", 0}}}},
		{AlterConfigs{Name: "b", Set: map[string]string{"x": "1"}}, GroupState{Group: "g", ProtocolType: "consumer", Generation: 1},
			commitTo(1, partRef{b0, 0}), ExpireOffsets{RetentionMs: 0, Groups: []string{"g"}}, DeleteGroup{Group: "g"}},
		{DeleteTopic{ID: b0}, CreateTopic{Name: "b", Partitions: 1}},
	}
	var entries [][]byte
	for i, cs := range cmds {
		e := Entry{WriterID: "w", Incarnation: 1, Seq: uint64(i + 1), Timestamp: int64(1000 * i)}
		for _, c := range cs {
			e.Commands = append(e.Commands, EncodeCommand(c))
		}
		entries = append(entries, AppendEntry(nil, &e))
	}
	// A copy of entry 1 (dropped) in the middle of the run.
	entries = append(entries[:3], append([][]byte{entries[1]}, entries[3:]...)...)

	var wantResults [][]Result
	var wantDigest [32]byte
	for size := 1; size <= len(entries); size++ {
		kv := NewMemStore()
		var results [][]Result
		for from := 0; from < len(entries); from += size {
			a := NewApplier(kv)
			to := min(from+size, len(entries))
			for pos := from; pos < to; pos++ {
				out, err := a.Apply(uint64(pos), entries[pos])
				if err != nil {
					t.Fatalf("size %d: apply at %d: %v", size, pos, err)
				}
				results = append(results, out.Results)
			}
			if err := a.Finish(uint64(to)); err != nil {
				t.Fatal(err)
			}
		}
		v := NewView(kv.Snapshot())
		digest, err := v.Digest()
		v.Close()
		if err != nil {
			t.Fatal(err)
		}
		if size == 1 {
			wantResults, wantDigest = results, digest
			if results[3] != nil {
				t.Fatalf("the copy of entry 1 was applied: %+v", results[3])
			}
			continue
		}
		if !reflect.DeepEqual(results, wantResults) {
			t.Fatalf("batches of %d: results\n%+v\nwant\n%+v", size, results, wantResults)
		}
		if digest != wantDigest {
			t.Fatalf("batches of %d: digest %x, want %x", size, digest, wantDigest)
		}
	}
	// Spot-check the sequence did what it says.
	if got := wantResults[2][2].Batches; got[0].Code == 0 || got[1].Code != 0 {
		t.Fatalf("commit after delete: %+v", got)
	}
}
