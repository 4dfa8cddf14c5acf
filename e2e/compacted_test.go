package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// compactedRecord is one record read back from a compacted topic.
type compactedRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Tombstone bool
	// Timestamp is the record's, ms; a cleaned batch's delete horizon
	// must not change it.
	Timestamp int64
}

// compactedPythonScript reads every partition of a topic from offset 0 to
// its end with confluent-kafka-python (librdkafka) and prints the
// records as JSON; the Go test does the checking.
const compactedPythonScript = `
import json, sys, time
from confluent_kafka import Consumer, KafkaError, TopicPartition

bootstrap, topic, partitions, timeout_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
out = {"records": [], "errors": []}
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compacted-py", "enable.partition.eof": True,
              "enable.auto.commit": False, "fetch.wait.max.ms": 100})
c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
eof = set()
deadline = time.monotonic() + timeout_s
while len(eof) < partitions:
    if time.monotonic() > deadline:
        out["errors"].append("not at the end after %ss" % timeout_s)
        break
    msg = c.poll(0.2)
    if msg is None:
        continue
    if msg.error():
        if msg.error().code() == KafkaError._PARTITION_EOF:
            eof.add(msg.partition())
        else:
            out["errors"].append(str(msg.error()))
        continue
    eof.discard(msg.partition())
    v = msg.value()
    out["records"].append({"Partition": msg.partition(), "Offset": msg.offset(), "Key": msg.key().decode(),
                           "Value": "" if v is None else v.decode(), "Tombstone": v is None,
                           "Timestamp": msg.timestamp()[1]})
c.close()
print(json.dumps(out))
sys.exit(1 if out["errors"] else 0)
`

// TestCompactedTopicClients is issue 13's first acceptance test: a
// compacted topic fed keys x updates plus tombstones, cleaned; a read
// from the beginning returns exactly the newest value of each key
// (checked against a model), tombstones included until
// delete.retention.ms passed and gone after, offsets rising with gaps;
// franz-go, kcat and confluent-kafka-python read the same records, and
// a franz-go consumer rebuilds the key-value table as a Kafka Streams
// store restore would.
func TestCompactedTopicClients(t *testing.T) {
	// Passes run when the test asks (CleanCompacted), not on their own.
	a := startAgent(t, agent.Config{HTTPListen: "127.0.0.1:0", LogCleanerBackoff: time.Hour})
	addr := a.KafkaAddr()
	const topic, partitions, keys, updates = "table", 2, 40, 10
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, -1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "delete.retention.ms": kadm.StringPtr("1"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	// model[partition][key] is the newest value; nil a tombstone.
	model := [partitions]map[string][]byte{{}, {}}
	// stamps[partition][offset] is each produced record's timestamp.
	stamps := [partitions]map[int64]int64{{}, {}}
	produce := func(rs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			model[r.Partition][string(r.Key)] = r.Value
			stamps[r.Partition][r.Offset] = r.Timestamp.UnixMilli()
		}
	}
	rec := func(key string, value []byte) *kgo.Record {
		p, _ := strconv.Atoi(strings.TrimPrefix(key, "key-"))
		return &kgo.Record{Topic: topic, Partition: int32(p % partitions), Key: []byte(key), Value: value}
	}
	for u := range updates {
		var rs []*kgo.Record
		for k := range keys {
			rs = append(rs, rec(fmt.Sprintf("key-%02d", k), fmt.Appendf(nil, "k%02d-u%d", k, u)))
		}
		produce(rs...)
	}
	var tombs []*kgo.Record
	for k := 0; k < keys; k += 4 {
		tombs = append(tombs, rec(fmt.Sprintf("key-%02d", k), nil))
	}
	produce(tombs...)
	sentinel := func(v string) {
		for p := range int32(partitions) {
			produce(&kgo.Record{Topic: topic, Partition: p, Key: []byte("sentinel"), Value: []byte(v)})
		}
	}
	sentinel("s1") // the newest entries, which the round leaves alone

	st, err := a.CleanCompacted(ctx)
	if err != nil || st.Rounds != partitions || st.Swaps == 0 {
		t.Fatalf("clean: %+v %v", st, err)
	}
	got := readCompacted(t, ctx, addr, adm, topic)
	checkCompacted(t, got, model, stamps, true)
	// The pass planned both partitions wholly dirty, and counted what
	// it did.
	ms := scrape(t, a.HTTPAddr())
	for name, want := range map[string]func(float64) bool{
		"strand_cleaner_max_dirty_ratio":       func(v float64) bool { return v == 1 },
		"strand_cleaner_rounds_total":          func(v float64) bool { return v == partitions },
		"strand_cleaner_dropped_records_total": func(v float64) bool { return v > 0 },
		"strand_cleaner_written_bytes_total":   func(v float64) bool { return v > 0 },
	} {
		f := ms[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("metric %s: %v", name, f)
		}
		m := f.GetMetric()[0]
		if v := m.GetGauge().GetValue() + m.GetCounter().GetValue(); !want(v) {
			t.Fatalf("metric %s = %v", name, v)
		}
	}

	// Another idempotent producer's only batch, superseded: the round
	// keeps its header (the producer is active), an empty batch every
	// client must read past.
	other := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err := other.ProduceSync(ctx, rec("key-01", []byte("other"))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(rec("key-01", []byte("after-other")))

	// delete.retention.ms (1 ms) passes; new data makes the rounds due.
	time.Sleep(20 * time.Millisecond)
	sentinel("s2")
	if st, err := a.CleanCompacted(ctx); err != nil || st.Filter.TombstonesDropped != int64(len(tombs)) || st.Filter.Emptied == 0 {
		t.Fatalf("second clean: %+v %v", st, err)
	}
	got = readCompacted(t, ctx, addr, adm, topic)
	checkCompacted(t, got, model, stamps, false)

	// A consumer that starts inside a gap (a committed offset whose
	// record went) gets the next record.
	for i := 1; i < len(got); i++ {
		if got[i].Partition == got[i-1].Partition && got[i].Offset > got[i-1].Offset+1 {
			gap := got[i-1].Offset + 1
			c := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				topic: {got[i].Partition: kgo.NewOffset().At(gap)}}))
			fs := c.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			if rs := fs.Records(); len(rs) == 0 || rs[0].Offset != got[i].Offset {
				t.Fatalf("from the gap at %d: first record %v, want offset %d", gap, rs, got[i].Offset)
			}
			break
		}
	}

	// A Kafka Streams style restore: put on a value, delete on a
	// tombstone, in offset order per partition.
	table := map[string]string{}
	for _, r := range got {
		k := fmt.Sprintf("%d/%s", r.Partition, r.Key)
		if r.Tombstone {
			delete(table, k)
		} else {
			table[k] = r.Value
		}
	}
	want := map[string]string{}
	for p, m := range model {
		for k, v := range m {
			if v != nil {
				want[fmt.Sprintf("%d/%s", p, k)] = string(v)
			}
		}
	}
	if fmt.Sprint(table) != fmt.Sprint(want) {
		t.Fatalf("restored table %v\nwant %v", table, want)
	}

	t.Run("kcat", func(t *testing.T) {
		kcat := requireCommand(t, "kcat")
		k := kcatRunner{t: t, path: kcat, addr: addr}
		msgs := k.consume(t, topic, len(got))
		var fromKcat []compactedRecord
		for _, m := range msgs {
			fromKcat = append(fromKcat, compactedRecord{Partition: m.partition, Offset: m.offset, Key: m.key, Value: m.value, Timestamp: m.timestamp})
		}
		sortCompacted(fromKcat)
		if fmt.Sprint(fromKcat) != fmt.Sprint(got) {
			t.Fatalf("kcat read\n%v\nfranz-go read\n%v", fromKcat, got)
		}
	})
	t.Run("kcat produce", func(t *testing.T) {
		// librdkafka's batches, in every codec, decompress for the
		// key check of a compacted topic.
		kcat := requireCommand(t, "kcat")
		k := kcatRunner{t: t, path: kcat, addr: addr}
		const kt = "table-kcat"
		if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, kt); err != nil {
			t.Fatal(err)
		}
		codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
		for _, z := range codecs {
			k.produce(t, kt, []keyValue{{"k-" + z, "v1"}, {"k-" + z, "v2"}}, "-z", z)
		}
		msgs := k.consume(t, kt, 2*len(codecs))
		for i, m := range msgs {
			if m.key != "k-"+codecs[i/2] {
				t.Fatalf("message %d: %+v", i, m)
			}
		}
	})
	t.Run("confluent-kafka-python", func(t *testing.T) {
		requirePythonModule(t, "confluent_kafka", "python3-confluent-kafka")
		script := filepath.Join(t.TempDir(), "compacted.py")
		if err := os.WriteFile(script, []byte(compactedPythonScript), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, systemPython, script, addr, topic, strconv.Itoa(partitions), strconv.Itoa(int(opTimeout.Seconds())))
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var res struct {
			Records []compactedRecord
			Errors  []string
		}
		if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || len(res.Errors) > 0 {
			t.Fatalf("script: %v %v %v\nstdout:\n%s\nstderr:\n%s", err, jerr, res.Errors, out, stderr.String())
		}
		sortCompacted(res.Records)
		if fmt.Sprint(res.Records) != fmt.Sprint(got) {
			t.Fatalf("confluent-kafka-python read\n%v\nfranz-go read\n%v", res.Records, got)
		}
	})
}

// readCompacted reads every partition of topic from its start to its
// end with a franz-go consumer.
func readCompacted(t *testing.T, ctx context.Context, addr string, adm *kadm.Client, topic string) []compactedRecord {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		starts[o.Partition] = kgo.NewOffset().AtStart()
		left[o.Partition] = o.Offset
	})
	c := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}), kgo.FetchMaxWait(100*time.Millisecond))
	var out []compactedRecord
	for {
		done := true
		for _, end := range left {
			done = done && end <= 0
		}
		if done {
			break
		}
		fs := c.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, compactedRecord{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value),
				Tombstone: r.Value == nil, Timestamp: r.Timestamp.UnixMilli()})
			if r.Offset+1 >= left[r.Partition] {
				left[r.Partition] = 0
			}
		})
	}
	sortCompacted(out)
	return out
}

func sortCompacted(rs []compactedRecord) {
	slices.SortFunc(rs, func(a, b compactedRecord) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
}

// checkCompacted checks a cleaned read against the model: per
// partition, one record per key but the sentinels (the newest entries),
// its newest value, tombstones only if withTombstones; offsets rising,
// with gaps.
func checkCompacted(t *testing.T, got []compactedRecord, model [2]map[string][]byte, stamps [2]map[int64]int64, withTombstones bool) {
	t.Helper()
	seen := map[string]bool{}
	gaps := 0
	for i, r := range got {
		if i > 0 && got[i-1].Partition == r.Partition {
			if r.Offset <= got[i-1].Offset {
				t.Fatalf("offset %d after %d", r.Offset, got[i-1].Offset)
			}
			if r.Offset > got[i-1].Offset+1 {
				gaps++
			}
		}
		if ts := stamps[r.Partition][r.Offset]; ts != r.Timestamp {
			t.Fatalf("read %+v: produced at %d", r, ts)
		}
		if r.Key == "sentinel" {
			continue
		}
		k := fmt.Sprintf("%d/%s", r.Partition, r.Key)
		v, ok := model[r.Partition][r.Key]
		if !ok || seen[k] || r.Tombstone != (v == nil) || r.Value != string(v) || r.Tombstone && !withTombstones {
			t.Fatalf("read %+v: model has %q (%v), seen before %v", r, v, ok, seen[k])
		}
		seen[k] = true
	}
	for p, m := range model {
		for k, v := range m {
			if k != "sentinel" && !seen[fmt.Sprintf("%d/%s", p, k)] && (v != nil || withTombstones) {
				t.Fatalf("partition %d key %s (%q) missing", p, k, v)
			}
		}
	}
	if gaps == 0 {
		t.Fatal("no offset gaps after compaction")
	}
}

// A compacted topic with transactions: cleaning removes the aborted
// transaction's records (Kafka's cleaner does, before they can hide an
// older committed value of their key) and keeps the markers, so
// read_committed and read_uncommitted consumers both read the newest
// committed value of every key.
func TestCompactedTopicTransactions(t *testing.T) {
	a := startAgent(t, agent.Config{LogCleanerBackoff: time.Hour})
	addr := a.KafkaAddr()
	const topic = "txn-table"
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "min.cleanable.dirty.ratio": kadm.StringPtr("0"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	p := newClient(t, addr, kgo.TransactionalID("compacted-txn"), kgo.DefaultProduceTopic(topic))
	txn := func(commit bool, kvs ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(kvs); i += 2 {
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, "a", "a1", "b", "b1")
	txn(false, "a", "a2-aborted", "c", "c2-aborted")
	txn(true, "b", "b3")
	txn(true, "d", "d4") // the newest entries: not cleaned
	if st, err := a.CleanCompacted(ctx); err != nil || st.Filter.AbortedDropped == 0 {
		t.Fatalf("clean: %+v %v", st, err)
	}
	want := "a=a1 b=b3 d=d4"
	for _, iso := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
		c := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
		var got []string
		for !slices.Contains(got, "d=d4") {
			fs := c.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Key)+"="+string(r.Value)) })
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("%v read %v, want %s", iso, got, want)
		}
	}
}
