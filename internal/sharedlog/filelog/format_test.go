package filelog

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// segmentBytes builds a segment file holding payloads.
func segmentBytes(base sharedlog.Pos, payloads ...[]byte) []byte {
	b := encodeSegmentHeader(base)
	for _, p := range payloads {
		b = appendEntry(b, p)
	}
	return b
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte{})
	f.Add(appendEntry(nil, nil))
	f.Add(appendEntry(nil, []byte("hello")))
	f.Add(append(appendEntry(nil, []byte("hello")), 1, 2, 3))
	f.Add(appendEntry(nil, []byte("hello"))[:9])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, n, err := decodeEntry(b)
		if err == nil {
			if n > len(b) || n != entryHeaderBytes+len(payload) {
				t.Fatalf("decoded %d bytes with a %d-byte payload from %d bytes", n, len(payload), len(b))
			}
			if cap(payload) != len(payload) {
				t.Fatalf("payload capacity %d beyond its length %d: appending would overwrite the next entry", cap(payload), len(payload))
			}
			if re := appendEntry(nil, payload); !bytes.Equal(re, b[:n]) {
				t.Fatalf("re-encoding %q gives %x, decoded from %x", payload, re, b[:n])
			}
		}
		// Every payload round-trips.
		enc := appendEntry(nil, b)
		got, n, err := decodeEntry(enc)
		if err != nil || n != len(enc) || !bytes.Equal(got, b) {
			t.Fatalf("round trip of %d bytes: %d bytes back, n %d, %v", len(b), len(got), n, err)
		}
	})
}

// FuzzScanSegment feeds arbitrary segment files to the recovery scan: it
// must not panic, must allocate in proportion to the file rather than to
// any length field in it, and must only accept entries whose checksums
// match, back to back from the header.
func FuzzScanSegment(f *testing.F) {
	three := segmentBytes(7, []byte("a"), nil, bytes.Repeat([]byte("xyz"), 100))
	f.Add([]byte{})
	f.Add(segmentBytes(0))
	f.Add(three)
	f.Add(three[:len(three)-1])
	f.Add(three[:segmentHeaderBytes+5])
	flipped := bytes.Clone(three)
	flipped[segmentHeaderBytes+entryHeaderBytes] ^= 1
	f.Add(flipped)
	f.Add(append(segmentBytes(3), 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0))
	f.Add(append(bytes.Clone(three), make([]byte, 100)...))
	f.Add(bytes.Repeat([]byte{0}, 100))
	f.Add(append(append(bytes.Clone(three), make([]byte, 100)...), 1))
	f.Add(append(bytes.Clone(three), 0, 0, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := scanSegment(bytes.NewReader(data), int64(len(data)))
		runtime.ReadMemStats(&after)
		// The read buffer (at most the file), the offsets (one int64 per
		// entry of at least 8 bytes, times slice growth) and fixed bits.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(6*len(data)+8<<10) {
			t.Fatalf("scanning %d bytes allocated %d", len(data), alloc)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("scan failed with %v, want ErrCorrupt", err)
			}
			return
		}
		off := int64(segmentHeaderBytes)
		for i, o := range s.offsets {
			if o != off {
				t.Fatalf("entry %d at offset %d, want %d", i, o, off)
			}
			_, n, err := decodeEntry(data[o:])
			if err != nil {
				t.Fatalf("scan accepted entry %d at %d, which does not decode: %v", i, o, err)
			}
			off += int64(n)
		}
		if s.end != off {
			t.Fatalf("end %d, entries end at %d", s.end, off)
		}
		// Clean: the file ends after the last entry, or in zeros alone
		// (the writer's preallocation).
		clean := !slices.ContainsFunc(data[s.end:], func(c byte) bool { return c != 0 })
		if (s.torn == nil) != clean {
			t.Fatalf("torn = %v with end %d of %d bytes", s.torn, s.end, len(data))
		}
		if s.torn != nil {
			if _, _, err := decodeEntry(data[s.end:]); err == nil {
				t.Fatalf("scan stopped at %d (%v) before an intact entry", s.end, s.torn)
			}
		}
	})
}

func TestStateRoundTrip(t *testing.T) {
	for _, st := range []state{{}, {sealed: true, sealedTail: 9, trimmed: 4}, {trimmed: 1 << 60}} {
		got, err := decodeState(st.encode())
		if err != nil || got != st {
			t.Errorf("round trip of %+v = (%+v, %v)", st, got, err)
		}
		b := st.encode()
		for i := range b {
			b[i] ^= 0x10
			if _, err := decodeState(b); !errors.Is(err, ErrCorrupt) {
				t.Errorf("state with byte %d flipped decoded: %v", i, err)
			}
			b[i] ^= 0x10
		}
	}
}
