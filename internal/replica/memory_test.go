package replica

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// TestPebbleMatchesMemory: package meta's tests and scenarios run on
// meta.MemStore, the key-value interface's reference. This replays a
// workload of every command type, several to an entry, through a Replica
// on Pebble and the same log through MemStore, and wants the same
// result for every command and the same final state: Pebble behind the
// adapters (an indexed batch reading its own writes, its iterators,
// range deletions) behaves as the reference does.
func TestPebbleMatchesMemory(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_000_000))
	log := memlog.New()
	r := openReplica(t, log, "", "w", withClock(clk))
	var got []meta.Result
	used := map[meta.CommandType]bool{}
	propose := func(cmds ...meta.Command) []meta.Result {
		t.Helper()
		res, err := r.ProposeBatch(testCtx(t), cmds)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			used[c.Type()] = true
		}
		got = append(got, res...)
		return res
	}
	res := propose(meta.CreateTopic{Name: "a", Partitions: 2}, meta.CreateTopic{Name: "b", Partitions: 1},
		meta.AllocateProducerID{ProducerID: -1, ProducerEpoch: -1})
	a0, a1, b0 := partRef{res[0].TopicID, 0}, partRef{res[0].TopicID, 1}, partRef{res[1].TopicID, 0}
	pid := res[2].ProducerID
	idem := commitTo(3, a0, b0)
	idem.Batches[0].ProducerID, idem.Batches[0].ProducerEpoch, idem.Batches[0].BaseSequence = pid, 0, 0
	retry := idem
	retry.ObjectKey += "-retry"
	propose(idem, retry, commitTo(2, a1), meta.CreatePartitions{Name: "a", NewTotal: 3},
		commitTo(1, partRef{a0.id, 2}), meta.AlterConfigs{Name: "a", Set: map[string]string{"x": "1"}})
	propose(groupCommit("a", 4), groupCommit("b", 1),
		meta.GroupState{Group: "g", ProtocolType: "consumer", Protocol: "range", Generation: 1, Leader: "m",
			SubscribedKnown: true, Subscribed: []string{"a"}, Members: []meta.GroupMember{{MemberID: "m"}}},
		meta.OffsetDelete{Group: "g", Partitions: []meta.TopicPartition{{Topic: "b"}}},
		meta.AgentHeartbeat{NodeID: 1, AgentID: "w", LeaseMs: 10_000, Applied: 1})
	tpid := propose(meta.InitTransactionalProducer{TransactionalID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})[0].ProducerID
	txnCommit := func(ref partRef, epoch int16, seq int32) meta.CommitObject {
		c := commitTo(2, ref)
		c.Batches[0].ProducerID, c.Batches[0].ProducerEpoch, c.Batches[0].BaseSequence = tpid, epoch, seq
		c.Batches[0].Transactional = true
		return c
	}
	propose(meta.AddPartitionsToTxn{TransactionalID: "tx", ProducerID: tpid, Partitions: []meta.TopicPartition{{Topic: "a"}, {Topic: "b"}}},
		meta.AddOffsetsToTxn{TransactionalID: "tx", ProducerID: tpid, Group: "g"},
		txnCommit(a0, 0, 0), txnCommit(b0, 0, 0),
		meta.TxnOffsetCommit{TransactionalID: "tx", ProducerID: tpid, Group: "g", Generation: -1,
			Offsets: []meta.OffsetCommitPartition{{Topic: "a", Partition: 1, Offset: 9, LeaderEpoch: -1, CommitTimestamp: -1}}},
		meta.EndTxn{TransactionalID: "tx", ProducerID: tpid, Commit: true, Seq: 1})
	propose(meta.AddPartitionsToTxn{TransactionalID: "tx", ProducerID: tpid, Partitions: []meta.TopicPartition{{Topic: "a", Partition: 1}}},
		txnCommit(a1, 0, 0),
		meta.EndTxn{TransactionalID: "tx", ProducerID: tpid, Seq: -1, BumpEpoch: true},
		meta.AddPartitionsToTxn{TransactionalID: "tx", ProducerID: tpid, ProducerEpoch: 1, Partitions: []meta.TopicPartition{{Topic: "b"}}},
		meta.DeleteRecords{Partitions: []meta.DeleteRecordsPartition{{TopicID: a0.id, Offset: 4}, {TopicID: a1.id, Partition: 1, Offset: -1}}})
	clk.Advance(48 * time.Hour)
	propose(meta.TxnSweep{TransactionalIDs: []string{"tx"}}, meta.ExpireOffsets{RetentionMs: 1000, Groups: []string{"g"}},
		meta.DeleteGroup{Group: "g"}, meta.DeleteTopic{Name: "b"}, commitTo(1, a0, b0))
	// Raising the level reads the agent table through the batch; the
	// heartbeat after it is written at the new level, with its ranges.
	propose(meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MaxMetadataLevel}}},
		meta.AgentHeartbeat{NodeID: 1, AgentID: "w", LeaseMs: 10_000, Features: meta.SupportedFeatures()})
	if got := r.Features().MetadataLevel(); got != meta.MaxMetadataLevel {
		t.Fatalf("replica's metadata level %d after raising it, want %d", got, meta.MaxMetadataLevel)
	}
	propose(meta.AgentHeartbeat{NodeID: 1, AgentID: "w", LeaseMs: 10_000, Features: meta.SupportedFeatures(),
		Endpoints: []meta.AgentEndpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092}, {Listener: "SSL", Port: 9093}}})
	// Level 3's commands, and what its apply keeps beside the older ones
	// (stored bytes per partition, trimmed producer state).
	propose(commitTo(2, a0, a1), meta.ReassignPartitions{Topic: "a", Partitions: []meta.PartitionReplicas{{Partition: 1, Replicas: []int32{1}}}},
		meta.AlterBrokerConfigs{Set: map[string]string{"log.retention.ms": "60000", "log.retention.bytes": "-1"}},
		meta.AlterBrokerConfigs{Resource: "1", Set: map[string]string{"log.retention.ms": "1000"}},
		meta.AlterBrokerConfigs{Delete: []string{"log.retention.bytes"}})
	// Level 4's client quotas.
	propose(meta.AlterClientQuota{Entity: meta.QuotaEntity{User: meta.Named("u"), ClientID: meta.DefaultQuotaName},
		Set: map[string]float64{"producer_byte_rate": 1024, "request_percentage": 50}},
		meta.AlterClientQuota{Entity: meta.QuotaEntity{ClientID: meta.Named("c")}, Set: map[string]float64{"consumer_byte_rate": 2048}},
		meta.AlterClientQuota{Entity: meta.QuotaEntity{User: meta.Named("u"), ClientID: meta.DefaultQuotaName}, Remove: []string{"request_percentage"}})
	clk.Advance(time.Hour)
	propose(commitTo(1, a1), meta.ApplyRetention{DefaultRetentionMs: 60_000, DefaultRetentionBytes: -1,
		Partitions: []meta.RetentionPartition{{TopicID: a0.id}, {TopicID: a1.id, Partition: 1}}},
		meta.DeleteRecords{Partitions: []meta.DeleteRecordsPartition{{TopicID: a1.id, Partition: 1, Offset: -1}}})
	// Level 4: compaction swaps a0's entries (those of the retention
	// above and two more) for one entry in a new object, and a second
	// swap of the same entries loses.
	propose(commitTo(1, a0), commitTo(1, a0))
	view := r.View()
	it, err := view.Seek(a0.id, a0.partition, 0)
	if err != nil {
		t.Fatal(err)
	}
	var old []meta.IndexEntry
	var records int32
	for it.Next() {
		old = append(old, it.Entry())
		records += it.Entry().Records
	}
	it.Close()
	view.Close()
	if len(old) < 2 {
		t.Fatalf("a0 holds %d index entries, want at least 2", len(old))
	}
	swap := func(key string) meta.SwapIndex {
		return meta.SwapIndex{TopicID: a0.id, Partition: a0.partition, Old: old,
			New: []meta.IndexEntry{{BaseOffset: old[0].BaseOffset, ObjectKey: key, Length: int64(len(old)) * 100,
				Records: records, BatchCount: int32(len(old)), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}},
			Objects: []meta.SwapObject{{Key: key, Size: int64(len(old)) * 100}}}
	}
	if res := propose(swap("compacted-1"), swap("compacted-2")); res[0].Code != 0 || !meta.SwapLost(res[1]) {
		t.Fatalf("swaps: %v, %v; want the first to win and the second to lose", res[0].Err(), res[1].Err())
	}
	// The janitor's report: the objects that died above, deleted, and a
	// reconciler pass.
	view = r.View()
	dead, err := view.DeadObjects(math.MaxInt64, 100) // every entry: the bound must not wrap
	view.Close()
	if err != nil || len(dead) == 0 {
		t.Fatalf("dead objects after DeleteRecords: %v, %v", dead, err)
	}
	clk.Advance(time.Hour)
	propose(meta.GCProgress{GraceMs: 60_000, Deleted: dead, ReconciledTo: clk.Now().UnixMilli() - 60_000, Orphans: 1, OrphanBytes: 100})
	// Level 4's ACLs: created, then deleted by a filter apply resolves.
	binding := func(name string, pt kmsg.ACLResourcePatternType) acl.Binding {
		return acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: name, PatternType: pt,
			Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	}
	propose(meta.CreateACLs{ACLs: []acl.Binding{binding("a", kmsg.ACLResourcePatternTypeLiteral), binding("a", kmsg.ACLResourcePatternTypePrefixed)}},
		meta.DeleteACLs{Filters: []acl.Filter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: kmsg.StringPtr("a"),
			PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}})
	// Level 4: SCRAM credentials, set, replaced and deleted.
	key := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	propose(meta.AlterScramCredential{User: "alice", Mechanism: meta.ScramSHA256, Iterations: 4096, Salt: []byte("s"), StoredKey: key(1, 32), ServerKey: key(2, 32)},
		meta.AlterScramCredential{User: "alice", Mechanism: meta.ScramSHA512, Iterations: 8192, Salt: []byte("t"), StoredKey: key(3, 64), ServerKey: key(4, 64)},
		meta.AlterScramCredential{User: "alice", Mechanism: meta.ScramSHA256, Delete: true},
		meta.AlterScramCredential{User: "bob", Mechanism: meta.ScramSHA256, Delete: true})
	// Level 6: the schema registry: ids, a reuse, a refusal, configs,
	// a soft and a permanent delete.
	propose(meta.RegisterSchema{Subject: "s", SchemaType: "AVRO", Schema: `"string"`},
		meta.RegisterSchema{Subject: "s", SchemaType: "AVRO", Schema: `"long"`, Expect: 1},
		meta.RegisterSchema{Subject: "t", SchemaType: "AVRO", Schema: `"string"`},
		meta.RegisterSchema{Subject: "s", SchemaType: "AVRO", Schema: `"int"`, Expect: 1},
		meta.SchemaConfig{Global: true, Compatibility: "FULL"},
		meta.SchemaConfig{Subject: "s", Mode: "READONLY"},
		meta.SchemaConfig{Subject: "s", DeleteMode: true},
		meta.DeleteSchemas{Subject: "t"},
		meta.DeleteSchemas{Subject: "t", Permanent: true})
	// Level 7: the SQL catalog: a source over topic a, a view over it,
	// a refused drop, a refused duplicate, then a cascade.
	col := func(name string, oid uint32) meta.RelationColumn {
		return meta.RelationColumn{Name: name, Type: oid, TypeMod: -1}
	}
	rel := propose(meta.CreateRelation{Kind: meta.RelationSource, Name: "src", SQL: "CREATE SOURCE src (v text) WITH (topic = 'a')",
		Columns: []meta.RelationColumn{col("v", 25), col("_offset", 20)}, Options: []meta.RelationOption{{Key: "format", Value: "text"}, {Key: "topic", Value: "a"}},
		Topic: "a", Format: "text", Owner: "User:alice"},
		meta.CreateRelation{Kind: meta.RelationView, Name: "v", SQL: "CREATE MATERIALIZED VIEW v AS SELECT count(*) FROM src",
			Columns: []meta.RelationColumn{col("count", 20)}, Query: "SELECT count(*) FROM src", DependsOn: []uint64{1}},
		meta.CreateRelation{Kind: meta.RelationView, Name: "src", SQL: "x", Query: "SELECT 1"},
		meta.DropRelation{Kind: meta.RelationSource, Names: []string{"src"}},
		meta.DropRelation{Kind: meta.RelationSource, Names: []string{"src", "gone"}, IfExists: true, Cascade: true})
	if rel[0].RelationID != 1 || rel[1].RelationID != 2 || rel[2].SQLState != meta.SQLStateDuplicateTable ||
		rel[3].SQLState != meta.SQLStateDependentObjectsExist || !reflect.DeepEqual(rel[4].RelationIDs, []uint64{2, 1}) {
		t.Fatalf("catalog results: %+v", rel)
	}

	// Connectors: a create, a refused duplicate, a pause, a restart
	// (a new generation), a status of the old generation refused and
	// one of the new taken, a delete.
	propose(meta.PutConnector{Name: "pg", Config: map[string]string{"connector.class": "X", "topic.prefix": "p"}, Owner: "User:alice", Mode: meta.PutCreate},
		meta.PutConnector{Name: "pg", Config: map[string]string{"connector.class": "X"}, Mode: meta.PutCreate},
		meta.ConnectorTargetState{Name: "pg", State: meta.ConnectorPaused},
		meta.RestartConnector{Name: "pg"},
		meta.ConnectorTaskStatus{Name: "pg", Generation: 1, State: meta.TaskRunning, Node: 1, Worker: "h:8083"},
		meta.ConnectorTaskStatus{Name: "pg", Generation: 2, State: meta.TaskFailed, Node: 1, Worker: "h:8083", Trace: "boom"},
		meta.DeleteConnector{Name: "pg"})
	// Level 9: share group membership (a state, a fenced one, a refusal
	// of another kind's id) and group configs.
	propose(meta.ShareGroupState{Group: "sg", Generation: 2, Subscribed: []string{"a"},
		Members: []meta.GroupMember{{MemberID: "m1", ClientID: "c", Metadata: []byte{1}, Assignment: []byte{2}}}},
		meta.ShareGroupState{Group: "sg", Generation: 1},
		meta.AlterGroupConfigs{Group: "sg", Set: map[string]string{meta.GroupShareAutoOffsetReset: "earliest"}},
		meta.AlterGroupConfigs{Group: "sg", Set: map[string]string{meta.GroupShareIsolationLevel: "read_committed"}, Replace: true},
		meta.AlterGroupConfigs{Group: "sg", Delete: []string{meta.GroupShareIsolationLevel}})

	// Level 9: share partitions: an init (and a second that changes
	// nothing), two members racing, acks of both kinds, a lock expired
	// by the log clock, a release, an alter and a delete.
	share := func(c meta.ShareAcquire) meta.ShareAcquire {
		c.Group, c.TopicID, c.Partition, c.LockMs, c.DeliveryLimit, c.MaxLocks = "q", a0.id, a0.partition, 30_000, 2, 2000
		return c
	}
	propose(meta.ShareInit{Group: "q", TopicID: a0.id, Partition: a0.partition},
		meta.ShareInit{Group: "q", TopicID: a0.id, Partition: a0.partition, StartOffset: 3},
		share(meta.ShareAcquire{Member: "m1", Ranges: []meta.ShareRange{{First: 0, Last: 2}, {First: 3, Last: 3, Gap: true}, {First: 4, Last: 5}}}),
		share(meta.ShareAcquire{Member: "m2", Ranges: []meta.ShareRange{{First: 0, Last: 7}}}),
		meta.ShareAck{Group: "q", TopicID: a0.id, Partition: a0.partition, Member: "m1", LockMs: 30_000, DeliveryLimit: 2,
			Batches: []meta.ShareAckBatch{{First: 0, Last: 1, Types: meta.ShareAckTypes{1, 3}}, {First: 2, Last: 2, Types: meta.ShareAckTypes{2}}}})
	clk.Advance(time.Minute)
	propose(share(meta.ShareAcquire{Member: "m3", Ranges: []meta.ShareRange{{First: 0, Last: 7}}}),
		meta.ShareRelease{Group: "q", Member: "m3", DeliveryLimit: 2},
		meta.ShareStateAlter{Group: "q", TopicID: a1.id, Partition: a1.partition, StartOffset: 1},
		meta.ShareStateDelete{Group: "q", Topics: []meta.TopicID{a1.id}},
		meta.ShareStateDelete{Group: "q"})

	for typ := meta.CommandType(1); typ < 256; typ++ {
		if !strings.HasPrefix(typ.String(), "CommandType(") && !used[typ] {
			t.Errorf("the workload does not propose %v", typ)
		}
	}
	entries := rawEntries(t, log)
	want, digest := memoryReplay(t, entries)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results on Pebble\n%+v\non MemStore\n%+v", got, want)
	}
	if d := mustDigest(t, r); d != digest {
		t.Fatalf("digest on Pebble %x, on MemStore %x", d, digest)
	}
}

// memoryReplay applies entries, from position 0, to a meta.MemStore in
// batches of 7 (so the partition cache spans entries, as the player's
// batches do), and returns every command's result and the digest.
func memoryReplay(t *testing.T, entries []sharedlog.Entry) ([]meta.Result, [32]byte) {
	t.Helper()
	kv := meta.NewMemStore()
	var results []meta.Result
	for from := 0; from < len(entries); from += 7 {
		a := meta.NewApplier(kv)
		to := min(from+7, len(entries))
		for _, e := range entries[from:to] {
			out, err := a.Apply(uint64(e.Pos), e.Data)
			if err != nil {
				t.Fatalf("apply at %d: %v", e.Pos, err)
			}
			results = append(results, out.Results...)
		}
		if err := a.Finish(uint64(to)); err != nil {
			t.Fatal(err)
		}
	}
	digest, err := meta.NewView(kv.Snapshot()).Digest()
	if err != nil {
		t.Fatal(err)
	}
	return results, digest
}
