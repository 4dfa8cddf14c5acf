package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// txnPythonScript drives confluent-kafka-python (librdkafka): one
// transactional producer runs three transactions over a 2-partition
// topic (commit, abort, commit), each flushed before it ends so the
// aborted records really reach the log, and each sending offsets of a
// consumer group to the transaction (send_offsets_to_transaction:
// AddOffsetsToTxn, TxnOffsetCommit), which the script reads back after
// each transaction ends. While the last transaction is open, and again
// after it, a read_committed consumer reads every partition from offset
// 0 to its end (partition EOF: the last stable offset), and at the end
// a read_uncommitted one too. It prints one JSON object: what the producer had
// acknowledged, the group's offsets after each transaction and what each
// consumer read. The Go test does the checking, so the script cannot
// pass by checking nothing.
const txnPythonScript = `
import json, sys, time
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

bootstrap, topic, txn_id = sys.argv[1], sys.argv[2], sys.argv[3]
partitions = int(sys.argv[4])
counts = [int(n) for n in sys.argv[5].split(",")]
timeout_s = float(sys.argv[6])
out = {"delivered": [], "consumed": {}, "group_offsets": [], "errors": []}
group = txn_id + "-group"

def done(code):
    print(json.dumps(out))
    sys.exit(code)

def consume(isolation):
    """Reads every partition from offset 0 to its end (partition EOF:
    the last stable offset under read_committed)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "txn-py-" + isolation,
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    })
    c.assign([TopicPartition(topic, part, 0) for part in range(partitions)])
    got = {str(part): [] for part in range(partitions)}
    eof = set()
    deadline = time.monotonic() + timeout_s
    while len(eof) < partitions:
        if time.monotonic() > deadline:
            out["errors"].append("%s: partitions %s not at their end after %ss" %
                                 (isolation, sorted(set(range(partitions)) - eof), timeout_s))
            break
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eof.add(msg.partition())
            else:
                out["errors"].append("%s: %s" % (isolation, msg.error()))
            continue
        # A record after EOF means the end moved: not at the end yet.
        eof.discard(msg.partition())
        got[str(msg.partition())].append([msg.offset(), msg.value().decode()])
    c.close()
    return got

try:
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "linger.ms": 5,
        "transaction.timeout.ms": 60000,
    })
    p.init_transactions(timeout_s)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    for txn, n in enumerate(counts):
        commit = txn != 1
        p.begin_transaction()
        def report(err, msg, txn=txn):
            if err is not None:
                out["errors"].append("txn %d delivery: %s" % (txn, err))
                return
            out["delivered"].append({"txn": txn, "partition": msg.partition(),
                                     "offset": msg.offset(), "value": msg.value().decode()})
        for i in range(n):
            part = i % partitions
            p.produce(topic, value=("t%d-p%d-%04d" % (txn, part, i)).encode(),
                      partition=part, on_delivery=report)
        left = p.flush(timeout_s)
        if left:
            out["errors"].append("txn %d: %d records not delivered after flush" % (txn, left))
            done(1)
        # Offsets no consumer could have reached, distinct per
        # transaction and partition, so the test can tell whose they are.
        p.send_offsets_to_transaction(
            [TopicPartition(topic, part, 1000 * (txn + 1) + part) for part in range(partitions)],
            member.consumer_group_metadata(), timeout_s)
        if txn == len(counts) - 1:
            # While the last transaction is open, read_committed ends
            # at its first records.
            out["consumed"]["read_committed_open"] = consume("read_committed")
        if commit:
            p.commit_transaction(timeout_s)
        else:
            p.abort_transaction(timeout_s)
        got = member.committed([TopicPartition(topic, part) for part in range(partitions)], timeout_s)
        out["group_offsets"].append([tp.offset for tp in got])
    member.close()
except Exception as e:
    out["errors"].append("producer: %r" % (e,))
    done(1)

for isolation in ("read_committed", "read_uncommitted"):
    out["consumed"][isolation] = consume(isolation)

done(1 if out["errors"] else 0)
`

// TestTxnConfluentPython is issue 5's acceptance test with
// confluent-kafka-python over librdkafka: a transactional producer
// commits a transaction, aborts one and commits another; a read_committed
// consumer reads exactly the committed records, in order per partition
// and at the offsets the producer was told, and a read_uncommitted one
// reads all three transactions' records. While the last transaction is
// open, a read_committed consumer reaches its partitions' ends (the last
// stable offsets) with the first transaction's records only. The
// consumer group offsets sent in each transaction are committed with it,
// and the aborted one's never.
func TestTxnConfluentPython(t *testing.T) {
	requirePythonModule(t, "confluent_kafka", "python3-confluent-kafka")
	a := startAgent(t, agent.Config{})
	const topic, partitions = "txn-py", 2
	counts := []int{40, 30, 20} // committed, aborted, committed
	createTopic(t, a.KafkaAddr(), topic, partitions)

	script := filepath.Join(t.TempDir(), "txn.py")
	if err := os.WriteFile(script, []byte(txnPythonScript), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*opTimeout)
	defer cancel()
	var countArg string
	for i, n := range counts {
		if i > 0 {
			countArg += ","
		}
		countArg += strconv.Itoa(n)
	}
	cmd := exec.CommandContext(ctx, systemPython, script, a.KafkaAddr(), topic, "txn-py-producer",
		strconv.Itoa(partitions), countArg, strconv.Itoa(int(opTimeout.Seconds())))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	type delivery struct {
		Txn       int    `json:"txn"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Value     string `json:"value"`
	}
	var res struct {
		Delivered []delivery `json:"delivered"`
		// Consumed is, per isolation level and partition, the
		// [offset, value] pairs read, in the order read.
		Consumed map[string]map[string][][2]any `json:"consumed"`
		// GroupOffsets is the group's committed offset of each
		// partition after each transaction ended.
		GroupOffsets [][]int64 `json:"group_offsets"`
		Errors       []string  `json:"errors"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("script: %v; output not JSON (%v):\nstdout:\n%s\nstderr:\n%s", err, jerr, out, stderr.String())
	}
	for _, e := range res.Errors {
		t.Error(e)
	}
	if err != nil {
		t.Fatalf("script failed: %v\nstderr:\n%s", err, stderr.String())
	}

	// Offsets sent in a transaction are committed with it, and those of
	// the aborted one never: after it the first transaction's remain.
	wantOffsets := [][]int64{{1000, 1001}, {1000, 1001}, {3000, 3001}}
	if !slices.EqualFunc(res.GroupOffsets, wantOffsets, slices.Equal) {
		t.Errorf("group offsets after each transaction %v, want %v", res.GroupOffsets, wantOffsets)
	}

	// What each consumer must read: the delivered records of the
	// transactions its isolation level shows, in offset order.
	type rec struct {
		offset int64
		value  string
	}
	want := map[string]map[int32][]rec{"read_committed": {}, "read_uncommitted": {}, "read_committed_open": {}}
	perTxn := make([]int, len(counts))
	for _, d := range res.Delivered {
		perTxn[d.Txn]++
		want["read_uncommitted"][d.Partition] = append(want["read_uncommitted"][d.Partition], rec{d.Offset, d.Value})
		if d.Txn != 1 {
			want["read_committed"][d.Partition] = append(want["read_committed"][d.Partition], rec{d.Offset, d.Value})
		}
		if d.Txn == 0 {
			want["read_committed_open"][d.Partition] = append(want["read_committed_open"][d.Partition], rec{d.Offset, d.Value})
		}
	}
	if !slices.Equal(perTxn, counts) {
		t.Fatalf("producer acknowledged %v records per transaction, want %v", perTxn, counts)
	}
	for _, w := range want {
		for _, rs := range w {
			slices.SortFunc(rs, func(x, y rec) int { return int(x.offset - y.offset) })
		}
	}
	// Values were produced in sequence per partition and transaction,
	// so offset order must also be production order.
	for p, rs := range want["read_uncommitted"] {
		seen := make(map[int64]bool)
		for i, r := range rs {
			if seen[r.offset] {
				t.Errorf("partition %d: offset %d acknowledged twice", p, r.offset)
			}
			seen[r.offset] = true
			if i > 0 && r.value < rs[i-1].value {
				t.Errorf("partition %d: %s at offset %d after %s at %d: offsets out of production order", p, r.value, r.offset, rs[i-1].value, rs[i-1].offset)
			}
		}
	}

	for _, isolation := range []string{"read_committed_open", "read_committed", "read_uncommitted"} {
		t.Run(isolation, func(t *testing.T) {
			got := res.Consumed[isolation]
			for p := range int32(partitions) {
				var read []rec
				for _, pair := range got[strconv.Itoa(int(p))] {
					off, ok1 := pair[0].(float64)
					v, ok2 := pair[1].(string)
					if !ok1 || !ok2 {
						t.Fatalf("partition %d: bad pair %v", p, pair)
					}
					read = append(read, rec{int64(off), v})
				}
				w := want[isolation][p]
				if !slices.Equal(read, w) {
					t.Errorf("partition %d: read %d records, want %d\nread: %v\nwant: %v", p, len(read), len(w), read, w)
				}
			}
		})
	}
}
