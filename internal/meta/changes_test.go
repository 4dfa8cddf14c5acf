package meta

import (
	"reflect"
	"testing"
)

// Each command names exactly the partitions whose Fetch answer it can
// change (state, index, open and aborted transactions), the topics it
// deletes, and nothing for commands Fetch does not read.
func TestChanges(t *testing.T) {
	e := newTxnEnv(t)
	a, b := e.a0.id, e.b0.id
	parts := func(refs ...partRef) Changes {
		c := Changes{}
		for _, r := range refs {
			c.Partitions = append(c.Partitions, PartitionRef{r.id, r.partition})
		}
		return c
	}
	steps := []struct {
		name string
		do   func(t *testing.T)
		want Changes
	}{
		{"commit", func(t *testing.T) { e.plain(t, e.a1, 3) }, parts(e.a1)},
		{"commit to two topics", func(t *testing.T) { mustOK(t, e.r, commitTo(2, e.b0, e.a0)) }, func() Changes {
			c := parts(e.a0, e.b0)
			if compareTopicIDs(a, b) > 0 {
				c.Partitions[0], c.Partitions[1] = c.Partitions[1], c.Partitions[0]
			}
			return c
		}()},
		{"offset commit", func(t *testing.T) {
			mustOK(t, e.r, OffsetCommit{Group: "g", Generation: -1, RetentionMs: -1,
				Offsets: []OffsetCommitPartition{{Topic: "a", Partition: 0, Offset: 1, CommitTimestamp: -1}}})
		}, Changes{}},
		{"producer id", func(t *testing.T) { mustOK(t, e.r, AllocateProducerID{ProducerID: -1, ProducerEpoch: -1}) }, Changes{}},
		{"init transactional producer", func(t *testing.T) { e.initOK(t, "tx", -1, -1) }, Changes{}},
		{"add partition to transaction", func(t *testing.T) { e.addOK(t, "tx", e.pid(t, "tx"), 0, e.a0) }, parts(e.a0)},
		{"transactional commit", func(t *testing.T) { e.produceOK(t, e.a0, e.pid(t, "tx"), 0, 0, 1) }, parts(e.a0)},
		{"abort", func(t *testing.T) {
			if res := e.end(t, "tx", e.pid(t, "tx"), 0, false, e.state(t, "tx").Seq); res.Code != 0 {
				t.Fatal(res.Err())
			}
		}, parts(e.a0)},
		{"delete records", func(t *testing.T) {
			mustOK(t, e.r, DeleteRecords{Partitions: []DeleteRecordsPartition{{TopicID: a, Partition: 1, Offset: 2}}})
		}, parts(e.a1)},
		{"create partitions", func(t *testing.T) { mustOK(t, e.r, CreatePartitions{Name: "a", NewTotal: 3}) }, parts(partRef{a, 2})},
		{"delete topic", func(t *testing.T) { mustOK(t, e.r, DeleteTopic{Name: "b"}) }, Changes{Topics: []TopicID{b}}},
	}
	for _, s := range steps {
		s.do(t)
		if got := e.r.changes; !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: changes %+v, want %+v", s.name, got, s.want)
		}
	}
}

func compareTopicIDs(x, y TopicID) int {
	return comparePartitionRefs(PartitionRef{TopicID: x}, PartitionRef{TopicID: y})
}

// pid is the producer id of transactional id.
func (e *txnEnv) pid(t *testing.T, id string) int64 {
	t.Helper()
	return e.state(t, id).ProducerID
}

// Ranges are placed in a partition or a topic when they lie inside one,
// ignored when they hold no key Fetch reads, and mark everything
// changed otherwise.
func TestChangesOfRanges(t *testing.T) {
	id := TopicID{1, 2, 3}
	other := TopicID{9}
	pstart, pend := indexSpan(id, 4)
	tstart, tend := topicSpan(prefixOpenTxn, id)
	gstart, gend := topicSpan(prefixGroupOffset, id)
	tests := []struct {
		name       string
		start, end []byte
		want       Changes
	}{
		{"one partition's index", pstart, pend, Changes{Partitions: []PartitionRef{{id, 4}}}},
		{"inside one partition", indexKey(nil, id, 4, 0), indexKey(nil, id, 4, 10), Changes{Partitions: []PartitionRef{{id, 4}}}},
		{"one topic", tstart, tend, Changes{Topics: []TopicID{id}}},
		{"group offsets", gstart, gend, Changes{}},
		{"two topics", indexKey(nil, id, 0, 0), indexKey(nil, other, 0, 0), Changes{All: true}},
		{"across prefixes", []byte{prefixTopicName}, []byte{prefixObject}, Changes{All: true}},
		{"up to a bare prefix", []byte{prefixObject}, []byte{prefixTxn}, Changes{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := changeTracker{parts: map[PartitionRef]struct{}{}, topics: map[TopicID]struct{}{}}
			ct.reset(NewMemStore())
			if err := ct.DeleteRange(tt.start, tt.end); err != nil {
				t.Fatal(err)
			}
			if got := ct.changes(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("changes %+v, want %+v", got, tt.want)
			}
		})
	}
}
