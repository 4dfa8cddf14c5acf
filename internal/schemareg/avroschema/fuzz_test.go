package avroschema

import "testing"

// FuzzParse: any text parses or is refused, without panicking, and a
// parsed schema can be normalized and checked against itself.
func FuzzParse(f *testing.F) {
	for _, tc := range compatCases {
		f.Add(tc.reader)
		f.Add(tc.writer)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Format{}.Parse(text, nil)
		if err != nil {
			return
		}
		_ = s.Canonical(true)
		if got := (Format{}).Compatible(s, s); got != nil {
			t.Fatalf("a schema is incompatible with itself: %q", got)
		}
	})
}
