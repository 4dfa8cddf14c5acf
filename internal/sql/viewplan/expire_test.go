package viewplan

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/sql/types"
)

// streamEpochs reads Nexmark's tables names as append sources with a
// watermark on date_time: event times up to 3 s out of order against a
// 1 s delay, four partitions each read at different paces, late records
// dropped (as a view whose state the watermark frees drops them). The
// epochs are for a view reading inputs (in its order); the sources'
// passed records are the same whatever the order.
func streamEpochs(t testing.TB, inputs []string, names ...string) ([]flow.Epoch, map[string]*source, map[string]sqltest.Table) {
	events, err := sqltest.GenerateNexmark(sqltest.NexmarkCorpusConfig(13, 6000))
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]sqltest.Table{}
	for _, tb := range sqltest.NexmarkTables(events) {
		tables[tb.Name] = tb
	}
	r := rand.New(rand.NewPCG(13, 29))
	const parts = 4
	byPart := map[string][][][]any{}
	srcs := map[string]*source{}
	pos := map[string][]int{}
	for _, name := range names {
		col := slices.IndexFunc(tables[name].Columns, func(c sqltest.Column) bool { return c.Name == "date_time" })
		byPart[name] = make([][][]any, parts)
		for i, row := range tables[name].Rows {
			row = slices.Clone(row)
			row[col] = row[col].(time.Time).Add(-time.Duration(r.IntN(3000)) * time.Millisecond)
			byPart[name][i%parts] = append(byPart[name][i%parts], row)
		}
		srcs[name] = &source{col: col, delay: time.Second, max: make([]time.Time, parts)}
		pos[name] = make([]int, parts)
	}
	var eps []flow.Epoch
	for {
		e := flow.Epoch{Inputs: make([][]types.Change, len(inputs))}
		done := true
		for _, name := range names {
			in := slices.Index(inputs, name)
			for p := range parts {
				// Bids are 15 times as many as auctions: read faster.
				pace := 2 + p
				if name == "bid" {
					pace = 8 * (p + 1)
				}
				n := min(r.IntN(pace), len(byPart[name][p])-pos[name][p])
				for _, row := range byPart[name][p][pos[name][p] : pos[name][p]+n] {
					if srcs[name].read(p, row) && in >= 0 {
						e.Inputs[in] = append(e.Inputs[in], types.Change{Row: tableRow(t, row), Diff: 1})
					}
				}
				pos[name][p] += n
				done = done && pos[name][p] == len(byPart[name][p])
			}
		}
		// The view's watermark: the least of its sources'.
		for i, name := range inputs {
			w := srcs[name].watermark()
			if i == 0 || w.IsZero() || w.Before(e.Watermark) {
				e.Watermark = w
			}
			if w.IsZero() {
				break
			}
		}
		eps = append(eps, e)
		if done {
			break
		}
	}
	return eps, srcs, tables
}

// TestIntervalJoinExpire runs interval joins (inner, left, full, in ON
// and as a WHERE) of auctions and bids as views: their contents equal
// DuckDB's answer for the same query over the records the sources
// passed, the joins hold a fraction of the state of the same views
// without a watermark (which keep every row), and a view reopened
// halfway over its Pebble store ends with the same contents and state
// as one run.
func TestIntervalJoinExpire(t *testing.T) {
	o := sqltest.NewOracle(t)
	cat := watermarked(t)
	a := *cat["auction"]
	a.Watermark = true
	a.EventTime = slices.IndexFunc(a.Columns, func(c exec.Column) bool { return c.Name == "date_time" })
	cat["auction"] = &a
	plain := testCatalog{}
	for k, r := range cat {
		x := *r
		x.Watermark = false
		plain[k] = &x
	}
	queries := []sqltest.Query{
		{Name: "inner", SQL: `SELECT b.auction, b.bidder, b.price, b.date_time, a.seller FROM bid b
			JOIN auction a ON b.auction = a.id AND b.date_time BETWEEN a.date_time AND a.date_time + INTERVAL '2' SECOND`},
		{Name: "left", SQL: `SELECT a.id, a.seller, b.bidder, b.price FROM auction a
			LEFT JOIN bid b ON b.auction = a.id AND b.date_time >= a.date_time AND b.date_time < a.date_time + INTERVAL '2' SECOND`},
		{Name: "full", SQL: `SELECT a.id, b.auction, b.bidder, b.price FROM auction a
			FULL JOIN bid b ON b.auction = a.id AND b.date_time BETWEEN a.date_time - INTERVAL '1' SECOND AND a.date_time + INTERVAL '1' SECOND`},
		{Name: "where", SQL: `SELECT a.id, a.seller, count(*) AS n, max(b.price) AS top FROM bid b, auction a
			WHERE b.auction = a.id AND a.date_time <= b.date_time AND b.date_time <= a.date_time + INTERVAL '1500 milliseconds' AND b.price > 100
			GROUP BY a.id, a.seller`},
	}
	_, srcs, tables := streamEpochs(t, nil, "auction", "bid")
	var passed []sqltest.Table
	for _, name := range []string{"auction", "bid"} {
		if srcs[name].late == 0 {
			t.Fatalf("no %s late at the source: the test needs some", name)
		}
		passed = append(passed, sqltest.Table{Name: name, Columns: tables[name].Columns, Rows: srcs[name].passed})
	}
	want := o.Query(t, passed, queries...)
	for i, q := range queries {
		t.Run(q.Name, func(t *testing.T) {
			v, err := compileWith(q.SQL, cat, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !v.Windowed {
				t.Fatal("a view with an expiring join does not drop late records")
			}
			eps, _, _ := streamEpochs(t, v.Inputs, "auction", "bid")
			st := flow.NewMemStore()
			d, err := flow.NewDriver(v.Graph(), st, flow.Options{Index: &v.Index})
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range eps {
				if _, err := d.Step(e); err != nil {
					t.Fatalf("epoch %d: %v", i, err)
				}
			}
			rows, err := d.View().Rows()
			if err != nil {
				t.Fatal(err)
			}
			if len(want[i].Rows) < 20 {
				t.Fatalf("DuckDB has %d rows: too few to compare", len(want[i].Rows))
			}
			sqltest.Equal(t, want[i], result(q.Name, v, rows), sqltest.Options{})
			var freed int64
			for _, s := range d.Stats() {
				freed += s.Freed
			}
			free := stateKeys(t, st)

			// Without a watermark the same view keeps every row.
			pv, err := compileWith(q.SQL, plain, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if pv.Windowed {
				t.Fatal("a view without a watermark drops late records")
			}
			pst := flow.NewMemStore()
			sqltest.Equal(t, want[i], result(q.Name, pv, run(t, pv, pst, eps)), sqltest.Options{})
			kept := stateKeys(t, pst)
			if freed == 0 || free*4 > kept {
				t.Fatalf("%d operator state keys with %d rows freed, %d without a watermark", free, freed, kept)
			}
			t.Logf("%d rows; state keys %d with rows freed (%d freed), %d kept", len(rows), free, freed, kept)

			// Reopened halfway over Pebble: the same contents and state.
			db := openPebble(t)
			half := len(eps) / 2
			run(t, v, flow.NewPebbleStore(db, []byte("v"), false), eps[:half])
			rst := flow.NewPebbleStore(db, []byte("v"), false)
			t.Cleanup(func() { rst.Close() }) // before the database's
			got := run(t, v, rst, eps[half:])
			sqltest.Equal(t, want[i], result(q.Name, v, got), sqltest.Options{})
			if n := stateKeys(t, rst); n != free {
				t.Fatalf("reopened: %d operator state keys, one run %d", n, free)
			}
		})
	}
}

// TestIntervalJoinKeeps: joins whose rows cannot be freed keep them,
// and their views drop no late record: a side that may retract (an
// outer join's output, an aggregate), a bound on a column that is not
// an event time, no watermark.
func TestIntervalJoinKeeps(t *testing.T) {
	cat := watermarked(t)
	for _, sql := range []string{
		// person has no watermark: its column bounds nothing.
		`SELECT b.price, p.name FROM bid b JOIN person p ON p.id = b.bidder AND b.date_time BETWEEN p.date_time AND p.date_time + INTERVAL '1' HOUR`,
		// The right side is an aggregate's, which retracts.
		`SELECT b.price, m.n FROM bid b JOIN (SELECT auction, max(date_time) AS t, count(*) AS n FROM bid GROUP BY auction) m
			ON m.auction = b.auction AND b.date_time BETWEEN m.t AND m.t + INTERVAL '1' SECOND`,
		// An OR is no conjunct of bounds.
		`SELECT b1.price, b2.price AS p2 FROM bid b1 JOIN bid b2 ON b1.auction = b2.auction AND (b2.date_time <= b1.date_time + INTERVAL '1' SECOND OR b1.price > 10)`,
	} {
		v, err := compileWith(sql, cat, Options{})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if v.Windowed {
			t.Errorf("%s: drops late records", sql)
		}
		for _, n := range v.nodes {
			if j, ok := n.op.(*flow.Join); ok && len(j.Expire[0])+len(j.Expire[1]) > 0 {
				t.Errorf("%s: join expires rows", sql)
			}
		}
	}
	// Both sides bound: each side expires by the other's event time.
	v, err := compileWith(`SELECT b1.price, b2.price AS p2 FROM bid b1 JOIN bid b2 ON b1.auction = b2.auction
		AND b2.date_time BETWEEN b1.date_time - INTERVAL '1' SECOND AND b1.date_time + INTERVAL '1 day 2 seconds'`, cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got [2][]flow.JoinExpiry
	for _, n := range v.nodes {
		if j, ok := n.op.(*flow.Join); ok {
			got = j.Expire
		}
	}
	want := [2][]flow.JoinExpiry{{{Col: 5, Offset: 24*time.Hour + 2*time.Second}}, {{Col: 5, Offset: time.Second}}}
	if !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) || !v.Windowed {
		t.Fatalf("expiry %+v, want %+v", got, want)
	}
	plan := strings.Join(v.Explain("v", []flow.NodeStats{3: {Freed: 7}}, nil), "\n")
	if !strings.Contains(plan, "left rows expire at #6 + 24h0m2s; right rows expire at #6 + 1s") || !strings.Contains(plan, "freed=7") {
		t.Fatalf("EXPLAIN does not show the expiries and rows freed:\n%s", plan)
	}
}

// TestSessionEmit runs SESSION windows per bidder and auction (1 s gap;
// per bidder alone Nexmark's hot bidders bid so often that their
// sessions stay open to the end) over bids whose event times are
// out of order (bidEpochs: four partitions, 1 s watermark delay) as a
// view grouping by window_end, in both emit modes: with
// 'on_window_close' it holds exactly the sessions ending at or before
// the final watermark, each emitted once, equal to DuckDB's sessions
// (the batch form with lag()) over the records the source passed; with
// 'on_update' every session. The aggregate drops nothing, closed
// sessions' state is freed (a fraction of a view's without a
// watermark), and a view reopened halfway over Pebble ends the same.
func TestSessionEmit(t *testing.T) {
	o := sqltest.NewOracle(t)
	cat := watermarked(t)
	eps, src, bids := bidEpochs(t)
	final := src.watermark()
	passed := []sqltest.Table{{Name: "bid", Columns: bids.Columns, Rows: src.passed}}
	sql := `SELECT bidder, auction, window_start, window_end, count(*) AS n, max(price) AS top
		FROM SESSION(bid, date_time, INTERVAL '1' SECOND, bidder, auction) GROUP BY bidder, auction, window_start, window_end`
	batch := `WITH g AS (
		SELECT bidder, auction, date_time, price,
		       CASE WHEN date_time - lag(date_time) OVER (PARTITION BY bidder, auction ORDER BY date_time) < INTERVAL '1 second' THEN 0 ELSE 1 END AS brk
		FROM bid
	), s AS (
		SELECT bidder, auction, date_time, price, sum(brk) OVER (PARTITION BY bidder, auction ORDER BY date_time ROWS UNBOUNDED PRECEDING) AS sid FROM g
	)
	SELECT bidder, auction, min(date_time) AS window_start, max(date_time) + INTERVAL '1 second' AS window_end, count(*) AS n, max(price) AS top
	FROM s GROUP BY bidder, auction, sid`
	want := o.Query(t, passed,
		sqltest.Query{Name: "all", SQL: batch},
		sqltest.Query{Name: "closed", SQL: "SELECT * FROM (" + batch + ") x WHERE window_end <= TIMESTAMP '" + final.UTC().Format("2006-01-02 15:04:05.999999") + "'"})
	t.Logf("DuckDB: %d sessions, %d closed; %d bids passed, times %v to %v", len(want[0].Rows), len(want[1].Rows), len(src.passed), src.passed[0][5], final)
	if len(want[1].Rows) < 20 || len(want[1].Rows) == len(want[0].Rows) {
		t.Fatalf("DuckDB has %d sessions, %d closed: the test needs many of both", len(want[0].Rows), len(want[1].Rows))
	}
	for _, emit := range []Emit{EmitOnUpdate, EmitOnWindowClose} {
		t.Run(emit.String(), func(t *testing.T) {
			v, err := compileWith(sql, cat, Options{Emit: emit})
			if err != nil {
				t.Fatal(err)
			}
			if !v.Windowed {
				t.Fatal("a view freeing sessions does not drop late records")
			}
			end := slices.IndexFunc(v.Columns, func(c exec.Column) bool { return c.Name == "window_end" })
			st := flow.NewMemStore()
			d, err := flow.NewDriver(v.Graph(), st, flow.Options{Index: &v.Index})
			if err != nil {
				t.Fatal(err)
			}
			emitted := map[string]bool{}
			for i, e := range eps {
				out, err := d.Step(e)
				if err != nil {
					t.Fatalf("epoch %d: %v", i, err)
				}
				if emit != EmitOnWindowClose {
					continue
				}
				for _, c := range out {
					k := formatRow(c.Row)
					if c.Diff != 1 || emitted[k] {
						t.Fatalf("epoch %d: %+d %s: a closed session's row changed", i, c.Diff, k)
					}
					emitted[k] = true
					if c.Row[end].(time.Time).After(d.Watermark()) {
						t.Fatalf("epoch %d: session ending %v emitted at watermark %v", i, c.Row[end], d.Watermark())
					}
				}
			}
			var late, freed int64
			for _, s := range d.Stats() {
				late += s.Late
				freed += s.Freed
			}
			if late != 0 {
				t.Fatalf("the aggregate dropped %d changes the session emitted", late)
			}
			rows, err := d.View().Rows()
			if err != nil {
				t.Fatal(err)
			}
			w := want[int(emit)]
			sqltest.Equal(t, w, result(w.Name, v, rows), sqltest.Options{})

			plain := testCatalog{}
			for k, r := range cat {
				x := *r
				x.Watermark = false
				plain[k] = &x
			}
			pv, err := compileWith(sql, plain, Options{})
			if err != nil {
				t.Fatal(err)
			}
			pst := flow.NewMemStore()
			run(t, pv, pst, eps)
			free, kept := stateKeys(t, st), stateKeys(t, pst)
			if freed == 0 || free*4 > kept {
				t.Fatalf("%d operator state keys with %d session rows freed, %d without a watermark", free, freed, kept)
			}
			t.Logf("%d sessions; state keys %d with sessions freed (%d rows freed), %d kept", len(rows), free, freed, kept)

			db := openPebble(t)
			half := len(eps) / 2
			run(t, v, flow.NewPebbleStore(db, []byte("v"), false), eps[:half])
			rst := flow.NewPebbleStore(db, []byte("v"), false)
			t.Cleanup(func() { rst.Close() }) // before the database's
			got := run(t, v, rst, eps[half:])
			sqltest.Equal(t, w, result(w.Name, v, got), sqltest.Options{})
			if n := stateKeys(t, rst); n != free {
				t.Fatalf("reopened: %d operator state keys, one run %d", n, free)
			}
		})
	}
}

// BenchmarkIntervalJoin runs TestIntervalJoinExpire's inner interval
// join over Nexmark auctions and bids (6000 events, out of order, as
// streamEpochs reads them) on Pebble, freeing its rows by the
// watermark or (nowm) keeping them all: what the expiry index costs
// per event, and the state each ends with.
func BenchmarkIntervalJoin(b *testing.B) {
	cat := watermarked(b)
	a := *cat["auction"]
	a.Watermark = true
	a.EventTime = slices.IndexFunc(a.Columns, func(c exec.Column) bool { return c.Name == "date_time" })
	cat["auction"] = &a
	plain := testCatalog{}
	for k, r := range cat {
		x := *r
		x.Watermark = false
		plain[k] = &x
	}
	const sql = `SELECT b.auction, b.bidder, b.price, b.date_time, a.seller FROM bid b
		JOIN auction a ON b.auction = a.id AND b.date_time BETWEEN a.date_time AND a.date_time + INTERVAL '2' SECOND`
	for _, tc := range []struct {
		name string
		cat  testCatalog
	}{{"expire", cat}, {"nowm", plain}} {
		b.Run(tc.name, func(b *testing.B) {
			v, err := compileWith(sql, tc.cat, Options{})
			if err != nil {
				b.Fatal(err)
			}
			eps, srcs, _ := streamEpochs(b, v.Inputs, "auction", "bid")
			events := len(srcs["auction"].passed) + len(srcs["bid"].passed)
			b.ReportAllocs()
			var elapsed time.Duration
			keys := 0
			for b.Loop() {
				// On disk, as a view's state is: an in-memory file
				// system's writes are reallocations, which would
				// overstate what writing the index costs.
				db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: quietLogger{}, Merger: flow.CountedMerger})
				if err != nil {
					b.Fatal(err)
				}
				st := flow.NewPebbleStore(db, []byte("v"), false)
				start := time.Now()
				d, err := flow.NewDriver(v.Graph(), st, flow.Options{Index: &v.Index})
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range eps {
					if _, err := d.Step(e); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(start)
				keys = 0
				if err := st.Committed().Scan([]byte{'n'}, []byte{'o'}, false, func(_, _ []byte) (bool, error) {
					keys++
					return true, nil
				}); err != nil {
					b.Fatal(err)
				}
				st.Close()
				db.Close()
			}
			b.ReportMetric(float64(events)*float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(keys), "state-keys")
		})
	}
}

// TestWindowJoinExpire runs Nexmark q8's streaming form (two TUMBLE
// GROUP BYs joined on key and window_start) over persons and auctions
// with watermarks: the join frees a window's rows once the watermark
// passes its end (a window start plus its size), the view equals
// DuckDB's batch q8 over the records the sources passed, holds a
// fraction of the state of the view without watermarks, and reopened
// halfway over Pebble ends the same.
func TestWindowJoinExpire(t *testing.T) {
	o := sqltest.NewOracle(t)
	cat := watermarked(t)
	for _, name := range []string{"auction", "person"} {
		r := *cat[name]
		r.Watermark = true
		r.EventTime = slices.IndexFunc(r.Columns, func(c exec.Column) bool { return c.Name == "date_time" })
		cat[name] = &r
	}
	plain := testCatalog{}
	for k, r := range cat {
		x := *r
		x.Watermark = false
		plain[k] = &x
	}
	stream, err := os.ReadFile(filepath.Join("..", "sqltest", "testdata", "nexmark", "streaming", "q8.sql"))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := sqltest.Corpus(sqltest.SetNexmark)
	if err != nil {
		t.Fatal(err)
	}
	var batch string
	for _, q := range qs {
		if q.Name == "nexmark/q8" {
			batch = q.SQL
		}
	}
	_, srcs, tables := streamEpochs(t, nil, "auction", "person")
	var passed []sqltest.Table
	for _, name := range []string{"auction", "person"} {
		passed = append(passed, sqltest.Table{Name: name, Columns: tables[name].Columns, Rows: srcs[name].passed})
	}
	// And as a LEFT JOIN: persons with no auction in their window are
	// padded, final once the window's rows are freed.
	left := func(sql string) string { return strings.Replace(sql, ") P\nJOIN (", ") P\nLEFT JOIN (", 1) }
	if left(batch) == batch || left(string(stream)) == string(stream) {
		t.Fatal("q8 has no ') P JOIN (' to make a LEFT JOIN of")
	}
	wants := o.Query(t, passed, sqltest.Query{Name: "q8", SQL: batch}, sqltest.Query{Name: "q8", SQL: left(batch)})
	for i, sql := range []string{string(stream), left(string(stream))} {
		t.Run([]string{"inner", "left"}[i], func(t *testing.T) { windowJoin(t, sql, cat, plain, wants[i]) })
	}
}

func windowJoin(t *testing.T, sql string, cat, plain testCatalog, want sqltest.Result) {
	if len(want.Rows) < 10 {
		t.Fatalf("DuckDB has %d rows: too few to compare", len(want.Rows))
	}
	v, err := compileWith(sql, cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var exp [2][]flow.JoinExpiry
	for _, n := range v.nodes {
		if j, ok := n.op.(*flow.Join); ok {
			exp = j.Expire
		}
	}
	if len(exp[0]) == 0 || len(exp[1]) == 0 || exp[0][0].Offset != 10*time.Second {
		t.Fatalf("the window join's expiries: %+v", exp)
	}
	eps, _, _ := streamEpochs(t, v.Inputs, "auction", "person")
	st := flow.NewMemStore()
	sqltest.Equal(t, want, result("q8", v, run(t, v, st, eps)), sqltest.Options{})
	pv, err := compileWith(sql, plain, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pst := flow.NewMemStore()
	sqltest.Equal(t, want, result("q8", pv, run(t, pv, pst, eps)), sqltest.Options{})
	free, kept := stateKeys(t, st), stateKeys(t, pst)
	if free*4 > kept {
		t.Fatalf("%d operator state keys with windows freed, %d without a watermark", free, kept)
	}
	t.Logf("%d rows; state keys %d with windows freed, %d kept", len(want.Rows), free, kept)
	db := openPebble(t)
	half := len(eps) / 2
	run(t, v, flow.NewPebbleStore(db, []byte("v"), false), eps[:half])
	rst := flow.NewPebbleStore(db, []byte("v"), false)
	t.Cleanup(func() { rst.Close() }) // before the database's
	sqltest.Equal(t, want, result("q8", v, run(t, v, rst, eps[half:])), sqltest.Options{})
	if n := stateKeys(t, rst); n != free {
		t.Fatalf("reopened: %d operator state keys, one run %d", n, free)
	}
}
