package planted

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParse(t *testing.T) {
	bug, tg, err := Parse("drop-acked:a/b/3/17")
	if err != nil || bug != BugDropAcked || tg != (Target{Topic: "a/b", Partition: 3, Offset: 17}) {
		t.Fatalf("Parse = %q, %+v, %v", bug, tg, err)
	}
	for _, bad := range []string{"", "drop-acked", "nap:t/0/1", "drop-acked:t/0", "drop-acked:/0/1", "expose-aborted:t/x/1", "expose-aborted:t/0/-1"} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// batch encodes an uncompressed batch at base holding one record per
// value, with offset deltas 0, 1, ...
func batch(base int64, values ...string) []byte {
	b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: int32(len(values) - 1), ProducerID: -1, FirstSequence: -1, NumRecords: int32(len(values))}
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)
		// AppendTo writes the record's Length as given: fix it up.
		var rest []byte
		_, n := binary.Varint(body)
		rest = body[n:]
		b.Records = binary.AppendVarint(b.Records, int64(len(rest)))
		b.Records = append(b.Records, rest...)
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], castagnoli))
	return out
}

// decode returns offset:value of every record in records, checking each
// batch's CRC.
func decode(t *testing.T, records []byte) []string {
	t.Helper()
	var out []string
	for rest := records; len(rest) > 0; {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(rest); err != nil {
			t.Fatalf("decode: %v", err)
		}
		size := 12 + int(b.Length)
		if got := crc32.Checksum(rest[21:size], castagnoli); uint32(b.CRC) != got {
			t.Fatalf("batch at %d: CRC %x, computed %x", b.FirstOffset, uint32(b.CRC), got)
		}
		recs := b.Records
		for range b.NumRecords {
			var r kmsg.Record
			length, n := binary.Varint(recs)
			if err := r.ReadFrom(recs[:n+int(length)]); err != nil {
				t.Fatalf("record: %v", err)
			}
			out = append(out, string(rune('0'+b.FirstOffset+int64(r.OffsetDelta)))+":"+string(r.Value))
			recs = recs[n+int(length):]
		}
		rest = rest[size:]
	}
	return out
}

func TestDropRecord(t *testing.T) {
	records := slices.Concat(batch(0, "a", "b", "c"), batch(3, "d"), batch(4, "e", "f"))
	tests := []struct {
		off  int64
		want []string
	}{
		{1, []string{"0:a", "2:c", "3:d", "4:e", "5:f"}},
		{3, []string{"0:a", "1:b", "2:c", "4:e", "5:f"}},
		{5, []string{"0:a", "1:b", "2:c", "3:d", "4:e"}},
		{9, []string{"0:a", "1:b", "2:c", "3:d", "4:e", "5:f"}},
	}
	for _, tc := range tests {
		if got := decode(t, DropRecord(records, tc.off)); !slices.Equal(got, tc.want) {
			t.Errorf("DropRecord(%d) = %v, want %v", tc.off, got, tc.want)
		}
	}
}

// TestNotPlanted checks that a build without the tag plants nothing,
// whatever the environment says.
func TestNotPlanted(t *testing.T) {
	t.Setenv(EnvBug, "drop-acked:t/0/0")
	if _, ok := DropAcked(); ok && !plantedBuild {
		t.Fatal("DropAcked reports a bug in a build without strand_planted")
	}
	if _, ok := ExposeAborted(); ok {
		t.Fatal("ExposeAborted reports a bug that was not selected")
	}
}
