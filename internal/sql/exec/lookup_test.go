package exec

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

// keyedRelation is a MemRelation that can look up by equalities: it
// records what it was asked and returns the rows matching the first
// equality only (a superset, as a view's index prefix gives).
type keyedRelation struct {
	*MemRelation
	asked []string
}

func (k *keyedRelation) ScanEqual(ctx context.Context, cols []int, vals types.Row) (RowIter, error) {
	k.asked = append(k.asked, fmt.Sprint(cols, vals))
	sub := &MemRelation{Cols: k.Cols}
	for _, r := range k.Rows {
		if types.Compare(r[cols[0]], vals[0]) == 0 {
			sub.Rows = append(sub.Rows, r)
		}
	}
	return sub.Scan(ctx)
}

// TestScanEqual: a WHERE's equalities on constants and parameters reach
// a relation that can look them up, with values it can key on; the
// answer is the full scan's in every case (the relation's superset is
// filtered); what cannot be a lookup (a float column, OR, a column on
// both sides, a WITH query) scans.
func TestScanEqual(t *testing.T) {
	mem := &MemRelation{Cols: []Column{{Name: "a", Type: types.Int8}, {Name: "b", Type: types.Text}, {Name: "f", Type: types.Float8}}}
	for i := range 200 {
		mem.Rows = append(mem.Rows, types.Row{int64(i % 20), fmt.Sprint("s", i%7), float64(i % 3)})
	}
	keyed := &keyedRelation{MemRelation: mem}
	for _, c := range []struct {
		sql    string
		params []any
		asked  string // "" : scanned whole
	}{
		{"SELECT * FROM t WHERE a = 3", nil, "[0] [3]"},
		{"SELECT * FROM t WHERE 3 = a", nil, "[0] [3]"},
		{"SELECT * FROM t WHERE a = $1", []any{int64(5)}, "[0] [5]"},
		{"SELECT count(*) FROM t WHERE a = $1 AND b = 's2'", []any{int64(5)}, "[0 1] [5 s2]"},
		{"SELECT * FROM t WHERE b = 's1' AND a = 4", nil, "[1 0] [s1 4]"},
		{"SELECT * FROM t x WHERE x.a = 7::int2", nil, "[0] [7]"},
		{"SELECT * FROM t WHERE a = $1", []any{nil}, ""},
		{"SELECT * FROM t WHERE a = 3.0", nil, ""},
		{"SELECT * FROM t WHERE f = 1", nil, ""},
		{"SELECT * FROM t WHERE a = 3 OR a = 4", nil, ""},
		{"SELECT * FROM t WHERE a = a", nil, ""},
		{"WITH w AS (SELECT * FROM t) SELECT * FROM w WHERE a = 3", nil, ""},
		{"SELECT * FROM t WHERE a = 3 AND a = 4", nil, "[0 0] [3 4]"},
	} {
		t.Run(c.sql, func(t *testing.T) {
			keyed.asked = nil
			q, err := plan(t, MemCatalog{"t": keyed}, c.sql, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := runAll(q, c.params...)
			if err != nil {
				t.Fatal(err)
			}
			full, err := plan(t, MemCatalog{"t": mem}, c.sql, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := runAll(full, c.params...)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("looked up %v\nscanned   %v", got, want)
			}
			if asked := fmt.Sprint(keyed.asked); c.asked == "" && len(keyed.asked) > 0 || c.asked != "" && !slices.Equal(keyed.asked, []string{c.asked}) {
				t.Fatalf("asked %s, want %q", asked, c.asked)
			}
		})
	}
}
