package recordbatch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

var allCompressions = []recordbatch.Compression{
	recordbatch.CompressionNone,
	recordbatch.CompressionGzip,
	recordbatch.CompressionSnappy,
	recordbatch.CompressionLZ4,
	recordbatch.CompressionZstd,
}

// shapes are the batch shapes every codec is tested with.
var shapes = []struct {
	name string
	o    batchtest.Options
}{
	{"one-empty-record", batchtest.Options{}},
	{"keys-values", batchtest.Options{Records: 10, KeyBytes: 16, ValueBytes: 100}},
	{"headers", batchtest.Options{Records: 3, ValueBytes: 50, Headers: 4}},
	{"kib-records", batchtest.Options{Records: 32, ValueBytes: 1024, Seed: 7}},
	{"idempotent", batchtest.Options{Records: 5, ValueBytes: 10, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 17}},
	{"transactional", batchtest.Options{Records: 2, ValueBytes: 10, ProducerID: 43, BaseSequence: 0, Transactional: true}},
}

const maxMessageBytes = 1 << 20

func TestValidateAcceptsRealBatches(t *testing.T) {
	for _, c := range allCompressions {
		for _, s := range shapes {
			t.Run(c.String()+"/"+s.name, func(t *testing.T) {
				o := s.o
				o.Compression = c
				b := batchtest.Build(t, o)
				orig := bytes.Clone(b)

				h, err := recordbatch.Validate(b, maxMessageBytes)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if !bytes.Equal(b, orig) {
					t.Fatal("Validate modified the batch")
				}
				rb, recs := batchtest.Decode(t, b)
				want := recordbatch.Header{
					BaseOffset: rb.FirstOffset, Length: rb.Length, PartitionLeaderEpoch: rb.PartitionLeaderEpoch,
					Magic: rb.Magic, CRC: uint32(rb.CRC), Attributes: rb.Attributes, LastOffsetDelta: rb.LastOffsetDelta,
					FirstTimestamp: rb.FirstTimestamp, MaxTimestamp: rb.MaxTimestamp, ProducerID: rb.ProducerID,
					ProducerEpoch: rb.ProducerEpoch, BaseSequence: rb.FirstSequence, NumRecords: rb.NumRecords,
				}
				if h != want {
					t.Fatalf("header\n got %+v\nwant %+v (kmsg)", h, want)
				}
				if h.Compression() != c || h.Size() != len(b) || h.IsControl() || h.TimestampType() != recordbatch.CreateTime {
					t.Fatalf("accessors: compression %v size %d control %v tstype %v", h.Compression(), h.Size(), h.IsControl(), h.TimestampType())
				}
				if h.IsTransactional() != o.Transactional || h.HasProducerID() != (o.ProducerID != 0) {
					t.Fatalf("transactional %v, has producer id %v", h.IsTransactional(), h.HasProducerID())
				}
				if len(recs) != max(o.Records, 1) || !bytes.Equal(recs[len(recs)-1].Value, batchtest.Value(o, len(recs)-1)) {
					t.Fatalf("decoded %d records", len(recs))
				}
				if err := recordbatch.CheckCRC(b); err != nil {
					t.Fatalf("CheckCRC: %v", err)
				}
			})
		}
	}
}

// TestValidateRejectsFlippedByte flips every byte of real batches in turn.
// Only the partition leader epoch (bytes 12-15) is outside both the CRC and
// the header checks, as in Kafka: a broker overwrites it anyway.
func TestValidateRejectsFlippedByte(t *testing.T) {
	for _, c := range allCompressions {
		t.Run(c.String(), func(t *testing.T) {
			o := batchtest.Options{Records: 4, KeyBytes: 3, ValueBytes: 40, Compression: c, ProducerID: 9, BaseSequence: 1}
			b := batchtest.Build(t, o)
			for i := range b {
				m := bytes.Clone(b)
				m[i] ^= 0x40
				_, err := recordbatch.Validate(m, maxMessageBytes)
				switch {
				case i >= 12 && i < 16:
					if err != nil {
						t.Fatalf("byte %d (leader epoch): %v", i, err)
					}
				case err == nil:
					t.Fatalf("byte %d flipped: accepted", i)
				case i >= 17 && !errors.Is(err, recordbatch.ErrCRC):
					t.Fatalf("byte %d flipped: %v, want ErrCRC", i, err)
				}
			}
		})
	}
}

// mutate returns a modified copy of a batch, optionally with its batchLength
// and CRC recomputed so the change reaches the checks behind the CRC.
func mutate(b []byte, fix bool, f func(b []byte) []byte) []byte {
	m := f(bytes.Clone(b))
	if fix && len(m) >= recordbatch.HeaderSize {
		binary.BigEndian.PutUint32(m[8:], uint32(len(m)-recordbatch.LogOverhead))
		binary.BigEndian.PutUint32(m[17:], crc32.Checksum(m[21:], crc32.MakeTable(crc32.Castagnoli)))
	}
	return m
}

func put16(off int, v int16) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], uint16(v)); return b }
}

func put32(off int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return b }
}

func put64(off int, v int64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], uint64(v)); return b }
}

func TestValidateErrors(t *testing.T) {
	plain := batchtest.Build(t, batchtest.Options{Records: 3, KeyBytes: 2, ValueBytes: 20})
	zstd := batchtest.Build(t, batchtest.Options{Records: 3, ValueBytes: 20, Compression: recordbatch.CompressionZstd})
	idem := batchtest.Build(t, batchtest.Options{Records: 2, ProducerID: 5, BaseSequence: 0})
	one := batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 5})
	// twoRecs is the records section of a 2-record batch, for building
	// batches whose header and records disagree.
	twoRecs := batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 5})[recordbatch.HeaderSize:]

	tests := []struct {
		name     string
		batch    []byte
		max      int
		want     error
		wantCode int16
	}{
		{"empty", nil, 0, recordbatch.ErrTruncated, 2},
		{"short header", plain[:40], 0, recordbatch.ErrBatchLength, 2},
		{"truncated", plain[:len(plain)-1], 0, recordbatch.ErrTruncated, 2},
		{"trailing byte", append(bytes.Clone(plain), 0), 0, recordbatch.ErrBatchLength, 2},
		{"magic 1", mutate(plain, false, func(b []byte) []byte { b[16] = 1; return b }), 0, recordbatch.ErrOldMagic, 87},
		{"magic 0", mutate(plain, false, func(b []byte) []byte { b[16] = 0; return b }), 0, recordbatch.ErrOldMagic, 87},
		{"magic 3", mutate(plain, false, func(b []byte) []byte { b[16] = 3; return b }), 0, recordbatch.ErrMagic, 2},
		{"base offset", mutate(plain, false, put64(0, 5)), 0, recordbatch.ErrBaseOffset, 87},
		{"too large", plain, len(plain) - 1, recordbatch.ErrTooLarge, 10},
		{"exactly max", plain, len(plain), nil, 0},
		{"crc", mutate(plain, false, func(b []byte) []byte { b[len(b)-1]++; return b }), 0, recordbatch.ErrCRC, 2},
		{"codec 5", mutate(plain, true, put16(21, 5)), 0, recordbatch.ErrCompression, 76},
		{"codec 7", mutate(plain, true, put16(21, 7)), 0, recordbatch.ErrCompression, 76},
		{"zero records", mutate(plain, true, put32(57, 0)), 0, recordbatch.ErrRecordCount, 87},
		{"negative records", mutate(plain, true, func(b []byte) []byte {
			return put32(23, -2)(put32(57, -1)(b))
		}), 0, recordbatch.ErrRecordCount, 87},
		{"delta mismatch", mutate(plain, true, put32(23, 5)), 0, recordbatch.ErrRecordCount, 87},
		{"negative delta", mutate(plain, true, put32(23, -1)), 0, recordbatch.ErrRecordCount, 87},
		{"control", mutate(plain, true, put16(21, 0x20)), 0, recordbatch.ErrControlBatch, 87},
		{"idempotent without sequence", mutate(idem, true, put32(53, -1)), 0, recordbatch.ErrSequence, 87},
		{"transactional without producer", mutate(plain, true, put16(21, 0x10)), 0, recordbatch.ErrSequence, 87},
		{"log append time", mutate(plain, true, put16(21, 0x08)), 0, recordbatch.ErrTimestampType, 32},
		{"fewer records than claimed", mutate(plain, true, func(b []byte) []byte {
			return put32(23, 2)(put32(57, 3)(append(b[:recordbatch.HeaderSize], twoRecs...)))
		}), 0, recordbatch.ErrRecords, 87},
		{"more records than claimed", mutate(plain, true, func(b []byte) []byte {
			return put32(23, 0)(put32(57, 1)(append(b[:recordbatch.HeaderSize], twoRecs...)))
		}), 0, recordbatch.ErrRecords, 87},
		{"bytes after records", mutate(plain, true, func(b []byte) []byte { return append(b, 0) }), 0, recordbatch.ErrRecords, 87},
		{"record length past end", mutate(one, true, func(b []byte) []byte {
			b[recordbatch.HeaderSize] = 0x7e // varint 63, more than the batch holds
			return b
		}), 0, recordbatch.ErrRecords, 87},
		{"negative key length", mutate(plain, true, func(b []byte) []byte {
			// record: length, attributes, tsDelta 0, offsetDelta 0, key length
			b[recordbatch.HeaderSize+4] = 0x03 // zigzag -2
			return b
		}), 0, recordbatch.ErrRecords, 87},
		// A compressed batch's records are not inspected: this only
		// passes because Validate does not decompress.
		{"compressed garbage passes", mutate(zstd, true, func(b []byte) []byte {
			return append(b[:recordbatch.HeaderSize], "not zstd"...)
		}), 0, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := recordbatch.Validate(tt.batch, tt.max)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Validate: %v, want %v", err, tt.want)
			}
			if code := recordbatch.ErrorCode(err); code != tt.wantCode {
				t.Fatalf("ErrorCode(%v) = %d, want %d", err, code, tt.wantCode)
			}
		})
	}
}

// legacyMessage is a magic 0 or 1 message with a 4-byte value, enough for
// the walker and the magic checks.
func legacyMessage(magic byte) []byte {
	body := []byte{0, 0, 0, 0, magic, 0} // crc (unchecked here), magic, attributes
	if magic == 1 {
		body = binary.BigEndian.AppendUint64(body, 0) // timestamp
	}
	body = binary.BigEndian.AppendUint32(body, 0xffffffff) // null key
	body = binary.BigEndian.AppendUint32(body, 4)
	body = append(body, "abcd"...)
	m := binary.BigEndian.AppendUint64(nil, 0)
	m = binary.BigEndian.AppendUint32(m, uint32(len(body)))
	return append(m, body...)
}

func TestValidateProduce(t *testing.T) {
	plain := batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 10})
	zstd := batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 10, Compression: recordbatch.CompressionZstd})
	concat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

	tests := []struct {
		name     string
		records  []byte
		version  int16
		want     error
		wantCode int16
	}{
		{"one batch", plain, 9, nil, 0},
		{"zstd v7", zstd, 7, nil, 0},
		{"zstd v6", zstd, 6, recordbatch.ErrCompression, 76},
		{"empty", nil, 9, recordbatch.ErrNoBatch, 87},
		{"first batch truncated", plain[:len(plain)-3], 9, recordbatch.ErrNoBatch, 87},
		{"shorter than a prefix", plain[:5], 9, recordbatch.ErrNoBatch, 87},
		{"two batches", concat(plain, plain), 9, recordbatch.ErrMultipleBatches, 87},
		{"batch then partial", concat(plain, plain[:30]), 9, recordbatch.ErrTruncated, 2},
		{"magic 1 message", legacyMessage(1), 3, recordbatch.ErrOldMagic, 87},
		{"magic 0 message", legacyMessage(0), 3, recordbatch.ErrOldMagic, 87},
		{"invalid batch", mutate(plain, false, put64(0, 1)), 9, recordbatch.ErrBaseOffset, 87},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batch, h, err := recordbatch.ValidateProduce(tt.records, tt.version, maxMessageBytes)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("ValidateProduce: %v, want %v", err, tt.want)
			}
			if code := recordbatch.ErrorCode(err); code != tt.wantCode {
				t.Fatalf("ErrorCode(%v) = %d, want %d", err, code, tt.wantCode)
			}
			if err == nil && (!bytes.Equal(batch, tt.records) || h.Size() != len(batch)) {
				t.Fatalf("batch %d bytes, header size %d, records %d bytes", len(batch), h.Size(), len(tt.records))
			}
		})
	}
}

func TestSplit(t *testing.T) {
	a := batchtest.Build(t, batchtest.Options{Records: 1})
	b := batchtest.Build(t, batchtest.Options{Records: 5, ValueBytes: 30, Compression: recordbatch.CompressionLZ4})
	c := batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 3})
	legacy := legacyMessage(1)
	all := bytes.Join([][]byte{a, b, legacy, c}, nil)

	tests := []struct {
		name    string
		records []byte
		want    [][]byte
		wantErr error
	}{
		{"one", a, [][]byte{a}, nil},
		{"several with a legacy message", all, [][]byte{a, b, legacy, c}, nil},
		{"empty", nil, nil, recordbatch.ErrNoBatch},
		{"first truncated", a[:len(a)-1], nil, recordbatch.ErrNoBatch},
		{"last truncated", all[:len(all)-1], nil, recordbatch.ErrTruncated},
		{"trailing prefix fragment", append(bytes.Clone(a), 0, 0, 0), nil, recordbatch.ErrTruncated},
		{"negative length", mutate(a, false, put32(8, -1)), nil, recordbatch.ErrBatchLength},
		{"length below legacy minimum", mutate(a, false, put32(8, 13)), nil, recordbatch.ErrBatchLength},
		{"v2 length below header", mutate(a, false, put32(8, 48)), nil, recordbatch.ErrBatchLength},
		{"huge length", mutate(a, false, put32(8, 1<<31-1)), nil, recordbatch.ErrNoBatch},
		{"bad magic", mutate(a, false, func(b []byte) []byte { b[16] = 0x80; return b }), nil, recordbatch.ErrMagic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := recordbatch.Split(tt.records)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Split: %v, want %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d batches, want %d", len(got), len(tt.want))
			}
			off := 0
			for i := range got {
				if !bytes.Equal(got[i], tt.want[i]) {
					t.Fatalf("batch %d differs", i)
				}
				if &got[i][0] != &tt.records[off] {
					t.Fatalf("batch %d does not alias the input", i)
				}
				off += len(got[i])
			}
		})
	}
}

func TestAppendSplitReuse(t *testing.T) {
	rec := bytes.Repeat(batchtest.Build(t, batchtest.Options{Records: 2}), 4)
	dst := make([][]byte, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = recordbatch.AppendSplit(dst[:0], rec); err != nil || len(dst) != 4 {
			panic(fmt.Sprint(len(dst), err))
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendSplit with capacity allocated %v times per run", allocs)
	}
	before := [][]byte{[]byte("keep")}
	if got, err := recordbatch.AppendSplit(before, rec[:10]); err == nil || len(got) != 1 {
		t.Fatalf("AppendSplit on bad input: %d entries, err %v; want dst unchanged and an error", len(got), err)
	}
}

func TestValidateDoesNotAllocate(t *testing.T) {
	for _, c := range []recordbatch.Compression{recordbatch.CompressionNone, recordbatch.CompressionZstd} {
		t.Run(c.String(), func(t *testing.T) {
			b := batchtest.Build(t, batchtest.Options{Records: 16, KeyBytes: 8, ValueBytes: 100, Headers: 2, Compression: c})
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := recordbatch.Validate(b, maxMessageBytes); err != nil {
					panic(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("Validate allocated %v times per run", allocs)
			}
		})
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int16
	}{
		{"nil", nil, 0},
		{"wrapped sentinel", fmt.Errorf("partition 3: %w", recordbatch.ErrCRC), kerr.CorruptMessage.Code},
		{"kerr passes through", fmt.Errorf("x: %w", kerr.NotLeaderForPartition), kerr.NotLeaderForPartition.Code},
		{"unknown", errors.New("disk on fire"), kerr.UnknownServerError.Code},
		{"no batch beats truncated", fmt.Errorf("%w: %w", recordbatch.ErrNoBatch, recordbatch.ErrTruncated), kerr.InvalidRecord.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := recordbatch.ErrorCode(tt.err); got != tt.want {
				t.Fatalf("ErrorCode = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	b := batchtest.Build(t, batchtest.Options{Records: 3, ProducerID: 8, ProducerEpoch: 2, BaseSequence: 30})
	h, err := recordbatch.ParseHeader(b[:recordbatch.HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	if h.ProducerID != 8 || h.ProducerEpoch != 2 || h.BaseSequence != 30 || h.NumRecords != 3 || h.LastOffset() != 2 {
		t.Fatalf("header %+v", h)
	}
	if _, err := recordbatch.ParseHeader(b[:60]); !errors.Is(err, recordbatch.ErrTruncated) {
		t.Fatalf("short header: %v", err)
	}
	if _, err := recordbatch.ParseHeader(legacyMessage(1)); !errors.Is(err, recordbatch.ErrOldMagic) {
		t.Fatalf("legacy: %v", err)
	}
}

// withRecords replaces a batch's records with the given record bodies, each
// framed by its length varint, and fixes the counts, length and CRC.
func withRecords(t *testing.T, bodies ...[]byte) []byte {
	t.Helper()
	b := batchtest.Build(t, batchtest.Options{})[:recordbatch.HeaderSize]
	for _, body := range bodies {
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	n := int32(len(bodies))
	return mutate(b, true, func(b []byte) []byte { return put32(23, n-1)(put32(57, n)(b)) })
}

func TestValidateRecordFraming(t *testing.T) {
	zz := func(v int64) []byte { return binary.AppendVarint(nil, v) }
	rec := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	attrs, zero, null := []byte{0}, zz(0), zz(-1)
	tests := []struct {
		name   string
		bodies [][]byte
		ok     bool
	}{
		{"minimal record", [][]byte{rec(attrs, zero, zero, null, null, zero)}, true},
		{"null header value", [][]byte{rec(attrs, zero, zero, null, null, zz(1), zz(1), []byte("h"), null)}, true},
		{"big timestamp delta", [][]byte{rec(attrs, zz(1<<40), zero, null, null, zero)}, true},
		{"two records", [][]byte{rec(attrs, zero, zero, null, null, zero), rec(attrs, zero, zz(1), zz(2), []byte("kk"), zz(1), []byte("v"), zero)}, true},
		{"no attributes", [][]byte{{}}, false},
		{"unterminated timestamp", [][]byte{rec(attrs, []byte{0x80})}, false},
		{"offset delta beyond int32", [][]byte{rec(attrs, zero, zz(1<<40), null, null, zero)}, false},
		{"key length -2", [][]byte{rec(attrs, zero, zero, zz(-2), null, zero)}, false},
		{"key past the record", [][]byte{rec(attrs, zero, zero, zz(8), []byte("ab"))}, false},
		{"value length -2", [][]byte{rec(attrs, zero, zero, null, zz(-2), zero)}, false},
		{"negative header count", [][]byte{rec(attrs, zero, zero, null, null, zz(-1))}, false},
		{"null header key", [][]byte{rec(attrs, zero, zero, null, null, zz(1), null, null)}, false},
		{"header value -2", [][]byte{rec(attrs, zero, zero, null, null, zz(1), zz(1), []byte("h"), zz(-2))}, false},
		{"more headers than bytes", [][]byte{rec(attrs, zero, zero, null, null, zz(3), zz(1), []byte("h"), null)}, false},
		{"bytes after headers", [][]byte{rec(attrs, zero, zero, null, null, zero, []byte{9})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := recordbatch.Validate(withRecords(t, tt.bodies...), 0)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, recordbatch.ErrRecords)) {
				t.Fatalf("Validate: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
