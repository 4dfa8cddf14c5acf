package codec

import (
	"bytes"
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// A batch built by AppendBatch with every codec reads back with kmsg
// and kgo's decoder (batchtest.Decode) as the records given, and with
// RecordsOf and EachRecord the same; the CRC holds; the delete horizon
// stands in the first timestamp while record timestamps stay.
func TestRoundTrip(t *testing.T) {
	const base, horizon = 100, 5_000
	in := []recordbatch.Record{
		{Offset: base, Timestamp: 1_000, Key: []byte("a"), Value: []byte("1"), Headers: []byte{0}},
		{Offset: base + 3, Timestamp: 1_007, Key: []byte("b"), Headers: []byte{0}}, // a tombstone
	}
	for c := recordbatch.CompressionNone; c <= recordbatch.CompressionZstd; c++ {
		t.Run(c.String(), func(t *testing.T) {
			var raw []byte
			for _, r := range in {
				raw = recordbatch.AppendRecord(raw, r, base, horizon)
			}
			b, err := AppendBatch(nil, recordbatch.BatchSpec{BaseOffset: base, LastOffsetDelta: 4, Compression: c,
				HasDeleteHorizon: true, DeleteHorizon: horizon, MaxTimestamp: 1_007,
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 2}, raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := recordbatch.CheckCRC(b); err != nil {
				t.Fatal(err)
			}
			rb, recs := batchtest.Decode(t, b)
			if rb.Attributes&0x07 != int16(c) || rb.Attributes&0x40 == 0 || rb.FirstTimestamp != horizon || len(recs) != 2 {
				t.Fatalf("header %+v, %d records", rb, len(recs))
			}
			h, _ := recordbatch.ParseHeader(b)
			if hz, ok := h.DeleteHorizon(); !ok || hz != horizon {
				t.Fatalf("DeleteHorizon %d %v", hz, ok)
			}
			dec, err := RecordsOf(b, h, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			err = recordbatch.EachRecord(dec, h, func(_ int, r recordbatch.Record) error {
				w := in[i]
				if r.Offset != w.Offset || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || (r.Value == nil) != (w.Value == nil) || !bytes.Equal(r.Value, w.Value) {
					t.Fatalf("record %d: %+v, want %+v", i, r, w)
				}
				if rr := recs[i]; rb.FirstOffset+int64(rr.OffsetDelta) != w.Offset || rb.FirstTimestamp+rr.TimestampDelta64 != w.Timestamp {
					t.Fatalf("kmsg record %d: %+v", i, rr)
				}
				i++
				return nil
			})
			if err != nil || i != 2 {
				t.Fatalf("EachRecord: %v after %d", err, i)
			}
			if _, err := RecordsOf(b, h, 1); c != recordbatch.CompressionNone && err == nil {
				t.Fatal("no error past maxBytes")
			}
		})
	}
}
