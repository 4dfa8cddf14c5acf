package meta

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ids resolves topic names to ids in a test's current state.
type ids func(name string) TopicID

func TestCommands(t *testing.T) {
	tests := []struct {
		name  string
		setup []Command
		cmd   func(id ids) Command
		want  *kerr.Error // nil for success
		check func(t *testing.T, r *testReplica, res Result)
	}{
		{
			name: "create topic",
			cmd: func(ids) Command {
				return CreateTopic{Name: "orders", Partitions: 3, Configs: map[string]string{"retention.ms": "1000", "cleanup.policy": "delete"}}
			},
			check: func(t *testing.T, r *testReplica, res Result) {
				v := viewOf(t, r)
				tp, ok, err := v.Topic("orders")
				if err != nil || !ok {
					t.Fatalf("Topic = %v, %v", ok, err)
				}
				if res.TopicID.IsZero() || tp.ID != res.TopicID || tp.Partitions != 3 {
					t.Fatalf("topic %+v, result id %v", tp, res.TopicID)
				}
				if !maps.Equal(tp.Configs, map[string]string{"retention.ms": "1000", "cleanup.policy": "delete"}) {
					t.Fatalf("configs %v", tp.Configs)
				}
				clock, _ := v.LogClock()
				if tp.CreatedAt != clock || clock == 0 {
					t.Fatalf("CreatedAt %d, log clock %d", tp.CreatedAt, clock)
				}
				if byID, ok, _ := v.TopicByID(tp.ID); !ok || byID.Name != "orders" {
					t.Fatalf("TopicByID = %+v, %v", byID, ok)
				}
				if name, ok, _ := v.TopicNameByID(tp.ID); !ok || name != "orders" {
					t.Fatalf("TopicNameByID = %q, %v", name, ok)
				}
				for p := int32(0); p < 3; p++ {
					if st, ok, _ := v.Partition(tp.ID, p); !ok || st != (PartitionState{}) {
						t.Fatalf("partition %d = %+v, %v", p, st, ok)
					}
				}
				if _, ok, _ := v.Partition(tp.ID, 3); ok {
					t.Fatal("partition 3 exists")
				}
			},
		},
		{name: "create existing", setup: []Command{CreateTopic{Name: "a", Partitions: 1}},
			cmd: func(ids) Command { return CreateTopic{Name: "a", Partitions: 2} }, want: kerr.TopicAlreadyExists},
		{name: "name of 249 bytes", cmd: func(ids) Command { return CreateTopic{Name: strings.Repeat("x", 249), Partitions: 1} }},
		{name: "name of 250 bytes", cmd: func(ids) Command { return CreateTopic{Name: strings.Repeat("x", 250), Partitions: 1} }, want: kerr.InvalidTopicException},
		{name: "empty name", cmd: func(ids) Command { return CreateTopic{Name: "", Partitions: 1} }, want: kerr.InvalidTopicException},
		{name: "name dot", cmd: func(ids) Command { return CreateTopic{Name: ".", Partitions: 1} }, want: kerr.InvalidTopicException},
		{name: "name dotdot", cmd: func(ids) Command { return CreateTopic{Name: "..", Partitions: 1} }, want: kerr.InvalidTopicException},
		{name: "name with slash", cmd: func(ids) Command { return CreateTopic{Name: "a/b", Partitions: 1} }, want: kerr.InvalidTopicException},
		{name: "name with space", cmd: func(ids) Command { return CreateTopic{Name: "a b", Partitions: 1} }, want: kerr.InvalidTopicException},
		{name: "name all legal chars", cmd: func(ids) Command { return CreateTopic{Name: "aZ09._-", Partitions: 1} }},
		{name: "zero partitions", cmd: func(ids) Command { return CreateTopic{Name: "a", Partitions: 0} }, want: kerr.InvalidPartitions},
		{name: "negative partitions", cmd: func(ids) Command { return CreateTopic{Name: "a", Partitions: -1} }, want: kerr.InvalidPartitions},
		{name: "too many partitions", cmd: func(ids) Command { return CreateTopic{Name: "a", Partitions: maxPartitionsPerTopic + 1} }, want: kerr.InvalidPartitions},
		{name: "empty config name", cmd: func(ids) Command {
			return CreateTopic{Name: "a", Partitions: 1, Configs: map[string]string{"": "x"}}
		}, want: kerr.InvalidConfig},

		{
			name:  "delete by name",
			setup: []Command{CreateTopic{Name: "a", Partitions: 2}},
			cmd:   func(ids) Command { return DeleteTopic{Name: "a"} },
			check: checkDeleted("a"),
		},
		{
			name:  "delete by id",
			setup: []Command{CreateTopic{Name: "a", Partitions: 2}},
			cmd:   func(id ids) Command { return DeleteTopic{ID: id("a")} },
			check: checkDeleted("a"),
		},
		{name: "delete unknown name", cmd: func(ids) Command { return DeleteTopic{Name: "nope"} }, want: kerr.UnknownTopicOrPartition},
		{name: "delete unknown id", cmd: func(ids) Command { return DeleteTopic{ID: TopicID{1}} }, want: kerr.UnknownTopicID},

		{
			name:  "create partitions",
			setup: []Command{CreateTopic{Name: "a", Partitions: 2}},
			cmd:   func(ids) Command { return CreatePartitions{Name: "a", NewTotal: 5} },
			check: func(t *testing.T, r *testReplica, res Result) {
				v := viewOf(t, r)
				tp, _, _ := v.Topic("a")
				if tp.Partitions != 5 {
					t.Fatalf("partitions %d", tp.Partitions)
				}
				if _, ok, _ := v.Partition(tp.ID, 4); !ok {
					t.Fatal("partition 4 missing")
				}
			},
		},
		{name: "create partitions not increasing", setup: []Command{CreateTopic{Name: "a", Partitions: 2}},
			cmd: func(ids) Command { return CreatePartitions{Name: "a", NewTotal: 2} }, want: kerr.InvalidPartitions},
		{name: "create partitions above max", setup: []Command{CreateTopic{Name: "a", Partitions: 2}},
			cmd: func(ids) Command { return CreatePartitions{Name: "a", NewTotal: maxPartitionsPerTopic + 1} }, want: kerr.InvalidPartitions},
		{name: "create partitions unknown", cmd: func(ids) Command { return CreatePartitions{Name: "a", NewTotal: 2} }, want: kerr.UnknownTopicOrPartition},

		{
			name:  "alter configs incremental",
			setup: []Command{CreateTopic{Name: "a", Partitions: 1, Configs: map[string]string{"x": "1", "y": "2"}}},
			cmd: func(ids) Command {
				return AlterConfigs{Name: "a", Set: map[string]string{"x": "10", "z": "3"}, Delete: []string{"y"}, Incremental: true}
			},
			check: checkConfigs("a", map[string]string{"x": "10", "z": "3"}),
		},
		{
			name:  "alter configs replace",
			setup: []Command{CreateTopic{Name: "a", Partitions: 1, Configs: map[string]string{"x": "1", "y": "2"}}},
			cmd:   func(ids) Command { return AlterConfigs{Name: "a", Set: map[string]string{"z": "3"}} },
			check: checkConfigs("a", map[string]string{"z": "3"}),
		},
		{name: "alter configs delete without incremental", setup: []Command{CreateTopic{Name: "a", Partitions: 1}},
			cmd: func(ids) Command { return AlterConfigs{Name: "a", Delete: []string{"x"}} }, want: kerr.InvalidRequest},
		{name: "alter configs set and delete", setup: []Command{CreateTopic{Name: "a", Partitions: 1}},
			cmd: func(ids) Command {
				return AlterConfigs{Name: "a", Set: map[string]string{"x": "1"}, Delete: []string{"x"}, Incremental: true}
			}, want: kerr.InvalidRequest},
		{name: "alter configs unknown", cmd: func(ids) Command { return AlterConfigs{Name: "a", Incremental: true} }, want: kerr.UnknownTopicOrPartition},

		{
			name:  "commit object",
			setup: []Command{CreateTopic{Name: "a", Partitions: 2}, CreateTopic{Name: "b", Partitions: 1}},
			cmd: func(id ids) Command {
				return commitTo(10, partRef{id("a"), 0}, partRef{id("a"), 1}, partRef{id("a"), 0}, partRef{id("b"), 0})
			},
			check: func(t *testing.T, r *testReplica, res Result) {
				want := []BatchResult{{BaseOffset: 0}, {BaseOffset: 0}, {BaseOffset: 10}, {BaseOffset: 0}}
				if !equalBatchResults(res.Batches, want) {
					t.Fatalf("batches %+v, want %+v", res.Batches, want)
				}
				a := topicID(t, r, "a")
				if st := partitionState(t, r, a, 0); st.NextOffset != 20 {
					t.Fatalf("a/0 next offset %d", st.NextOffset)
				}
				v := viewOf(t, r)
				it, err := v.Seek(a, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer it.Close()
				var bases []int64
				for it.Next() {
					e := it.Entry()
					bases = append(bases, e.BaseOffset)
					if e.Records != 10 || e.Length != 100 || e.ObjectKey == "" || e.ProducerID != -1 {
						t.Fatalf("entry %+v", e)
					}
				}
				if it.Err() != nil || len(bases) != 2 || bases[0] != 0 || bases[1] != 10 {
					t.Fatalf("bases %v, err %v", bases, it.Err())
				}
			},
		},
		{
			name:  "commit object unknown partition",
			setup: []Command{CreateTopic{Name: "a", Partitions: 1}},
			cmd: func(id ids) Command {
				return commitTo(5, partRef{id("a"), 0}, partRef{id("a"), 1}, partRef{TopicID{9}, 0}, partRef{id("a"), 0})
			},
			check: func(t *testing.T, r *testReplica, res Result) {
				u := kerr.UnknownTopicOrPartition.Code
				want := []BatchResult{{BaseOffset: 0}, {Code: u}, {Code: u}, {BaseOffset: 5}}
				if !equalBatchResults(res.Batches, want) {
					t.Fatalf("batches %+v, want %+v", res.Batches, want)
				}
			},
		},
		{
			name:  "commit object invalid batches",
			setup: []Command{CreateTopic{Name: "a", Partitions: 1}},
			cmd: func(id ids) Command {
				co := commitTo(5, partRef{id("a"), 0}, partRef{id("a"), 0}, partRef{id("a"), 0}, partRef{id("a"), 0})
				co.Batches[0].Records = 0
				co.Batches[1].Length = co.ObjectSize // past the end from its position
				co.Batches[2].BatchCount = 0
				return co
			},
			check: func(t *testing.T, r *testReplica, res Result) {
				i := kerr.InvalidRequest.Code
				want := []BatchResult{{Code: i}, {Code: i}, {Code: i}, {BaseOffset: 0}}
				if !equalBatchResults(res.Batches, want) {
					t.Fatalf("batches %+v, want %+v", res.Batches, want)
				}
			},
		},
		{
			name: "commit object twice",
			setup: []Command{CreateTopic{Name: "a", Partitions: 1},
				CommitObject{ObjectKey: "same", ObjectSize: 10, Batches: nil}},
			cmd: func(id ids) Command {
				co := commitTo(5, partRef{id("a"), 0})
				co.ObjectKey = "same"
				return co
			},
			want: kerr.DuplicateResource,
			check: func(t *testing.T, r *testReplica, res Result) {
				if len(res.Batches) != 1 || res.Batches[0].Code != kerr.DuplicateResource.Code {
					t.Fatalf("batches %+v", res.Batches)
				}
				if st := partitionState(t, r, topicID(t, r, "a"), 0); st.NextOffset != 0 {
					t.Fatalf("next offset %d", st.NextOffset)
				}
			},
		},
		{name: "commit object without key", cmd: func(ids) Command { return CommitObject{ObjectSize: 1} }, want: kerr.InvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := openReplica(t, newTestLog(), nil, "w")
			for _, c := range tt.setup {
				mustOK(t, r, c)
			}
			res := mustPropose(t, r, tt.cmd(func(name string) TopicID { return topicID(t, r, name) }))
			var want int16
			if tt.want != nil {
				want = tt.want.Code
			}
			if res.Code != want {
				t.Fatalf("code %d (%v), want %d", res.Code, res.Err(), want)
			}
			if tt.check != nil {
				tt.check(t, r, res)
			}
		})
	}
}

func equalBatchResults(got, want []BatchResult) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func checkDeleted(name string) func(*testing.T, *testReplica, Result) {
	return func(t *testing.T, r *testReplica, res Result) {
		t.Helper()
		v := viewOf(t, r)
		if _, ok, _ := v.Topic(name); ok {
			t.Fatal("topic still there")
		}
		if _, ok, _ := v.TopicByID(res.TopicID); ok {
			t.Fatal("topic id still there")
		}
		if name, ok, _ := v.TopicNameByID(res.TopicID); ok || name != "" {
			t.Fatalf("TopicNameByID of a deleted topic = %q, %v", name, ok)
		}
		if _, ok, _ := v.Partition(res.TopicID, 0); ok {
			t.Fatal("partition still there")
		}
	}
}

func checkConfigs(name string, want map[string]string) func(*testing.T, *testReplica, Result) {
	return func(t *testing.T, r *testReplica, res Result) {
		t.Helper()
		tp, _, _ := viewOf(t, r).Topic(name)
		if !maps.Equal(tp.Configs, want) {
			t.Fatalf("configs %v, want %v", tp.Configs, want)
		}
	}
}

// TestDeleteRecreate: a topic deleted and created again has a new id, empty
// partitions and no index; commits to the old id fail.
func TestDeleteRecreate(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	old := mustOK(t, r, CreateTopic{Name: "a", Partitions: 1}).TopicID
	mustOK(t, r, commitTo(7, partRef{old, 0}))
	mustOK(t, r, DeleteTopic{Name: "a"})
	fresh := mustOK(t, r, CreateTopic{Name: "a", Partitions: 1}).TopicID
	if fresh == old {
		t.Fatal("recreated topic reuses its id")
	}
	if st := partitionState(t, r, fresh, 0); st.NextOffset != 0 {
		t.Fatalf("next offset %d", st.NextOffset)
	}
	res := mustPropose(t, r, commitTo(1, partRef{old, 0}, partRef{fresh, 0}))
	if res.Batches[0].Code != kerr.UnknownTopicOrPartition.Code || res.Batches[1] != (BatchResult{}) {
		t.Fatalf("batches %+v", res.Batches)
	}
	it, err := viewOf(t, r).Seek(old, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.Next() {
		t.Fatalf("old index entry survived: %+v", it.Entry())
	}
}

// TestTopicIDDeterministic: replicas agree on a topic's id without any
// exchange but the log.
func TestTopicIDDeterministic(t *testing.T) {
	log := newTestLog()
	a := openReplica(t, log, nil, "a")
	b := openReplica(t, log, nil, "b")
	id := mustOK(t, a, CreateTopic{Name: "t", Partitions: 1}).TopicID
	mustSync(t, b)
	if got := topicID(t, b, "t"); got != id {
		t.Fatalf("replica b id %v, a %v", got, id)
	}
}

func TestSeek(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	id := mustOK(t, r, CreateTopic{Name: "a", Partitions: 2}).TopicID
	// Entries [0,10) [10,15) [15,35) and, after a gap made below, [50,60).
	for _, n := range []int32{10, 5, 20, 15, 10} {
		co := commitTo(n, partRef{id, 0})
		co.Batches[0].MaxTimestamp = int64(n) * 100
		mustOK(t, r, co)
	}
	// Cut [35,50) out of the index, as retention or compaction will.
	if err := r.kv.Delete(indexKey(nil, id, 0, 35)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		offset int64
		want   []int64 // base offsets
	}{
		{-5, []int64{0, 10, 15, 50}},
		{0, []int64{0, 10, 15, 50}},
		{9, []int64{0, 10, 15, 50}},
		{10, []int64{10, 15, 50}},
		{34, []int64{15, 50}},
		{35, []int64{50}}, // in the gap
		{49, []int64{50}},
		{59, []int64{50}},
		{60, nil},
		{1 << 62, nil},
	}
	v := viewOf(t, r)
	for _, tt := range tests {
		it, err := v.Seek(id, 0, tt.offset)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for it.Next() {
			got = append(got, it.Entry().BaseOffset)
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		it.Close()
		if !slicesEqual(got, tt.want) {
			t.Errorf("Seek(%d) = %v, want %v", tt.offset, got, tt.want)
		}
	}
	// Partition 1 is empty; the iterator must not wander into others.
	it, _ := v.Seek(id, 1, 0)
	if it.Next() {
		t.Fatalf("empty partition yields %+v", it.Entry())
	}
	it.Close()

	for _, tt := range []struct {
		ts   int64
		base int64
		ok   bool
	}{{0, 0, true}, {1000, 0, true}, {1001, 15, true}, {1500, 15, true}, {2000, 15, true}, {2001, 0, false}} {
		e, ok, err := v.OffsetForTimestamp(id, 0, tt.ts)
		if err != nil || ok != tt.ok || (ok && e.BaseOffset != tt.base) {
			t.Errorf("OffsetForTimestamp(%d) = %d, %v, %v; want %d, %v", tt.ts, e.BaseOffset, ok, err, tt.base, tt.ok)
		}
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
