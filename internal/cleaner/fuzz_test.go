package cleaner

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// FuzzBatch feeds Index and Filter.Batch a batch of any bytes with a
// good CRC (the cleaner reads only CRC-checked batches, so the fuzzer
// must get past it to reach the records): no panic, and what Batch
// returns without an error is whole batches with good CRCs and the
// input's offsets.
func FuzzBatch(f *testing.F) {
	for _, s := range []spec{
		{recs: []rec{{[]byte("a"), []byte("1")}, {[]byte("a"), nil}, {nil, []byte("x")}}},
		{recs: []rec{{[]byte("b"), []byte("2")}}, codec: recordbatch.CompressionZstd, pid: 3, txn: true},
		{recs: []rec{{[]byte("c"), nil}}, codec: recordbatch.CompressionGzip},
	} {
		f.Add(build(f, s), int64(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, now int64) {
		if len(b) >= recordbatch.HeaderSize {
			binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
		}
		h, err := recordbatch.ParseHeader(b)
		if err != nil || h.Size() != len(b) {
			return
		}
		m := NewOffsetMap(1 << 16)
		ab := NewAborted([]AbortedTxn{{ProducerID: 3, FirstOffset: 0, LastOffset: 5}})
		if _, err := Index(m, b, ab); err != nil {
			return
		}
		fl := &Filter{Map: m, Now: now, DeleteRetentionMs: 10, Aborted: ab, End: m.Latest() + 1}
		out, _, err := fl.Batch(nil, b)
		if err != nil || len(out) == 0 {
			return
		}
		oh, err := recordbatch.ParseHeader(out)
		if err != nil || recordbatch.CheckCRC(out) != nil || oh.BaseOffset != h.BaseOffset || oh.LastOffsetDelta != h.LastOffsetDelta {
			t.Fatalf("output %x: %v (header %+v, input %+v)", out, err, oh, h)
		}
	})
}
