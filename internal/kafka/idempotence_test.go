package kafka

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/testservers/faultproxy"
)

func initProducerID(t *testing.T, a *testAgent, version int16, txnID *string, id int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = version
	req.TransactionalID = txnID
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = id, epoch
	return a.rawRequest(t, req).(*kmsg.InitProducerIDResponse)
}

// TestInitProducerID runs on a copy in memory: InitProducerId needs
// nothing of the agent but its metadata.
func TestInitProducerID(t *testing.T) {
	a := newMemAgent(t, metatest.New(nil))
	txn := "txn"
	type want struct {
		code  int16
		id    int64
		epoch int16
	}
	steps := []struct {
		name    string
		version int16
		txnID   *string
		id      int64
		epoch   int16
		want    want
	}{
		{"v0 new", 0, nil, -1, -1, want{0, 0, 0}},
		{"v2 new", 2, nil, -1, -1, want{0, 1, 0}},
		{"v3 bump", 3, nil, 1, 0, want{0, 1, 1}},
		{"v5 bump again", 5, nil, 1, 1, want{0, 1, 2}},
		{"v4 unknown id gets a new one", 4, nil, 77, 0, want{0, 2, 0}},
		// Before v3 the fields do not exist on the wire: always a new id.
		{"v2 ignores the id", 2, nil, 1, 2, want{0, 3, 0}},
		{"transactional new", 5, &txn, -1, -1, want{0, 4, 0}},
		{"transactional again fences the first", 5, &txn, -1, -1, want{0, 4, 1}},
		{"transactional stale epoch", 5, &txn, 4, 0, want{kerr.ProducerFenced.Code, -1, -1}},
		{"v3 says INVALID_PRODUCER_EPOCH", 3, &txn, 4, 0, want{kerr.InvalidProducerEpoch.Code, -1, -1}},
		{"transactional KIP-360 bump", 5, &txn, 4, 1, want{0, 4, 2}},
		{"retry of the bump", 5, &txn, 4, 1, want{0, 4, 2}},
		{"wrong producer id", 5, &txn, 3, 2, want{kerr.ProducerFenced.Code, -1, -1}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			resp := initProducerID(t, a, s.version, s.txnID, s.id, s.epoch)
			if got := (want{resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch}); got != s.want {
				t.Fatalf("InitProducerId v%d = %+v, want %+v", s.version, got, s.want)
			}
		})
	}
}

// produceCode produces one raw batch and returns the partition's answer,
// error or not.
func produceCode(t *testing.T, a *testAgent, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := a.rawRequest(t, produceReq(9, -1, nil, rawPart{topic, 0, batch})).(*kmsg.ProduceResponse)
	return producePartitions(resp)[0]
}

// TestIdempotentProduceRaw sends idempotent Produce requests by hand: the
// same request twice is a duplicate answered with the first base offset,
// and takes no offsets.
func TestIdempotentProduceRaw(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	const topic = "idem"
	id := a.createTopic(t, topic, 1, nil)
	// The first id is 0, which batchtest takes for "no producer id".
	initProducerID(t, a, 4, nil, -1, -1)
	pid := initProducerID(t, a, 4, nil, -1, -1).ProducerID
	if pid <= 0 {
		t.Fatalf("second producer id %d", pid)
	}
	batch := func(epoch int16, seq int32, records int) []byte {
		return batchtest.Build(t, batchtest.Options{Records: records, ValueBytes: 8, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Seed: uint64(seq)})
	}
	steps := []struct {
		name  string
		batch []byte
		code  *kerr.Error
		base  int64
		hwm   int64
	}{
		{"first", batch(0, 0, 5), nil, 0, 5},
		{"same batch again", batch(0, 0, 5), nil, 0, 5},
		{"next", batch(0, 5, 3), nil, 5, 8},
		{"first again, still in the window", batch(0, 0, 5), nil, 0, 8},
		{"gap", batch(0, 20, 1), kerr.OutOfOrderSequenceNumber, -1, 8},
		{"new epoch not at zero", batch(1, 8, 1), kerr.OutOfOrderSequenceNumber, -1, 8},
		{"new epoch at zero", batch(1, 0, 2), nil, 8, 10},
		{"fenced epoch", batch(0, 8, 1), kerr.InvalidProducerEpoch, -1, 10},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			sp := produceCode(t, a, topic, s.batch)
			var want int16
			if s.code != nil {
				want = s.code.Code
			}
			if sp.ErrorCode != want || sp.BaseOffset != s.base {
				t.Fatalf("produce: code %v base %d, want %v base %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset, s.code, s.base)
			}
			v := a.Replica.View()
			defer v.Close()
			st, _, err := v.Partition(id, 0)
			if err != nil || st.HighWatermark() != s.hwm {
				t.Fatalf("high watermark %d (%v), want %d", st.HighWatermark(), err, s.hwm)
			}
		})
	}
	recs := a.consume(t, topic, 1, 10)
	for i, r := range recs {
		if r.Offset != int64(i) || r.ProducerID != pid {
			t.Fatalf("record %d: offset %d producer %d", i, r.Offset, r.ProducerID)
		}
	}
}

// produceAll produces n records with kgo, record i to partition
// i%partitions with value i, and fails on any error.
func produceAll(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions, from, n int) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		wg.Add(1)
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: strconv.AppendInt(nil, int64(i), 10)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				errs <- err
			}
			wg.Done()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("produce: %v", err)
	}
}

// checkExactlyOnce consumes topic and checks that it holds records 0..n-1
// exactly once, each partition in produce order.
func checkExactlyOnce(t *testing.T, a *testAgent, topic string, partitions, n int) {
	t.Helper()
	recs := a.consume(t, topic, int32(partitions), n)
	seen := make([]bool, n)
	last := make([]int, partitions)
	for p := range last {
		last[p] = -1
	}
	for _, r := range recs {
		i, err := strconv.Atoi(string(r.Value))
		if err != nil || i < 0 || i >= n {
			t.Fatalf("record %s[%d]@%d: value %q", r.Topic, r.Partition, r.Offset, r.Value)
		}
		if seen[i] {
			t.Fatalf("record %d stored twice (again at %d@%d)", i, r.Partition, r.Offset)
		}
		seen[i] = true
		if i <= last[r.Partition] {
			t.Fatalf("partition %d: record %d after %d", r.Partition, i, last[r.Partition])
		}
		last[r.Partition] = i
	}
	// consume stops at n records: a duplicate beyond them would show in
	// the high watermarks.
	v := a.Replica.View()
	defer v.Close()
	id := a.topicID(t, topic)
	var total int64
	for p := range partitions {
		st, _, err := v.Partition(id, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		total += st.HighWatermark()
	}
	if total != int64(n) {
		t.Fatalf("topic holds %d offsets, want %d", total, n)
	}
}

// TestIdempotentProduceKgo: a kgo producer, idempotent by default, with
// producer ids from the real InitProducerId.
func TestIdempotentProduceKgo(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	const (
		topic      = "idem-kgo"
		partitions = 4
		n          = 10000
	)
	a.createTopic(t, topic, partitions, nil)
	pr := a.kgoClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, a.ctx(t), pr, topic, partitions, 0, n)
	checkExactlyOnce(t, a, topic, partitions, n)
}

// withProxy puts a faultproxy in front of the agent and advertises it, so
// every connection a client makes, to the seed or to the brokers from
// Metadata, goes through it.
func withProxy(t *testing.T, proxy **faultproxy.Proxy) agentOption {
	return func(c *agentConfig) {
		cl := &c.Server.Deps.Cluster
		p, err := faultproxy.Start(fmt.Sprintf("%s:%d", cl.Host, cl.Port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		host, port, err := splitAddr(p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		cl.Host, cl.Port = host, port
		*proxy = p
	}
}

// idempotentRecordsInLog sums the records of the idempotent batches of
// every CommitObject in the log, duplicates included.
func idempotentRecordsInLog(t *testing.T, a *testAgent) int64 {
	t.Helper()
	ctx := a.ctx(t)
	tail, _, err := a.Log.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for from := sharedlog.Pos(0); from < tail; {
		es, err := a.Log.ReadNext(ctx, from, tail)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d): %d entries, %v", from, len(es), err)
		}
		for _, e := range es {
			ent, err := meta.DecodeEntry(e.Data)
			if err != nil {
				t.Fatal(err)
			}
			for _, rc := range ent.Commands {
				c, err := meta.DecodeCommand(rc)
				if err != nil {
					t.Fatal(err)
				}
				if co, ok := c.(meta.CommitObject); ok {
					for _, cb := range co.Batches {
						if cb.ProducerID >= 0 {
							total += int64(cb.Records)
						}
					}
				}
			}
			from = e.Pos + 1
		}
	}
	return total
}

// TestIdempotentRetryAfterLostReply: the proxy drops a Produce response
// after the agent committed the batch; kgo retries the same batch on a new
// connection, apply answers it as a duplicate, and the topic holds every
// record exactly once.
func TestIdempotentRetryAfterLostReply(t *testing.T) {
	var proxy *faultproxy.Proxy
	a, _ := newDataAgent(t, nil, withProxy(t, &proxy))
	const (
		topic      = "idem-retry"
		partitions = 2
		warm       = 10
		n          = 1000
	)
	a.createTopic(t, topic, partitions, nil)
	pr := a.kgoClient(t, kgo.SeedBrokers(proxy.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := a.ctx(t)
	// Connections up and a producer id in hand, so the next reply on the
	// produce connection is a Produce response.
	produceAll(t, ctx, pr, topic, partitions, 0, warm)
	cut := proxy.CutOnReply(nil)
	produceAll(t, ctx, pr, topic, partitions, warm, n-warm)
	select {
	case <-cut:
	default:
		t.Fatal("no reply was cut")
	}
	checkExactlyOnce(t, a, topic, partitions, n)
	if logged := idempotentRecordsInLog(t, a); logged <= n {
		t.Fatalf("the log holds %d idempotent records for %d stored: no retry reached apply", logged, n)
	}
}
