package segment_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/segment"
)

func topic(n byte) [16]byte { return [16]byte{0: n, 15: n} }

// add is one Writer.Add call.
type add struct {
	topic     [16]byte
	partition int32
	batches   []byte
}

// buildObject adds everything, checks each ChunkRef and the predicted size,
// and returns the finished object and the refs.
func buildObject(t *testing.T, w *segment.Writer, adds []add) ([]byte, []segment.ChunkRef) {
	t.Helper()
	var refs []segment.ChunkRef
	for i, a := range adds {
		ref, err := w.Add(a.topic, a.partition, a.batches)
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		refs = append(refs, ref)
	}
	predicted := w.Len()
	obj := w.Finish()
	if len(obj) != predicted {
		t.Fatalf("Len predicted %d, Finish gave %d bytes", predicted, len(obj))
	}
	for i, ref := range refs {
		if !bytes.Equal(obj[ref.Offset:ref.Offset+ref.Length], adds[i].batches) {
			t.Fatalf("add %d: ChunkRef %+v does not locate its bytes", i, ref)
		}
	}
	return obj, refs
}

// wantChunks is the footer the adds should produce: consecutive adds to one
// partition coalesce.
func wantChunks(t *testing.T, adds []add) []segment.Chunk {
	t.Helper()
	var cs []segment.Chunk
	off := int64(segment.HeaderSize)
	for _, a := range adds {
		bs, err := recordbatch.Split(a.batches)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			h, _ := recordbatch.ParseHeader(b)
			n := len(cs)
			if n == 0 || cs[n-1].TopicID != a.topic || cs[n-1].Partition != a.partition {
				cs = append(cs, segment.Chunk{TopicID: a.topic, Partition: a.partition, Offset: off,
					FirstTimestamp: h.FirstTimestamp, MaxTimestamp: h.MaxTimestamp})
			}
			c := &cs[len(cs)-1]
			c.Length += int64(len(b))
			c.Batches++
			c.Records += int64(h.NumRecords)
			c.FirstTimestamp = min(c.FirstTimestamp, h.FirstTimestamp)
			c.MaxTimestamp = max(c.MaxTimestamp, h.MaxTimestamp)
			off += int64(len(b))
		}
	}
	return cs
}

func batch(t *testing.T, records, valueBytes int, ts int64, seed uint64) []byte {
	return batchtest.Build(t, batchtest.Options{Records: records, ValueBytes: valueBytes, FirstTimestamp: ts, Seed: seed})
}

func TestRoundTrip(t *testing.T) {
	b1 := batch(t, 1, 10, 1000, 1)
	b2 := batch(t, 3, 100, 900, 2) // earlier first timestamp than b1
	b3 := batchtest.Build(t, batchtest.Options{Records: 5, ValueBytes: 50, Compression: recordbatch.CompressionZstd, ProducerID: 3})
	logAppend := bytes.Clone(b1)
	recordbatch.SetLogAppendTime(logAppend, 5000)

	tests := []struct {
		name string
		adds []add
	}{
		{"empty", nil},
		{"one batch", []add{{topic(1), 0, b1}}},
		{"coalesce one partition", []add{{topic(1), 0, b1}, {topic(1), 0, b2}, {topic(1), 0, b3}}},
		{"several batches in one add", []add{{topic(1), 2, slices.Concat(b1, b2, b3)}}},
		{"interleaved partitions", []add{{topic(1), 0, b1}, {topic(1), 1, b2}, {topic(1), 0, b3}, {topic(2), 0, b1}}},
		{"same partition other topic", []add{{topic(1), 0, b1}, {topic(2), 0, b1}}},
		{"log append time batch", []add{{topic(3), 7, logAppend}, {topic(3), 7, b2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := segment.NewWriter()
			obj, _ := buildObject(t, w, tt.adds)
			want := wantChunks(t, tt.adds)
			checkObject(t, obj, want)
			if got := w.Chunks(); !slices.Equal(got, want) {
				t.Fatalf("Writer.Chunks\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// checkObject reads obj every way a reader can and compares with want.
func checkObject(t *testing.T, obj []byte, want []segment.Chunk) {
	t.Helper()
	for name, read := range map[string]func() ([]segment.Chunk, error){
		"ReadFooter":         func() ([]segment.Chunk, error) { return segment.ReadFooter(obj) },
		"Verify":             func() ([]segment.Chunk, error) { return segment.Verify(obj) },
		"ReadFooterFromTail": func() ([]segment.Chunk, error) { return readFromTail(t, obj, 1) },
	} {
		got, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("%s\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// readFromTail plays a reader that can fetch only ranges of the object: it
// starts with the last `first` bytes and fetches what ShortTailError asks.
func readFromTail(t *testing.T, obj []byte, first int) ([]segment.Chunk, error) {
	t.Helper()
	n := min(first, len(obj))
	for fetches := 0; ; fetches++ {
		if fetches > 2 { // the trailer, then the footer: never more
			t.Fatalf("%d fetches", fetches)
		}
		chunks, err := segment.ReadFooterFromTail(obj[len(obj)-n:], int64(len(obj)))
		var short *segment.ShortTailError
		if !errors.As(err, &short) {
			return chunks, err
		}
		if !errors.Is(err, segment.ErrShortTail) || short.Need <= int64(n) || short.Need > int64(len(obj)) {
			t.Fatalf("short tail error %v with %d of %d bytes", err, n, len(obj))
		}
		n = int(short.Need)
	}
}

// TestRoundTripRandom builds objects from seeded random add sequences; a
// failing seed replays by its subtest name.
func TestRoundTripRandom(t *testing.T) {
	var pool [][]byte
	for i, c := range []recordbatch.Compression{recordbatch.CompressionNone, recordbatch.CompressionSnappy, recordbatch.CompressionLZ4} {
		for r := 1; r <= 4; r++ {
			pool = append(pool, batchtest.Build(t, batchtest.Options{Records: r, ValueBytes: 30 * r, Compression: c, FirstTimestamp: int64(1000 + 10*i + r), Seed: uint64(r)}))
		}
	}
	w := segment.NewWriter() // reused across seeds, as the flusher does
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			var adds []add
			for range rng.IntN(40) {
				var bs []byte
				for range 1 + rng.IntN(3) {
					bs = append(bs, pool[rng.IntN(len(pool))]...)
				}
				adds = append(adds, add{topic(byte(rng.IntN(3))), int32(rng.IntN(4)), bs})
			}
			w.Reset()
			obj, _ := buildObject(t, w, adds)
			checkObject(t, obj, wantChunks(t, adds))
			for _, first := range []int{segment.DefaultTailBytes, segment.TrailerSize, 0} {
				if _, err := readFromTail(t, obj, first); err != nil {
					t.Fatalf("tail read starting with %d bytes: %v", first, err)
				}
			}
		})
	}
}

// TestVerifyDetectsFlippedBytes flips every byte of an object. Only a
// batch's baseOffset and partitionLeaderEpoch are outside every check: they
// are outside the batch CRC in Kafka's format, and the fetch path overwrites
// both on the way out.
func TestVerifyDetectsFlippedBytes(t *testing.T) {
	adds := []add{
		{topic(1), 0, batch(t, 2, 10, 1000, 1)},
		{topic(1), 1, batch(t, 1, 5, 1000, 2)},
	}
	obj, refs := buildObject(t, segment.NewWriter(), adds)
	unchecked := func(i int) bool {
		for _, r := range refs {
			if rel := int64(i) - r.Offset; rel >= 0 && rel < r.Length && (rel < 8 || (rel >= 12 && rel < 16)) {
				return true
			}
		}
		return false
	}
	for i := range obj {
		m := bytes.Clone(obj)
		m[i] ^= 0x01
		_, err := segment.Verify(m)
		switch {
		case unchecked(i):
			if err != nil {
				t.Fatalf("byte %d (batch offset or epoch): %v", i, err)
			}
		case err == nil:
			t.Fatalf("byte %d flipped: Verify accepted the object", i)
		case !errors.Is(err, segment.ErrCorrupt) && !errors.Is(err, segment.ErrVersion):
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

// refooter rewrites an object's footer entries with f and fixes the footer
// CRC, so structural checks behind the CRC can be reached.
func refooter(obj []byte, f func(entries []byte)) []byte {
	m := bytes.Clone(obj)
	tr := m[len(m)-segment.TrailerSize:]
	flen := int(binary.BigEndian.Uint32(tr))
	start := len(m) - segment.TrailerSize - flen
	f(m[start : start+flen])
	binary.BigEndian.PutUint32(tr[8:], crc32.Checksum(m[start:start+flen+8], crc32.MakeTable(crc32.Castagnoli)))
	return m
}

func TestReadFooterErrors(t *testing.T) {
	b := batch(t, 2, 10, 1000, 1)
	obj, _ := buildObject(t, segment.NewWriter(), []add{{topic(1), 0, b}, {topic(1), 1, b}})
	be := binary.BigEndian
	setTrailer := func(off int, v uint32) []byte {
		m := bytes.Clone(obj)
		be.PutUint32(m[len(m)-segment.TrailerSize+off:], v)
		return m
	}
	entry := func(i, field int) int { return i*segment.EntrySize + field }

	tests := []struct {
		name string
		obj  []byte
		want error
	}{
		{"empty", nil, segment.ErrCorrupt},
		{"header only", obj[:segment.HeaderSize], segment.ErrCorrupt},
		{"truncated", obj[:len(obj)-1], segment.ErrCorrupt},
		{"bad leading magic", append([]byte("XTRD"), obj[4:]...), segment.ErrCorrupt},
		{"leading version", slices.Concat(obj[:4], []byte{0, 2}, obj[6:]), segment.ErrVersion},
		{"trailing version", func() []byte { m := bytes.Clone(obj); m[len(m)-7] = 9; return m }(), segment.ErrVersion},
		{"footer length mismatch", setTrailer(0, 61), segment.ErrCorrupt},
		{"chunk count huge", setTrailer(4, 1<<30), segment.ErrCorrupt},
		{"footer longer than object", func() []byte {
			m := setTrailer(4, 1000) // consistent counts, but more than the object holds
			be.PutUint32(m[len(m)-segment.TrailerSize:], 1000*segment.EntrySize)
			return m
		}(), segment.ErrCorrupt},
		{"footer CRC", setTrailer(8, 0), segment.ErrCorrupt},
		{"gap between chunks", refooter(obj, func(e []byte) { be.PutUint64(e[entry(1, 20):], be.Uint64(e[entry(1, 20):])+1) }), segment.ErrCorrupt},
		{"zero length chunk", refooter(obj, func(e []byte) { be.PutUint32(e[entry(0, 28):], 0) }), segment.ErrCorrupt},
		{"zero batches", refooter(obj, func(e []byte) { be.PutUint32(e[entry(0, 32):], 0) }), segment.ErrCorrupt},
		{"chunks short of footer", refooter(obj, func(e []byte) { be.PutUint32(e[entry(1, 28):], be.Uint32(e[entry(1, 28):])-1) }), segment.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := segment.ReadFooter(tt.obj); !errors.Is(err, tt.want) {
				t.Fatalf("ReadFooter: %v, want %v", err, tt.want)
			}
		})
	}

	verifyOnly := []struct {
		name string
		obj  []byte
	}{
		{"record count", refooter(obj, func(e []byte) { be.PutUint64(e[entry(0, 36):], 3) })},
		{"batch count", refooter(obj, func(e []byte) { be.PutUint32(e[entry(0, 32):], 2) })},
		{"first timestamp", refooter(obj, func(e []byte) { be.PutUint64(e[entry(1, 44):], 999) })},
		{"max timestamp", refooter(obj, func(e []byte) { be.PutUint64(e[entry(1, 52):], 0) })},
		{"chunk boundary inside a batch", refooter(obj, func(e []byte) {
			be.PutUint32(e[entry(0, 28):], be.Uint32(e[entry(0, 28):])-1)
			be.PutUint64(e[entry(1, 20):], be.Uint64(e[entry(1, 20):])-1)
			be.PutUint32(e[entry(1, 28):], be.Uint32(e[entry(1, 28):])+1)
		})},
	}
	for _, tt := range verifyOnly {
		t.Run("verify/"+tt.name, func(t *testing.T) {
			if _, err := segment.ReadFooter(tt.obj); err != nil {
				t.Fatalf("ReadFooter should not look at chunk bytes: %v", err)
			}
			if _, err := segment.Verify(tt.obj); !errors.Is(err, segment.ErrCorrupt) {
				t.Fatalf("Verify: %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestReadFooterFromTailArguments(t *testing.T) {
	obj, _ := buildObject(t, segment.NewWriter(), []add{{topic(1), 0, batch(t, 1, 1, 1, 1)}})
	if _, err := segment.ReadFooterFromTail(obj, int64(len(obj))-1); !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("tail longer than the object: %v", err)
	}
	_, err := segment.ReadFooterFromTail(obj[len(obj)-5:], int64(len(obj)))
	var short *segment.ShortTailError
	if !errors.As(err, &short) || short.Need != segment.TrailerSize {
		t.Fatalf("5-byte tail: %v", err)
	}
	_, err = segment.ReadFooterFromTail(obj[len(obj)-segment.TrailerSize:], int64(len(obj)))
	if !errors.As(err, &short) || short.Need != segment.TrailerSize+segment.EntrySize {
		t.Fatalf("trailer-only tail: %v", err)
	}
}

func TestWriterAddErrors(t *testing.T) {
	b := batch(t, 1, 1, 1, 1)
	tests := []struct {
		name    string
		batches []byte
		want    error
	}{
		{"empty", nil, recordbatch.ErrNoBatch},
		{"truncated", b[:len(b)-1], recordbatch.ErrTruncated},
		{"trailing bytes", append(bytes.Clone(b), 1, 2), recordbatch.ErrTruncated},
		{"legacy magic", func() []byte { m := bytes.Clone(b); m[16] = 1; return m }(), recordbatch.ErrOldMagic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := segment.NewWriter()
			if _, err := w.Add(topic(1), 0, tt.batches); !errors.Is(err, tt.want) {
				t.Fatalf("Add: %v, want %v", err, tt.want)
			}
			if w.Len() != segment.HeaderSize+segment.TrailerSize || w.DataLen() != 0 {
				t.Fatalf("a failed Add changed the writer: Len %d", w.Len())
			}
		})
	}
	t.Run("after finish", func(t *testing.T) {
		w := segment.NewWriter()
		if _, err := w.Add(topic(1), 0, b); err != nil {
			t.Fatal(err)
		}
		first := bytes.Clone(w.Finish())
		if _, err := w.Add(topic(1), 0, b); !errors.Is(err, segment.ErrFinished) {
			t.Fatalf("Add after Finish: %v", err)
		}
		if !bytes.Equal(w.Finish(), first) {
			t.Fatal("second Finish changed the object")
		}
		w.Reset()
		if _, err := w.Add(topic(1), 0, b); err != nil {
			t.Fatalf("Add after Reset: %v", err)
		}
	})
}

func TestWriterLengths(t *testing.T) {
	w := segment.NewWriter()
	b := batch(t, 2, 100, 1, 1)
	for i := range 5 {
		if _, err := w.Add(topic(1), int32(i%2), b); err != nil {
			t.Fatal(err)
		}
		if w.DataLen() != (i+1)*len(b) {
			t.Fatalf("DataLen %d after %d adds of %d bytes", w.DataLen(), i+1, len(b))
		}
	}
	if want := segment.HeaderSize + 5*len(b) + 5*segment.EntrySize + segment.TrailerSize; w.Len() != want {
		t.Fatalf("Len %d, want %d", w.Len(), want)
	}
}

func TestWriterSteadyStateDoesNotAllocate(t *testing.T) {
	b := batch(t, 4, 1024, 1, 1)
	w := segment.NewWriter()
	fill := func() {
		w.Reset()
		for i := range 64 {
			if _, err := w.Add(topic(1), int32(i%8), b); err != nil {
				panic(err)
			}
		}
		w.Finish()
	}
	fill() // grow the buffers once
	if a := testing.AllocsPerRun(20, fill); a != 0 {
		t.Fatalf("a reused Writer allocated %v times per object", a)
	}
}

func TestObjectKey(t *testing.T) {
	const ms = 1764646994123 // 2025-12-02T03:43:14.123Z
	tests := []struct {
		agent string
		seq   uint64
		ms    int64
		want  string
	}{
		{"agent-1", 0, ms, "data/0029410783/001764646994123-agent-1-00000000000000000000.strd"},
		{"agent-1", 42, ms, "data/0029410783/001764646994123-agent-1-00000000000000000042.strd"},
		{"a", 1<<64 - 1, 0, "data/0000000000/000000000000000-a-18446744073709551615.strd"},
		{"host/7", 3, 59999, "data/0000000000/000000000059999-host%2F7-00000000000000000003.strd"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := segment.ObjectKey(tt.agent, tt.seq, tt.ms)
			if got != tt.want {
				t.Fatalf("ObjectKey = %q, want %q", got, tt.want)
			}
			agent, seq, at, err := segment.ParseObjectKey(got)
			if err != nil || agent != tt.agent || seq != tt.seq || at != tt.ms {
				t.Fatalf("ParseObjectKey = %q, %d, %d, %v", agent, seq, at, err)
			}
			// Apply reads the time from the key too (it refuses commits
			// of keys below the orphan horizon): both must agree.
			if mt, ok := meta.ObjectKeyTime(got); !ok || mt != tt.ms {
				t.Fatalf("meta.ObjectKeyTime = %d, %v", mt, ok)
			}
			if !strings.HasPrefix(got, segment.BucketPrefix(tt.ms)) {
				t.Fatalf("%q is not under its bucket %q", got, segment.BucketPrefix(tt.ms))
			}
		})
	}

	// Lexical order is time order, then sequence order for one agent.
	type at struct {
		ms  int64
		seq uint64
	}
	ats := []at{{0, 5}, {1, 0}, {59999, 0}, {60000, 0}, {ms, 9}, {ms, 10}, {ms, 1 << 40}, {ms + 1, 0}}
	keys := make([]string, len(ats))
	for i, a := range ats {
		keys[i] = segment.ObjectKey("agent", a.seq, a.ms)
	}
	if !slices.IsSorted(keys) {
		t.Fatalf("keys not sorted in time order: %v", keys)
	}

	for _, bad := range []string{"", "data/a/1.strd", "data/agent-1/00000000000000000042.strd",
		"snap/0029410783/001764646994123-a-00000000000000000001.strd",
		"data/0029410784/001764646994123-a-00000000000000000001.strd", // bucket disagrees
		"data/0029410783/001764646994123--00000000000000000001.strd",
		"data/0029410783/001764646994123-a-0000000000000000000x.strd",
		"data/0029410783/001764646994123-a-00000000000000000001.json",
		"data/0029410783/001764646994123-a%zz-00000000000000000001.strd"} {
		if _, _, _, err := segment.ParseObjectKey(bad); err == nil {
			t.Errorf("ParseObjectKey(%q) accepted", bad)
		}
	}
}
