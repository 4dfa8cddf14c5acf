package flow

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/sql/types"
)

// The oracle test: corpus queries built by hand as dataflows (what the
// planner will compile them into), fed the whole keyed history of
// sqltest.SmallChanges in random epochs, must end with the contents
// DuckDB computes for the query over the history's final state. Each
// runs over MemStore and PebbleStore with the same epochs, whose
// outputs must agree epoch by epoch, and over a second batching.

// Input numbers: every graph declares customers, products, orders in
// this order.
const (
	inCustomers = iota
	inProducts
	inOrders
)

// Column numbers of the small tables.
const (
	cID, cName, cCity, cTier, cSignup                               = 0, 1, 2, 3, 4
	pID, pName, pCategory, pListPrice                               = 0, 1, 2, 3
	oID, oCustomer, oProduct, oQty, oPrice, oDiscount, oStatus, oTS = 0, 1, 2, 3, 4, 5, 6, 7
	customerWidth, productWidth, orderWidth                         = 5, 4, 8
)

// oracleQuery is a corpus query and its dataflow.
type oracleQuery struct {
	name  string // corpus file name without .sql
	index *IndexSpec
	build func(g *Graph, customers, products, orders Node) Node
	// emitOnClose windows: the history runs under a zero watermark and
	// a last epoch's watermark closes every window.
	closeAll bool
}

func col(i int) Expr { return func(r types.Row) (any, error) { return r[i], nil } }

func add(g *Graph, op Operator, ins ...Node) Node { return g.Add(fmt.Sprintf("%T", op), op, ins...) }

func project(g *Graph, n Node, cols ...int) Node { return add(g, &Project{Cols: cols}, n) }

func where(g *Graph, n Node, pred func(types.Row) bool) Node {
	return add(g, &Filter{Pred: func(r types.Row) (any, error) { return pred(r), nil }}, n)
}

func aggregate(g *Graph, n Node, groupBy []int, calls ...AggCall) Node {
	return add(g, &Aggregate{GroupBy: groupBy, Aggs: calls}, n)
}

func join(g *Graph, kind JoinKind, l Node, lw, lk int, r Node, rw, rk int) Node {
	return add(g, &Join{Kind: kind, LeftKey: []int{lk}, RightKey: []int{rk}, LeftWidth: lw, RightWidth: rw}, l, r)
}

// mulNumeric is int4 * numeric, exact.
func mulNumeric(a, b any) (any, error) {
	if a == nil || b == nil {
		return nil, nil
	}
	r := new(apd.Decimal)
	_, err := apd.BaseContext.Mul(r, apd.New(int64(a.(int32)), 0), b.(*apd.Decimal))
	return r, err
}

var twentyFive = apd.New(25, 0)
var ten = apd.New(10, 0)

func uniqueBy(cols ...int) *IndexSpec { return &IndexSpec{KeyCols: cols, Unique: true} }

var oracleQueries = []oracleQuery{
	{name: "011_count", build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, nil, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Count, Col: oDiscount}, AggCall{Kind: Count, Col: oCustomer})
	}},
	{name: "012_sum_avg", build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, nil, AggCall{Kind: Sum, Col: oQty}, AggCall{Kind: Sum, Col: oPrice}, AggCall{Kind: Avg, Col: oQty}, AggCall{Kind: Avg, Col: oPrice}, AggCall{Kind: Sum, Col: oDiscount}, AggCall{Kind: Avg, Col: oDiscount})
	}},
	{name: "013_min_max", build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, nil, AggCall{Kind: Min, Col: oPrice}, AggCall{Kind: Max, Col: oPrice}, AggCall{Kind: Min, Col: oStatus}, AggCall{Kind: Max, Col: oStatus},
			AggCall{Kind: Min, Col: oTS}, AggCall{Kind: Max, Col: oTS}, AggCall{Kind: Min, Col: oDiscount}, AggCall{Kind: Max, Col: oDiscount})
	}},
	{name: "014_group_by", index: uniqueBy(0), build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, []int{oStatus}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Sum, Col: oQty}, AggCall{Kind: Min, Col: oPrice}, AggCall{Kind: Max, Col: oPrice}, AggCall{Kind: Avg, Col: oQty})
	}},
	{name: "015_group_by_nullable_key", index: uniqueBy(0), build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, []int{oCustomer}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Sum, Col: oPrice})
	}},
	{name: "016_group_by_expression", index: uniqueBy(0, 1), build: func(g *Graph, _, _, o Node) Node {
		m := add(g, &Map{Exprs: []Expr{
			func(r types.Row) (any, error) { return r[oQty].(int32) % 2, nil },
			func(r types.Row) (any, error) {
				if types.Compare(r[oPrice], twentyFive) >= 0 {
					return "high", nil
				}
				return "low", nil
			},
		}}, o)
		return aggregate(g, m, []int{0, 1}, AggCall{Kind: CountStar, Col: 0})
	}},
	{name: "017_group_by_two_keys", index: uniqueBy(0, 1), build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, []int{oStatus, oProduct}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Sum, Col: oQty})
	}},
	{name: "018_having", build: func(g *Graph, _, _, o Node) Node {
		a := aggregate(g, o, []int{oCustomer}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Max, Col: oPrice})
		return where(g, a, func(r types.Row) bool { return r[1].(int64) >= 3 && types.Compare(r[2], ten) > 0 })
	}},
	{name: "019_count_distinct", index: uniqueBy(0), build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, []int{oCustomer}, AggCall{Kind: CountDistinct, Col: oProduct}, AggCall{Kind: CountDistinct, Col: oStatus}, AggCall{Kind: CountStar, Col: 0})
	}},
	{name: "020_distinct", build: func(g *Graph, _, _, o Node) Node {
		return add(g, &Distinct{}, project(g, o, oStatus, oQty))
	}},
	{name: "021_distinct_nulls", build: func(g *Graph, c, _, _ Node) Node {
		return add(g, &Distinct{}, project(g, c, cCity))
	}},
	{name: "022_inner_join", build: func(g *Graph, c, _, o Node) Node {
		oo := where(g, o, func(r types.Row) bool { return r[oQty].(int32) > 1 })
		cc := where(g, c, func(r types.Row) bool { return r[cTier] != nil })
		j := join(g, InnerJoin, oo, orderWidth, oCustomer, cc, customerWidth, cID)
		return project(g, j, oID, orderWidth+cName, orderWidth+cCity, oPrice)
	}},
	{name: "023_left_join", build: func(g *Graph, c, _, o Node) Node {
		j := join(g, LeftJoin, c, customerWidth, cID, o, orderWidth, oCustomer)
		return project(g, j, cID, cName, customerWidth+oID, customerWidth+oPrice)
	}},
	{name: "024_right_join", build: func(g *Graph, c, _, o Node) Node {
		j := join(g, RightJoin, c, customerWidth, cID, o, orderWidth, oCustomer)
		return project(g, j, cName, customerWidth+oID, customerWidth+oCustomer)
	}},
	{name: "025_full_join", build: func(g *Graph, c, _, o Node) Node {
		j := join(g, FullJoin, c, customerWidth, cID, o, orderWidth, oCustomer)
		return project(g, j, cID, customerWidth+oID, customerWidth+oCustomer)
	}},
	{name: "026_three_way_join", build: func(g *Graph, c, p, o Node) Node {
		oc := join(g, InnerJoin, o, orderWidth, oCustomer, c, customerWidth, cID)
		ocp := join(g, InnerJoin, oc, orderWidth+customerWidth, oProduct, p, productWidth, pID)
		base := orderWidth + customerWidth
		return add(g, &Map{Exprs: []Expr{col(oID), col(orderWidth + cName), col(base + pName), col(base + pCategory),
			func(r types.Row) (any, error) { return mulNumeric(r[oQty], r[oPrice]) }}}, ocp)
	}},
	{name: "028_join_aggregate", index: uniqueBy(0), build: func(g *Graph, _, p, o Node) Node {
		j := join(g, InnerJoin, o, orderWidth, oProduct, p, productWidth, pID)
		m := add(g, &Map{Exprs: []Expr{col(orderWidth + pCategory),
			func(r types.Row) (any, error) { return mulNumeric(r[oQty], r[oPrice]) }, col(oPrice)}}, j)
		return aggregate(g, m, []int{0}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Sum, Col: 1}, AggCall{Kind: Max, Col: 2})
	}},
	{name: "034_topn_row_number", index: &IndexSpec{KeyCols: []int{0}}, build: func(g *Graph, _, _, o Node) Node {
		t := add(g, &TopN{PartitionBy: []int{oCustomer}, OrderBy: []SortKey{{Col: oPrice, Desc: true}, {Col: oID}}, Limit: 2, RowNumber: true}, o)
		return project(g, t, oCustomer, oID, oPrice, orderWidth)
	}},
	{name: "037_tumble_window", index: uniqueBy(0), build: tumble10},
	{name: "037_tumble_window", index: uniqueBy(0), build: tumble10Close, closeAll: true},
	{name: "038_hop_window", index: uniqueBy(0), build: func(g *Graph, _, _, o Node) Node {
		h := add(g, &Hop{TimeCol: oTS, Slide: 10 * time.Minute, Size: 30 * time.Minute}, o)
		return aggregate(g, h, []int{orderWidth}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Max, Col: oPrice})
	}},
	{name: "039_window_per_key", build: func(g *Graph, _, _, o Node) Node {
		oo := where(g, o, func(r types.Row) bool { return r[oCustomer] != nil })
		w := add(g, &Tumble{TimeCol: oTS, Size: time.Hour}, oo)
		a := aggregate(g, w, []int{oCustomer, orderWidth}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Sum, Col: oPrice})
		return where(g, a, func(r types.Row) bool { return r[2].(int64) > 1 })
	}},
	{name: "045_min_max_retraction", index: uniqueBy(0), build: func(g *Graph, _, _, o Node) Node {
		return aggregate(g, o, []int{oProduct}, AggCall{Kind: Min, Col: oPrice}, AggCall{Kind: Max, Col: oPrice}, AggCall{Kind: Min, Col: oTS}, AggCall{Kind: Max, Col: oTS})
	}},
	{name: "046_outer_join_count", index: uniqueBy(0), build: func(g *Graph, c, _, o Node) Node {
		j := join(g, LeftJoin, c, customerWidth, cID, o, orderWidth, oCustomer)
		a := aggregate(g, j, []int{cID}, AggCall{Kind: Count, Col: customerWidth + oID}, AggCall{Kind: Sum, Col: customerWidth + oQty})
		return add(g, &Map{Exprs: []Expr{col(0), col(1), func(r types.Row) (any, error) {
			if r[2] == nil {
				return int64(0), nil
			}
			return r[2], nil
		}}}, a)
	}},
	{name: "047_bool_aggregates", index: uniqueBy(0), build: func(g *Graph, _, _, o Node) Node {
		m := add(g, &Map{Exprs: []Expr{col(oStatus),
			func(r types.Row) (any, error) { return r[oQty].(int32) > 1, nil },
			func(r types.Row) (any, error) { return r[oDiscount] == nil, nil }}}, o)
		return aggregate(g, m, []int{0}, AggCall{Kind: BoolAnd, Col: 1}, AggCall{Kind: BoolOr, Col: 2})
	}},
	{name: "051_empty_group", build: func(g *Graph, _, _, o Node) Node {
		oo := where(g, o, func(r types.Row) bool { return r[oQty].(int32) > 100 })
		return aggregate(g, oo, nil, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Sum, Col: oQty}, AggCall{Kind: Max, Col: oPrice})
	}},
}

// tumble10 is 037: 10-minute windows, count(*) and sum(qty), emitted
// as they change.
func tumble10(g *Graph, _, _, o Node) Node {
	w := add(g, &Tumble{TimeCol: oTS, Size: 10 * time.Minute}, o)
	return aggregate(g, w, []int{orderWidth}, AggCall{Kind: CountStar, Col: 0}, AggCall{Kind: Sum, Col: oQty})
}

// tumble10Close is 037 emitting each window once, when it closes.
func tumble10Close(g *Graph, _, _, o Node) Node {
	w := add(g, &Tumble{TimeCol: oTS, Size: 10 * time.Minute}, o)
	p := project(g, w, orderWidth, oQty)
	return add(g, &Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: CountStar, Col: 0}, {Kind: Sum, Col: 1}},
		Window: &WindowPolicy{Size: 10 * time.Minute, EmitOnClose: true}}, p)
}

func (q oracleQuery) graph() *Graph {
	var g Graph
	c, p, o := g.Input("customers"), g.Input("products"), g.Input("orders")
	g.SetOutput(q.build(&g, c, p, o))
	return &g
}

// upsert turns the keyed history into change epochs, as an upsert
// source does: a new value for a key retracts the old one, a delete
// retracts it. Epoch sizes are random in [1, maxEpoch].
func upsert(t testing.TB, history []sqltest.Change, r *rand.Rand, maxEpoch int) []Epoch {
	t.Helper()
	input := map[string]int{"customers": inCustomers, "products": inProducts, "orders": inOrders}
	state := map[string]map[int64]types.Row{"customers": {}, "products": {}, "orders": {}}
	var epochs []Epoch
	for i := 0; i < len(history); {
		n := 1 + r.IntN(maxEpoch)
		e := Epoch{Inputs: make([][]types.Change, 3)}
		for _, c := range history[i:min(i+n, len(history))] {
			in := input[c.Table]
			if old, ok := state[c.Table][c.Key]; ok {
				e.Inputs[in] = append(e.Inputs[in], types.Change{Row: old, Diff: -1})
				delete(state[c.Table], c.Key)
			}
			if c.Row != nil {
				row := make(types.Row, len(c.Row))
				for j, v := range c.Row {
					var err error
					if row[j], err = fromTable(v); err != nil {
						t.Fatal(err)
					}
				}
				state[c.Table][c.Key] = row
				e.Inputs[in] = append(e.Inputs[in], types.Change{Row: row, Diff: 1})
			}
		}
		epochs = append(epochs, e)
		i += n
	}
	return epochs
}

// fromTable converts a sqltest table value to the engine's.
func fromTable(v any) (any, error) {
	switch v.(type) {
	case nil, int32, int64, float64, string, time.Time:
		return v, nil
	}
	return types.FromWire(types.Numeric, v)
}

// runEpochs runs epochs through q's dataflow over st and returns each
// epoch's output, shown, and the final contents.
func runEpochs(t *testing.T, q oracleQuery, st Store, epochs []Epoch) ([]string, []types.Row) {
	t.Helper()
	d, err := NewDriver(q.graph(), st, Options{Index: q.index})
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	for i, e := range epochs {
		out, err := d.Step(e)
		if err != nil {
			t.Fatalf("epoch %d: %v", i+1, err)
		}
		outs = append(outs, show(out))
	}
	if q.closeAll {
		out, err := d.Step(Epoch{Watermark: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, show(out))
	}
	rows, err := d.View().Rows()
	if err != nil {
		t.Fatal(err)
	}
	return outs, rows
}

func TestOracleCorpus(t *testing.T) {
	o := sqltest.NewOracle(t)
	corpus, err := sqltest.Corpus(sqltest.SetGeneral)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]sqltest.CorpusQuery{}
	for _, c := range corpus {
		byName[strings.TrimPrefix(c.Name, "corpus/")] = c
	}
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		history := sqltest.SmallChanges(seed, 900)
		var queries []sqltest.Query
		seen := map[string]bool{}
		for _, q := range oracleQueries {
			cq, ok := byName[q.name]
			if !ok {
				t.Fatalf("no corpus query %s", q.name)
			}
			if !seen[q.name] {
				queries = append(queries, cq.Query())
				seen[q.name] = true
			}
		}
		results := o.Query(t, sqltest.SmallTables(history), queries...)
		want := map[string]sqltest.Result{}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("DuckDB: %s: %v", r.Name, r.Err)
			}
			want[strings.TrimPrefix(r.Name, "corpus/")] = r
		}
		for i, q := range oracleQueries {
			t.Run(fmt.Sprintf("seed%d/%s#%d", seed, q.name, i), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				epochs := upsert(t, history, r, 40)
				memOuts, memRows := runEpochs(t, q, NewMemStore(), epochs)
				db := openPebble(t, vfs.NewMem(), "")
				pebOuts, pebRows := runEpochs(t, q, NewPebbleStore(db, []byte("q"), false), epochs)
				merging := NewPebbleStore(openPebbleMerging(t), []byte("q"), false)
				merging.SetCountedMerges(true)
				mrgOuts, mrgRows := runEpochs(t, q, merging, epochs)
				// Metamorphic: the stores agree epoch by epoch.
				for e := range memOuts {
					if memOuts[e] != pebOuts[e] {
						t.Fatalf("epoch %d: mem and pebble differ:\nmem:\n%s\npebble:\n%s", e+1, memOuts[e], pebOuts[e])
					}
					if memOuts[e] != mrgOuts[e] {
						t.Fatalf("epoch %d: mem and pebble with merges differ:\nmem:\n%s\npebble:\n%s", e+1, memOuts[e], mrgOuts[e])
					}
				}
				if showRows(memRows) != showRows(pebRows) {
					t.Fatalf("final contents differ: mem %s, pebble %s", showRows(memRows), showRows(pebRows))
				}
				if showRows(memRows) != showRows(mrgRows) {
					t.Fatalf("final contents differ: mem %s, pebble with merges %s", showRows(memRows), showRows(mrgRows))
				}
				w := want[q.name]
				sqltest.Equal(t, w, result(w, memRows), sqltest.Options{Ordered: byName[q.name].Ordered})
				// Another batching, epochs of one to three changes,
				// ends in the same place.
				_, rows := runEpochs(t, q, NewMemStore(), upsert(t, history, r, 3))
				sqltest.Equal(t, w, result(w, rows), sqltest.Options{})
			})
		}
	}
}

// result is a view's rows as an oracle Result with want's columns: a
// hand-built dataflow has no column names or types of its own.
func result(want sqltest.Result, rows []types.Row) sqltest.Result {
	got := sqltest.Result{Name: want.Name, Columns: want.Columns}
	for _, r := range rows {
		vals := make([]any, len(r))
		for i, v := range r {
			vals[i] = types.ToWire(v)
		}
		got.Rows = append(got.Rows, vals)
	}
	return got
}
