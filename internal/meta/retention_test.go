package meta

import (
	"context"
	"fmt"
	"testing"
)

// TestRetentionPolicyOf: what apply reads of a topic's configs, over the
// proposer's broker defaults.
func TestRetentionPolicyOf(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		want    RetentionPolicy
	}{
		{nil, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
		{map[string]string{"retention.ms": " 5 ", "retention.bytes": "7"}, RetentionPolicy{Delete: true, Ms: 5, Bytes: 7}},
		{map[string]string{"retention.ms": "-1"}, RetentionPolicy{Delete: true, Ms: -1, Bytes: -1}},
		{map[string]string{"retention.ms": "soon"}, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
		{map[string]string{"cleanup.policy": "compact"}, RetentionPolicy{Ms: 100, Bytes: -1}},
		{map[string]string{"cleanup.policy": "compact, delete"}, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
		{map[string]string{"cleanup.policy": "delete,compact"}, RetentionPolicy{Delete: true, Ms: 100, Bytes: -1}},
	} {
		if got := RetentionPolicyOf(tc.configs, 100, -1); got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.configs, got, tc.want)
		}
	}
	if (RetentionPolicy{Delete: true, Ms: -1, Bytes: -1}).Limited() || (RetentionPolicy{Ms: 5, Bytes: 5}).Limited() {
		t.Error("a policy that keeps everything is limited")
	}
}

// BenchmarkRetentionDue measures what a retention check costs per owned
// partition when nothing is due (the common case: every topic has the
// 7-day default): partitions of 10 index entries each, read through a
// View of a MemStore.
func BenchmarkRetentionDue(b *testing.B) {
	const partitions, entries = 1000, 10
	log := newTestLog()
	r := openReplica(&testing.T{}, log, nil, "bench")
	ctx := context.Background()
	if _, err := r.ProposeBatch(ctx, []Command{FinalizeFeatures{Bootstrap: true, Features: []FeatureLevel{{Name: FeatureMetadata, Level: MetadataLevel3}}}}); err != nil {
		b.Fatal(err)
	}
	res, err := r.ProposeBatch(ctx, []Command{CreateTopic{Name: "t", Partitions: partitions, Configs: map[string]string{"retention.bytes": "1000000000"}}})
	if err != nil || res[0].Code != 0 {
		b.Fatal(err, res)
	}
	id := res[0].TopicID
	for e := range entries {
		co := CommitObject{ObjectKey: fmt.Sprintf("o%d", e), ObjectSize: partitions * 100}
		for p := range int32(partitions) {
			co.Batches = append(co.Batches, CommitBatch{TopicID: id, Partition: p, Position: int64(p) * 100, Length: 100, Records: 10, BatchCount: 1,
				MaxTimestamp: 1_700_000_000_000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
		}
		if _, err := r.ProposeBatch(ctx, []Command{co}); err != nil {
			b.Fatal(err)
		}
	}
	v := NewView(r.kv.Snapshot())
	defer v.Close()
	policy := RetentionPolicyOf(map[string]string{"retention.bytes": "1000000000"}, 7*24*3600*1000, -1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, due, err := v.RetentionDue(id, int32(i%partitions), policy, 1_700_000_001_000); err != nil || due {
			b.Fatal(due, err)
		}
	}
}
