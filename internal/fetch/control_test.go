package fetch_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// txnProducer is a transactional producer driven through meta commands.
type txnProducer struct {
	id    string
	pid   int64
	epoch int16
	seq   map[int32]int32 // next sequence per partition
}

func (e *env) propose(t testing.TB, c meta.Command) meta.Result {
	t.Helper()
	res, err := e.replica.Propose(testCtx(t), c)
	if err != nil {
		t.Fatalf("%T: %v", c, err)
	}
	if res.Code != 0 {
		t.Fatalf("%T: %v", c, res.Err())
	}
	for i, code := range res.Codes {
		if code != 0 {
			t.Fatalf("%T: code %d for item %d", c, code, i)
		}
	}
	return res
}

func (e *env) initTxn(t testing.TB, id string) *txnProducer {
	t.Helper()
	for {
		res := e.propose(t, meta.InitTransactionalProducer{TransactionalID: id, TimeoutMs: 60_000, ProducerID: -1, ProducerEpoch: -1})
		// batchtest reads producer id 0 as "not idempotent": take
		// another id.
		if res.ProducerID != 0 {
			return &txnProducer{id: id, pid: res.ProducerID, epoch: res.ProducerEpoch, seq: map[int32]int32{}}
		}
		id += "'"
	}
}

func (e *env) addPartitions(t testing.TB, p *txnProducer, partitions ...int32) {
	t.Helper()
	c := meta.AddPartitionsToTxn{TransactionalID: p.id, ProducerID: p.pid, ProducerEpoch: p.epoch}
	for _, part := range partitions {
		c.Partitions = append(c.Partitions, meta.TopicPartition{Topic: "t", Partition: part})
	}
	e.propose(t, c)
}

// produceTxn produces one transactional batch of n records and returns
// its base offset.
func (e *env) produceTxn(t testing.TB, p *txnProducer, partition int32, n, valueBytes int) int64 {
	t.Helper()
	data := batchtest.Build(t, batchtest.Options{
		Records: n, ValueBytes: valueBytes, Seed: uint64(p.seq[partition]),
		ProducerID: p.pid, ProducerEpoch: p.epoch, BaseSequence: p.seq[partition], Transactional: true,
	})
	p.seq[partition] += int32(n)
	return e.produce(t, partition, data)[0]
}

func (e *env) endTxn(t testing.TB, p *txnProducer, commit bool) {
	t.Helper()
	e.propose(t, meta.EndTxn{TransactionalID: p.id, ProducerID: p.pid, ProducerEpoch: p.epoch, Commit: commit, Seq: -1})
}

// batchInfo is what a test checks of one returned batch.
type batchInfo struct {
	base    int64
	last    int64
	control bool
	commit  bool // for a control batch
	pid     int64
	epoch   int16
}

// parseBatches checks every batch's framing and CRC, and decodes the
// control record of each marker.
func parseBatches(t testing.TB, records []byte) []batchInfo {
	t.Helper()
	var out []batchInfo
	for rest := records; len(rest) > 0; {
		b, next, err := recordbatch.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		rest = next
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := recordbatch.CheckCRC(b); err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		bi := batchInfo{base: h.BaseOffset, last: h.LastOffset(), control: h.IsControl(), pid: h.ProducerID, epoch: h.ProducerEpoch}
		if h.IsControl() {
			bi.commit = controlIsCommit(t, b)
		}
		out = append(out, bi)
	}
	return out
}

// controlIsCommit decodes a marker batch with kmsg, as a client does, and
// checks what every marker Strand writes must hold.
func controlIsCommit(t testing.TB, b []byte) bool {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.Attributes&0x30 != 0x30 || rb.NumRecords != 1 || rb.LastOffsetDelta != 0 || rb.FirstSequence != -1 || rb.PartitionLeaderEpoch != 0 {
		t.Fatalf("marker header: attributes %#x, %d records, lastOffsetDelta %d, sequence %d, leader epoch %d",
			rb.Attributes, rb.NumRecords, rb.LastOffsetDelta, rb.FirstSequence, rb.PartitionLeaderEpoch)
	}
	var rec kmsg.Record
	if err := rec.ReadFrom(rb.Records); err != nil {
		t.Fatal(err)
	}
	var key kmsg.ControlRecordKey
	if err := key.ReadFrom(rec.Key); err != nil {
		t.Fatal(err)
	}
	var val kmsg.EndTxnMarker
	if err := val.ReadFrom(rec.Value); err != nil {
		t.Fatal(err)
	}
	if key.Version != 0 || val.Version != 0 || val.CoordinatorEpoch != 0 || rec.OffsetDelta != 0 {
		t.Fatalf("marker record: key %+v, value %+v, offset delta %d", key, val, rec.OffsetDelta)
	}
	switch key.Type {
	case kmsg.ControlRecordKeyTypeCommit:
		return true
	case kmsg.ControlRecordKeyTypeAbort:
		return false
	}
	t.Fatalf("marker type %v", key.Type)
	return false
}

// countingStore counts Gets, to show markers are not read from objects.
type countingStore struct {
	objstore.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key, off, n)
}

func TestReadMarkers(t *testing.T) {
	store := &countingStore{Store: memobj.New()}
	e := newEnv(t, store, 2, nil)
	a := e.initTxn(t, "a")
	b := e.initTxn(t, "b")
	c := e.initTxn(t, "c")

	// Partition 0: plain 0-2; a's 3-4, commit at 5; b's 6-7, abort at 8;
	// c's 9-10 still open; plain 11-12 after it.
	e.produce(t, 0, build(t, 3, 10, 1))
	e.addPartitions(t, a, 0, 1) // a writes nothing to 1: a lone marker
	if got := e.produceTxn(t, a, 0, 2, 10); got != 3 {
		t.Fatalf("a's batch at %d", got)
	}
	e.endTxn(t, a, true)
	e.addPartitions(t, b, 0)
	e.produceTxn(t, b, 0, 2, 10)
	e.endTxn(t, b, false)
	e.addPartitions(t, c, 0)
	e.produceTxn(t, c, 0, 2, 10)
	e.produce(t, 0, build(t, 2, 10, 2))

	v := e.view(t)
	lso, err := v.LastStableOffset(e.topic, 0, 13)
	if err != nil || lso != 9 {
		t.Fatalf("LastStableOffset = %d, %v; want 9", lso, err)
	}
	plain := func(base, last int64) batchInfo { return batchInfo{base: base, last: last, pid: -1, epoch: -1} }
	data := func(p *txnProducer, base, last int64) batchInfo {
		return batchInfo{base: base, last: last, pid: p.pid, epoch: p.epoch}
	}
	marker := func(p *txnProducer, at int64, commit bool) batchInfo {
		return batchInfo{base: at, last: at, control: true, commit: commit, pid: p.pid, epoch: p.epoch}
	}
	all := []batchInfo{plain(0, 2), data(a, 3, 4), marker(a, 5, true), data(b, 6, 7), marker(b, 8, false), data(c, 9, 10), plain(11, 12)}
	sizeOf := func(from int64, n int) int32 {
		r, err := fetch.NewReader(e.store, nil).Read(testCtx(t), v, e.topic, 0, from, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		_, sizes := batchOffsets(t, r.Records)
		var total int
		for _, s := range sizes[:n] {
			total += s
		}
		return int32(total)
	}

	for _, tc := range []struct {
		name      string
		partition int32
		offset    int64
		maxBytes  int32
		upTo      int64
		want      []batchInfo
	}{
		{"everything", 0, 0, 1 << 20, fetch.NoBound, all},
		{"up to the LSO", 0, 0, 1 << 20, lso, all[:5]},
		{"from a commit marker", 0, 5, 1 << 20, lso, all[2:5]},
		{"only a marker fits", 0, 5, 1, fetch.NoBound, all[2:3]},
		{"only the abort marker below the bound", 0, 8, 1 << 20, lso, all[4:5]},
		{"data and marker fit exactly", 0, 3, sizeOf(3, 2), fetch.NoBound, all[1:3]},
		{"marker one byte short", 0, 3, sizeOf(3, 2) - 1, fetch.NoBound, all[1:2]},
		{"at the LSO", 0, 9, 1 << 20, lso, nil},
		{"past the LSO", 0, 11, 1 << 20, lso, nil},
		{"bound inside the data", 0, 0, 1 << 20, 4, all[:2]},
		{"lone marker", 1, 0, 1 << 20, fetch.NoBound, []batchInfo{marker(a, 0, true)}},
		{"lone marker, maxBytes 1", 1, 0, 1, fetch.NoBound, []batchInfo{marker(a, 0, true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := fetch.NewReader(e.store, nil).ReadUpTo(testCtx(t), v, e.topic, tc.partition, tc.offset, tc.maxBytes, tc.upTo)
			if err != nil || res.Err != 0 {
				t.Fatalf("ReadUpTo = %d, %v", res.Err, err)
			}
			if got := parseBatches(t, res.Records); !slices.Equal(got, tc.want) {
				t.Fatalf("batches\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}

	t.Run("markers read no object", func(t *testing.T) {
		before := store.gets.Load()
		res, err := fetch.NewReader(e.store, nil).Read(testCtx(t), v, e.topic, 1, 0, 1<<20)
		if err != nil || len(res.Records) != recordbatch.ControlBatchSize {
			t.Fatalf("Read = %d bytes, %v", len(res.Records), err)
		}
		if n := store.gets.Load() - before; n != 0 {
			t.Fatalf("%d object reads for a marker", n)
		}
	})
}

// TestReadUpToInsideEntry bounds a read inside an index entry holding
// several batches: the batches from the bound on are left out.
func TestReadUpToInsideEntry(t *testing.T) {
	e := newEnv(t, memobj.New(), 1, nil)
	// One entry: batches at 0-1, 2-4, 5-8.
	e.produce(t, 0, slices.Concat(build(t, 2, 10, 1), build(t, 3, 10, 2), build(t, 4, 10, 3)))
	v := e.view(t)
	for _, tc := range []struct {
		offset, upTo int64
		want         []int64
	}{
		{0, 1, []int64{0}}, // the bound is inside the first batch: it starts below
		{0, 2, []int64{0}},
		{0, 5, []int64{0, 2}},
		{3, 5, []int64{2}},
		{3, 9, []int64{2, 5}},
		{5, 5, nil},
	} {
		res, err := fetch.NewReader(e.store, nil).ReadUpTo(testCtx(t), v, e.topic, 0, tc.offset, 1<<20, tc.upTo)
		if err != nil || res.Err != 0 {
			t.Fatalf("ReadUpTo(%d, upTo %d) = %d, %v", tc.offset, tc.upTo, res.Err, err)
		}
		if bases, _ := batchOffsets(t, res.Records); !slices.Equal(bases, tc.want) {
			t.Fatalf("ReadUpTo(%d, upTo %d): batches at %v, want %v", tc.offset, tc.upTo, bases, tc.want)
		}
	}
}
