package viewplan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/sql/types"
)

// watermarked is smallCatalog with a watermark on bid.date_time and
// orders.ts, as sources with watermark.column have.
func watermarked(t testing.TB) testCatalog {
	cat := smallCatalog(t)
	for name, col := range map[string]string{"bid": "date_time", "orders": "ts"} {
		r := *cat[name]
		r.Watermark = true
		r.EventTime = slices.IndexFunc(r.Columns, func(c exec.Column) bool { return c.Name == col })
		cat[name] = &r
	}
	return cat
}

func TestEmitOptionRefused(t *testing.T) {
	cat := watermarked(t)
	for _, tc := range []struct {
		sql   string
		state string
	}{
		{"SELECT auction, count(*) AS n FROM bid GROUP BY auction", sqlerr.FeatureNotSupported},
		// A computed window start has no lineage to the watermark.
		{"SELECT date_trunc('minute', date_time) AS w, count(*) AS n FROM bid GROUP BY 1", sqlerr.FeatureNotSupported},
		// A window over another column than the watermark's.
		{"SELECT window_start, count(*) AS n FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND) GROUP BY window_start", sqlerr.InvalidObjectDefinition},
		// Rows that a join may change after the window closes.
		{`SELECT w.window_start, w.n, p.name FROM (SELECT window_start, min(bidder) AS b, count(*) AS n
			FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_start) w JOIN person p ON p.id = w.b`, sqlerr.InvalidObjectDefinition},
		{"SELECT * FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)", sqlerr.FeatureNotSupported},
		{"SELECT customer_id, window_start, count(*) AS n FROM SESSION(orders, ts, INTERVAL '10 minutes', customer_id) GROUP BY customer_id, window_start", sqlerr.FeatureNotSupported},
	} {
		_, err := compileWith(tc.sql, cat, Options{Emit: EmitOnWindowClose})
		var e *sqlerr.Error
		if !errors.As(err, &e) || e.Code != tc.state {
			t.Errorf("%s: got %v, want SQLSTATE %s", tc.sql, err, tc.state)
		}
	}
	// auction and person have no watermark: the second case says so
	// (42P17), the join case too, since person has none.
	for _, sql := range []string{
		"SELECT window_start, window_end, count(*) AS n FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_start, window_end",
		"SELECT auction, window_start, count(*) AS n FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY auction, window_start HAVING count(*) > 1",
		// A SESSION's window_end closes its windows (window_start does not: above).
		"SELECT customer_id, window_start, window_end, count(*) AS n FROM SESSION(orders, ts, INTERVAL '10 minutes', customer_id) GROUP BY customer_id, window_start, window_end",
	} {
		if _, err := compileWith(sql, cat, Options{Emit: EmitOnWindowClose}); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	if _, err := ParseEmit("sometimes"); err == nil {
		t.Error("emit 'sometimes' accepted")
	}
}

func compileWith(sql string, cat Catalog, opts Options) (*View, error) {
	st, err := ParseSelect(sql)
	if err != nil {
		return nil, err
	}
	return CompileSelectWith(st, cat, opts)
}

// source simulates a source's reader over bids spread on partitions: a
// partition's watermark is its greatest event time minus delay, a
// record earlier than its partition's watermark is late (dropped and
// counted), and the source's watermark is the least of its
// partitions' (zero while one has none).
type source struct {
	col    int // the event time's column
	delay  time.Duration
	max    []time.Time
	late   int
	passed [][]any
}

func (s *source) watermark() time.Time {
	var wm time.Time
	for _, m := range s.max {
		if m.IsZero() {
			return time.Time{}
		}
		if w := m.Add(-s.delay); wm.IsZero() || w.Before(wm) {
			wm = w
		}
	}
	return wm
}

// read judges one record of partition p.
func (s *source) read(p int, row []any) bool {
	ts := row[s.col].(time.Time)
	late := !s.max[p].IsZero() && ts.Before(s.max[p].Add(-s.delay))
	if ts.After(s.max[p]) {
		s.max[p] = ts
	}
	if late {
		s.late++
		return false
	}
	s.passed = append(s.passed, row)
	return true
}

// TestEmitOnWindowClose runs windowed views over bids whose event times
// are out of order, read from four partitions at different paces with a
// 1 s watermark delay. With emit = 'on_window_close' the view holds
// exactly the windows whose end is at or before the watermark, each
// emitted once (never retracted) and equal to DuckDB's answer for that
// window over the records the source passed; with 'on_update' it holds
// every window, equal to DuckDB's; the aggregates drop no record the
// source passed, and a record for a closed window fed past the source
// is dropped and counted. Closed windows' state is freed in both modes.
func TestEmitOnWindowClose(t *testing.T) {
	o := sqltest.NewOracle(t)
	cat := watermarked(t)
	eps, src, bids := bidEpochs(t)
	if src.late == 0 {
		t.Fatal("no record late at the source: the test needs some")
	}
	final := src.watermark()
	passed := []sqltest.Table{{Name: "bid", Columns: bids.Columns, Rows: src.passed}}
	start := func(slide int) string {
		return fmt.Sprintf("TIMESTAMP '1970-01-01' + INTERVAL '1 second' * (CAST(floor(extract(epoch FROM date_time) / %d) AS bigint) * %d)", slide, slide)
	}
	closed := func(size int) string {
		return fmt.Sprintf("window_start + INTERVAL '%d seconds' <= TIMESTAMP '%s'", size, final.UTC().Format("2006-01-02 15:04:05.999999"))
	}
	tumble := "SELECT " + start(10) + " AS window_start, count(*) AS n, sum(price) AS total, max(price) AS top FROM bid GROUP BY 1"
	hop := "SELECT auction, window_start, count(*) AS n FROM (SELECT auction, " + start(2) +
		" - INTERVAL '2 seconds' * k.n AS window_start FROM bid CROSS JOIN generate_series(0, 4) AS k(n)) w GROUP BY auction, window_start HAVING count(*) > 1"
	want := o.Query(t, passed,
		sqltest.Query{Name: "tumble_all", SQL: tumble},
		sqltest.Query{Name: "tumble_closed", SQL: "SELECT * FROM (" + tumble + ") x WHERE " + closed(10)},
		sqltest.Query{Name: "hop_all", SQL: hop},
		sqltest.Query{Name: "hop_closed", SQL: "SELECT * FROM (" + hop + ") x WHERE " + closed(10)})
	for _, tc := range []struct {
		name, sql string
		size      time.Duration
		all       int   // want's index of every window
		perRecord int64 // windows a record is in
	}{
		{"tumble", "SELECT window_start, count(*) AS n, sum(price) AS total, max(price) AS top FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_start", 10 * time.Second, 0, 1},
		// The window start second in the group key (flow wants it
		// first: the compiler reorders and projects back), HAVING over it.
		{"hop", "SELECT auction, window_start, count(*) AS n FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY auction, window_start HAVING count(*) > 1", 10 * time.Second, 2, 5},
	} {
		for _, emit := range []Emit{EmitOnUpdate, EmitOnWindowClose} {
			t.Run(tc.name+"/"+emit.String(), func(t *testing.T) {
				v, err := compileWith(tc.sql, cat, Options{Emit: emit})
				if err != nil {
					t.Fatal(err)
				}
				ws := slices.IndexFunc(v.Columns, func(c exec.Column) bool { return c.Name == "window_start" })
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
							t.Fatalf("epoch %d: %+d %s: a closed window's row changed", i, c.Diff, k)
						}
						emitted[k] = true
						if end := c.Row[ws].(time.Time).Add(tc.size); end.After(d.Watermark()) {
							t.Fatalf("epoch %d: window ending %v emitted at watermark %v", i, end, d.Watermark())
						}
					}
				}
				if !d.Watermark().Equal(final) {
					t.Fatalf("watermark %v, the source's %v", d.Watermark(), final)
				}
				var late int64
				for _, s := range d.Stats() {
					late += s.Late
				}
				if late != 0 {
					t.Fatalf("the aggregate dropped %d records the source passed", late)
				}
				rows, err := d.View().Rows()
				if err != nil {
					t.Fatal(err)
				}
				w := want[tc.all+int(emit)]
				if len(w.Rows) == 0 {
					t.Fatal("DuckDB has no windows to compare")
				}
				sqltest.Equal(t, w, result(w.Name, v, rows), sqltest.Options{})

				// Closed windows' state is gone: what the operators keep
				// is the open windows' alone (fewer keys than a view
				// without a watermark keeps).
				free := stateKeys(t, st)
				plain := testCatalog{}
				for k, r := range cat {
					x := *r
					x.Watermark = false
					plain[k] = &x
				}
				pv, err := compileWith(tc.sql, plain, Options{})
				if err != nil {
					t.Fatal(err)
				}
				pst := flow.NewMemStore()
				run(t, pv, pst, eps)
				if kept := stateKeys(t, pst); free*4 > kept {
					t.Fatalf("%d operator state keys with closed windows freed, %d without a watermark", free, kept)
				}

				// A record for a closed window (one the source would have
				// dropped) is dropped and counted, the view unchanged.
				old := tableRow(t, bids.Rows[0])
				if _, err := d.Step(flow.Epoch{Inputs: [][]types.Change{{{Row: old, Diff: 1}}}, Watermark: final}); err != nil {
					t.Fatal(err)
				}
				late = 0
				for _, s := range d.Stats() {
					late += s.Late
				}
				if late != tc.perRecord {
					t.Fatalf("late count %d after a record for a closed window, want %d", late, tc.perRecord)
				}
				after, err := d.View().Rows()
				if err != nil {
					t.Fatal(err)
				}
				sqltest.Equal(t, w, result(w.Name, v, after), sqltest.Options{})
			})
		}
	}
}

// bidEpochs reads 4000 Nexmark events' bids, event times up to 3 s out
// of order, from four partitions at different paces as a source with a
// 1 s watermark delay does: the epochs a view of bid gets, the source,
// and the bids as generated.
func bidEpochs(t testing.TB) ([]flow.Epoch, *source, sqltest.Table) {
	events, err := sqltest.GenerateNexmark(sqltest.NexmarkCorpusConfig(11, 4000))
	if err != nil {
		t.Fatal(err)
	}
	bids := sqltest.NexmarkTables(events)[2]
	r := rand.New(rand.NewPCG(11, 29))
	const parts = 4
	byPart := make([][][]any, parts)
	for i, row := range bids.Rows {
		row = slices.Clone(row)
		// Up to 3 s out of order, against a 1 s delay: some records
		// are late at the source.
		row[5] = row[5].(time.Time).Add(-time.Duration(r.IntN(3000)) * time.Millisecond)
		byPart[i%parts] = append(byPart[i%parts], row)
	}
	src := &source{col: 5, delay: time.Second, max: make([]time.Time, parts)}
	var eps []flow.Epoch
	for pos := make([]int, parts); ; {
		e := flow.Epoch{Inputs: make([][]types.Change, 1)}
		done := true
		for p := range parts {
			// Partitions advance at different paces.
			n := min(r.IntN(8*(p+1)), len(byPart[p])-pos[p])
			for _, row := range byPart[p][pos[p] : pos[p]+n] {
				if src.read(p, row) {
					e.Inputs[0] = append(e.Inputs[0], types.Change{Row: tableRow(t, row), Diff: 1})
				}
			}
			pos[p] += n
			done = done && pos[p] == len(byPart[p])
		}
		e.Watermark = src.watermark()
		eps = append(eps, e)
		if done {
			break
		}
	}
	return eps, src, bids
}

// TestEmitReopen: a view emitting on window close, rebuilt over its
// Pebble store halfway (as a restarted agent does), ends where one
// uninterrupted run does: which windows are closed and what they hold
// is in the store.
func TestEmitReopen(t *testing.T) {
	eps, _, _ := bidEpochs(t)
	v, err := compileWith("SELECT auction, window_start, count(*) AS n, max(price) AS top FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY auction, window_start",
		watermarked(t), Options{Emit: EmitOnWindowClose})
	if err != nil {
		t.Fatal(err)
	}
	whole := run(t, v, flow.NewMemStore(), eps)
	db := openPebble(t)
	half := len(eps) / 2
	run(t, v, flow.NewPebbleStore(db, []byte("v"), false), eps[:half])
	got := run(t, v, flow.NewPebbleStore(db, []byte("v"), false), eps[half:])
	show := func(rows []types.Row) []string {
		var s []string
		for _, r := range rows {
			s = append(s, formatRow(r))
		}
		slices.Sort(s)
		return s
	}
	if len(whole) == 0 || !slices.Equal(show(whole), show(got)) {
		t.Fatalf("reopened run ends with %d rows, one run with %d", len(got), len(whole))
	}
}

// stateKeys counts the operators' state keys ('n' ...) in st.
func stateKeys(t *testing.T, st flow.Store) int {
	t.Helper()
	n := 0
	if err := st.Scan([]byte{'n'}, []byte{'o'}, false, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
