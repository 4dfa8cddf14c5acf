package agent_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
)

// startRetention starts an agent that checks retention every 20 ms.
func startRetention(t *testing.T) *agent.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0",
		LogRetentionCheckInterval: 20 * time.Millisecond,
	}, quietLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stop(t, a) })
	return a
}

// waitPartition waits, on apply notifications, until ok holds of the
// partition's state and storage, or the test's guard ends.
func waitPartition(t *testing.T, a *agent.Agent, id meta.TopicID, ok func(meta.PartitionState, meta.PartitionStorage) bool) (meta.PartitionState, meta.PartitionStorage) {
	t.Helper()
	return waitPartitionOf(t, a, id, 0, ok)
}

func waitPartitionOf(t *testing.T, a *agent.Agent, id meta.TopicID, partition int32, ok func(meta.PartitionState, meta.PartitionStorage) bool) (meta.PartitionState, meta.PartitionStorage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for {
		changed := a.Replica().Changed()
		v := a.Replica().View()
		st, _, err := v.Partition(id, partition)
		var stored meta.PartitionStorage
		if err == nil {
			stored, err = v.PartitionStorage(id, partition)
		}
		v.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ok(st, stored) {
			return st, stored
		}
		select {
		case <-ctx.Done():
			t.Fatalf("partition at the guard: %+v, stored %+v", st, stored)
		case <-changed:
		}
	}
}

// TestRetentionMs: records older than a topic's retention.ms of a few
// seconds go at the next check; the newer ones stay. The log start
// moves, ListOffsets earliest reports it, a fetch below it is
// OFFSET_OUT_OF_RANGE, and a consumer at offset 0 resets to it
// (auto.offset.reset earliest). The records carry old timestamps, so
// the test waits for no clock.
func TestRetentionMs(t *testing.T) {
	a := startRetention(t)
	const topic = "retention-ms"
	id := createTopicWith(t, a.KafkaAddr(), topic, 1, map[string]*string{"retention.ms": kadm.StringPtr("3000")})

	old := time.Now().Add(-time.Hour)
	var oldRecs, newRecs []*kgo.Record
	for i := range 10 {
		oldRecs = append(oldRecs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "old-%d", i), Timestamp: old})
	}
	for i := range 5 {
		newRecs = append(newRecs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "new-%d", i), Timestamp: time.Now().Add(time.Hour)})
	}
	produce(t, a.KafkaAddr(), oldRecs)
	produce(t, a.KafkaAddr(), newRecs)

	st, stored := waitPartition(t, a, id, func(st meta.PartitionState, _ meta.PartitionStorage) bool { return st.LogStartOffset > 0 })
	if st.LogStartOffset != 10 || st.HighWatermark() != 15 {
		t.Fatalf("log start %d, high watermark %d; want 10 and 15", st.LogStartOffset, st.HighWatermark())
	}
	if stored.Entries != 1 || stored.Bytes <= 0 {
		t.Errorf("stored after retention: %+v, want the one entry of the new records", stored)
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl := client(t, a.KafkaAddr())
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != 10 {
		t.Errorf("ListOffsets earliest: %d (%v), want 10", o.Offset, o.Err)
	}

	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.LogStartOffset = 0, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at 0: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(p.ErrorCode))
	}

	consumer := client(t, a.KafkaAddr(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < len(newRecs) {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records at the guard", len(got))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		if r.Offset != int64(10+i) || string(r.Value) != string(newRecs[i].Value) {
			t.Errorf("record %d after the reset: offset %d %q, want %d %q", i, r.Offset, r.Value, 10+i, newRecs[i].Value)
		}
	}
}

// TestRetentionBytes: with retention.bytes set, the partition keeps at
// least retention.bytes and less than that plus one index entry, as
// Kafka keeps less than retention.bytes plus one segment.
func TestRetentionBytes(t *testing.T) {
	a := startRetention(t)
	const topic = "retention-bytes"
	const limit = 2000
	id := createTopicWith(t, a.KafkaAddr(), topic, 1, map[string]*string{"retention.bytes": kadm.StringPtr(fmt.Sprint(limit))})

	value := make([]byte, 500)
	rand.NewChaCha8([32]byte{1}).Read(value) // incompressible: every batch the same size
	for i := range 12 {
		produce(t, a.KafkaAddr(), []*kgo.Record{{Topic: topic, Value: value, Key: fmt.Appendf(nil, "%d", i)}})
	}
	var entry int64
	st, stored := waitPartition(t, a, id, func(st meta.PartitionState, s meta.PartitionStorage) bool {
		if s.Entries > 0 && entry == 0 {
			entry = s.Bytes / s.Entries // every batch is the same size
		}
		return st.LogStartOffset > 0 && s.Bytes < limit+entry
	})
	if stored.Bytes < limit || stored.Bytes >= limit+entry {
		t.Errorf("stored %d bytes in %d entries of %d bytes, want [%d, %d)", stored.Bytes, stored.Entries, entry, limit, limit+entry)
	}
	if want := st.HighWatermark() - stored.Entries; st.LogStartOffset != want {
		t.Errorf("log start %d, want %d: one record per entry", st.LogStartOffset, want)
	}
}

// TestRetentionTwoAgents: with two agents on one log, each partition is
// trimmed (by its placement owner), and kadm's DescribeAllLogDirs, asking
// both, lists every partition once with the bytes apply counted.
func TestRetentionTwoAgents(t *testing.T) {
	shared := t.TempDir()
	logURL := "mem://" + strings.ReplaceAll(t.Name(), "/", "-")
	var agents []*agent.Agent
	for node := range int32(2) {
		agents = append(agents, startWith(t, agent.Config{
			DataDir: t.TempDir(), NodeID: node + 1, Log: logURL,
			ObjStore:                  "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			LogRetentionCheckInterval: 20 * time.Millisecond,
		}, nil))
	}
	const topic, partitions = "retention-two", 8
	id := createTopicWith(t, agents[0].KafkaAddr(), topic, partitions, map[string]*string{"retention.ms": kadm.StringPtr("3000")})
	old := time.Now().Add(-time.Hour)
	var rs []*kgo.Record
	for p := range int32(partitions) {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("old"), Timestamp: old})
	}
	produce(t, agents[1].KafkaAddr(), rs)
	var newer []*kgo.Record
	for p := range int32(partitions) {
		newer = append(newer, &kgo.Record{Topic: topic, Partition: p, Value: []byte("new"), Timestamp: time.Now().Add(time.Hour)})
	}
	produce(t, agents[1].KafkaAddr(), newer)

	for p := range int32(partitions) {
		waitPartitionOf(t, agents[0], id, p, func(st meta.PartitionState, _ meta.PartitionStorage) bool { return st.LogStartOffset == 1 })
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl := client(t, agents[0].KafkaAddr(), kgo.SeedBrokers(agents[0].KafkaAddr(), agents[1].KafkaAddr()))
	adm := kadm.NewClient(cl)
	// A partition placement gives agent 1 gets a replica list naming
	// agent 2 first: Metadata and DescribeLogDirs then put it on agent 2.
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	moved := int32(-1)
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		if p.Leader == 1 {
			moved = p.Partition
			break
		}
	}
	if moved < 0 {
		t.Fatalf("placement gives agent 1 none of %d partitions", partitions)
	}
	res, err := agents[0].Replica().Propose(ctx, meta.ReassignPartitions{Topic: topic, Partitions: []meta.PartitionReplicas{{Partition: moved, Replicas: []int32{2, 1}}}})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := agents[1].Replica().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[int32][]int32{}
	v := agents[0].Replica().View()
	defer v.Close()
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Errorf("broker %d: %v", d.Broker, d.Err)
		}
		if d.Dir == kafka.DeadLogDirName {
			return // what dead objects hold, apart from the stored sizes
		}
		for p, dp := range d.Topics[topic] {
			listed[p] = append(listed[p], d.Broker)
			stored, err := v.PartitionStorage(id, p)
			if err != nil || dp.Size != stored.Bytes || stored.Entries != 1 {
				t.Errorf("%s/%d on broker %d: size %d, stored %+v (%v)", topic, p, d.Broker, dp.Size, stored, err)
			}
		}
	})
	for p := range int32(partitions) {
		if len(listed[p]) != 1 {
			t.Errorf("partition %d listed by brokers %v, want one", p, listed[p])
		}
	}
	if !slices.Equal(listed[moved], []int32{2}) {
		t.Errorf("reassigned partition %d listed by brokers %v, want 2", moved, listed[moved])
	}
}

// TestRetentionDynamicDefault: lowering log.retention.ms cluster-wide
// with kadm (a dynamic broker config, KIP-226) makes the running agent
// trim a topic that sets no retention.ms, without a restart; the topic
// then describes the value as DYNAMIC_DEFAULT_BROKER_CONFIG.
func TestRetentionDynamicDefault(t *testing.T) {
	a := startRetention(t)
	const topic = "retention-dynamic"
	id := createTopicWith(t, a.KafkaAddr(), topic, 1, nil)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "old-%d", i), Timestamp: time.Now().Add(-time.Hour)})
	}
	produce(t, a.KafkaAddr(), recs)
	produce(t, a.KafkaAddr(), []*kgo.Record{{Topic: topic, Value: []byte("new"), Timestamp: time.Now().Add(time.Hour)}})

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	adm := kadm.NewClient(client(t, a.KafkaAddr()))
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("60000")}})
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("AlterBrokerConfigs: %v %+v", err, rs)
	}
	st, _ := waitPartition(t, a, id, func(st meta.PartitionState, _ meta.PartitionStorage) bool { return st.LogStartOffset > 0 })
	if st.LogStartOffset != 10 || st.HighWatermark() != 11 {
		t.Fatalf("log start %d, high watermark %d; want 10 and 11", st.LogStartOffset, st.HighWatermark())
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil || len(rcs) != 1 {
		t.Fatalf("DescribeTopicConfigs: %v %+v", err, rcs)
	}
	for _, c := range rcs[0].Configs {
		if c.Key == "retention.ms" && (c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig) {
			t.Errorf("retention.ms %q from %v, want 60000 from the dynamic default", c.MaybeValue(), c.Source)
		}
	}
}
