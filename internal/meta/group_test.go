package meta

import (
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// groupReplica is a replica whose entry timestamps follow *ms.
func groupReplica(t *testing.T, ms *atomic.Int64) *testReplica {
	t.Helper()
	return openReplica(t, newTestLog(), nil, "w", func(c *testConfig) {
		c.Now = func() time.Time { return time.UnixMilli(ms.Load()) }
	})
}

func commitOf(group string, gen int32, offs ...OffsetCommitPartition) OffsetCommit {
	return OffsetCommit{Group: group, Generation: gen, RetentionMs: -1, Offsets: offs}
}

func off(topic string, p int32, offset int64) OffsetCommitPartition {
	return OffsetCommitPartition{Topic: topic, Partition: p, Offset: offset, LeaderEpoch: -1, CommitTimestamp: -1}
}

func offsetsOf(t *testing.T, r *testReplica, group string) map[string]int64 {
	t.Helper()
	os, err := viewOf(t, r).CommittedOffsets(group)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]int64)
	for _, o := range os {
		m[o.Topic+"/"+string(rune('0'+o.Partition))] = o.Offset
	}
	return m
}

func groupOf(t *testing.T, r *testReplica, name string) (Group, bool) {
	t.Helper()
	g, ok, err := viewOf(t, r).Group(name)
	if err != nil {
		t.Fatal(err)
	}
	return g, ok
}

// countKeys counts the replicated keys under one prefix byte.
func countKeys(t *testing.T, r *testReplica, prefix byte) int {
	t.Helper()
	v := viewOf(t, r)
	it, err := v.r.NewIter([]byte{prefix}, []byte{prefix + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

func TestOffsetCommitApply(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_000_000)
	r := groupReplica(t, &ms)
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 2})

	big := make([]byte, MaxOffsetMetadataBytes+1)
	res := mustOK(t, r, OffsetCommit{Group: "g", Generation: -1, RetentionMs: -1, Offsets: []OffsetCommitPartition{
		{Topic: "a", Partition: 0, Offset: 10, LeaderEpoch: 3, Metadata: "meta", CommitTimestamp: -1},
		{Topic: "a", Partition: 1, Offset: 20, LeaderEpoch: -1, CommitTimestamp: 42},
		{Topic: "a", Partition: 2, Offset: 1},
		{Topic: "nope", Partition: 0, Offset: 1},
		{Topic: "a", Partition: 0, Offset: 1, Metadata: string(big)},
	}})
	want := []int16{0, 0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.OffsetMetadataTooLarge.Code}
	if !reflect.DeepEqual(res.Codes, want) {
		t.Fatalf("codes %v, want %v", res.Codes, want)
	}
	os, err := viewOf(t, r).CommittedOffsets("g")
	if err != nil {
		t.Fatal(err)
	}
	id := topicID(t, r, "a")
	wantOffs := []CommittedOffset{
		{TopicID: id, Topic: "a", Partition: 0, Offset: 10, LeaderEpoch: 3, Metadata: "meta", CommitTimestamp: 1_000_000, ExpireTimestamp: -1},
		{TopicID: id, Topic: "a", Partition: 1, Offset: 20, LeaderEpoch: -1, CommitTimestamp: 42, ExpireTimestamp: -1},
	}
	if !reflect.DeepEqual(os, wantOffs) {
		t.Fatalf("offsets\n%+v\nwant\n%+v", os, wantOffs)
	}
	o, ok, err := viewOf(t, r).CommittedOffset("g", id, 1)
	if err != nil || !ok || o.Offset != 20 {
		t.Fatalf("CommittedOffset = %+v, %v, %v", o, ok, err)
	}
	g, ok := groupOf(t, r, "g")
	if !ok || g.ProtocolType != "" || g.Generation != 0 || len(g.Members) != 0 {
		t.Fatalf("group created by the commit: %+v, %v", g, ok)
	}

	// A commit where nothing is stored creates no group; explicit
	// retention sets an expiry from the log clock.
	res = mustOK(t, r, commitOf("h", -1, off("nope", 0, 1)))
	if res.Codes[0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("codes %v", res.Codes)
	}
	if _, ok := groupOf(t, r, "h"); ok {
		t.Fatal("group h created by a commit that stored nothing")
	}
	ms.Store(2_000_000)
	c := commitOf("g", -1, off("a", 0, 11))
	c.RetentionMs = 500
	mustOK(t, r, c)
	o, _, _ = viewOf(t, r).CommittedOffset("g", id, 0)
	if o.ExpireTimestamp != 2_000_500 || o.CommitTimestamp != 2_000_000 {
		t.Fatalf("explicit retention: %+v", o)
	}
}

// A coordinator that lost a group cannot write a generation below the
// stored one, for state or offsets.
func TestGroupGenerationFence(t *testing.T) {
	var ms atomic.Int64
	r := groupReplica(t, &ms)
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 1})
	state := func(gen int32) GroupState {
		return GroupState{Group: "g", ProtocolType: "consumer", Protocol: "range", Generation: gen, Leader: "m",
			Members: []GroupMember{{MemberID: "m", Metadata: []byte{1}, Assignment: []byte{2}}}}
	}
	mustOK(t, r, state(5))
	tests := []struct {
		name string
		cmd  Command
		code int16
	}{
		{"older state", state(4), kerr.IllegalGeneration.Code},
		{"same state", state(5), 0},
		{"older commit", commitOf("g", 4, off("a", 0, 1)), kerr.IllegalGeneration.Code},
		{"current commit", commitOf("g", 5, off("a", 0, 2)), 0},
		{"outside group management", commitOf("g", -1, off("a", 0, 3)), 0},
		{"newer state", state(6), 0},
		{"bad kind", GroupState{Group: "g", Kind: 9, Generation: 7}, kerr.InvalidRequest.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustPropose(t, r, tt.cmd)
			if res.Code != tt.code {
				t.Fatalf("code %d (%s), want %d", res.Code, res.Message, tt.code)
			}
		})
	}
	g, _ := groupOf(t, r, "g")
	if g.Generation != 6 || len(g.Members) != 1 || string(g.Members[0].Assignment) != "\x02" {
		t.Fatalf("group %+v", g)
	}
	if got := offsetsOf(t, r, "g")["a/0"]; got != 3 {
		t.Fatalf("offset %d, want 3", got)
	}
}

func TestDeleteTopicDropsOffsets(t *testing.T) {
	var ms atomic.Int64
	r := groupReplica(t, &ms)
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 2})
	mustOK(t, r, CreateTopic{Name: "b", Partitions: 1})
	// "g" and "g2": a group id that is a prefix of another must not
	// drag the other's keys along.
	for _, g := range []string{"g", "g2", ""} {
		mustOK(t, r, commitOf(g, -1, off("a", 0, 1), off("a", 1, 2), off("b", 0, 3)))
	}
	mustOK(t, r, DeleteTopic{Name: "a"})
	for _, g := range []string{"g", "g2", ""} {
		if got := offsetsOf(t, r, g); !reflect.DeepEqual(got, map[string]int64{"b/0": 3}) {
			t.Fatalf("group %q offsets after deleting a: %v", g, got)
		}
	}
	if n := countKeys(t, r, prefixGroupOffset); n != 3 {
		t.Fatalf("%d offset keys, want 3", n)
	}
	if n := countKeys(t, r, prefixTopicGroup); n != 3 {
		t.Fatalf("%d topic markers, want 3", n)
	}
	// A new "a" starts with no offsets.
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 2})
	if got := offsetsOf(t, r, "g"); len(got) != 1 {
		t.Fatalf("offsets after re-creating a: %v", got)
	}
}

func TestDeleteGroupAndOffsetDelete(t *testing.T) {
	var ms atomic.Int64
	r := groupReplica(t, &ms)
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 2})
	mustOK(t, r, CreateTopic{Name: "b", Partitions: 1})
	mustOK(t, r, commitOf("g", -1, off("a", 0, 1), off("a", 1, 2), off("b", 0, 3)))
	mustOK(t, r, commitOf("g2", -1, off("a", 0, 1)))

	res := mustOK(t, r, OffsetDelete{Group: "g", Partitions: []TopicPartition{{"a", 0}, {"b", 0}, {"x", 0}, {"a", 0}}})
	if want := []int16{0, 0, kerr.UnknownTopicOrPartition.Code, 0}; !reflect.DeepEqual(res.Codes, want) {
		t.Fatalf("codes %v, want %v", res.Codes, want)
	}
	if got := offsetsOf(t, r, "g"); !reflect.DeepEqual(got, map[string]int64{"a/1": 2}) {
		t.Fatalf("offsets %v", got)
	}
	// g keeps a marker for a (a/1 is left), drops b's; g2 keeps a's.
	if n := countKeys(t, r, prefixTopicGroup); n != 2 {
		t.Fatalf("%d markers, want 2", n)
	}
	if res := mustPropose(t, r, OffsetDelete{Group: "nope", Partitions: []TopicPartition{{"a", 0}}}); res.Code != kerr.GroupIDNotFound.Code || res.Codes[0] != kerr.GroupIDNotFound.Code {
		t.Fatalf("offset delete of an unknown group: %+v", res)
	}

	mustOK(t, r, DeleteGroup{Group: "g"})
	if _, ok := groupOf(t, r, "g"); ok {
		t.Fatal("group g still there")
	}
	if n := countKeys(t, r, prefixGroupOffset); n != 1 {
		t.Fatalf("%d offset keys, want g2's 1", n)
	}
	if n := countKeys(t, r, prefixTopicGroup); n != 1 {
		t.Fatalf("%d markers, want g2's 1", n)
	}
	if res := mustPropose(t, r, DeleteGroup{Group: "g"}); res.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("second delete: %+v", res)
	}
}

// TestExpireOffsets walks KIP-211's cases with the log clock moved by the
// entries' timestamps.
func TestExpireOffsets(t *testing.T) {
	const retention = 1000
	var ms atomic.Int64
	ms.Store(10_000)
	r := groupReplica(t, &ms)
	mustOK(t, r, CreateTopic{Name: "a", Partitions: 1})
	mustOK(t, r, CreateTopic{Name: "b", Partitions: 1})

	// standalone: offsets only, retention from each commit.
	mustOK(t, r, commitOf("standalone", -1, off("a", 0, 1)))
	// empty: a consumer group whose members left at 10_500.
	mustOK(t, r, commitOf("empty", -1, off("a", 0, 1)))
	// live: members subscribed to a only; b's offset is stale.
	mustOK(t, r, commitOf("live", -1, off("a", 0, 1), off("b", 0, 1)))
	// unknown: members whose subscriptions the coordinator cannot read.
	mustOK(t, r, commitOf("unknown", -1, off("a", 0, 1)))
	// explicit: a v2-v4 commit with its own retention.
	explicit := commitOf("explicit", -1, off("a", 0, 1))
	explicit.RetentionMs = 5000
	mustOK(t, r, explicit)
	member := []GroupMember{{MemberID: "m"}}
	mustOK(t, r, GroupState{Group: "live", ProtocolType: "consumer", Protocol: "range", Generation: 1, Leader: "m",
		SubscribedKnown: true, Subscribed: []string{"a"}, Members: member})
	mustOK(t, r, GroupState{Group: "unknown", ProtocolType: "other", Protocol: "x", Generation: 1, Leader: "m", Members: member})
	ms.Store(10_500)
	mustOK(t, r, GroupState{Group: "empty", ProtocolType: "consumer", Generation: 2})

	all := []string{"standalone", "empty", "live", "unknown", "explicit", "missing"}
	expire := func(at int64) {
		t.Helper()
		ms.Store(at)
		mustOK(t, r, ExpireOffsets{RetentionMs: retention, Groups: all})
	}
	type want struct {
		offsets map[string]int64
		exists  bool
	}
	check := func(at int64, wants map[string]want) {
		t.Helper()
		for g, w := range wants {
			got := offsetsOf(t, r, g)
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, w.offsets) {
				t.Errorf("at %d: group %s offsets %v, want %v", at, g, got, w.offsets)
			}
			if _, ok := groupOf(t, r, g); ok != w.exists {
				t.Errorf("at %d: group %s exists %v, want %v", at, g, ok, w.exists)
			}
		}
	}
	a1 := map[string]int64{"a/0": 1}
	expire(10_999)
	check(10_999, map[string]want{
		"standalone": {a1, true}, "empty": {a1, true}, "live": {map[string]int64{"a/0": 1, "b/0": 1}, true},
		"unknown": {a1, true}, "explicit": {a1, true},
	})
	expire(11_000)
	check(11_000, map[string]want{
		"standalone": {nil, false}, // expired and emptied: gone
		"empty":      {a1, true},   // empty since 10_500
		"live":       {a1, true},   // b is not subscribed
		"unknown":    {a1, true},
		"explicit":   {a1, true}, // expires at 15_000
	})
	expire(11_500)
	check(11_500, map[string]want{"empty": {nil, false}, "live": {a1, true}})
	expire(15_000)
	check(15_000, map[string]want{"explicit": {nil, false}, "live": {a1, true}, "unknown": {a1, true}})
	if n := countKeys(t, r, prefixTopicGroup); n != 2 {
		t.Fatalf("%d markers left, want live's and unknown's a", n)
	}

	if res := mustPropose(t, r, ExpireOffsets{RetentionMs: -1, Groups: all}); res.Code != kerr.InvalidRequest.Code {
		t.Fatalf("negative retention: %+v", res)
	}
}
