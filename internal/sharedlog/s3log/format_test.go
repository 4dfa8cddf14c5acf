package s3log

import (
	"bytes"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

// FuzzDecodeSlot: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to the same bytes. The seeds run in every go test.
func FuzzDecodeSlot(f *testing.F) {
	tok := slotlog.Token{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, s := range []slotlog.Slot{
		{Pos: 0, Kind: slotlog.KindEntry, Token: tok, Data: []byte{}},
		{Pos: 7, Kind: slotlog.KindEntry, Token: tok, Data: []byte("entry")},
		{Pos: 1<<64 - 1, Kind: slotlog.KindSeal, Token: tok},
	} {
		b, err := encodeSlot(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint64(s.Pos), b, false)
		f.Add(uint64(s.Pos), b[:min(len(b), entryHeader)], true)
		f.Add(uint64(s.Pos)+1, b, false)
		corrupt := bytes.Clone(b)
		corrupt[len(corrupt)-1] ^= 1
		f.Add(uint64(s.Pos), corrupt, false)
	}
	f.Fuzz(func(t *testing.T, pos uint64, b []byte, headerOnly bool) {
		s, err := decodeSlot(sharedlog.Pos(pos), b, headerOnly)
		if err != nil || headerOnly {
			return
		}
		again, err := encodeSlot(s)
		if err != nil {
			t.Fatalf("decoded slot does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip changed the bytes:\n got %x\nwant %x", again, b)
		}
	})
}

func TestSlotKeyOrder(t *testing.T) {
	s := &store{prefix: "p/"}
	positions := []sharedlog.Pos{0, 1, 2, 255, 256, 1 << 40, 1<<64 - 1}
	for i := 1; i < len(positions); i++ {
		lo, hi := s.slotKey(positions[i-1]), s.slotKey(positions[i])
		if hi >= lo {
			t.Fatalf("key of %d (%s) does not sort before key of %d (%s)", positions[i], hi, positions[i-1], lo)
		}
	}
	for _, p := range positions {
		got, err := s.parseSlotKey(s.slotKey(p))
		if err != nil || got != p {
			t.Fatalf("parseSlotKey(slotKey(%d)) = (%d, %v)", p, got, err)
		}
	}
	if _, err := s.parseSlotKey("p/slots/zz"); err == nil {
		t.Fatal("parseSlotKey accepted a bad key")
	}
}
