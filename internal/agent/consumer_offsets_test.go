package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/offsetstopic"
	producepkg "github.com/strandkafka/strand/internal/produce"
)

// offsetsRecord is the newest __consumer_offsets record of one key.
type offsetsRecord struct {
	partition int32
	offset    *kmsg.OffsetCommitValue  // nil for a tombstone
	group     *kmsg.GroupMetadataValue // nil for a tombstone
}

// readOffsetsTopic reads __consumer_offsets from the start to its end
// offsets, with a plain consumer as Burrow does, and returns the newest
// record of each key: "offset g/topic/p" or "group g".
func readOffsetsTopic(t *testing.T, a *agent.Agent) map[string]offsetsRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := a.SyncConsumerOffsets(ctx); err != nil {
		t.Fatalf("waiting for the records: %v", err)
	}
	ends, err := kadm.NewClient(client(t, a.KafkaAddr())).ListEndOffsets(ctx, offsetstopic.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().At(0)
		}
	})
	got := map[string]offsetsRecord{}
	if len(want) == 0 {
		return got
	}
	cl := client(t, a.KafkaAddr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{offsetstopic.Topic: parts}))
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: partitions %v not read to their end", offsetstopic.Topic, want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
			k, rec := decodeOffsetsRecord(t, r)
			got[k] = rec
		})
	}
	return got
}

func decodeOffsetsRecord(t *testing.T, r *kgo.Record) (string, offsetsRecord) {
	t.Helper()
	rec := offsetsRecord{partition: r.Partition}
	var version kmsg.OffsetCommitKey // the version leads every key
	if len(r.Key) < 2 {
		t.Fatalf("key %x", r.Key)
	}
	switch version.Version = int16(r.Key[0])<<8 | int16(r.Key[1]); version.Version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatalf("offset key %x: %v", r.Key, err)
		}
		if r.Value != nil {
			rec.offset = new(kmsg.OffsetCommitValue)
			if err := rec.offset.ReadFrom(r.Value); err != nil || rec.offset.Version != 3 {
				t.Fatalf("offset value %x: version %d, %v", r.Value, rec.offset.Version, err)
			}
		}
		return fmt.Sprintf("offset %s/%s/%d", k.Group, k.Topic, k.Partition), rec
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatalf("group key %x: %v", r.Key, err)
		}
		if r.Value != nil {
			rec.group = new(kmsg.GroupMetadataValue)
			if err := rec.group.ReadFrom(r.Value); err != nil {
				t.Fatalf("group value %x: %v", r.Value, err)
			}
		}
		return "group " + k.Group, rec
	}
	t.Fatalf("key version %d", version.Version)
	return "", rec
}

// wantOffsetRecord checks the newest record of group's offset of
// topic/p: the committed offset and metadata, in the group's partition.
func wantOffsetRecord(t *testing.T, got map[string]offsetsRecord, group, topic string, p int32, offset int64, metadata string) {
	t.Helper()
	k := fmt.Sprintf("offset %s/%s/%d", group, topic, p)
	r, ok := got[k]
	switch {
	case !ok:
		t.Errorf("%s: no record", k)
	case r.offset == nil:
		t.Errorf("%s: tombstone, want offset %d", k, offset)
	case r.offset.Offset != offset || r.offset.Metadata != metadata || r.offset.CommitTimestamp <= 0:
		t.Errorf("%s: %+v, want offset %d metadata %q", k, *r.offset, offset, metadata)
	case r.partition != offsetstopic.PartitionFor(group, 50):
		t.Errorf("%s: in partition %d, want %d", k, r.partition, offsetstopic.PartitionFor(group, 50))
	}
}

func wantTombstone(t *testing.T, got map[string]offsetsRecord, k string) {
	t.Helper()
	if r, ok := got[k]; !ok || r.offset != nil || r.group != nil {
		t.Errorf("%s: newest record %+v (found %v), want a tombstone", k, r, ok)
	}
}

// TestConsumerOffsetsRecords: offsets committed by a group consumer and
// by an admin client appear in __consumer_offsets as Kafka writes them,
// with the group's state; OffsetDelete and DeleteGroups leave
// tombstones; the topic is internal, compacted, and closed to producers.
func TestConsumerOffsetsRecords(t *testing.T) {
	a := start(t, t.TempDir())
	const topic = "co-records"
	createTopic(t, a.KafkaAddr(), topic, 2)
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte{byte(i)}})
	}
	produce(t, a.KafkaAddr(), rs)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	// A group consumer reads everything and commits.
	consumer := client(t, a.KafkaAddr(), kgo.ConsumerGroup("co-g1"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < len(rs); {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", n, len(rs))
		}
		n += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	// An admin commit with metadata, outside group management.
	adm := kadm.NewClient(client(t, a.KafkaAddr()))
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1, Metadata: "by admin"})
	if cr, err := adm.CommitOffsets(ctx, "co-g2", offs); err != nil || cr.Error() != nil {
		t.Fatalf("commit: %v %v", err, cr.Error())
	}

	// The records match what OffsetFetch answers from the metadata
	// database (kgo commits its member id as metadata).
	fetched, err := adm.FetchOffsets(ctx, "co-g1")
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	got := readOffsetsTopic(t, a)
	for p := range int32(2) {
		o, _ := fetched.Lookup(topic, p)
		if o.At != 5 || o.Metadata == "" {
			t.Errorf("OffsetFetch co-g1 %s/%d: %+v, want offset 5 with kgo's metadata", topic, p, o)
		}
		wantOffsetRecord(t, got, "co-g1", topic, p, o.At, o.Metadata)
	}
	wantOffsetRecord(t, got, "co-g2", topic, 0, 3, "by admin")
	// Value v1: Burrow 1.2 decodes no later one (records.go).
	if g := got["group co-g1"].group; g == nil || g.Version != 1 || g.ProtocolType != "consumer" || g.Generation < 1 || len(g.Members) != 1 || len(g.Members[0].Assignment) == 0 {
		t.Errorf("group co-g1: %+v, want a v1 consumer group value with one member and its assignment", g)
	}

	// OffsetDelete of an empty group's offset.
	if dr, err := adm.DeleteOffsets(ctx, "co-g2", kadm.TopicsSet{topic: {0: {}}}); err != nil || dr.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, dr.Error())
	}
	// DeleteGroups once the consumer left.
	consumer.Close()
	if dr, err := adm.DeleteGroup(ctx, "co-g1"); err != nil || dr.Err != nil {
		t.Fatalf("delete group: %v %v", err, dr.Err)
	}
	got = readOffsetsTopic(t, a)
	wantTombstone(t, got, fmt.Sprintf("offset co-g2/%s/0", topic))
	wantTombstone(t, got, fmt.Sprintf("offset co-g1/%s/0", topic))
	wantTombstone(t, got, fmt.Sprintf("offset co-g1/%s/1", topic))
	wantTombstone(t, got, "group co-g1")

	// The topic as Kafka has it: internal, compacted, no client writes.
	md, err := adm.Metadata(ctx, offsetstopic.Topic)
	if err != nil || !md.Topics[offsetstopic.Topic].IsInternal {
		t.Errorf("Metadata: %+v, %v; want an internal topic", md.Topics[offsetstopic.Topic], err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, offsetstopic.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On(offsetstopic.Topic, nil); err != nil || !hasConfig(c.Configs, "cleanup.policy", "compact") {
		t.Errorf("configs of %s: %+v, %v; want cleanup.policy=compact", offsetstopic.Topic, c.Configs, err)
	}
	prod := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0))
	err = prod.ProduceSync(ctx, &kgo.Record{Topic: offsetstopic.Topic, Key: []byte("k"), Value: []byte("v")}).FirstErr()
	if err == nil || !isInvalidTopic(err) {
		t.Errorf("client produce to %s: %v, want INVALID_TOPIC_EXCEPTION", offsetstopic.Topic, err)
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name {
			return c.Value != nil && *c.Value == value
		}
	}
	return false
}

func isInvalidTopic(err error) bool {
	for e := err; e != nil; {
		if e == kerr.InvalidTopicException {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// TestConsumerOffsetsTxn: offsets committed in a transaction appear
// when it commits, not before, and an aborted transaction's never.
func TestConsumerOffsetsTxn(t *testing.T) {
	a := start(t, t.TempDir())
	const topic = "co-txn"
	createTopic(t, a.KafkaAddr(), topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl := client(t, a.KafkaAddr(), kgo.TransactionalID("co-tx"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	key := fmt.Sprintf("offset co-g3/%s/1", topic)

	txn := func(offset int64, end kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("in txn")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "co-tx", pid, epoch, "co-g3"
		if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
		}
		commit := kmsg.NewPtrTxnOffsetCommitRequest()
		commit.TransactionalID, commit.ProducerID, commit.ProducerEpoch, commit.Group, commit.Generation = "co-tx", pid, epoch, "co-g3", -1
		ct := kmsg.NewTxnOffsetCommitRequestTopic()
		ct.Topic = topic
		cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch = 1, offset, -1
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		resp, err := commit.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
		}
		if r, ok := readOffsetsTopic(t, a)[key]; ok && r.offset != nil && r.offset.Offset == offset {
			t.Errorf("offset %d has a record before its transaction ended", offset)
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}

	txn(7, kgo.TryCommit)
	wantOffsetRecord(t, readOffsetsTopic(t, a), "co-g3", topic, 1, 7, "")
	txn(9, kgo.TryAbort)
	wantOffsetRecord(t, readOffsetsTopic(t, a), "co-g3", topic, 1, 7, "")
}

// failingProducer fails every write, as an object store or log outage
// would.
type failingProducer struct{}

func (failingProducer) Produce(context.Context, []producepkg.Batch) ([]meta.BatchResult, error) {
	return nil, errors.New("injected: produce path down")
}

// TestConsumerOffsetsRestart: a commit whose record was never written
// (every write failed, as if the agent had crashed after the apply) gets
// its record when the agent starts again: the agent rewrites the
// records of the groups it coordinates.
func TestConsumerOffsetsRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := agent.Config{DataDir: dir, KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0"}
	broken := cfg
	agent.SetOffsetsProducer(&broken, func(offsetstopic.Producer) offsetstopic.Producer { return failingProducer{} })
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, broken, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	const topic = "co-restart"
	createTopic(t, a.KafkaAddr(), topic, 1)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4, LeaderEpoch: -1, Metadata: "before the crash"})
	if cr, err := kadm.NewClient(client(t, a.KafkaAddr())).CommitOffsets(ctx, "co-r", offs); err != nil || cr.Error() != nil {
		t.Fatalf("commit: %v %v", err, cr.Error())
	}
	key := fmt.Sprintf("offset co-r/%s/0", topic)
	if r, ok := readOffsetsTopic(t, a)[key]; ok {
		t.Fatalf("a record despite a broken produce path: %+v", r)
	}
	stop(t, a)

	a = start(t, dir)
	select {
	case <-a.ConsumerOffsetsResynced():
	case <-ctx.Done():
		t.Fatal("the agent did not rewrite its groups' records")
	}
	wantOffsetRecord(t, readOffsetsTopic(t, a), "co-r", topic, 0, 4, "before the crash")
}
