package exec

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

func plan(t testing.TB, cat Catalog, sql string, opts Options, params ...uint32) (*Query, error) {
	t.Helper()
	stmts, err := parse.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	return Plan(cat, stmts[0].Node.GetSelectStmt(), params, opts)
}

func runAll(q *Query, params ...any) ([]types.Row, error) {
	it, err := q.Run(context.Background(), params, time.Unix(0, 0))
	if err != nil {
		return nil, err
	}
	var out []types.Row
	for {
		row, ok, err := it.Next(context.Background())
		if err != nil || !ok {
			return out, err
		}
		out = append(out, row)
	}
}

// TestMemoryBudget: a sort, a hash aggregation, a DISTINCT and a join
// over more than the budget fail with 53200; the same queries under a
// larger budget succeed, so the budget and not the query is what fails.
func TestMemoryBudget(t *testing.T) {
	rel := &MemRelation{Cols: []Column{{Name: "k", Type: types.Int8}, {Name: "s", Type: types.Text}}}
	for i := range 5000 {
		rel.Rows = append(rel.Rows, types.Row{int64(i), fmt.Sprintf("row %d with some padding text", i)})
	}
	cat := MemCatalog{"big": rel}
	for _, sql := range []string{
		"SELECT * FROM big ORDER BY s",
		"SELECT k, count(*) FROM big GROUP BY k",
		"SELECT DISTINCT s FROM big",
		"SELECT a.k FROM big a JOIN big b ON a.k = b.k",
		"SELECT count(DISTINCT s) FROM big",
		"SELECT k FROM big UNION SELECT k FROM big",
	} {
		small, err := plan(t, cat, sql, Options{MemoryBudget: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runAll(small); sqlerr.Code(err) != sqlerr.OutOfMemory {
			t.Errorf("%s under 64 KiB: got %v, want 53200", sql, err)
		}
		large, err := plan(t, cat, sql, Options{MemoryBudget: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if rows, err := runAll(large); err != nil || len(rows) == 0 {
			t.Errorf("%s under 64 MiB: %d rows, %v", sql, len(rows), err)
		}
	}
	// Streaming operators hold nothing: a scan with a filter and a
	// LIMIT runs under any budget.
	q, err := plan(t, cat, "SELECT k FROM big WHERE k % 2 = 0 LIMIT 10", Options{MemoryBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := runAll(q); err != nil || len(rows) != 10 {
		t.Fatalf("streaming query: %d rows, %v", len(rows), err)
	}
}

// TestParamInference: parameters take their types from their context,
// as PostgreSQL infers them, and a declared type wins.
func TestParamInference(t *testing.T) {
	cat := MemCatalog{"t": &MemRelation{Cols: []Column{{Name: "a", Type: types.Int8}, {Name: "b", Type: types.Text}, {Name: "c", Type: types.Numeric}}}}
	for _, c := range []struct {
		sql      string
		declared []uint32
		want     []types.Type
	}{
		{"SELECT a FROM t WHERE a = $1 AND b = $2", nil, []types.Type{types.Int8, types.Text}},
		{"SELECT $1::int4 + c FROM t", nil, []types.Type{types.Int4}},
		{"SELECT c * $1 FROM t", nil, []types.Type{types.Numeric}},
		{"SELECT $1", nil, []types.Type{types.Text}},
		{"SELECT a FROM t WHERE a = $1", []uint32{types.OIDInt4}, []types.Type{types.Int4}},
		{"SELECT a FROM t LIMIT $1", nil, []types.Type{types.Int8}},
		{"SELECT a FROM t WHERE a IN ($1, $2)", nil, []types.Type{types.Int8, types.Int8}},
	} {
		q, err := plan(t, cat, c.sql, Options{}, c.declared...)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		got := q.Params()
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: params %v, want %v", c.sql, got, c.want)
		}
	}
}
