package viewplan

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/bench/nexmark"
	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/sql/types"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/corpus.txt with this run's outcomes")

// testCatalog is relations by name.
type testCatalog map[string]*Relation

func (c testCatalog) Relation(schema, name string) (*Relation, bool, error) {
	if schema != "" && schema != "public" {
		return nil, false, nil
	}
	r, ok := c[name]
	return r, ok, nil
}

// tableType reads a sqltest table column's type.
func tableType(t testing.TB, name string) types.Type {
	if name == "numeric(10,2)" {
		return types.NumericPS(10, 2)
	}
	typ, ok := types.ByName(name)
	if !ok {
		t.Fatalf("no type %q", name)
	}
	return typ
}

func catalogOf(t testing.TB, tables ...[]sqltest.Table) testCatalog {
	cat := testCatalog{}
	for _, ts := range tables {
		for _, tb := range ts {
			r := &Relation{Name: tb.Name}
			for _, col := range tb.Columns {
				r.Columns = append(r.Columns, exec.Column{Name: col.Name, Type: tableType(t, col.Type)})
			}
			cat[tb.Name] = r
		}
	}
	return cat
}

// tableChange is one change to a table: a row inserted (+1) or
// deleted (-1).
type tableChange struct {
	table string
	row   types.Row
	diff  int64
}

// fromTable converts a sqltest table value to the engine's.
func fromTable(t testing.TB, v any) any {
	switch v.(type) {
	case nil, int32, int64, float64, string, time.Time:
		return v
	}
	x, err := types.FromWire(types.Numeric, v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func tableRow(t testing.TB, vals []any) types.Row {
	row := make(types.Row, len(vals))
	for i, v := range vals {
		row[i] = fromTable(t, v)
	}
	return row
}

// smallHistory is the keyed history as an upsert source gives it: a
// new value for a key retracts the old, a delete retracts it.
func smallHistory(t testing.TB, history []sqltest.Change) []tableChange {
	state := map[string]map[int64]types.Row{"customers": {}, "products": {}, "orders": {}}
	var out []tableChange
	for _, c := range history {
		if old, ok := state[c.Table][c.Key]; ok {
			out = append(out, tableChange{c.Table, old, -1})
			delete(state[c.Table], c.Key)
		}
		if c.Row != nil {
			row := tableRow(t, c.Row)
			state[c.Table][c.Key] = row
			out = append(out, tableChange{c.Table, row, 1})
		}
	}
	return out
}

// nexmarkHistory inserts the events in order, then deletes every
// deleteEvery'th (so MAX, joins and windows retract; 0: none), and
// returns the changes and the final tables.
func nexmarkHistory(t testing.TB, events []nexmark.Event, deleteEvery int) ([]tableChange, []sqltest.Table) {
	all := sqltest.NexmarkTables(events)
	final := make([]sqltest.Table, len(all))
	var out, deletes []tableChange
	n := 0
	// Interleave the tables in event order, as a stream has them.
	idx := map[string]int{}
	for _, ev := range events {
		tb := ev.Kind.Table()
		ti := map[string]int{"person": 0, "auction": 1, "bid": 2}[tb]
		vals := all[ti].Rows[idx[tb]]
		idx[tb]++
		row := tableRow(t, vals)
		out = append(out, tableChange{tb, row, 1})
		if deleteEvery > 0 && n%deleteEvery == 3 {
			deletes = append(deletes, tableChange{tb, row, -1})
		} else {
			final[ti].Rows = append(final[ti].Rows, vals)
		}
		n++
	}
	for i := range final {
		final[i].Name, final[i].Columns = all[i].Name, all[i].Columns
	}
	return append(out, deletes...), final
}

// epochs batches changes into epochs of 1 to maxEpoch changes for v's
// inputs (changes to tables v does not read are dropped).
func epochs(v *View, changes []tableChange, r *rand.Rand, maxEpoch int) []flow.Epoch {
	input := map[string]int{}
	for i, name := range v.Inputs {
		input[name] = i
	}
	var out []flow.Epoch
	for i := 0; i < len(changes); {
		n := 1 + r.IntN(maxEpoch)
		e := flow.Epoch{Inputs: make([][]types.Change, len(v.Inputs))}
		for _, c := range changes[i:min(i+n, len(changes))] {
			if in, ok := input[c.table]; ok {
				e.Inputs[in] = append(e.Inputs[in], types.Change{Row: c.row, Diff: c.diff})
			}
		}
		out = append(out, e)
		i += n
	}
	return out
}

func openPebble(t testing.TB) *pebble.DB {
	t.Helper()
	// As a view's state in the agent (internal/sql/views): the index's
	// additions are merges of counted rows.
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Merger: flow.CountedMerger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// run feeds epochs to a driver of v over st and returns the view's
// final contents.
func run(t testing.TB, v *View, st flow.Store, eps []flow.Epoch) []types.Row {
	t.Helper()
	d, err := flow.NewDriver(v.Graph(), st, flow.Options{Index: &v.Index})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range eps {
		if _, err := d.Step(e); err != nil {
			t.Fatalf("epoch %d: %v", i+1, err)
		}
	}
	rows, err := d.View().Rows()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// pgName is a type as sqltest's results name it.
func pgName(t types.Type) string {
	switch t.OID {
	case types.OIDBool:
		return "bool"
	case types.OIDInt2:
		return "int2"
	case types.OIDInt4:
		return "int4"
	case types.OIDInt8:
		return "int8"
	case types.OIDFloat4:
		return "float4"
	case types.OIDFloat8:
		return "float8"
	case types.OIDNumeric:
		return "numeric"
	case types.OIDText, types.OIDUnknown:
		return "text"
	case types.OIDVarchar:
		return "varchar"
	case types.OIDTimestamp:
		return "timestamp"
	case types.OIDTimestampTZ:
		return "timestamptz"
	case types.OIDDate:
		return "date"
	case types.OIDInterval:
		return "interval"
	case types.OIDJSONB:
		return "json"
	case types.OIDBytea:
		return "bytea"
	}
	return t.Name()
}

// result is a view's contents as an oracle Result, with the view's own
// column names and types.
func result(name string, v *View, rows []types.Row) sqltest.Result {
	got := sqltest.Result{Name: name}
	for _, c := range v.Columns {
		got.Columns = append(got.Columns, sqltest.Column{Name: c.Name, Type: pgName(c.Type)})
	}
	for _, r := range rows {
		vals := make([]any, len(r))
		for i, x := range r {
			vals[i] = types.ToWire(x)
		}
		got.Rows = append(got.Rows, vals)
	}
	return got
}

// viewQuery is a corpus query compiled as a view.
type viewQuery struct {
	name   string
	sql    string // what the view is compiled from
	oracle string // what DuckDB runs (the batch form of a streaming query)
	tables []string
}

func (q viewQuery) nexmark() bool {
	for _, t := range q.tables {
		if t == "person" || t == "auction" || t == "bid" {
			return true
		}
	}
	return false
}

// corpusQueries are the general corpus, Nexmark q0-q8 (batch form) and
// the streaming forms (TUMBLE/HOP) checked against the batch forms.
func corpusQueries(t testing.TB) []viewQuery {
	var out []viewQuery
	batch := map[string]viewQuery{}
	for _, set := range []string{sqltest.SetGeneral, sqltest.SetNexmark} {
		qs, err := sqltest.Corpus(set)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			vq := viewQuery{name: q.Name, sql: q.SQL, oracle: q.SQL, tables: q.Tables}
			out = append(out, vq)
			batch[q.Name] = vq
		}
	}
	dir := filepath.Join("..", "sqltest", "testdata", "nexmark", "streaming")
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(filepath.Base(f), ".sql")
		bq, ok := batch["nexmark/"+base]
		if !ok {
			t.Fatalf("streaming %s has no batch form", base)
		}
		out = append(out, viewQuery{name: "nexmark/streaming/" + base, sql: string(b), oracle: bq.oracle, tables: bq.tables})
	}
	return append(out, streamingQueries(t)...)
}

// streamingQueries are testdata/streaming's: a streaming form (SESSION
// windows) DuckDB has no spelling of, then, after a "-- batch:" line,
// the batch query (window functions) it must equal; "-- tables:" in
// the header names what it reads.
func streamingQueries(t testing.TB) []viewQuery {
	files, err := filepath.Glob(filepath.Join("testdata", "streaming", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var out []viewQuery
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stream, batch, ok := strings.Cut(string(b), "\n-- batch:\n")
		if !ok {
			t.Fatalf("%s has no -- batch: line", f)
		}
		q := viewQuery{name: "streaming/" + strings.TrimSuffix(filepath.Base(f), ".sql"), sql: stream, oracle: batch}
		for _, line := range strings.Split(stream, "\n") {
			if rest, ok := strings.CutPrefix(line, "-- tables:"); ok {
				for _, tb := range strings.Split(rest, ",") {
					q.tables = append(q.tables, strings.TrimSpace(tb))
				}
			}
		}
		if len(q.tables) == 0 {
			t.Fatalf("%s names no tables", f)
		}
		out = append(out, q)
	}
	return out
}

// TestCorpusOracle compiles every corpus query as a view, feeds the
// view its inputs' changes in random epochs (the small tables' keyed
// history with updates and deletes; Nexmark events inserted, then a
// tenth deleted) over MemStore and PebbleStore, and compares the final
// contents, with the view's column names and types, with DuckDB's
// answer over the final tables. Each query's outcome (match, or the
// error that refused it) is kept in testdata/corpus.txt (-rewrite).
func TestCorpusOracle(t *testing.T) {
	o := sqltest.NewOracle(t)
	seed := uint64(1)
	small := sqltest.SmallChanges(seed, 900)
	smallChanges := smallHistory(t, small)
	smallTables := sqltest.SmallTables(small)
	// As many events as the corpus is checked over (fewer give q2 no
	// rows).
	nEvents := int64(5000)
	events, err := sqltest.GenerateNexmark(sqltest.NexmarkCorpusConfig(seed, nEvents))
	if err != nil {
		t.Fatal(err)
	}
	nexChanges, nexTables := nexmarkHistory(t, events, 10)
	cat := catalogOf(t, smallTables, nexTables)

	queries := corpusQueries(t)
	outcome := map[string]string{}
	views := map[string]*View{}
	var smallQ, nexQ []sqltest.Query
	for _, q := range queries {
		v, err := Compile(q.sql, cat)
		if err != nil {
			if code := sqlerr.Code(err); code != sqlerr.FeatureNotSupported {
				t.Errorf("%s: refused with %s, not 0A000: %v", q.name, code, err)
			}
			outcome[q.name] = "refused: " + err.Error()
			continue
		}
		views[q.name] = v
		oq := sqltest.Query{Name: q.name, SQL: q.oracle}
		if q.nexmark() {
			nexQ = append(nexQ, oq)
		} else {
			smallQ = append(smallQ, oq)
		}
	}
	want := map[string]sqltest.Result{}
	for _, r := range append(o.Query(t, smallTables, smallQ...), o.Query(t, nexTables, nexQ...)...) {
		if r.Err != nil {
			t.Fatalf("DuckDB: %s: %v", r.Name, r.Err)
		}
		want[r.Name] = r
	}
	for i, q := range queries {
		v := views[q.name]
		if v == nil {
			continue
		}
		changes := smallChanges
		if q.nexmark() {
			changes = nexChanges
		}
		ok := t.Run(q.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			w := want[q.name]
			eps := epochs(v, changes, r, 40)
			memRows := run(t, v, flow.NewMemStore(), eps)
			sqltest.Equal(t, w, result(q.name, v, memRows), sqltest.Options{})
			peb := flow.NewPebbleStore(openPebble(t), []byte("v"), false)
			peb.SetCountedMerges(true)
			pebRows := run(t, v, peb, eps)
			sqltest.Equal(t, w, result(q.name, v, pebRows), sqltest.Options{})
			if !testing.Short() {
				// Another batching, epochs of one to three changes.
				rows := run(t, v, flow.NewMemStore(), epochs(v, changes, r, 3))
				sqltest.Equal(t, w, result(q.name, v, rows), sqltest.Options{})
			}
		})
		if ok {
			outcome[q.name] = fmt.Sprintf("match (%d rows)", len(want[q.name].Rows))
		} else {
			outcome[q.name] = "DIFFERS"
		}
	}
	var b strings.Builder
	matched := 0
	for _, q := range queries {
		fmt.Fprintf(&b, "%s: %s\n", q.name, outcome[q.name])
		if strings.HasPrefix(outcome[q.name], "match") {
			matched++
		}
	}
	fmt.Fprintf(&b, "%d of %d match DuckDB\n", matched, len(queries))
	t.Logf("%d of %d corpus queries compile and match DuckDB", matched, len(queries))
	golden(t, filepath.Join("testdata", "corpus.txt"), b.String())
}

// golden compares got with the file, or writes it under -rewrite.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if string(b) != got {
		t.Errorf("%s differs (run with -rewrite to accept):\n--- want\n%s\n--- got\n%s", path, b, got)
	}
}
