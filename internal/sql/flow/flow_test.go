package flow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/sql/types"
)

// stores are the Store implementations every scenario runs over.
var stores = []struct {
	name string
	open func(t testing.TB) Store
}{
	{"mem", func(testing.TB) Store { return NewMemStore() }},
	{"pebble", func(t testing.TB) Store {
		return NewPebbleStore(openPebble(t, vfs.NewMem(), ""), []byte("view1/"), false)
	}},
	// The view's index written by merges (CountedMerger), with a roomy
	// and a tiny cache.
	{"pebble-merge", func(t testing.TB) Store {
		s := NewPebbleStore(openPebbleMerging(t), []byte("view1/"), false)
		s.SetCountedMerges(true)
		return s
	}},
	{"pebble-merge-tinycache", func(t testing.TB) Store {
		s := NewPebbleStore(openPebbleMerging(t), []byte("view1/"), false)
		s.SetCountedMerges(true)
		s.SetCacheBytes(4 * cacheEntryOverhead)
		return s
	}},
	// A cache of a few entries: most reads miss and entries are evicted
	// while epochs write them, so the cache's coherence is exercised.
	{"pebble-tinycache", func(t testing.TB) Store {
		s := NewPebbleStore(openPebble(t, vfs.NewMem(), ""), []byte("view1/"), false)
		s.SetCacheBytes(4 * cacheEntryOverhead)
		return s
	}},
}

// openPebbleMerging is an in-memory database with CountedMerger.
func openPebbleMerging(t testing.TB) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Merger: CountedMerger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openPebble(t testing.TB, fs vfs.FS, dir string) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// quietLogger drops Pebble's routine messages (WAL replay) that would
// bury a failure's output.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

func row(vals ...any) types.Row { return vals }

func ins(vals ...any) types.Change { return types.Change{Row: vals, Diff: 1} }
func del(vals ...any) types.Change { return types.Change{Row: vals, Diff: -1} }

func ts(sec int) time.Time { return time.Unix(int64(sec), 0).UTC() }

func dec(s string) *apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return d
}

// show formats changes as sorted lines "+1 (a, b)", so an epoch's
// output compares as a multiset.
func show(cs []types.Change) string {
	lines := make([]string, len(cs))
	for i, c := range cs {
		lines[i] = fmt.Sprintf("%+d %s", c.Diff, showRow(c.Row))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func showRow(r types.Row) string {
	s := make([]string, len(r))
	for i, v := range r {
		switch x := v.(type) {
		case nil:
			s[i] = "NULL"
		case time.Time:
			s[i] = fmt.Sprintf("%ds", x.Unix())
		default:
			s[i] = types.Format(v)
		}
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// step is one epoch of a scenario and the output it must give.
type step struct {
	in        [][]types.Change
	watermark time.Time
	want      []string // sorted lines of show
}

// runSteps runs steps over a fresh driver of g on each store, checking
// each epoch's output exactly, and returns the drivers.
func runSteps(t *testing.T, build func() *Graph, opts Options, steps []step) {
	t.Helper()
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			d, err := NewDriver(build(), s.open(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range steps {
				out, err := d.Step(Epoch{Inputs: st.in, Watermark: st.watermark})
				if err != nil {
					t.Fatalf("epoch %d: %v", i+1, err)
				}
				want := slices.Clone(st.want)
				slices.Sort(want)
				if got, w := show(out), strings.Join(want, "\n"); got != w {
					t.Errorf("epoch %d:\ngot:\n%s\nwant:\n%s", i+1, got, w)
				}
			}
		})
	}
}

func single(op Operator) func() *Graph {
	return func() *Graph {
		var g Graph
		in := g.Input("in")
		g.SetOutput(g.Add("op", op, in))
		return &g
	}
}

func TestAggregateRetractions(t *testing.T) {
	// (k text, v int4): count(*), min(v), max(v), sum(v), count(distinct v).
	agg := func() *Graph {
		return single(&Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: CountStar, Col: 0}, {Kind: Min, Col: 1}, {Kind: Max, Col: 1}, {Kind: Sum, Col: 1}, {Kind: CountDistinct, Col: 1}}})()
	}
	runSteps(t, agg, Options{Index: &IndexSpec{KeyCols: []int{0}, Unique: true}}, []step{
		{in: [][]types.Change{{ins("a", int32(5)), ins("a", int32(3)), ins("a", int32(3)), ins("b", int32(7))}},
			want: []string{"+1 (a, 3, 3, 5, 11, 2)", "+1 (b, 1, 7, 7, 7, 1)"}},
		// One of the two minimums goes: the other is still the minimum.
		{in: [][]types.Change{{del("a", int32(3))}},
			want: []string{"-1 (a, 3, 3, 5, 11, 2)", "+1 (a, 2, 3, 5, 8, 2)"}},
		// The last minimum goes: the next value is found.
		{in: [][]types.Change{{del("a", int32(3))}},
			want: []string{"-1 (a, 2, 3, 5, 8, 2)", "+1 (a, 1, 5, 5, 5, 1)"}},
		// A change undone within the epoch changes no result: nothing.
		{in: [][]types.Change{{ins("b", int32(1)), del("b", int32(1))}}},
		// NULLs count for count(*) only; a group of only NULLs has NULL
		// min, max and sum.
		{in: [][]types.Change{{ins("c", nil), ins("b", nil)}},
			want: []string{"+1 (c, 1, NULL, NULL, NULL, 0)", "-1 (b, 1, 7, 7, 7, 1)", "+1 (b, 2, 7, 7, 7, 1)"}},
		// The group's last row goes: the group is retracted.
		{in: [][]types.Change{{del("a", int32(5))}},
			want: []string{"-1 (a, 1, 5, 5, 5, 1)"}},
	})
}

func TestAggregateGlobalOverNothing(t *testing.T) {
	runSteps(t, single(&Aggregate{Aggs: []AggCall{{Kind: CountStar, Col: 0}, {Kind: Sum, Col: 0}, {Kind: Max, Col: 0}, {Kind: BoolAnd, Col: 1}, {Kind: BoolOr, Col: 1}}}), Options{}, []step{
		// SQL's aggregate without GROUP BY has a row over no rows.
		{want: []string{"+1 (0, NULL, NULL, NULL, NULL)"}},
		{in: [][]types.Change{{ins(int64(4), true), ins(int64(6), false)}},
			want: []string{"-1 (0, NULL, NULL, NULL, NULL)", "+1 (2, 10, 6, f, t)"}},
		{in: [][]types.Change{{del(int64(6), false)}},
			want: []string{"-1 (2, 10, 6, f, t)", "+1 (1, 4, 4, t, t)"}},
		{in: [][]types.Change{{del(int64(4), true)}},
			want: []string{"-1 (1, 4, 4, t, t)", "+1 (0, NULL, NULL, NULL, NULL)"}},
	})
}

func TestAggregateAvgAndNonFinite(t *testing.T) {
	// avg(int4) and avg(numeric) are numeric at PostgreSQL's scale;
	// sum(float8) retracts an infinity exactly.
	runSteps(t, single(&Aggregate{Aggs: []AggCall{{Kind: Avg, Col: 0}, {Kind: Avg, Col: 1}, {Kind: Sum, Col: 2}, {Kind: Sum, Col: 3}}}), Options{}, []step{
		{in: [][]types.Change{{
			ins(int32(1), dec("1.50"), 1.0, int64(9223372036854775807)),
			ins(int32(2), dec("2.25"), 2.0, int64(9223372036854775807)),
			ins(int32(2), nil, 0.5, nil),
		}}, want: []string{"+1 (1.6666666666666667, 1.8750000000000000, 3.5, 18446744073709551614)"}},
		{in: [][]types.Change{{ins(nil, dec("NaN"), math.Inf(1), nil)}},
			want: []string{"-1 (1.6666666666666667, 1.8750000000000000, 3.5, 18446744073709551614)", "+1 (1.6666666666666667, NaN, Infinity, 18446744073709551614)"}},
		{in: [][]types.Change{{del(nil, dec("NaN"), math.Inf(1), nil)}},
			want: []string{"-1 (1.6666666666666667, NaN, Infinity, 18446744073709551614)", "+1 (1.6666666666666667, 1.8750000000000000, 3.5, 18446744073709551614)"}},
	})
}

func TestDivNumeric(t *testing.T) {
	// PostgreSQL's answers: SELECT x / n::numeric.
	for _, c := range []struct {
		x    string
		n    int64
		want string
	}{
		{"5", 3, "1.6666666666666667"},
		{"12345", 7, "1763.5714285714285714"},
		{"123456789", 4, "30864197.250000000000"},
		{"0.005", 3, "0.00166666666666666667"},
		{"-7", 2, "-3.5000000000000000"},
		{"0", 5, "0.00000000000000000000"},
		{"1.000000000000000000005", 2, "0.500000000000000000003"},
	} {
		got, err := divNumeric(dec(c.x), c.n)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != c.want {
			t.Errorf("%s / %d = %s, want %s", c.x, c.n, got, c.want)
		}
	}
}

func TestJoinOuter(t *testing.T) {
	join := func(kind JoinKind) func() *Graph {
		return func() *Graph {
			var g Graph
			l, r := g.Input("l"), g.Input("r")
			g.SetOutput(g.Add("join", &Join{Kind: kind, LeftKey: []int{0}, RightKey: []int{0}, LeftWidth: 2, RightWidth: 2}, l, r))
			return &g
		}
	}
	left := func(cs ...types.Change) [][]types.Change { return [][]types.Change{cs} }
	right := func(cs ...types.Change) [][]types.Change { return [][]types.Change{nil, cs} }
	t.Run("left", func(t *testing.T) {
		runSteps(t, join(LeftJoin), Options{}, []step{
			{in: left(ins(int64(1), "a")), want: []string{"+1 (1, a, NULL, NULL)"}},
			// The first match retracts the padded row.
			{in: right(ins(int64(1), "x")), want: []string{"-1 (1, a, NULL, NULL)", "+1 (1, a, 1, x)"}},
			{in: right(ins(int64(1), "y")), want: []string{"+1 (1, a, 1, y)"}},
			// The last match gone: the padded row comes back.
			{in: right(del(int64(1), "x"), del(int64(1), "y")), want: []string{"-1 (1, a, 1, x)", "-1 (1, a, 1, y)", "+1 (1, a, NULL, NULL)"}},
			// A NULL key matches nothing, even a NULL.
			{in: [][]types.Change{{ins(nil, "n")}, {ins(nil, "m")}}, want: []string{"+1 (NULL, n, NULL, NULL)"}},
			// Both sides in one epoch: one joined row, no padded one.
			{in: [][]types.Change{{ins(int64(2), "b")}, {ins(int64(2), "z")}}, want: []string{"+1 (2, b, 2, z)"}},
			// A right row without left rows emits nothing in a left join.
			{in: right(ins(int64(3), "w")), want: nil},
			// An update of the left row: -old +new against its match.
			{in: left(del(int64(2), "b"), ins(int64(2), "c")), want: []string{"-1 (2, b, 2, z)", "+1 (2, c, 2, z)"}},
		})
	})
	t.Run("full", func(t *testing.T) {
		runSteps(t, join(FullJoin), Options{}, []step{
			{in: right(ins(int64(1), "x"), ins(int64(1), "x")), want: []string{"+2 (NULL, NULL, 1, x)"}},
			{in: left(ins(int64(1), "a")), want: []string{"-2 (NULL, NULL, 1, x)", "+2 (1, a, 1, x)"}},
			{in: left(ins(int64(1), "b")), want: []string{"+2 (1, b, 1, x)"}},
			{in: left(del(int64(1), "a"), del(int64(1), "b")), want: []string{"-2 (1, a, 1, x)", "-2 (1, b, 1, x)", "+2 (NULL, NULL, 1, x)"}},
			{in: right(del(int64(1), "x")), want: []string{"-1 (NULL, NULL, 1, x)"}},
		})
	})
	t.Run("right", func(t *testing.T) {
		runSteps(t, join(RightJoin), Options{}, []step{
			{in: left(ins(int64(1), "a")), want: nil},
			{in: right(ins(int64(1), "x"), ins(int64(2), "y")), want: []string{"+1 (1, a, 1, x)", "+1 (NULL, NULL, 2, y)"}},
			{in: left(del(int64(1), "a")), want: []string{"-1 (1, a, 1, x)", "+1 (NULL, NULL, 1, x)"}},
		})
	})
	t.Run("inner", func(t *testing.T) {
		runSteps(t, join(InnerJoin), Options{}, []step{
			{in: left(ins(int64(1), "a"), ins(nil, "n")), want: nil},
			{in: right(ins(int64(1), "x"), ins(nil, "m")), want: []string{"+1 (1, a, 1, x)"}},
			{in: [][]types.Change{{del(int64(1), "a")}, {del(int64(1), "x")}}, want: []string{"-1 (1, a, 1, x)"}},
		})
	})
}

func TestTopN(t *testing.T) {
	// ROW_NUMBER() OVER (PARTITION BY p ORDER BY v DESC) <= 2; ties on v
	// rank by the whole row.
	t.Run("row_number", func(t *testing.T) {
		runSteps(t, single(&TopN{PartitionBy: []int{0}, OrderBy: []SortKey{{Col: 1, Desc: true}}, Limit: 2, RowNumber: true}), Options{}, []step{
			{in: [][]types.Change{{ins("p", int64(10), "a"), ins("p", int64(20), "b"), ins("p", int64(20), "c"), ins("q", int64(1), "z")}},
				want: []string{"+1 (p, 20, b, 1)", "+1 (p, 20, c, 2)", "+1 (q, 1, z, 1)"}},
			// The first goes: the second moves up, the third enters.
			{in: [][]types.Change{{del("p", int64(20), "b")}},
				want: []string{"-1 (p, 20, b, 1)", "-1 (p, 20, c, 2)", "+1 (p, 20, c, 1)", "+1 (p, 10, a, 2)"}},
			// A new first pushes the others down, and one out.
			{in: [][]types.Change{{ins("p", int64(30), "d")}},
				want: []string{"-1 (p, 20, c, 1)", "-1 (p, 10, a, 2)", "+1 (p, 30, d, 1)", "+1 (p, 20, c, 2)"}},
			// A change below the top changes nothing.
			{in: [][]types.Change{{ins("p", int64(5), "e"), del("p", int64(10), "a")}}},
			// NULL sorts first descending (PostgreSQL's default).
			{in: [][]types.Change{{ins("q", nil, "y")}},
				want: []string{"-1 (q, 1, z, 1)", "+1 (q, NULL, y, 1)", "+1 (q, 1, z, 2)"}},
		})
	})
	t.Run("duplicates_no_rank", func(t *testing.T) {
		runSteps(t, single(&TopN{OrderBy: []SortKey{{Col: 0}}, Limit: 2, Offset: 1}), Options{}, []step{
			{in: [][]types.Change{{ins(int64(3)), ins(int64(1)), ins(int64(2)), ins(int64(2))}}, want: []string{"+2 (2)"}},
			{in: [][]types.Change{{del(int64(1))}}, want: []string{"-1 (2)", "+1 (3)"}},
			{in: [][]types.Change{{ins(int64(0)), ins(int64(0))}}, want: []string{"+1 (0)", "-1 (3)"}},
		})
	})
}

func TestDistinct(t *testing.T) {
	runSteps(t, single(&Distinct{}), Options{}, []step{
		{in: [][]types.Change{{ins("a", nil), ins("a", nil), ins("b", int64(1))}}, want: []string{"+1 (a, NULL)", "+1 (b, 1)"}},
		{in: [][]types.Change{{del("a", nil)}}},
		{in: [][]types.Change{{del("a", nil), del("b", int64(1)), ins("b", int64(1))}}, want: []string{"-1 (a, NULL)"}},
	})
}

func TestHopAndTumble(t *testing.T) {
	runSteps(t, single(&Hop{TimeCol: 0, Slide: 5 * time.Second, Size: 10 * time.Second}), Options{}, []step{
		{in: [][]types.Change{{ins(ts(7)), ins(ts(-3)), ins(ts(10)), ins(nil)}},
			want: []string{"+1 (7s, 0s, 10s)", "+1 (7s, 5s, 15s)", "+1 (-3s, -10s, 0s)", "+1 (-3s, -5s, 5s)", "+1 (10s, 5s, 15s)", "+1 (10s, 10s, 20s)"}},
	})
	runSteps(t, single(&Tumble{TimeCol: 0, Size: 10 * time.Second, Offset: 2 * time.Second}), Options{}, []step{
		{in: [][]types.Change{{ins(ts(7)), ins(ts(-3)), ins(ts(12)), ins(nil)}},
			want: []string{"+1 (7s, 2s, 12s)", "+1 (-3s, -8s, 2s)", "+1 (12s, 12s, 22s)", "+1 (NULL, NULL, NULL)"}},
	})
}

// windowGraph is TUMBLE(t, 10s) then count(*) per window.
func windowGraph(emitOnClose bool) func() *Graph {
	return func() *Graph {
		var g Graph
		in := g.Input("in")
		w := g.Add("tumble", &Tumble{TimeCol: 0, Size: 10 * time.Second}, in)
		p := g.Add("project", &Project{Cols: []int{1, 0}}, w) // window_start, t
		g.SetOutput(g.Add("agg", &Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: CountStar, Col: 0}, {Kind: Max, Col: 1}},
			Window: &WindowPolicy{Size: 10 * time.Second, Lateness: 5 * time.Second, EmitOnClose: emitOnClose}}, p))
		return &g
	}
}

func TestWindowEmitOnClose(t *testing.T) {
	steps := []step{
		{in: [][]types.Change{{ins(ts(1)), ins(ts(3)), ins(ts(12))}}},
		// [0s,10s) closes at 10s+5s of lateness: not yet.
		{in: [][]types.Change{{ins(ts(2))}}, watermark: ts(14)},
		// Judged against the watermark before the epoch (14s), 4s is
		// on time; the epoch's watermark then closes [0s,10s).
		{in: [][]types.Change{{ins(ts(4))}}, watermark: ts(15), want: []string{"+1 (0s, 4, 4s)"}},
		// Late: dropped and counted, the window's row stays final.
		{in: [][]types.Change{{ins(ts(5)), del(ts(1)), ins(ts(13))}}, watermark: ts(15)},
		{watermark: ts(25), want: []string{"+1 (10s, 2, 13s)"}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st := s.open(t)
			d, err := NewDriver(windowGraph(true)(), st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range steps {
				out, err := d.Step(Epoch{Inputs: e.in, Watermark: e.watermark})
				if err != nil {
					t.Fatal(err)
				}
				want := slices.Clone(e.want)
				slices.Sort(want)
				if got := show(out); got != strings.Join(want, "\n") {
					t.Errorf("epoch %d: got\n%s\nwant\n%s", i+1, got, strings.Join(want, "\n"))
				}
			}
			if late := d.Stats()[3].Late; late != 2 {
				t.Errorf("late records %d, want 2", late)
			}
			// The closed windows' state is freed: nothing under the
			// aggregate's namespace.
			n := 0
			if err := scanPrefix(st, nodePrefix(3), false, func(k, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d state keys left after every window closed", n)
			}
			rows, err := d.View().Rows()
			if err != nil {
				t.Fatal(err)
			}
			if got := showRows(rows); got != "(0s, 4, 4s) (10s, 2, 13s)" {
				t.Errorf("view %s", got)
			}
		})
	}
}

func TestWindowChanges(t *testing.T) {
	// Without EmitOnClose a window's row changes as records come, and
	// stays once the window closes.
	runSteps(t, windowGraph(false), Options{}, []step{
		{in: [][]types.Change{{ins(ts(1)), ins(ts(12))}}, want: []string{"+1 (0s, 1, 1s)", "+1 (10s, 1, 12s)"}},
		{in: [][]types.Change{{ins(ts(3))}}, watermark: ts(15), want: []string{"-1 (0s, 1, 1s)", "+1 (0s, 2, 3s)"}},
		{in: [][]types.Change{{ins(ts(4)), ins(ts(11))}}, want: []string{"-1 (10s, 1, 12s)", "+1 (10s, 2, 12s)"}},
	})
}

func showRows(rows []types.Row) string {
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = showRow(r)
	}
	return strings.Join(s, " ")
}

func TestViewIndex(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			var g Graph
			in := g.Input("in")
			g.SetOutput(g.Add("agg", &Aggregate{GroupBy: []int{0, 1}, Aggs: []AggCall{{Kind: CountStar, Col: 0}}}, in))
			d, err := NewDriver(&g, s.open(t), Options{Index: &IndexSpec{KeyCols: []int{0, 1}, Unique: true}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Step(Epoch{Inputs: [][]types.Change{{
				ins("b", int64(2)), ins("a", int64(10)), ins("a", int64(9)), ins("a", nil), ins("a", int64(9)), ins("ab", int64(1)),
			}}}); err != nil {
				t.Fatal(err)
			}
			v := d.View()
			var got []string
			collect := func(r types.Row, n int64) bool { got = append(got, fmt.Sprintf("%d%s", n, showRow(r))); return true }
			if err := v.Scan(row("a"), collect); err != nil {
				t.Fatal(err)
			}
			// In key order, NULL last, and not "ab": a prefix of values,
			// not of bytes.
			if w := "1(a, 9, 2) 1(a, 10, 1) 1(a, NULL, 1)"; strings.Join(got, " ") != w {
				t.Errorf("scan a: %v, want %s", got, w)
			}
			got = nil
			if err := v.Lookup(row("a", int64(10)), collect); err != nil {
				t.Fatal(err)
			}
			if w := "1(a, 10, 1)"; strings.Join(got, " ") != w {
				t.Errorf("lookup: %v, want %s", got, w)
			}
			if err := v.Lookup(row("a"), collect); err == nil {
				t.Error("lookup by half the key: no error")
			}
		})
	}
}

func TestStepErrorKeepsNothing(t *testing.T) {
	errBoom := errors.New("boom")
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			var g Graph
			in := g.Input("in")
			f := g.Add("filter", &Filter{Pred: func(r types.Row) (any, error) {
				if r[0] == "bad" {
					return nil, errBoom
				}
				return true, nil
			}}, in)
			g.SetOutput(g.Add("agg", &Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: CountStar, Col: 0}}}, f))
			d, err := NewDriver(&g, s.open(t), Options{MaxEpochChanges: 3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Step(Epoch{Inputs: [][]types.Change{{ins("a")}}, Checkpoint: []byte("1")}); err != nil {
				t.Fatal(err)
			}
			// The aggregate never sees "bad", but the epoch's other row
			// must not stay either.
			if _, err := d.Step(Epoch{Inputs: [][]types.Change{{ins("a"), ins("bad")}}, Checkpoint: []byte("2")}); !errors.Is(err, errBoom) {
				t.Fatalf("err %v, want boom", err)
			}
			if _, err := d.Step(Epoch{Inputs: [][]types.Change{{ins("a"), ins("a"), ins("a"), ins("a")}}}); err == nil {
				t.Fatal("an epoch over MaxEpochChanges was accepted")
			}
			// A retraction of what is not there is refused, whole.
			if _, err := d.Step(Epoch{Inputs: [][]types.Change{{ins("c"), del("b")}}}); !errors.Is(err, ErrNegative) {
				t.Fatalf("err %v, want ErrNegative", err)
			}
			rows, err := d.View().Rows()
			if err != nil {
				t.Fatal(err)
			}
			cp, _, err := d.Checkpoint()
			if err != nil {
				t.Fatal(err)
			}
			if got := showRows(rows); got != "(a, 1)" || string(cp) != "1" || d.Epoch() != 1 {
				t.Errorf("after failed epochs: view %s, checkpoint %q, epoch %d; want (a, 1), 1, 1", got, cp, d.Epoch())
			}
			out, err := d.Step(Epoch{Inputs: [][]types.Change{{ins("a")}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := show(out); got != "+1 (a, 2)\n-1 (a, 1)" {
				t.Errorf("next epoch %s", got)
			}
		})
	}
}

func TestPebbleReopen(t *testing.T) {
	// A driver reopened over the same database continues where the
	// last commit left it: an uncommitted epoch is gone.
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	build := func() *Graph {
		return single(&Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: Min, Col: 1}, {Kind: CountStar, Col: 0}}})()
	}
	d, err := NewDriver(build(), NewPebbleStore(db, []byte("v"), true), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Step(Epoch{Inputs: [][]types.Change{{ins("a", int64(2)), ins("a", int64(1))}}, Watermark: ts(100), Checkpoint: []byte("offset 2")}); err != nil {
		t.Fatal(err)
	}
	// Written but never committed.
	st := NewPebbleStore(db, []byte("v"), true)
	if err := st.Set([]byte("mc"), []byte("torn")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openPebble(t, fs, "db")
	d, err = NewDriver(build(), NewPebbleStore(db, []byte("v"), true), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cp, _, err := d.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if string(cp) != "offset 2" || d.Epoch() != 1 || !d.Watermark().Equal(ts(100)) {
		t.Fatalf("reopened at checkpoint %q epoch %d watermark %v", cp, d.Epoch(), d.Watermark())
	}
	out, err := d.Step(Epoch{Inputs: [][]types.Change{{del("a", int64(1))}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := show(out); got != "+1 (a, 2, 1)\n-1 (a, 1, 2)" {
		t.Errorf("after reopen: %s", got)
	}
}

// TestBeforeCommit: the hook sees the epoch's output and the view with
// the epoch applied, the committed view does not show it yet, and an
// error from the hook rolls the epoch back (a sink's transaction that
// failed leaves the state where it was).
func TestBeforeCommit(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			g := new(Graph)
			g.SetOutput(g.Input("in"))
			st := s.open(t)
			d, err := NewDriver(g, st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rowsOf := func(v *View) string {
				rows, err := v.Rows()
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, r := range rows {
					out = append(out, fmt.Sprint(r...))
				}
				return strings.Join(out, ",")
			}
			in := func(vals ...int64) [][]types.Change {
				var cs []types.Change
				for _, v := range vals {
					cs = append(cs, types.Change{Row: types.Row{v}, Diff: 1})
				}
				return [][]types.Change{cs}
			}
			fail := errors.New("transaction refused")
			var pendingSeen, committedSeen string
			_, err = d.Step(Epoch{Inputs: in(1, 2), Checkpoint: []byte("a"), BeforeCommit: func(out []types.Change, pending *View) error {
				if len(out) != 2 {
					t.Errorf("out %v", out)
				}
				pendingSeen, committedSeen = rowsOf(pending), rowsOf(d.View())
				return fail
			}})
			if !errors.Is(err, fail) {
				t.Fatalf("Step: %v, want the hook's error", err)
			}
			if pendingSeen != "1,2" || committedSeen != "" {
				t.Fatalf("in the hook: pending %q, committed %q; want 1,2 and nothing", pendingSeen, committedSeen)
			}
			if got := rowsOf(d.View()); got != "" || d.Epoch() != 0 {
				t.Fatalf("after a failed hook: view %q, epoch %d; want nothing kept", got, d.Epoch())
			}
			if _, ok, _ := d.Checkpoint(); ok {
				t.Fatal("a failed hook's checkpoint was kept")
			}
			if _, err := d.Step(Epoch{Inputs: in(3), Checkpoint: []byte("b"), BeforeCommit: func([]types.Change, *View) error { return nil }}); err != nil {
				t.Fatal(err)
			}
			if cp, _, _ := d.Checkpoint(); rowsOf(d.View()) != "3" || d.Epoch() != 1 || string(cp) != "b" {
				t.Fatalf("after a hook that passed: view %q, epoch %d, checkpoint %q", rowsOf(d.View()), d.Epoch(), cp)
			}
		})
	}
}

// TestDriverStateLayout: a state this build began reopens; one begun
// before layouts were recorded, or in another layout, is refused with
// ErrStaleLayout (its operators' keys may mean something else), and an
// empty store is always taken.
func TestDriverStateLayout(t *testing.T) {
	g := single(&Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: CountStar, Col: 0}}})
	st := NewMemStore()
	d, err := NewDriver(g(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Step(Epoch{Inputs: [][]types.Change{{ins("a", int32(1))}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDriver(g(), st, Options{}); err != nil {
		t.Fatalf("reopening this build's state: %v", err)
	}
	for _, layout := range [][]byte{nil, binary.AppendUvarint(nil, StateLayout+1)} {
		if layout == nil {
			err = st.Delete(metaLayout)
		} else {
			err = st.Set(metaLayout, layout)
		}
		if err != nil || st.Commit() != nil {
			t.Fatal(err)
		}
		if _, err := NewDriver(g(), st, Options{}); !errors.Is(err, ErrStaleLayout) {
			t.Fatalf("layout %v: NewDriver = %v, want ErrStaleLayout", layout, err)
		}
	}
	if _, err := NewDriver(g(), NewMemStore(), Options{}); err != nil {
		t.Fatalf("an empty store: %v", err)
	}
}
