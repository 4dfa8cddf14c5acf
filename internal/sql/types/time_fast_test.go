package types

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestISOTimestampFastPath: wherever the fast path answers, it answers
// what the full parser does, over generated near-canonical strings
// (out-of-range fields, leap days, fractions of every length, stray
// characters), and it answers for the canonical forms.
func TestISOTimestampFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	answered := 0
	for i := range 200_000 {
		y, mo, d := rng.IntN(2100), rng.IntN(14), rng.IntN(33)
		h, mi, s := rng.IntN(26), rng.IntN(62), rng.IntN(62)
		sep := " "
		if i%3 == 0 {
			sep = "T"
		}
		text := fmt.Sprintf("%04d-%02d-%02d%s%02d:%02d:%02d", y, mo, d, sep, h, mi, s)
		if n := rng.IntN(9); n > 0 {
			text += "." + fmt.Sprintf("%09d", rng.IntN(1_000_000_000))[:n]
		}
		switch rng.IntN(20) {
		case 0:
			text += "Z"
		case 1:
			text = text[:len(text)-1] + "x"
		case 2:
			text += "."
		}
		fast, ok := parseISOTimestamp(text)
		if !ok {
			continue
		}
		answered++
		for _, tz := range []bool{false, true} {
			full, err := parseTimestamp(text, tz)
			if err != nil || !full.Equal(fast) {
				t.Fatalf("%q (tz %v): fast path %v, full parser %v %v", text, tz, fast, full, err)
			}
		}
	}
	if answered < 20_000 {
		t.Fatalf("the fast path answered %d of 200,000: it should take the canonical forms", answered)
	}
	for _, text := range []string{"2026-12-07 18:50:17", "2026-12-07T18:50:17.123456", "2024-02-29 00:00:00.5"} {
		if _, ok := parseISOTimestamp(text); !ok {
			t.Errorf("%q: not taken by the fast path", text)
		}
	}
}

func BenchmarkParseTimestamp(b *testing.B) {
	for _, text := range []string{"2026-12-07 18:50:17.123", "2026-12-07 18:50:17.123+02"} {
		b.Run(text, func(b *testing.B) {
			for b.Loop() {
				if _, err := ParseTimestamp(text, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
