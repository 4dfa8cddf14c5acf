package meta

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// indexBases lists a partition's index entries by base offset.
func indexBases(t *testing.T, r *testReplica, id TopicID, p int32) []int64 {
	t.Helper()
	v := r.View()
	defer v.Close()
	it, err := v.Seek(id, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var bases []int64
	for it.Next() {
		bases = append(bases, it.Entry().BaseOffset)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return bases
}

// TestDeleteRecords runs DeleteRecords steps against one partition in
// order: each step sees the state the previous ones left.
func TestDeleteRecords(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	id := mustOK(t, r, CreateTopic{Name: "a", Partitions: 3}).TopicID
	other := mustOK(t, r, CreateTopic{Name: "b", Partitions: 1}).TopicID
	// Partition 0: [0,10) [10,15) [15,35) [35,40). Partition 2 and topic
	// b get entries too, so a deletion that strays into a neighbour's
	// range shows.
	for _, n := range []int32{10, 5, 20, 5} {
		mustOK(t, r, commitTo(n, partRef{id, 0}, partRef{id, 2}, partRef{other, 0}))
	}
	ok, oor, unknown := int16(0), kerr.OffsetOutOfRange.Code, kerr.UnknownTopicOrPartition.Code
	steps := []struct {
		name      string
		part      int32
		offset    int64
		code      int16
		lowWM     int64
		wantBases []int64 // partition 0's index after the step
	}{
		{"zero is a no-op", 0, 0, ok, 0, []int64{0, 10, 15, 35}},
		{"inside the first entry keeps it", 0, 5, ok, 5, []int64{0, 10, 15, 35}},
		{"at an entry's end drops it", 0, 10, ok, 10, []int64{10, 15, 35}},
		{"straddling keeps the straddled entry", 0, 20, ok, 20, []int64{15, 35}},
		{"lower offset never moves back", 0, 12, ok, 20, []int64{15, 35}},
		{"beyond the high watermark", 0, 41, oor, 20, []int64{15, 35}},
		{"below -1", 0, -2, oor, 20, []int64{15, 35}},
		{"at the start of the last entry", 0, 35, ok, 35, []int64{35}},
		{"-1 is the high watermark", 0, -1, ok, 40, nil},
		{"again at the high watermark", 0, 40, ok, 40, nil},
		{"empty partition at -1", 1, -1, ok, 0, nil},
		{"empty partition beyond", 1, 1, oor, 0, nil},
		{"unknown partition", 3, 0, unknown, 0, nil},
		{"negative partition", -1, 0, unknown, 0, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			res := mustOK(t, r, DeleteRecords{Partitions: []DeleteRecordsPartition{{TopicID: id, Partition: s.part, Offset: s.offset}}})
			if len(res.Batches) != 1 {
				t.Fatalf("%d results, want 1", len(res.Batches))
			}
			if got := res.Batches[0]; got.Code != s.code || (s.code != unknown && got.LogStartOffset != s.lowWM) {
				t.Fatalf("result %+v, want code %d low watermark %d", got, s.code, s.lowWM)
			}
			if got := indexBases(t, r, id, 0); !slices.Equal(got, s.wantBases) {
				t.Fatalf("index %v, want %v", got, s.wantBases)
			}
			if st := partitionState(t, r, id, 0); st.NextOffset != 40 {
				t.Fatalf("next offset moved to %d", st.NextOffset)
			}
		})
	}
	if st := partitionState(t, r, id, 0); st.LogStartOffset != 40 {
		t.Fatalf("log start %d, want 40", st.LogStartOffset)
	}
	for _, ref := range []partRef{{id, 2}, {other, 0}} {
		if got, want := indexBases(t, r, ref.id, ref.partition), []int64{0, 10, 15, 35}; !slices.Equal(got, want) {
			t.Errorf("neighbour %v index %v, want %v", ref, got, want)
		}
		if st := partitionState(t, r, ref.id, ref.partition); st.LogStartOffset != 0 {
			t.Errorf("neighbour %v log start %d", ref, st.LogStartOffset)
		}
	}
	if res := mustOK(t, r, DeleteRecords{Partitions: []DeleteRecordsPartition{{TopicID: TopicID{9}, Offset: 0}}}); res.Batches[0].Code != unknown {
		t.Errorf("unknown topic: code %d", res.Batches[0].Code)
	}
}

// TestDeleteRecordsInBatch: commands in one entry see each other. A commit
// after a DeleteRecords reports the raised log start, and one before it
// makes a higher offset valid.
func TestDeleteRecordsInBatch(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	id := mustOK(t, r, CreateTopic{Name: "a", Partitions: 1}).TopicID
	mustOK(t, r, commitTo(10, partRef{id, 0}))
	res, err := r.ProposeBatch(testCtx(t), []Command{
		commitTo(5, partRef{id, 0}),
		DeleteRecords{Partitions: []DeleteRecordsPartition{
			{TopicID: id, Partition: 0, Offset: 12},
			{TopicID: id, Partition: 0, Offset: 3},
		}},
		commitTo(5, partRef{id, 0}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[1].Batches; len(got) != 2 || got[0] != (BatchResult{LogStartOffset: 12}) || got[1] != (BatchResult{LogStartOffset: 12}) {
		t.Fatalf("DeleteRecords results %+v", got)
	}
	if got := res[2].Batches[0]; got.BaseOffset != 15 || got.LogStartOffset != 12 {
		t.Fatalf("commit after it: %+v", got)
	}
	if got, want := indexBases(t, r, id, 0), []int64{10, 15}; !slices.Equal(got, want) {
		t.Fatalf("index %v, want %v", got, want)
	}
	if st := partitionState(t, r, id, 0); st != (PartitionState{LogStartOffset: 12, NextOffset: 20}) {
		t.Fatalf("state %+v", st)
	}
}

// TestDeleteRecordsDeterministic: a replica that proposed DeleteRecords and
// one that only replayed the log hold the same bytes, before and after a
// restart of the first.
func TestDeleteRecordsDeterministic(t *testing.T) {
	log := newTestLog()
	dir := NewMemStore()
	a := openReplica(t, log, dir, "a")
	id := mustOK(t, a, CreateTopic{Name: "a", Partitions: 4}).TopicID
	for i := range 20 {
		mustOK(t, a, commitTo(int32(i%7+1), partRef{id, int32(i % 4)}, partRef{id, int32((i + 1) % 4)}))
	}
	mustOK(t, a, DeleteRecords{Partitions: []DeleteRecordsPartition{
		{TopicID: id, Partition: 3, Offset: 17},
		{TopicID: id, Partition: 0, Offset: -1},
		{TopicID: id, Partition: 1, Offset: 9},
		{TopicID: id, Partition: 2, Offset: 1 << 40},
	}})
	b := openReplica(t, log, nil, "b")
	mustSync(t, b)
	if da, db := mustDigest(t, a), mustDigest(t, b); da != db {
		t.Fatalf("digests differ: %x vs %x", da, db)
	}
	want := mustDigest(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := openReplica(t, log, dir, "a")
	mustSync(t, a2)
	if got := mustDigest(t, a2); got != want {
		t.Fatalf("digest after restart %x, want %x", got, want)
	}
	if st := partitionState(t, b, id, 0); st.LogStartOffset != st.NextOffset || len(indexBases(t, b, id, 0)) != 0 {
		t.Fatalf("partition 0 after -1: %+v, index %v", st, indexBases(t, b, id, 0))
	}
}
