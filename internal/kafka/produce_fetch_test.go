package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// dataPath is the produce pipeline and fetch reader of a test agent,
// over the agent's in-memory object store (testAgent.Store).
type dataPath struct {
	// Optional, set before the agent starts.
	// WrapStore wraps the store both the pipeline and the reader use.
	WrapStore func(objstore.Store) objstore.Store
	// Tune changes the pipeline's config.
	Tune func(*produce.Config)

	// Set when the agent starts.
	Pipeline *produce.Pipeline
	Reader   *fetch.Reader
}

// withDataPath starts a pipeline and a reader over the agent's replica
// and store and wires them into Deps.
func withDataPath(t testing.TB, dp *dataPath) agentOption {
	return func(c *agentConfig) {
		var store objstore.Store = c.Store
		if dp.WrapStore != nil {
			store = dp.WrapStore(store)
		}
		cache := fetch.NewCache(64 << 20)
		cfg := produce.Config{
			Store:   store,
			Replica: c.Replica,
			AgentID: fmt.Sprintf("agent-%d-%d", testNodeID, c.Replica.Incarnation()),
			Cache:   cache,
			Logger:  discardLogger,
		}
		if dp.Tune != nil {
			dp.Tune(&cfg)
		}
		p, err := produce.New(cfg)
		if err != nil {
			t.Fatalf("produce.New: %v", err)
		}
		// Registered after the replica's Close and before the server's
		// Shutdown, so it runs between them.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			p.Close(ctx)
		})
		dp.Pipeline = p
		dp.Reader = fetch.NewReader(store, cache)
		c.Server.Deps.Produce = p
		c.Server.Deps.Fetch = dp.Reader
	}
}

// withSpy has spy told when a long poll waits.
func withSpy(spy *spyNotifier) agentOption {
	return func(c *agentConfig) {
		c.Server.Deps.longPollWaiting = spy.waiting
	}
}

// newDataAgent is newTestAgent with the data path wired; dp may be nil.
func newDataAgent(t testing.TB, dp *dataPath, opts ...agentOption) (*testAgent, *dataPath) {
	t.Helper()
	if dp == nil {
		dp = &dataPath{}
	}
	a := newTestAgent(t, append(opts, withDataPath(t, dp))...)
	return a, dp
}

// firstProducerID is the first id withProducerIDs hands out.
const firstProducerID = 1000

// withProducerIDs serves InitProducerID (non-transactional) with fresh
// producer ids, so kgo producers send idempotent batches, until the real
// handler exists.
func withProducerIDs(t testing.TB) agentOption {
	var next atomic.Int64
	h := func(_ context.Context, r *Request) (kmsg.Response, error) {
		resp := r.Body.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID = firstProducerID + next.Add(1) - 1
		resp.ProducerEpoch = 0
		return resp, nil
	}
	return func(c *agentConfig) {
		reg := c.Server.Registry
		if reg == nil {
			reg = DefaultRegistry()
		}
		if err := reg.Register(22, 0, kmsg.NewPtrInitProducerIDRequest().MaxVersion(), h); err != nil {
			t.Fatal(err)
		}
		c.Server.Registry = reg
	}
}

// withClock fixes the agent's clock at ms.
func withClock(ms int64) agentOption {
	return withDeps(func(d *Deps) { d.Now = func() time.Time { return time.UnixMilli(ms) } })
}

// kgoClient is a kgo client of the agent, closed at cleanup.
func (a *testAgent) kgoClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.addr), kgo.RetryTimeout(guard), kgo.DisableClientMetrics()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consume reads n records of partitions 0..partitions-1 of topic from
// their start with a direct partition consumer, in the order fetched.
func (a *testAgent) consume(t testing.TB, topic string, partitions int32, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	offs := make(map[int32]kgo.Offset)
	for p := range partitions {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl := a.kgoClient(t, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs})}, opts...)...)
	ctx := a.ctx(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the guard", len(out), n)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
		}
		out = append(out, fs.Records()...)
	}
	if len(out) != n {
		t.Fatalf("consumed %d records, want %d", len(out), n)
	}
	return out
}

// rawPart is one partition's records in a raw Produce request.
type rawPart struct {
	topic     string
	partition int32
	records   []byte
}

// produceReq builds a Produce request, grouping parts by topic in order.
func produceReq(version, acks int16, txnID *string, parts ...rawPart) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = int32(guard / time.Millisecond)
	req.TransactionID = txnID
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p.partition
		rp.Records = p.records
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// producePartitions flattens a Produce response.
func producePartitions(resp *kmsg.ProduceResponse) []kmsg.ProduceResponseTopicPartition {
	var out []kmsg.ProduceResponseTopicPartition
	for _, rt := range resp.Topics {
		out = append(out, rt.Partitions...)
	}
	return out
}

// produceRaw produces one batch to one partition and fails on an error.
func (a *testAgent) produceRaw(t *testing.T, topic string, p int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := a.rawRequest(t, produceReq(9, -1, nil, rawPart{topic, p, batch})).(*kmsg.ProduceResponse)
	sp := producePartitions(resp)[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("produce to %s[%d]: %v", topic, p, kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp
}

// fetchPartReq is one partition of a raw Fetch request.
type fetchPartReq struct {
	topic     string
	id        meta.TopicID
	partition int32
	offset    int64
	maxBytes  int32
	// epoch is CurrentLeaderEpoch; tests leave 0 unless fencing.
	epoch int32
}

func fetchReq(version int16, maxWaitMs, minBytes, maxBytes int32, parts ...fetchPartReq) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = minBytes
	req.MaxBytes = maxBytes
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic || req.Topics[n-1].TopicID != p.id {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.topic, p.id
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.partition
		rp.FetchOffset = p.offset
		rp.PartitionMaxBytes = p.maxBytes
		rp.CurrentLeaderEpoch = p.epoch
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

func fetchPartitions(resp *kmsg.FetchResponse) []kmsg.FetchResponseTopicPartition {
	var out []kmsg.FetchResponseTopicPartition
	for _, rt := range resp.Topics {
		out = append(out, rt.Partitions...)
	}
	return out
}

// batchesOf splits fetched records into batches.
func batchesOf(t *testing.T, records []byte) [][]byte {
	t.Helper()
	if len(records) == 0 {
		return nil
	}
	bs, err := recordbatch.Split(records)
	if err != nil {
		t.Fatalf("fetched records: %v", err)
	}
	return bs
}

// A kgo producer (idempotent, acks=all) writes 10k records to four
// partitions; a direct partition consumer reads every one back, in order,
// with keys, values, headers and timestamps intact.
func TestProduceConsumeKgo(t *testing.T) {
	a, _ := newDataAgent(t, nil, withProducerIDs(t))
	const (
		topic      = "events"
		partitions = 4
		n          = 10000
	)
	a.createTopic(t, topic, partitions, nil)
	pr := a.kgoClient(t,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	ctx := a.ctx(t)
	base := time.UnixMilli(1_700_000_000_000)
	sent := make([]*kgo.Record, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		r := &kgo.Record{
			// Uneven spread, so partitions interleave irregularly.
			Partition: int32(i*i+i/7) % partitions,
			Key:       fmt.Appendf(nil, "key-%d", i),
			Value:     fmt.Appendf(nil, "value-%d-%s", i, strings.Repeat("x", i%64)),
			Headers: []kgo.RecordHeader{
				{Key: "i", Value: strconv.AppendInt(nil, int64(i), 10)},
				{Key: "empty"},
			},
			Timestamp: base.Add(time.Duration(i%1000) * time.Millisecond),
		}
		if i%10 == 0 {
			r.Key = nil
		}
		sent[i] = r
		wg.Add(1)
		pr.Produce(ctx, r, func(_ *kgo.Record, err error) {
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

	// Produce order is offset order in each partition.
	bySlot := make(map[[2]int64]*kgo.Record, n)
	var next [partitions]int64
	for i, r := range sent {
		if r.Offset != next[r.Partition] {
			t.Fatalf("record %d: partition %d offset %d, want %d", i, r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		bySlot[[2]int64{int64(r.Partition), r.Offset}] = r
	}

	got := a.consume(t, topic, partitions, n)
	var seen [partitions]int64
	for _, g := range got {
		if g.Offset != seen[g.Partition] {
			t.Fatalf("consumed %d[%d] after offset %d", g.Partition, g.Offset, seen[g.Partition]-1)
		}
		seen[g.Partition]++
		w := bySlot[[2]int64{int64(g.Partition), g.Offset}]
		if !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) || !bytes.Equal(g.Value, w.Value) {
			t.Fatalf("%d[%d]: key %q value %q, want %q %q", g.Partition, g.Offset, g.Key, g.Value, w.Key, w.Value)
		}
		if g.Timestamp.UnixMilli() != w.Timestamp.UnixMilli() || g.Attrs.TimestampType() != 0 {
			t.Fatalf("%d[%d]: timestamp %v type %d, want %v CreateTime", g.Partition, g.Offset, g.Timestamp, g.Attrs.TimestampType(), w.Timestamp)
		}
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("%d[%d]: %d headers, want %d", g.Partition, g.Offset, len(g.Headers), len(w.Headers))
		}
		for i, h := range g.Headers {
			if h.Key != w.Headers[i].Key || !bytes.Equal(h.Value, w.Headers[i].Value) {
				t.Fatalf("%d[%d]: header %d is %q=%q, want %q=%q", g.Partition, g.Offset, i, h.Key, h.Value, w.Headers[i].Key, w.Headers[i].Value)
			}
		}
	}

	// The batches were idempotent and were stored as such, with the
	// leader epoch Metadata reports.
	view := a.Replica.View()
	defer view.Close()
	it, err := view.Seek(a.topicID(t, topic), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Next() {
		t.Fatalf("no index entry: %v", it.Err())
	}
	if e := it.Entry(); e.ProducerID < firstProducerID || e.BaseSequence != 0 {
		t.Fatalf("first batch stored with producer id %d sequence %d, want an id >= %d and sequence 0", e.ProducerID, e.BaseSequence, firstProducerID)
	}
	resp := a.rawRequest(t, fetchReq(11, 0, 0, 1<<20, fetchPartReq{topic: topic, offset: 0, maxBytes: 1 << 20})).(*kmsg.FetchResponse)
	h, err := recordbatch.ParseHeader(fetchPartitions(resp)[0].RecordBatches)
	if err != nil || h.PartitionLeaderEpoch != partitionLeaderEpoch {
		t.Fatalf("stored batch leader epoch %d (%v), want %d", h.PartitionLeaderEpoch, err, partitionLeaderEpoch)
	}
}

// Every codec round-trips: the batch is stored with the producer's codec
// and a consumer decodes the records.
func TestProduceCompressionRoundTrip(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	for _, tt := range []struct {
		name  string
		codec kgo.CompressionCodec
		want  recordbatch.Compression
	}{
		{"gzip", kgo.GzipCompression(), recordbatch.CompressionGzip},
		{"snappy", kgo.SnappyCompression(), recordbatch.CompressionSnappy},
		{"lz4", kgo.Lz4Compression(), recordbatch.CompressionLZ4},
		{"zstd", kgo.ZstdCompression(), recordbatch.CompressionZstd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			topic := "codec-" + tt.name
			a.createTopic(t, topic, 1, nil)
			pr := a.kgoClient(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(tt.codec), kgo.ProducerLinger(0))
			const n = 200
			var rs []*kgo.Record
			for i := range n {
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat(fmt.Appendf(nil, "%s-%d ", tt.name, i), 20)})
			}
			if err := pr.ProduceSync(a.ctx(t), rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			got := a.consume(t, topic, 1, n)
			for i, g := range got {
				if g.Offset != int64(i) || !bytes.Equal(g.Key, rs[i].Key) || !bytes.Equal(g.Value, rs[i].Value) {
					t.Fatalf("record %d: offset %d key %q value %q", i, g.Offset, g.Key, g.Value)
				}
			}
			resp := a.rawRequest(t, fetchReq(11, 0, 0, 1<<20, fetchPartReq{topic: topic, offset: 0, maxBytes: 1 << 20})).(*kmsg.FetchResponse)
			for _, b := range batchesOf(t, fetchPartitions(resp)[0].RecordBatches) {
				h, err := recordbatch.ParseHeader(b)
				if err != nil || h.Compression() != tt.want {
					t.Fatalf("stored batch codec %v (%v), want %v", h.Compression(), err, tt.want)
				}
			}
		})
	}
}

// A LogAppendTime topic stamps batches with the agent's clock and says so
// in the response; a CreateTime topic keeps the producer's time and
// answers -1.
func TestProduceLogAppendTime(t *testing.T) {
	const nowMs = 1_800_000_000_000
	a, _ := newDataAgent(t, nil, withClock(nowMs))
	a.createTopic(t, "appended", 1, map[string]*string{"message.timestamp.type": kmsg.StringPtr("LogAppendTime")})
	a.createTopic(t, "created", 1, nil)

	batch := batchtest.Build(t, batchtest.Options{Records: 3, ValueBytes: 10})
	if sp := a.produceRaw(t, "appended", 0, bytes.Clone(batch)); sp.LogAppendTime != nowMs {
		t.Fatalf("LogAppendTime %d, want %d", sp.LogAppendTime, nowMs)
	}
	if sp := a.produceRaw(t, "created", 0, bytes.Clone(batch)); sp.LogAppendTime != -1 {
		t.Fatalf("CreateTime topic: LogAppendTime %d, want -1", sp.LogAppendTime)
	}
	// kgo producers too.
	pr := a.kgoClient(t, kgo.DefaultProduceTopic("appended"))
	if err := pr.ProduceSync(a.ctx(t), &kgo.Record{Value: []byte("kgo"), Timestamp: time.UnixMilli(5)}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for _, r := range a.consume(t, "appended", 1, 4) {
		if r.Timestamp.UnixMilli() != nowMs || r.Attrs.TimestampType() != 1 {
			t.Fatalf("offset %d: timestamp %d type %d, want %d LogAppendTime", r.Offset, r.Timestamp.UnixMilli(), r.Attrs.TimestampType(), nowMs)
		}
	}
	for i, r := range a.consume(t, "created", 1, 3) {
		if want := int64(batchtest.DefaultTimestamp + i); r.Timestamp.UnixMilli() != want || r.Attrs.TimestampType() != 0 {
			t.Fatalf("offset %d: timestamp %d type %d, want %d CreateTime", r.Offset, r.Timestamp.UnixMilli(), r.Attrs.TimestampType(), want)
		}
	}
}

// acks=0 gets no response but the records are stored; a failed acks=0
// request closes the connection, as Kafka does.
func TestProduceAcksZero(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "fire", 2, nil)
	pr := a.kgoClient(t, kgo.DefaultProduceTopic("fire"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	const n = 100
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := pr.ProduceSync(a.ctx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	values := make(map[string]bool)
	for _, r := range a.consume(t, "fire", 2, n) {
		values[string(r.Value)] = true
	}
	if len(values) != n {
		t.Fatalf("%d distinct values consumed, want %d", len(values), n)
	}

	t.Run("no response", func(t *testing.T) {
		c := dial(t, a.addr)
		write(t, c, frameFor(1, produceReq(9, 0, nil, rawPart{"fire", 0, batchtest.Build(t, batchtest.Options{})})))
		// The next frame is the ApiVersions answer, not a produce one.
		checkAPIVersions(t, c, a.Server)
	})
	t.Run("failure closes", func(t *testing.T) {
		c := dial(t, a.addr)
		write(t, c, frameFor(1, produceReq(9, 0, nil, rawPart{"no-such-topic", 0, batchtest.Build(t, batchtest.Options{})})))
		expectClosed(t, c)
	})
}

// Bad batches and addresses get their Kafka codes per partition; the good
// partitions of the same request commit, and the connection keeps serving.
func TestProduceErrors(t *testing.T) {
	const nowMs = batchtest.DefaultTimestamp + 24*3600*1000 // a day after the batches' time
	a, _ := newDataAgent(t, nil, withClock(nowMs))
	a.createTopic(t, "t", 2, nil)
	a.createTopic(t, "small", 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("1024")})
	a.createTopic(t, "recent", 1, map[string]*string{"message.timestamp.before.max.ms": kmsg.StringPtr("60000")})
	a.createTopic(t, "nofuture", 1, map[string]*string{"message.timestamp.after.max.ms": kmsg.StringPtr("60000")})

	good := func() []byte { return batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 20}) }
	badCRC := good()
	badCRC[len(badCRC)-1] ^= 0xff
	future := batchtest.Build(t, batchtest.Options{FirstTimestamp: nowMs + 3600*1000})
	claimsAppendTime := good()
	recordbatch.SetLogAppendTime(claimsAppendTime, 1)
	txnal := batchtest.Build(t, batchtest.Options{ProducerID: 5, Transactional: true})
	const (
		ok               = 0
		corrupt          = 2  // CORRUPT_MESSAGE
		unknown          = 3  // UNKNOWN_TOPIC_OR_PARTITION
		tooLarge         = 10 // MESSAGE_TOO_LARGE
		badAcks          = 21 // INVALID_REQUIRED_ACKS
		invalidTimestamp = 32 // INVALID_TIMESTAMP
		oldFormat        = 43 // UNSUPPORTED_FOR_MESSAGE_FORMAT
		txnState         = 48 // INVALID_TXN_STATE
		txnAuth          = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
		unsupportedCodec = 76 // UNSUPPORTED_COMPRESSION_TYPE
		invalidRecord    = 87 // INVALID_RECORD
	)
	tests := []struct {
		name    string
		version int16
		acks    int16
		txnID   *string
		parts   []rawPart
		want    []int16
	}{
		{name: "bad crc next to a good one", parts: []rawPart{{"t", 0, badCRC}, {"t", 1, good()}}, want: []int16{corrupt, ok}},
		{name: "too large", parts: []rawPart{{"small", 0, batchtest.Build(t, batchtest.Options{ValueBytes: 2000})}}, want: []int16{tooLarge}},
		{name: "unknown topic", parts: []rawPart{{"nope", 0, good()}, {"t", 0, good()}}, want: []int16{unknown, ok}},
		{name: "partition out of range", parts: []rawPart{{"t", 2, good()}, {"t", -1, good()}}, want: []int16{unknown, unknown}},
		{name: "two batches", parts: []rawPart{{"t", 0, append(good(), good()...)}}, want: []int16{invalidRecord}},
		{name: "no records", parts: []rawPart{{"t", 0, nil}}, want: []int16{invalidRecord}},
		{name: "truncated", parts: []rawPart{{"t", 0, good()[:70]}}, want: []int16{invalidRecord}},
		{name: "zstd before v7", version: 6, parts: []rawPart{{"t", 0, batchtest.Build(t, batchtest.Options{Compression: recordbatch.CompressionZstd})}}, want: []int16{unsupportedCodec}},
		{name: "zstd at v7", version: 7, parts: []rawPart{{"t", 0, batchtest.Build(t, batchtest.Options{Compression: recordbatch.CompressionZstd})}}, want: []int16{ok}},
		{name: "producer claims LogAppendTime", parts: []rawPart{{"t", 0, claimsAppendTime}}, want: []int16{invalidTimestamp}},
		{name: "too old for the topic", parts: []rawPart{{"recent", 0, good()}, {"t", 0, good()}}, want: []int16{invalidTimestamp, ok}},
		{name: "too new for the topic", parts: []rawPart{{"nofuture", 0, future}, {"t", 0, future}}, want: []int16{invalidTimestamp, ok}},
		{name: "acks 2", acks: 2, parts: []rawPart{{"t", 0, good()}, {"t", 1, good()}}, want: []int16{badAcks, badAcks}},
		{name: "transactional without id", parts: []rawPart{{"t", 0, txnal}, {"t", 1, good()}}, want: []int16{txnAuth, txnAuth}},
		{name: "transactional with id", txnID: kmsg.StringPtr("tx"), parts: []rawPart{{"t", 0, txnal}, {"t", 1, good()}}, want: []int16{txnState, ok}},
		{name: "v1: message format v0/v1 not stored", version: 1, parts: []rawPart{{"t", 0, good()}, {"t", 1, good()}}, want: []int16{oldFormat, oldFormat}},
		{name: "v2: message format v0/v1 not stored", version: 2, parts: []rawPart{{"t", 0, good()}}, want: []int16{oldFormat}},
		{name: "v3", version: 3, parts: []rawPart{{"t", 0, good()}}, want: []int16{ok}},
		{name: "v11", version: 11, parts: []rawPart{{"t", 0, good()}}, want: []int16{ok}},
	}
	c := dial(t, a.addr)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			version, acks := tt.version, tt.acks
			if version == 0 {
				version = 9
			}
			if acks == 0 {
				acks = -1
			}
			resp := roundTrip(t, c, int32(i), produceReq(version, acks, tt.txnID, tt.parts...)).(*kmsg.ProduceResponse)
			got := producePartitions(resp)
			if len(got) != len(tt.want) {
				t.Fatalf("%d partitions answered, want %d", len(got), len(tt.want))
			}
			for j, sp := range got {
				if sp.Partition != tt.parts[j].partition || sp.ErrorCode != tt.want[j] {
					t.Fatalf("partition %d: %d code %d (%v), want %d code %d", j, sp.Partition, sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode), tt.parts[j].partition, tt.want[j])
				}
				switch {
				case sp.ErrorCode == 0 && (sp.BaseOffset < 0 || version >= 5 && sp.LogStartOffset != 0):
					t.Fatalf("partition %d: base offset %d log start %d", j, sp.BaseOffset, sp.LogStartOffset)
				case sp.ErrorCode != 0 && (sp.BaseOffset != -1 || sp.LogAppendTime != -1 || sp.LogStartOffset != -1):
					t.Fatalf("partition %d: error with offsets %d %d %d, want -1s", j, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset)
				case version >= 8 && sp.ErrorCode != 0 && sp.ErrorCode != badAcks && sp.ErrorCode != txnAuth && sp.ErrorCode != unknown && sp.ErrorMessage == nil:
					t.Fatalf("partition %d: no error message", j)
				}
			}
		})
	}
	checkAPIVersions(t, c, a.Server)
	// Only the good batches were stored: "t" holds the ok ones.
	var okT [2]int64
	for _, tt := range tests {
		for j, p := range tt.parts {
			if p.topic == "t" && tt.want[j] == ok {
				okT[p.partition]++
			}
		}
	}
	for p := range int32(2) {
		resp := a.rawRequest(t, fetchReq(11, 0, 0, 1<<20, fetchPartReq{topic: "t", partition: p, maxBytes: 1 << 20})).(*kmsg.FetchResponse)
		if got := len(batchesOf(t, fetchPartitions(resp)[0].RecordBatches)); int64(got) != okT[p] {
			t.Fatalf("t[%d] holds %d batches, want %d", p, got, okT[p])
		}
	}
}

// With auto-creation on, producing to an unknown topic creates it.
func TestProduceAutoCreate(t *testing.T) {
	a, _ := newDataAgent(t, nil, withAutoCreate(3))
	resp := a.rawRequest(t, produceReq(9, -1, nil,
		rawPart{"fresh", 2, batchtest.Build(t, batchtest.Options{})},
		rawPart{"fresh", 3, batchtest.Build(t, batchtest.Options{})},
		rawPart{"bad name!", 0, batchtest.Build(t, batchtest.Options{})},
	)).(*kmsg.ProduceResponse)
	got := producePartitions(resp)
	want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidTopicException.Code}
	for i, sp := range got {
		if sp.ErrorCode != want[i] {
			t.Fatalf("partition %d: code %d, want %d", i, sp.ErrorCode, want[i])
		}
	}
	if tp, ok := a.topic(t, "fresh"); !ok || tp.Partitions != 3 {
		t.Fatalf("topic fresh: %v %+v", ok, tp)
	}
}

// Produce requests pipelined on one connection are committed in the order
// they were sent.
func TestProducePipelinedOrder(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "ordered", 1, nil)
	const n = 40
	var frames []byte
	for i := range n {
		b := batchtest.Build(t, batchtest.Options{Records: 1 + i%3, ValueBytes: 10, Seed: uint64(i)})
		frames = append(frames, frameFor(int32(i), produceReq(9, -1, nil, rawPart{"ordered", 0, b}))...)
	}
	c := dial(t, a.addr)
	write(t, c, frames)
	var next int64
	for i := range n {
		resp := kmsg.NewPtrProduceResponse()
		if corr := decodeResponse(t, readFrame(t, c), resp, 9); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		sp := producePartitions(resp)[0]
		if sp.ErrorCode != 0 || sp.BaseOffset != next {
			t.Fatalf("request %d: code %d base offset %d, want offset %d", i, sp.ErrorCode, sp.BaseOffset, next)
		}
		next += int64(1 + i%3)
	}
}

// Pipeline failures become retriable codes.
func TestProducePipelineFailures(t *testing.T) {
	batch := func(t *testing.T) []byte { return batchtest.Build(t, batchtest.Options{}) }
	t.Run("upload fails", func(t *testing.T) {
		a, _ := newDataAgent(t, &dataPath{
			WrapStore: func(s objstore.Store) objstore.Store {
				return objstore.WithFaults(s, objstore.FaultFunc(func(op objstore.Op, _ string) objstore.FaultMode {
					if op == objstore.OpPut {
						return objstore.FaultBefore
					}
					return objstore.NoFault
				}))
			},
			Tune: func(c *produce.Config) { c.UploadAttempts = 1 },
		})
		a.createTopic(t, "t", 1, nil)
		resp := a.rawRequest(t, produceReq(9, -1, nil, rawPart{"t", 0, batch(t)})).(*kmsg.ProduceResponse)
		if code := producePartitions(resp)[0].ErrorCode; code != kerr.KafkaStorageError.Code {
			t.Fatalf("code %d, want KAFKA_STORAGE_ERROR", code)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		a, _ := newDataAgent(t, &dataPath{
			WrapStore: func(s objstore.Store) objstore.Store {
				return objstore.WithFaults(s, objstore.FaultFunc(func(op objstore.Op, _ string) objstore.FaultMode {
					if op == objstore.OpPut {
						<-release
					}
					return objstore.NoFault
				}))
			},
		})
		t.Cleanup(func() { close(release) }) // before the pipeline closes
		a.createTopic(t, "t", 1, nil)
		req := produceReq(9, -1, nil, rawPart{"t", 0, batch(t)})
		req.TimeoutMillis = 20 // the upload cannot end before it passes
		resp := a.rawRequest(t, req).(*kmsg.ProduceResponse)
		if code := producePartitions(resp)[0].ErrorCode; code != kerr.RequestTimedOut.Code {
			t.Fatalf("code %d, want REQUEST_TIMED_OUT", code)
		}
	})
	t.Run("pipeline closed", func(t *testing.T) {
		a, dp := newDataAgent(t, nil)
		a.createTopic(t, "t", 1, nil)
		if err := dp.Pipeline.Close(a.ctx(t)); err != nil {
			t.Fatal(err)
		}
		resp := a.rawRequest(t, produceReq(9, -1, nil, rawPart{"t", 0, batch(t)})).(*kmsg.ProduceResponse)
		if code := producePartitions(resp)[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("code %d, want NOT_LEADER_OR_FOLLOWER", code)
		}
	})
}

// Fetch errors per partition, and the session answers.
func TestFetchErrors(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	id := a.createTopic(t, "t", 2, nil)
	a.produceRaw(t, "t", 0, batchtest.Build(t, batchtest.Options{Records: 3}))
	const (
		outOfRange = 1  // OFFSET_OUT_OF_RANGE
		unknown    = 3  // UNKNOWN_TOPIC_OR_PARTITION
		fenced     = 74 // FENCED_LEADER_EPOCH
		newerEpoch = 75 // UNKNOWN_LEADER_EPOCH
		unknownID  = 100
	)
	tests := []struct {
		name    string
		version int16
		parts   []fetchPartReq
		want    []int16
	}{
		{name: "beyond the high watermark", version: 11, parts: []fetchPartReq{{topic: "t", offset: 4}, {topic: "t", partition: 1, offset: 0}}, want: []int16{outOfRange, 0}},
		{name: "at the high watermark", version: 11, parts: []fetchPartReq{{topic: "t", offset: 3}}, want: []int16{0}},
		{name: "negative offset", version: 11, parts: []fetchPartReq{{topic: "t", offset: -1}}, want: []int16{outOfRange}},
		{name: "unknown topic", version: 11, parts: []fetchPartReq{{topic: "nope"}}, want: []int16{unknown}},
		{name: "unknown partition", version: 12, parts: []fetchPartReq{{topic: "t", partition: 2}, {topic: "t", partition: -1}}, want: []int16{unknown, unknown}},
		{name: "unknown topic id", version: 13, parts: []fetchPartReq{{id: meta.TopicID{1}}}, want: []int16{unknownID}},
		{name: "unknown partition by id", version: 16, parts: []fetchPartReq{{id: id, partition: 7}}, want: []int16{unknown}},
		{name: "newer leader epoch", version: 11, parts: []fetchPartReq{{topic: "t", epoch: 1}}, want: []int16{newerEpoch}},
		{name: "older leader epoch", version: 11, parts: []fetchPartReq{{topic: "t", epoch: -2}}, want: []int16{fenced}},
		{name: "no leader epoch", version: 11, parts: []fetchPartReq{{topic: "t", epoch: -1}}, want: []int16{0}},
		{name: "epoch ignored before v9", version: 8, parts: []fetchPartReq{{topic: "t", epoch: 5}}, want: []int16{0}},
	}
	c := dial(t, a.addr)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for j := range tt.parts {
				tt.parts[j].maxBytes = 1 << 20
			}
			resp := roundTrip(t, c, int32(i), fetchReq(tt.version, 0, 0, 1<<20, tt.parts...)).(*kmsg.FetchResponse)
			got := fetchPartitions(resp)
			if resp.ErrorCode != 0 || len(got) != len(tt.want) {
				t.Fatalf("top-level code %d, %d partitions, want 0 and %d", resp.ErrorCode, len(got), len(tt.want))
			}
			for j, sp := range got {
				if sp.RecordBatches == nil {
					// Kafka sends an empty record set; librdkafka
					// fails to parse a null one.
					t.Fatalf("partition %d: null record set", j)
				}
				if sp.ErrorCode != tt.want[j] {
					t.Fatalf("partition %d: code %d (%v), want %d", j, sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode), tt.want[j])
				}
				if sp.ErrorCode != 0 && (sp.HighWatermark != -1 || sp.LastStableOffset != -1 || sp.LogStartOffset != -1 || len(sp.RecordBatches) != 0) {
					t.Fatalf("partition %d: error with %d %d %d and %d bytes", j, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset, len(sp.RecordBatches))
				}
			}
		})
	}

	t.Run("sessions", func(t *testing.T) {
		for _, st := range []struct {
			id, epoch int32
			wantCode  int16
		}{
			{0, -1, 0}, // no session wanted
			{0, 0, 0},  // new session (fetch_session_test.go)
			{9, 0, 0},  // close 9, open a new one
			{9, 3, kerr.FetchSessionIDNotFound.Code},
			{0, 1, kerr.FetchSessionIDNotFound.Code},
		} {
			req := fetchReq(16, 0, 0, 1<<20, fetchPartReq{id: id, maxBytes: 1 << 20})
			req.SessionID, req.SessionEpoch = st.id, st.epoch
			resp := a.rawRequest(t, req).(*kmsg.FetchResponse)
			if opened := resp.SessionID != 0; resp.ErrorCode != st.wantCode || opened != (st.epoch == 0) {
				t.Fatalf("session %d epoch %d: code %d session %d, want %d and a session %v", st.id, st.epoch, resp.ErrorCode, resp.SessionID, st.wantCode, st.epoch == 0)
			}
			if wantTopics := st.wantCode == 0; (len(resp.Topics) == 1) != wantTopics {
				t.Fatalf("session %d epoch %d: %d topics", st.id, st.epoch, len(resp.Topics))
			}
		}
	})
}

// MaxBytes bounds the response, except that the first partition with data
// returns its first batch whole (KIP-74); PartitionMaxBytes bounds each.
func TestFetchMaxBytes(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "mb", 2, nil)
	var size int32
	for p := range int32(2) {
		for i := range 3 {
			b := batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 500, Seed: uint64(i)})
			size = int32(len(b))
			a.produceRaw(t, "mb", p, b)
		}
	}
	tests := []struct {
		name              string
		maxBytes, partMax int32
		want              [2]int // batches of partitions 0 and 1
	}{
		{"everything", 1 << 20, 1 << 20, [2]int{3, 3}},
		{"partition max", 1 << 20, 2*size + 1, [2]int{2, 2}},
		{"response max", size*3/2 + size, 1 << 20, [2]int{2, 0}},
		{"response max below one batch", 1, 1 << 20, [2]int{1, 0}},
		{"response max zero", 0, 1 << 20, [2]int{1, 0}},
		{"partition max below one batch", 1 << 20, 1, [2]int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := a.rawRequest(t, fetchReq(11, 0, 0, tt.maxBytes,
				fetchPartReq{topic: "mb", partition: 0, maxBytes: tt.partMax},
				fetchPartReq{topic: "mb", partition: 1, maxBytes: tt.partMax},
			)).(*kmsg.FetchResponse)
			for i, sp := range fetchPartitions(resp) {
				if sp.ErrorCode != 0 || sp.HighWatermark != 6 || sp.LastStableOffset != 6 || sp.LogStartOffset != 0 {
					t.Fatalf("partition %d: code %d offsets %d %d %d", i, sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset)
				}
				if got := len(batchesOf(t, sp.RecordBatches)); got != tt.want[i] {
					t.Fatalf("partition %d: %d batches, want %d", i, got, tt.want[i])
				}
			}
		})
	}
}

// spyNotifier reports each time a long poll is about to wait, having
// watched its partitions and read them (Deps.longPollWaiting), so a test
// knows it is waiting, or went back to waiting after a wake-up.
type spyNotifier struct {
	calls chan struct{}
}

func (s *spyNotifier) waiting() {
	select {
	case s.calls <- struct{}{}:
	default:
	}
}

func (s *spyNotifier) waitCall(t testing.TB) {
	t.Helper()
	select {
	case <-s.calls:
	case <-time.After(guard):
		t.Fatal("the fetch never waited")
	}
}

// A long poll returns as soon as enough data arrives, well before its
// MaxWait (longer than the test's guard).
func TestFetchLongPoll(t *testing.T) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	a, _ := newDataAgent(t, nil,
		withSpy(spy))
	const maxWaitMs = 30_000
	if time.Duration(maxWaitMs)*time.Millisecond <= guard {
		t.Fatal("MaxWait must outlast the guard for this test to mean anything")
	}
	start := func(t *testing.T, req *kmsg.FetchRequest) <-chan *kmsg.FetchResponse {
		c := dial(t, a.addr)
		write(t, c, frameFor(1, req))
		out := make(chan *kmsg.FetchResponse, 1)
		go func() {
			frame, err := readFrameErr(c)
			resp := kmsg.NewPtrFetchResponse()
			if err == nil {
				_, err = decodeResponseErr(frame, resp, req.Version)
			}
			if err != nil {
				resp = nil
			}
			out <- resp
		}()
		return out
	}
	wait := func(t *testing.T, ch <-chan *kmsg.FetchResponse) *kmsg.FetchResponse {
		t.Helper()
		select {
		case resp := <-ch:
			if resp == nil {
				t.Fatal("fetch failed")
			}
			return resp
		case <-time.After(guard):
			t.Fatal("the long poll did not return when data arrived")
			return nil
		}
	}

	t.Run("one record wakes MinBytes 1", func(t *testing.T) {
		id := a.createTopic(t, "lp", 2, nil)
		ch := start(t, fetchReq(16, maxWaitMs, 1, 1<<20,
			fetchPartReq{id: id, partition: 0, maxBytes: 1 << 20},
			fetchPartReq{id: id, partition: 1, maxBytes: 1 << 20}))
		spy.waitCall(t)
		a.produceRaw(t, "lp", 1, batchtest.Build(t, batchtest.Options{Records: 2}))
		got := fetchPartitions(wait(t, ch))
		if got[0].HighWatermark != 0 || len(got[0].RecordBatches) != 0 {
			t.Fatalf("partition 0: hwm %d, %d bytes", got[0].HighWatermark, len(got[0].RecordBatches))
		}
		if got[1].HighWatermark != 2 || len(batchesOf(t, got[1].RecordBatches)) != 1 {
			t.Fatalf("partition 1: hwm %d, %d bytes", got[1].HighWatermark, len(got[1].RecordBatches))
		}
	})
	t.Run("MinBytes waits for enough", func(t *testing.T) {
		a.createTopic(t, "lp-min", 1, nil)
		small := batchtest.Build(t, batchtest.Options{ValueBytes: 10})
		big := batchtest.Build(t, batchtest.Options{ValueBytes: 3000, Seed: 1})
		drainSignals(spy.calls)
		ch := start(t, fetchReq(11, maxWaitMs, int32(len(small)+1), 1<<20, fetchPartReq{topic: "lp-min", maxBytes: 1 << 20}))
		spy.waitCall(t)
		a.produceRaw(t, "lp-min", 0, small)
		// The fetch saw the small batch and went back to waiting.
		spy.waitCall(t)
		a.produceRaw(t, "lp-min", 0, big)
		got := fetchPartitions(wait(t, ch))
		if n := len(batchesOf(t, got[0].RecordBatches)); n != 2 || got[0].HighWatermark != 2 {
			t.Fatalf("%d batches, hwm %d; want 2 and 2", n, got[0].HighWatermark)
		}
	})
	t.Run("shutdown answers a waiting fetch", func(t *testing.T) {
		spy := &spyNotifier{calls: make(chan struct{}, 64)}
		b, _ := newDataAgent(t, nil,
			withSpy(spy))
		b.createTopic(t, "idle", 1, nil)
		c := dial(t, b.addr)
		write(t, c, frameFor(1, fetchReq(11, maxWaitMs, 1, 1<<20, fetchPartReq{topic: "idle", maxBytes: 1 << 20})))
		spy.waitCall(t)
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			done <- b.Shutdown(ctx)
		}()
		resp := kmsg.NewPtrFetchResponse()
		decodeResponse(t, readFrame(t, c), resp, 11)
		if sp := fetchPartitions(resp)[0]; sp.ErrorCode != 0 || sp.HighWatermark != 0 {
			t.Fatalf("code %d hwm %d", sp.ErrorCode, sp.HighWatermark)
		}
		if err := <-done; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	})
}

func drainSignals(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// Fetch v4 and ListOffsets v1 as kafka-python 2.0.2 sends them.
func TestFetchKafkaPython(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "py", 1, nil)
	o := batchtest.Options{Records: 5, KeyBytes: 4, ValueBytes: 30, Headers: 1}
	a.produceRaw(t, "py", 0, batchtest.Build(t, o))

	c := dial(t, a.addr)
	for _, tt := range []struct{ ts, want int64 }{{-1, 5}, {-2, 0}} {
		lreq := kmsg.NewPtrListOffsetsRequest()
		lreq.Version = 1
		lreq.ReplicaID = -1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "py"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = tt.ts
		lt.Partitions = append(lt.Partitions, lp)
		lreq.Topics = append(lreq.Topics, lt)
		lresp := roundTrip(t, c, 1, lreq).(*kmsg.ListOffsetsResponse)
		if sp := lresp.Topics[0].Partitions[0]; sp.ErrorCode != 0 || sp.Offset != tt.want {
			t.Fatalf("ListOffsets v1 at %d: code %d offset %d, want %d", tt.ts, sp.ErrorCode, sp.Offset, tt.want)
		}
	}

	for _, isolation := range []int8{0, 1} {
		// kafka-python's defaults: fetch_max_wait_ms 500,
		// fetch_min_bytes 1, fetch_max_bytes 52428800,
		// max_partition_fetch_bytes 1048576.
		freq := fetchReq(4, 500, 1, 52428800, fetchPartReq{topic: "py", maxBytes: 1048576})
		freq.ReplicaID = -1
		freq.IsolationLevel = isolation
		fresp := roundTrip(t, c, 2, freq).(*kmsg.FetchResponse)
		sp := fetchPartitions(fresp)[0]
		if sp.ErrorCode != 0 || sp.HighWatermark != 5 || sp.LastStableOffset != 5 {
			t.Fatalf("isolation %d: code %d hwm %d lso %d", isolation, sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset)
		}
		if (sp.AbortedTransactions == nil) != (isolation == 0) {
			t.Fatalf("isolation %d: aborted transactions %v", isolation, sp.AbortedTransactions)
		}
		_, recs := batchtest.Decode(t, sp.RecordBatches)
		for i, r := range recs {
			if !bytes.Equal(r.Key, batchtest.Key(o, i)) || !bytes.Equal(r.Value, batchtest.Value(o, i)) {
				t.Fatalf("record %d: %q %q", i, r.Key, r.Value)
			}
		}
	}
}

// Fetch v13+ names topics by id; v12 is the last by name.
func TestFetchByTopicID(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	id := a.createTopic(t, "by-id", 1, nil)
	o := batchtest.Options{Records: 4, ValueBytes: 12}
	a.produceRaw(t, "by-id", 0, batchtest.Build(t, o))
	for _, v := range []int16{12, 13, 15, 16} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			p := fetchPartReq{topic: "by-id", maxBytes: 1 << 20, offset: 2}
			if v >= 13 {
				p = fetchPartReq{id: id, maxBytes: 1 << 20, offset: 2}
			}
			resp := a.rawRequest(t, fetchReq(v, 0, 0, 1<<20, p)).(*kmsg.FetchResponse)
			rt := resp.Topics[0]
			if v >= 13 && meta.TopicID(rt.TopicID) != id || v < 13 && rt.Topic != "by-id" {
				t.Fatalf("topic %q id %v", rt.Topic, rt.TopicID)
			}
			sp := rt.Partitions[0]
			if sp.ErrorCode != 0 || sp.HighWatermark != 4 || sp.PreferredReadReplica != -1 {
				t.Fatalf("code %d hwm %d preferred replica %d", sp.ErrorCode, sp.HighWatermark, sp.PreferredReadReplica)
			}
			// The batch holding offset 2 starts at 0; the consumer skips.
			rb, recs := batchtest.Decode(t, sp.RecordBatches)
			if rb.FirstOffset != 0 || len(recs) != 4 || !bytes.Equal(recs[3].Value, batchtest.Value(o, 3)) {
				t.Fatalf("batch at %d with %d records", rb.FirstOffset, len(recs))
			}
		})
	}
}

// A Produce or Fetch handler given missing dependencies fails the
// connection, not the agent.
func TestDataPathMissingDeps(t *testing.T) {
	a := newTestAgent(t) // no data path
	a.createTopic(t, "t", 1, nil)
	for _, req := range []kmsg.Request{
		produceReq(9, -1, nil, rawPart{"t", 0, batchtest.Build(t, batchtest.Options{})}),
		fetchReq(11, 0, 0, 1<<20, fetchPartReq{topic: "t", maxBytes: 1 << 20}),
	} {
		c := dial(t, a.addr)
		write(t, c, frameFor(1, req))
		expectClosed(t, c)
		// Other connections (the admin client's) may close first.
		for cc := a.obs.waitClose(t); !errors.Is(cc.reason, ErrMissingDeps); cc = a.obs.waitClose(t) {
		}
	}
}

// FuzzProduceFetch runs the Produce and Fetch handlers on arbitrary
// request bodies against a live agent: no panic, a response that encodes,
// and no error except an acks=0 failure's.
func FuzzProduceFetch(f *testing.F) {
	a, _ := newDataAgent(f, nil)
	a.createTopic(f, "fuzz", 2, nil)
	good := batchtest.Build(f, batchtest.Options{Records: 2, ValueBytes: 8})
	seeds := []kmsg.Request{
		produceReq(3, -1, nil, rawPart{"fuzz", 0, good}),
		produceReq(9, 1, nil, rawPart{"fuzz", 1, good}, rawPart{"other", 0, good}),
		produceReq(11, 0, kmsg.StringPtr("tx"), rawPart{"fuzz", 0, good}),
		fetchReq(4, 0, 1, 1<<20, fetchPartReq{topic: "fuzz", maxBytes: 1 << 20}),
		fetchReq(12, 0, 1, 10, fetchPartReq{topic: "fuzz", partition: 1, maxBytes: 5}),
		fetchReq(16, 0, 1, 1<<20, fetchPartReq{id: a.topicID(f, "fuzz"), maxBytes: 1 << 20}),
	}
	// Fetch sessions (fetch_session.go): one opened, incremental
	// fetches with and without a session of that id, forgetting
	// partitions by name and by id.
	opened := fetchReq(12, 0, 1, 1<<20, fetchPartReq{topic: "fuzz", maxBytes: 1 << 20}, fetchPartReq{topic: "fuzz", partition: 1, maxBytes: 1 << 20})
	byName := sessionFetch(12, 1, 1, 0, []fetchPartReq{{topic: "fuzz", offset: 2}}, fetchPartReq{topic: "fuzz", partition: 1})
	byID := sessionFetch(16, 7, 5, 0, nil, fetchPartReq{id: a.topicID(f, "fuzz"), partition: 1})
	seeds = append(seeds, opened, byName, byID)
	for _, req := range seeds {
		f.Add(req.Key(), req.GetVersion(), req.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		if key != 0 && key != 1 {
			return
		}
		e := builtin.lookup(key)
		if !e.serves(version) {
			return
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		switch r := req.(type) {
		case *kmsg.ProduceRequest:
			r.TimeoutMillis = int32(guard / time.Millisecond)
		case *kmsg.FetchRequest:
			r.MaxWaitMillis = 0 // no Conn to drain; a long poll would only wait
		}
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		kr := &Request{Header: Header{Key: key, Version: version}, Body: req, Deps: a.Deps}
		kr.order.prev, kr.order.mine = closedChan, make(chan struct{})
		resp, err := e.handler(ctx, kr)
		if err != nil {
			if !errors.Is(err, errAcksZeroFailed) {
				t.Fatalf("key %d v%d: %v", key, version, err)
			}
			return
		}
		if resp != nil {
			resp.SetVersion(version)
			resp.AppendTo(nil)
		}
	})
}
