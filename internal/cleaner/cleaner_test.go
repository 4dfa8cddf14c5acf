package cleaner

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// rec is a record to build: a nil value is a tombstone, a nil key a
// keyless record.
type rec struct{ key, value []byte }

// spec describes a batch to build with franz-go's encoders, so the
// cleaner is checked against bytes it did not write.
type spec struct {
	base   int64
	recs   []rec
	codec  recordbatch.Compression
	pid    int64 // 0: not idempotent
	seq    int32 // added to base for the first sequence
	txn    bool
	firstT int64
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

func build(t testing.TB, s spec) []byte {
	t.Helper()
	var raw []byte
	for i, r := range s.recs {
		kr := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: r.key, Value: r.value}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	records := raw
	if s.codec != recordbatch.CompressionNone {
		var codec kgo.CompressionCodec
		switch s.codec {
		case recordbatch.CompressionGzip:
			codec = kgo.GzipCompression()
		case recordbatch.CompressionSnappy:
			codec = kgo.SnappyCompression()
		case recordbatch.CompressionLZ4:
			codec = kgo.Lz4Compression()
		case recordbatch.CompressionZstd:
			codec = kgo.ZstdCompression()
		}
		c, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := c.Compress(new(bytes.Buffer), raw)
		records = bytes.Clone(out)
	}
	ts := s.firstT
	if ts == 0 {
		ts = 1_700_000_000_000
	}
	n := len(s.recs)
	rb := kmsg.RecordBatch{
		FirstOffset: s.base, PartitionLeaderEpoch: 0, Magic: 2, Attributes: int16(s.codec),
		LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: records,
	}
	if s.pid != 0 {
		rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = s.pid, 0, int32(s.base)+s.seq
	}
	if s.txn {
		rb.Attributes |= 0x10
	}
	rb.Length = int32(recordbatch.HeaderSize - recordbatch.LogOverhead + len(records))
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
	return b
}

// got is a record read back from the cleaner's output with kmsg.
type got struct {
	offset     int64
	key, value string
	tombstone  bool
	ts         int64
}

// decodeAll checks every output batch (CRC, header) and returns its
// records in order, with the batches' headers.
func decodeAll(t *testing.T, out []byte) ([]got, []kmsg.RecordBatch) {
	t.Helper()
	bs, err := recordbatch.Split(out)
	if err != nil {
		if len(out) == 0 {
			return nil, nil
		}
		t.Fatal(err)
	}
	var recs []got
	var hdrs []kmsg.RecordBatch
	for _, b := range bs {
		if err := recordbatch.CheckCRC(b); err != nil {
			t.Fatalf("output batch: %v", err)
		}
		var rs []kmsg.Record
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.NumRecords > 0 {
			rb, rs = batchtest.Decode(t, b)
		}
		hdrs = append(hdrs, rb)
		for _, r := range rs {
			recs = append(recs, got{offset: rb.FirstOffset + int64(r.OffsetDelta), key: string(r.Key), value: string(r.Value),
				tombstone: r.Value == nil, ts: rb.FirstTimestamp + r.TimestampDelta64})
		}
	}
	return recs, hdrs
}

// round runs one cleaning round over batches (all of them the
// partition's, the dirty ones from firstDirty) and returns the output
// and the round's end.
func round(t *testing.T, batches [][]byte, firstDirty int64, mapBytes int64, now int64, aborted []AbortedTxn, last func(int64) (int64, bool)) ([]byte, int64, Stats) {
	t.Helper()
	m := NewOffsetMap(mapBytes)
	ab := NewAborted(aborted)
	for _, b := range batches {
		h, _ := recordbatch.ParseHeader(b)
		if h.LastOffset() < firstDirty {
			continue
		}
		full, err := Index(m, b, ab)
		if err != nil {
			t.Fatalf("Index: %v", err)
		}
		if full {
			break
		}
	}
	f := &Filter{Map: m, Now: now, DeleteRetentionMs: 1000, Aborted: ab, End: m.Latest() + 1, LastDataOffset: last}
	var out []byte
	for _, b := range batches {
		h, _ := recordbatch.ParseHeader(b)
		if h.BaseOffset > m.Latest() {
			out = append(out, b...) // past the round: untouched
			continue
		}
		var err error
		if out, _, err = f.Batch(out, b); err != nil {
			t.Fatalf("Batch: %v", err)
		}
	}
	return out, m.Latest() + 1, f.Stats
}

func splitBatches(t *testing.T, out []byte) [][]byte {
	t.Helper()
	if len(out) == 0 {
		return nil
	}
	bs, err := recordbatch.Split(out)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// TestModel feeds keys x updates with tombstones, in batches of random
// size and codec, and checks rounds against a model: after a round the
// newest record of every key stays (tombstones too, their horizon
// stamped), nothing else; offsets and batch offset ranges are the
// input's; after the horizon passes the tombstones are gone. With a
// small offset map the rounds advance in prefixes and end in the same
// place.
func TestModel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mapBytes int64
	}{{"big map", 1 << 20}, {"small map", 40 * EntryBytes}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			const keys, updates = 30, 8
			newest := map[string]got{}
			var batches [][]byte
			var off int64
			codecs := []recordbatch.Compression{recordbatch.CompressionNone, recordbatch.CompressionGzip, recordbatch.CompressionSnappy, recordbatch.CompressionLZ4, recordbatch.CompressionZstd}
			for range keys * updates / 4 {
				n := 1 + rng.IntN(7)
				s := spec{base: off, codec: codecs[rng.IntN(len(codecs))]}
				for i := range n {
					k := fmt.Sprintf("key-%02d", rng.IntN(keys))
					r := rec{key: []byte(k), value: fmt.Appendf(nil, "v%d", off+int64(i))}
					if rng.IntN(6) == 0 {
						r.value = nil
					}
					s.recs = append(s.recs, r)
					newest[k] = got{offset: off + int64(i), key: k, value: string(r.value), tombstone: r.value == nil, ts: 1_700_000_000_000 + int64(i)}
				}
				batches = append(batches, build(t, s))
				off += int64(n)
			}
			in := batches
			const now = 2_000_000_000_000
			// Rounds until the whole log is clean.
			firstDirty := int64(0)
			for rounds := 0; firstDirty < off; rounds++ {
				if rounds > 50 {
					t.Fatal("rounds do not advance")
				}
				out, end, _ := round(t, batches, firstDirty, tc.mapBytes, now, nil, nil)
				if end <= firstDirty {
					t.Fatalf("round made no progress at %d", firstDirty)
				}
				batches, firstDirty = splitBatches(t, out), end
			}
			checkOffsets(t, in, batches)
			recs, _ := decodeAll(t, catBatches(batches))
			want := map[string]got{}
			for k, g := range newest {
				want[k] = g
			}
			for _, r := range recs {
				w, ok := want[r.key]
				if !ok || w != r {
					t.Fatalf("kept %+v, newest of its key is %+v", r, w)
				}
				delete(want, r.key)
			}
			if len(want) != 0 {
				t.Fatalf("newest records missing: %v", want)
			}
			// Tombstones carry the horizon of the round that kept them.
			for _, b := range batches {
				h, _ := recordbatch.ParseHeader(b)
				if hz, ok := h.DeleteHorizon(); ok && hz != now+1000 {
					t.Fatalf("horizon %d, want %d", hz, now+1000)
				}
			}
			// Before the horizon a round keeps them; after it they go.
			out, _, _ := round(t, batches, 0, 1<<20, now+999, nil, nil)
			if r2, _ := decodeAll(t, out); len(r2) != len(recs) {
				t.Fatalf("before the horizon: %d records, want %d", len(r2), len(recs))
			}
			out, _, st := round(t, batches, 0, 1<<20, now+1000, nil, nil)
			r3, _ := decodeAll(t, out)
			live := 0
			for _, g := range newest {
				if !g.tombstone {
					live++
				}
			}
			for _, r := range r3 {
				if r.tombstone {
					t.Fatalf("tombstone %+v outlived its horizon", r)
				}
			}
			if len(r3) != live || st.TombstonesDropped != int64(len(newest)-live) {
				t.Fatalf("after the horizon: %d records (%d tombstones dropped), want %d live of %d", len(r3), st.TombstonesDropped, live, len(newest))
			}
		})
	}
}

func catBatches(bs [][]byte) []byte { return bytes.Join(bs, nil) }

// checkOffsets: every output batch is an input batch's offset range,
// in order; offsets only rise.
func checkOffsets(t *testing.T, in, out [][]byte) {
	t.Helper()
	ranges := map[int64]int32{}
	for _, b := range in {
		h, _ := recordbatch.ParseHeader(b)
		ranges[h.BaseOffset] = h.LastOffsetDelta
	}
	prev := int64(-1)
	for _, b := range out {
		h, _ := recordbatch.ParseHeader(b)
		if d, ok := ranges[h.BaseOffset]; !ok || d != h.LastOffsetDelta {
			t.Fatalf("output batch [%d, %d] is no input batch's range", h.BaseOffset, h.LastOffset())
		}
		if h.BaseOffset <= prev {
			t.Fatalf("batch at %d after one ending at %d", h.BaseOffset, prev)
		}
		prev = h.LastOffset()
	}
}

// A batch none of whose records go is copied byte for byte; one that
// loses records is rebuilt with its own codec and a valid CRC.
func TestCopyOrRebuild(t *testing.T) {
	for _, codec := range []recordbatch.Compression{recordbatch.CompressionNone, recordbatch.CompressionGzip, recordbatch.CompressionSnappy, recordbatch.CompressionLZ4, recordbatch.CompressionZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			a := build(t, spec{base: 0, codec: codec, recs: []rec{{[]byte("a"), []byte("1")}, {[]byte("b"), []byte("1")}}})
			b := build(t, spec{base: 2, codec: codec, recs: []rec{{[]byte("c"), []byte("1")}, {[]byte("a"), []byte("2")}}})
			c := build(t, spec{base: 4, codec: codec, recs: []rec{{[]byte("d"), []byte("1")}}})
			out, _, st := round(t, [][]byte{a, b, c}, 0, 1<<20, 0, nil, nil)
			bs := splitBatches(t, out)
			if len(bs) != 3 || !bytes.Equal(bs[1], b) || !bytes.Equal(bs[2], c) {
				t.Fatalf("untouched batches changed")
			}
			h, _ := recordbatch.ParseHeader(bs[0])
			if h.Compression() != codec || h.NumRecords != 1 || h.LastOffsetDelta != 1 || h.BaseOffset != 0 || st.Rewritten != 1 {
				t.Fatalf("rebuilt header %+v, stats %+v", h, st)
			}
			recs, _ := decodeAll(t, out)
			if len(recs) != 4 || recs[0].offset != 1 || recs[0].key != "b" || recs[0].ts != 1_700_000_000_001 {
				t.Fatalf("records %+v", recs)
			}
		})
	}
}

// Batches of aborted transactions go whole; committed transactional
// batches and plain ones are judged by key; keyless records go.
func TestAbortedAndKeyless(t *testing.T) {
	const pid = 7
	batches := [][]byte{
		build(t, spec{base: 0, recs: []rec{{[]byte("k"), []byte("committed")}}, pid: pid, txn: true}), // committed by a marker at 1
		build(t, spec{base: 2, recs: []rec{{[]byte("x"), []byte("aborted")}, {[]byte("y"), []byte("aborted")}}, pid: pid, txn: true}),
		// abort marker at 4 (an index entry, not a batch)
		build(t, spec{base: 5, recs: []rec{{nil, []byte("keyless")}, {[]byte("z"), []byte("plain")}}}),
		build(t, spec{base: 7, recs: []rec{{[]byte("tail"), []byte("t")}}}),
	}
	aborted := []AbortedTxn{{ProducerID: pid, FirstOffset: 2, LastOffset: 4}}
	out, _, st := round(t, batches, 0, 1<<20, 0, aborted, nil)
	recs, hdrs := decodeAll(t, out)
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.key)
	}
	if fmt.Sprint(keys) != "[k z tail]" || st.AbortedDropped != 1 || len(hdrs) != 3 {
		t.Fatalf("kept %v in %d batches, stats %+v", keys, len(hdrs), st)
	}
	// Index skipped the aborted batch: its keys map to nothing.
	m := NewOffsetMap(1 << 20)
	for _, b := range batches {
		if _, err := Index(m, b, NewAborted(aborted)); err != nil {
			t.Fatal(err)
		}
	}
	if m.Get([]byte("x")) != -1 || m.Get([]byte("k")) != 0 || m.Latest() != 7 {
		t.Fatalf("map: x %d k %d latest %d", m.Get([]byte("x")), m.Get([]byte("k")), m.Latest())
	}
}

// Kafka keeps an emptied batch's header in two cases: the last batch of
// a still-active producer, and the batch ending the round.
func TestRetainEmpty(t *testing.T) {
	batches := [][]byte{
		build(t, spec{base: 0, recs: []rec{{[]byte("a"), []byte("1")}}, pid: 3}),
		build(t, spec{base: 1, recs: []rec{{[]byte("a"), []byte("2")}}, pid: 4}),
		build(t, spec{base: 2, recs: []rec{{[]byte("a"), []byte("3")}}}),
		build(t, spec{base: 3, recs: []rec{{[]byte("b"), []byte("1")}, {[]byte("a"), []byte("4")}}}),
		build(t, spec{base: 5, recs: []rec{{[]byte("b"), []byte("2")}}}),
	}
	// Producer 3 is active and its last batch is the first; producer
	// 4's last write is elsewhere.
	last := func(pid int64) (int64, bool) {
		switch pid {
		case 3:
			return 0, true
		case 4:
			return 99, true
		}
		return 0, false
	}
	out, end, _ := round(t, batches, 0, 1<<20, 0, nil, last)
	if end != 6 {
		t.Fatalf("end %d", end)
	}
	recs, hdrs := decodeAll(t, out)
	if len(hdrs) != 3 || hdrs[0].NumRecords != 0 || hdrs[0].ProducerID != 3 || hdrs[0].FirstOffset != 0 || hdrs[0].FirstTimestamp != -1 {
		t.Fatalf("batches %+v", hdrs)
	}
	if len(recs) != 2 || recs[0].value != "4" || recs[1].value != "2" {
		t.Fatalf("records %+v", recs)
	}
	// The last batch of the round, emptied, stays as a header.
	batches = append(batches, build(t, spec{base: 6, recs: []rec{{[]byte("b"), []byte("3")}}}))
	m := NewOffsetMap(1 << 20)
	for _, b := range batches {
		Index(m, b, Aborted{})
	}
	f := &Filter{Map: m, End: 6} // a round ending at 6: batch [5,5] ends it
	o, oc, err := f.Batch(nil, batches[4])
	if err != nil || oc != Emptied {
		t.Fatalf("round's last batch: %v %v", oc, err)
	}
	if h, _ := recordbatch.ParseHeader(o); h.NumRecords != 0 || h.BaseOffset != 5 {
		t.Fatalf("header %+v", h)
	}
	if _, oc, _ := (&Filter{Map: m, End: 7}).Batch(nil, batches[4]); oc != Dropped {
		t.Fatalf("emptied batch not ending the round: %v", oc)
	}
}

// A full map ends the round at the last batch it mapped whole; a map
// that cannot hold one batch is ErrMapTooSmall.
func TestOffsetMapBound(t *testing.T) {
	var recs []rec
	for i := range 10 {
		recs = append(recs, rec{fmt.Appendf(nil, "k%d", i), []byte("v")})
	}
	a := build(t, spec{base: 0, recs: recs[:4]})
	b := build(t, spec{base: 4, recs: recs[4:]})
	m := NewOffsetMap(7 * EntryBytes) // 90% of 7 slots
	if m.Cap() != 6 {
		t.Fatalf("cap %d", m.Cap())
	}
	if full, err := Index(m, a, Aborted{}); full || err != nil {
		t.Fatal(full, err)
	}
	if full, err := Index(m, b, Aborted{}); !full || err != nil || m.Latest() != 3 || m.Len() > m.Cap() {
		t.Fatalf("full %v err %v latest %d len %d", full, err, m.Latest(), m.Len())
	}
	tiny := NewOffsetMap(2 * EntryBytes)
	if _, err := Index(tiny, a, Aborted{}); err != ErrMapTooSmall {
		t.Fatalf("tiny map: %v", err)
	}
}

func TestAbortedContains(t *testing.T) {
	a := NewAborted([]AbortedTxn{{1, 10, 20}, {1, 30, 40}, {2, 0, 5}})
	for _, tc := range []struct {
		pid, base, last int64
		want            bool
	}{
		{1, 10, 12, true}, {1, 15, 19, true}, {1, 21, 22, false}, {1, 5, 6, false},
		{1, 30, 30, true}, {1, 41, 41, false}, {2, 1, 1, true}, {3, 12, 12, false},
	} {
		if got := a.Contains(tc.pid, tc.base, tc.last); got != tc.want {
			t.Errorf("Contains(%d, %d, %d) = %v", tc.pid, tc.base, tc.last, got)
		}
	}
}
