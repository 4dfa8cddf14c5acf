package meta

import (
	"reflect"
	"sync/atomic"
	"testing"
)

// TestOffsetNotes: every command that stores or deletes committed
// offsets or group states names them in its Result, by topic name, and
// names nothing else; the notes of one command do not leak into the
// next.
func TestOffsetNotes(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_000_000)
	r := groupReplica(t, &ms)
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 2})
	mustOK(t, r, CreateTopic{Name: "b", Partitions: 1})
	type notes struct {
		Offsets []OffsetRef
		Groups  []string
	}
	check := func(what string, res Result, want notes) {
		t.Helper()
		if got := (notes{res.Offsets, res.Groups}); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: notes %+v, want %+v", what, got, want)
		}
	}
	ref := func(g, topic string, p int32) OffsetRef { return OffsetRef{Group: g, Topic: topic, Partition: p} }

	check("first commit", mustOK(t, r, commitOf("g", -1, off("a", 0, 1), off("a", 1, 2), off("nope", 0, 3), off("b", 0, 4))),
		notes{[]OffsetRef{ref("g", "a", 0), ref("g", "a", 1), ref("g", "b", 0)}, []string{"g"}})
	check("second commit", mustOK(t, r, commitOf("g", -1, off("a", 0, 5))), notes{Offsets: []OffsetRef{ref("g", "a", 0)}})
	check("topic created", mustOK(t, r, CreateTopic{Name: "c", Partitions: 1}), notes{})
	check("OffsetDelete", mustOK(t, r, OffsetDelete{Group: "g", Partitions: []TopicPartition{{"a", 1}, {"zz", 0}}}),
		notes{Offsets: []OffsetRef{ref("g", "a", 1)}})
	check("group state", mustOK(t, r, GroupState{Group: "g", Kind: GroupClassic, ProtocolType: "consumer", Generation: 1}), notes{Groups: []string{"g"}})
	mustOK(t, r, commitOf("h", -1, off("b", 0, 7), off("a", 1, 8)))
	check("DeleteTopic", mustOK(t, r, DeleteTopic{Name: "b"}), notes{Offsets: []OffsetRef{ref("g", "b", 0), ref("h", "b", 0)}})
	check("DeleteGroup", mustOK(t, r, DeleteGroup{Group: "g"}), notes{[]OffsetRef{ref("g", "a", 0)}, []string{"g"}})

	// h holds a/1 and no protocol: expiry takes it and the group.
	ms.Add(1000)
	check("ExpireOffsets", mustOK(t, r, ExpireOffsets{RetentionMs: 1, Groups: []string{"h"}}), notes{[]OffsetRef{ref("h", "a", 1)}, []string{"h"}})
}

// TestOffsetNotesTxn: offsets committed in a transaction are named when
// the transaction commits, not when they are sent, and never after an
// abort.
func TestOffsetNotesTxn(t *testing.T) {
	e := newTxnEnv(t)
	pid, _ := e.initOK(t, "tx", -1, -1)
	txnCommit := func(offset int64) Result {
		t.Helper()
		wantCode(t, "AddOffsetsToTxn", mustPropose(t, e.r, AddOffsetsToTxn{TransactionalID: "tx", ProducerID: pid, Group: "g"}), nil)
		return mustPropose(t, e.r, TxnOffsetCommit{TransactionalID: "tx", ProducerID: pid, Group: "g", Generation: -1,
			Offsets: []OffsetCommitPartition{{Topic: "a", Partition: 1, Offset: offset, LeaderEpoch: -1, CommitTimestamp: -1}}})
	}
	if res := txnCommit(10); res.Offsets != nil {
		t.Errorf("TxnOffsetCommit named %v before the transaction ended", res.Offsets)
	}
	res := e.end(t, "tx", pid, 0, true, -1)
	if want := []OffsetRef{{"g", "a", 1}}; !reflect.DeepEqual(res.Offsets, want) || !reflect.DeepEqual(res.Groups, []string{"g"}) {
		t.Errorf("EndTxn commit: offsets %v groups %v, want %v [g]", res.Offsets, res.Groups, want)
	}
	txnCommit(20)
	if res := e.end(t, "tx", pid, 0, false, -1); res.Offsets != nil || res.Groups != nil {
		t.Errorf("EndTxn abort: offsets %v groups %v, want none", res.Offsets, res.Groups)
	}
}

// TestGroupNames: the names of the stored groups, sorted, and only
// those.
func TestGroupNames(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_000_000)
	r := groupReplica(t, &ms)
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 1})
	for _, g := range []string{"b", "a", "ab"} {
		mustOK(t, r, commitOf(g, -1, off("a", 0, 1)))
	}
	mustOK(t, r, DeleteGroup{Group: "b"})
	names, err := viewOf(t, r).GroupNames()
	if err != nil || !reflect.DeepEqual(names, []string{"a", "ab"}) {
		t.Errorf("GroupNames: %q, %v; want [a ab]", names, err)
	}
}
