package sqltest

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/strandkafka/strand/internal/bench/nexmark"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestOracleRoundTrip loads values of every type the corpus uses and
// reads them back: what goes in must come out, exactly, with
// PostgreSQL's type names.
func TestOracleRoundTrip(t *testing.T) {
	o := NewOracle(t)
	ts := time.Date(2015, 7, 15, 0, 0, 1, 500_000_000, time.UTC)
	tbl := Table{
		Name: "t",
		Columns: []Column{{"i8", "int8"}, {"i4", "int4"}, {"f", "float8"}, {"n", "numeric(20,4)"},
			{"s", "text"}, {"ts", "timestamp"}, {"b", "bool"}, {"iv", "interval"}},
		Rows: [][]any{
			{int64(math.MaxInt64), int32(-7), 0.1, num("1234567890123456.1234"), "it's é", ts, true, pgtype.Interval{Months: 1, Days: 2, Microseconds: 3, Valid: true}},
			{int64(-1 << 53), nil, math.Inf(-1), num("-0.0001"), "", ts.Add(time.Millisecond), false, time.Second},
			{nil, int32(0), math.NaN(), nil, nil, nil, nil, nil},
		},
	}
	res := o.Query(t, []Table{tbl}, Query{Name: "all", SQL: "SELECT * FROM t"})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := Result{Name: "all", Columns: []Column{{"i8", "int8"}, {"i4", "int4"}, {"f", "float8"}, {"n", "numeric"},
		{"s", "text"}, {"ts", "timestamp"}, {"b", "bool"}, {"iv", "interval"}}, Rows: tbl.Rows}
	// Exact types, and floats to the last bit: nothing may be rounded on
	// the way through text and JSON.
	if !Equal(t, want, res, Options{Types: TypesExact, RelTol: 1e-300, AbsTol: 1e-300}) {
		t.Logf("DuckDB types: %v", res.DuckDBTypes)
	}
}

// TestOracleAgainstGo checks DuckDB's answers over generated bids with
// the same aggregates computed in Go: an independent answer that must
// agree, and that must disagree once perturbed.
func TestOracleAgainstGo(t *testing.T) {
	o := NewOracle(t)
	evs, err := GenerateNexmark(NexmarkCorpusConfig(11, 3000))
	if err != nil {
		t.Fatal(err)
	}
	type agg struct{ n, max, sum int64 }
	per := map[int64]*agg{}
	for _, ev := range evs {
		if ev.Kind != nexmark.KindBid {
			continue
		}
		a := per[ev.Bid.Auction]
		if a == nil {
			a = &agg{}
			per[ev.Bid.Auction] = a
		}
		a.n++
		a.sum += ev.Bid.Price
		a.max = max(a.max, ev.Bid.Price)
	}
	want := Result{Name: "per auction", Columns: []Column{{"auction", "int8"}, {"n", "int8"}, {"top", "int8"}, {"total", "numeric"}}}
	for id, a := range per {
		want.Rows = append(want.Rows, []any{id, a.n, a.max, a.sum})
	}
	got := o.Query(t, NexmarkTables(evs), Query{Name: "per auction",
		SQL: "SELECT auction, count(*) AS n, max(price) AS top, sum(price) AS total FROM bid GROUP BY auction"})[0]
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	if len(got.Rows) < 10 {
		t.Fatalf("only %d auctions with bids", len(got.Rows))
	}
	Equal(t, want, got, Options{Types: TypesExact})
	// One count off by one must show as one missing and one extra row.
	want.Rows[0] = append([]any{}, want.Rows[0]...)
	want.Rows[0][1] = want.Rows[0][1].(int64) + 1
	diff, err := Compare(want, got, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff, "1 missing, 1 extra") {
		t.Fatalf("a perturbed count was not reported as one missing and one extra row:\n%s", diff)
	}
}

func TestOracleErrors(t *testing.T) {
	o := NewOracle(t)
	tbl := Table{Name: "t", Columns: []Column{{"x", "int8"}}, Rows: [][]any{{int64(1)}, {int64(2)}, {int64(3)}}}
	// A failing query reports DuckDB's message; the queries after it
	// still run.
	res := o.Query(t, []Table{tbl},
		Query{Name: "bad", SQL: "SELEC 1"},
		Query{Name: "missing", SQL: "SELECT * FROM nope"},
		Query{Name: "good", SQL: "SELECT sum(x) AS s FROM t"})
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "syntax error") {
		t.Errorf("bad query: err %v, want a syntax error", res[0].Err)
	}
	if res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "nope") {
		t.Errorf("missing table: err %v, want one naming it", res[1].Err)
	}
	if res[2].Err != nil || len(res[2].Rows) != 1 {
		t.Errorf("good query after bad ones: %+v", res[2])
	}
	// A value the column's type cannot hold fails the batch, naming it.
	_, err := o.Run(context.Background(), []Table{{Name: "t", Columns: []Column{{"x", "int8"}}, Rows: [][]any{{"abc"}}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "load t") {
		t.Errorf("bad value: err %v, want the load to fail", err)
	}
	// A row of the wrong width is refused before DuckDB runs.
	if _, err := o.Run(context.Background(), []Table{{Name: "t", Columns: []Column{{"x", "int8"}}, Rows: [][]any{{1, 2}}}}, nil); err == nil {
		t.Error("a row of 2 values for 1 column was accepted")
	}
	// Results are bounded: more rows than MaxRows is an error, not a
	// silent truncation.
	bounded := *o
	bounded.MaxRows = 2
	res2, err := bounded.Run(context.Background(), []Table{tbl}, []Query{{Name: "all", SQL: "SELECT x FROM t"}})
	if err != nil {
		t.Fatal(err)
	}
	if res2[0].Err == nil || !strings.Contains(res2[0].Err.Error(), "more than 2 rows") {
		t.Errorf("unbounded result: err %v", res2[0].Err)
	}
}
