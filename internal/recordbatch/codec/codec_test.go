package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"

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
			dec, err := RecordsOf(b, h)
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
		})
	}
}

// Records that decompress past the bound are refused, for every codec,
// in the framings producers use (snappy raw, as franz-go writes it, and
// xerial, as the Java producer does); at the bound they decode. The
// bound here is 1 MiB, MaxRecordsBytes being slow to compress in a test.
func TestDecompressionBound(t *testing.T) {
	const max = 1 << 20
	for c := recordbatch.CompressionGzip; c <= recordbatch.CompressionZstd; c++ {
		t.Run(c.String(), func(t *testing.T) {
			for _, n := range []int{max, max + 1} {
				b, err := AppendBatch(nil, recordbatch.BatchSpec{Compression: c, NumRecords: 1}, make([]byte, n))
				if err != nil {
					t.Fatal(err)
				}
				out, err := decompress(c, b[recordbatch.HeaderSize:], max)
				if n > max && err != errTooLarge || n <= max && (err != nil || len(out) != n) {
					t.Fatalf("%d bytes: %d out, %v", n, len(out), err)
				}
			}
		})
	}
	t.Run("snappy xerial", func(t *testing.T) {
		src := append(append([]byte{}, xerialPrefix...), 0, 0, 0, 1, 0, 0, 0, 1)
		chunk := s2.EncodeSnappy(nil, make([]byte, max/2))
		for range 2 {
			src = binary.BigEndian.AppendUint32(src, uint32(len(chunk)))
			src = append(src, chunk...)
		}
		if out, err := decompress(recordbatch.CompressionSnappy, src, max); err != nil || len(out) != max {
			t.Fatalf("at the bound: %d out, %v", len(out), err)
		}
		if _, err := decompress(recordbatch.CompressionSnappy, src, max-1); err != errTooLarge {
			t.Fatalf("past the bound: %v", err)
		}
	})
	// Through RecordsOf, the refusal is ErrRecords (INVALID_RECORD).
	b, _ := AppendBatch(nil, recordbatch.BatchSpec{Compression: recordbatch.CompressionZstd, NumRecords: 1}, make([]byte, MaxRecordsBytes+1))
	h, _ := recordbatch.ParseHeader(b)
	if _, err := RecordsOf(b, h); !errors.Is(err, recordbatch.ErrRecords) {
		t.Fatalf("RecordsOf past MaxRecordsBytes: %v", err)
	}
}
