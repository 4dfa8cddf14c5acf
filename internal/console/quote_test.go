package console

import "testing"

// TestQuoteIdent: names as PostgreSQL's quote_ident writes them, so the
// SQL page's EXPLAIN buttons name any view.
func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		"totals": "totals", "v_2": "v_2", "Totals": `"Totals"`, "2v": `"2v"`,
		"a b": `"a b"`, `q"x`: `"q""x"`, "": `""`, "été": `"été"`,
	} {
		if got := quoteIdent(in); got != want {
			t.Errorf("quoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}
