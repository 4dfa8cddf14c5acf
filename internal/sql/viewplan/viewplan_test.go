package viewplan

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/sql/types"
)

func smallCatalog(t testing.TB) testCatalog {
	return catalogOf(t, sqltest.SmallTables(nil), sqltest.NexmarkTables(nil))
}

// TestViewOverView compiles views whose inputs are other views' and
// runs them as chained drivers (each epoch's output of one is the
// next's input in the same epoch), against DuckDB's answer for the
// composed query.
func TestViewOverView(t *testing.T) {
	o := sqltest.NewOracle(t)
	cat := smallCatalog(t)
	perCustomer, err := Compile("SELECT customer_id, count(*) AS n, sum(qty) AS qty FROM orders GROUP BY customer_id", cat)
	if err != nil {
		t.Fatal(err)
	}
	if !perCustomer.Index.Unique || !slices.Equal(perCustomer.Index.KeyCols, []int{0}) {
		t.Errorf("GROUP BY view indexed by %+v, want its group key, unique", perCustomer.Index)
	}
	cat["per_customer"] = &Relation{Name: "per_customer", Columns: perCustomer.Columns}
	byCount, err := Compile("SELECT n, count(*) AS customers, max(qty) AS top FROM per_customer GROUP BY n", cat)
	if err != nil {
		t.Fatal(err)
	}
	withCity, err := Compile("SELECT c.city, p.n, p.qty FROM per_customer p JOIN customers c ON c.id = p.customer_id WHERE p.n > 1", cat)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(withCity.Inputs, []string{"per_customer", "customers"}) {
		t.Fatalf("inputs %v", withCity.Inputs)
	}
	history := sqltest.SmallChanges(7, 900)
	tables := sqltest.SmallTables(history)
	sub := "(SELECT customer_id, count(*) AS n, sum(qty) AS qty FROM orders GROUP BY customer_id)"
	want := o.Query(t, tables,
		sqltest.Query{Name: "by_count", SQL: "SELECT n, count(*) AS customers, max(qty) AS top FROM " + sub + " p GROUP BY n"},
		sqltest.Query{Name: "with_city", SQL: "SELECT c.city, p.n, p.qty FROM " + sub + " p JOIN customers c ON c.id = p.customer_id WHERE p.n > 1"})

	eps := epochs(&View{Inputs: []string{"orders", "customers"}}, smallHistory(t, history), rand.New(rand.NewPCG(7, 7)), 30)
	newDriver := func(v *View) *flow.Driver {
		d, err := flow.NewDriver(v.Graph(), flow.NewMemStore(), flow.Options{Index: &v.Index})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b, c := newDriver(perCustomer), newDriver(byCount), newDriver(withCity)
	for i, e := range eps {
		out, err := a.Step(flow.Epoch{Inputs: e.Inputs[:1]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Step(flow.Epoch{Inputs: [][]types.Change{out}}); err != nil {
			t.Fatalf("epoch %d: %v", i, err)
		}
		if _, err := c.Step(flow.Epoch{Inputs: [][]types.Change{out, e.Inputs[1]}}); err != nil {
			t.Fatalf("epoch %d: %v", i, err)
		}
	}
	for i, d := range []*flow.Driver{b, c} {
		rows, err := d.View().Rows()
		if err != nil {
			t.Fatal(err)
		}
		v := []*View{byCount, withCity}[i]
		sqltest.Equal(t, want[i], result(want[i].Name, v, rows), sqltest.Options{})
	}
}

// TestReopen runs half a view's epochs, builds its graph again over the
// same Pebble store (as a restarted agent does), and finishes: the
// contents equal one uninterrupted run's.
func TestReopen(t *testing.T) {
	for _, sql := range []string{
		`SELECT customer_id, id, price, rn FROM (
		SELECT customer_id, id, price, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY price DESC, id) AS rn FROM orders) t
		WHERE rn <= 2`,
		// The operators added for string_agg, set operations, residual
		// outer joins, scalar subqueries, sessions and ROWS frames keep
		// all their state in the store too.
		`SELECT status, string_agg(CAST(id AS text), ',' ORDER BY id) AS ids, var_samp(discount) AS v FROM orders GROUP BY status`,
		`SELECT customer_id FROM orders WHERE qty > 2 EXCEPT ALL SELECT id FROM customers`,
		`SELECT c.id, o.id AS o FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.qty > c.tier`,
		`SELECT id, qty - (SELECT max(qty) FROM orders WHERE status = 'new') AS d FROM orders`,
		`SELECT customer_id, window_start, count(*) AS n FROM SESSION(orders, ts, INTERVAL '10 minutes', customer_id) GROUP BY customer_id, window_start`,
		`SELECT id, sum(qty) OVER (PARTITION BY customer_id ORDER BY ts, id ROWS 2 PRECEDING) AS s FROM orders`,
	} {
		t.Run("", func(t *testing.T) { reopen(t, sql) })
	}
}

func reopen(t *testing.T, sql string) {
	v, err := Compile(sql, smallCatalog(t))
	if err != nil {
		t.Fatal(err)
	}
	eps := epochs(v, smallHistory(t, sqltest.SmallChanges(3, 600)), rand.New(rand.NewPCG(3, 3)), 20)
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
		t.Fatalf("reopened run ends with %d rows %v, one run with %d %v", len(got), show(got), len(whole), show(whole))
	}
}

// TestRefused: what a view cannot be is refused with the SQLSTATE
// PostgreSQL would use, naming the construct; nothing else is lost.
func TestRefused(t *testing.T) {
	cat := smallCatalog(t)
	for _, tc := range []struct {
		sql, code, msg string
	}{
		{"SELECT o.id FROM orders o JOIN products p ON o.price < p.list_price", sqlerr.FeatureNotSupported, "without an equality"},
		{"SELECT o.id FROM orders o, products p", sqlerr.FeatureNotSupported, "without an equality"},
		{"SELECT c.id FROM customers c LEFT JOIN orders o ON o.customer_id > c.id", sqlerr.FeatureNotSupported, "without an equality"},
		{"SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id > c.id)", sqlerr.FeatureNotSupported, "EXISTS"},
		{"SELECT id FROM customers c WHERE c.id NOT IN (SELECT customer_id FROM orders)", sqlerr.FeatureNotSupported, "IN/ANY"},
		{"SELECT id FROM orders o WHERE price > (SELECT avg(price) FROM orders i WHERE i.product_id = o.product_id)", sqlerr.FeatureNotSupported, "correlated scalar subquery"},
		{"SELECT count(*) + (SELECT count(*) FROM customers) FROM orders", sqlerr.FeatureNotSupported, "aggregate without GROUP BY"},
		{"SELECT id FROM orders LIMIT 3", sqlerr.FeatureNotSupported, "LIMIT or OFFSET without ORDER BY"},
		{"SELECT id, now() FROM orders", sqlerr.FeatureNotSupported, "now()"},
		{"SELECT id, CURRENT_TIMESTAMP FROM orders", sqlerr.FeatureNotSupported, "current time"},
		{"SELECT id FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rn FROM orders) t", sqlerr.FeatureNotSupported, "upper bound on rn"},
		{"SELECT id, rank() OVER (ORDER BY id) FROM orders", sqlerr.FeatureNotSupported, "window function rank"},
		{"SELECT c.id, t.n FROM customers c, LATERAL (SELECT count(*) AS n FROM orders o WHERE o.customer_id = c.id) t", sqlerr.FeatureNotSupported, "LATERAL"},
		{"SELECT c.id, t.id FROM customers c, LATERAL (SELECT o.id FROM orders o WHERE o.customer_id > c.id ORDER BY o.id LIMIT 1) t", sqlerr.FeatureNotSupported, "LATERAL"},
		{"SELECT id, avg(qty) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) FROM orders", sqlerr.FeatureNotSupported, "ROWS BETWEEN n PRECEDING AND CURRENT ROW only"},
		{"SELECT id, avg(qty) OVER (ORDER BY id RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) FROM orders", sqlerr.FeatureNotSupported, "ROWS BETWEEN n PRECEDING"},
		{"SELECT id, sum(qty) OVER (ORDER BY id ROWS 2 PRECEDING), max(qty) OVER (ORDER BY id ROWS 2 PRECEDING) FROM orders", sqlerr.FeatureNotSupported, "more than one window function"},
		{"SELECT tier, string_agg(DISTINCT name, ',') FROM customers GROUP BY tier", sqlerr.FeatureNotSupported, "string_agg(DISTINCT"},
		{"SELECT status, array_agg(discount) FROM orders GROUP BY status", sqlerr.FeatureNotSupported, "array_agg"},
		{"SELECT sum(DISTINCT qty) FROM orders", sqlerr.FeatureNotSupported, "sum(DISTINCT)"},
		{"SELECT * FROM generate_series(1, 3, 0)", sqlerr.InvalidParameterValue, "step size"},
		{"SELECT * FROM TUMBLE(orders, ts, INTERVAL '1 month')", sqlerr.InvalidParameterValue, "months"},
		{"SELECT * FROM HOP(orders, ts, INTERVAL '1 second', INTERVAL '1 hour')", sqlerr.ProgramLimitExceeded, "more than 1024 windows"},
		{"SELECT * FROM TUMBLE(orders, status, INTERVAL '1 hour')", sqlerr.DatatypeMismatch, "not a timestamp"},
		{"SELECT * FROM unnest(ARRAY[1])", sqlerr.FeatureNotSupported, "unnest"},
		{"SELECT * FROM nowhere", sqlerr.UndefinedTable, "nowhere"},
		{"SELECT nothing FROM orders", sqlerr.UndefinedColumn, "nothing"},
		{"SELECT id FROM orders WHERE id = $1", sqlerr.FeatureNotSupported, "parameters"},
		{"WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r", sqlerr.FeatureNotSupported, "RECURSIVE"},
		{"INSERT INTO orders VALUES (1)", sqlerr.SyntaxError, "SELECT"},
	} {
		_, err := Compile(tc.sql, cat)
		if sqlerr.Code(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v (%s), want %s with %q", tc.sql, err, sqlerr.Code(err), tc.code, tc.msg)
		}
	}
}

// TestCompiled checks what Compile says about views it accepts: their
// columns, index, inputs and notices.
func TestCompiled(t *testing.T) {
	cat := smallCatalog(t)
	for _, tc := range []struct {
		sql     string
		cols    string
		index   flow.IndexSpec
		inputs  []string
		notices int
	}{
		{sql: "SELECT status, count(*) AS n FROM orders GROUP BY status ORDER BY n", cols: "status text, n bigint",
			index: flow.IndexSpec{KeyCols: []int{0}, Unique: true}, inputs: []string{"orders"}, notices: 1},
		{sql: "CREATE MATERIALIZED VIEW v AS SELECT n, status FROM (SELECT status, count(*) AS n FROM orders GROUP BY status) s",
			cols: "n bigint, status text", index: flow.IndexSpec{KeyCols: []int{1}, Unique: true}, inputs: []string{"orders"}},
		{sql: "SELECT DISTINCT city FROM customers", cols: "city text", index: flow.IndexSpec{KeyCols: []int{0}, Unique: true}, inputs: []string{"customers"}},
		{sql: "SELECT c.name, o.id FROM orders o JOIN customers c USING (id)", cols: "name text, id bigint", inputs: []string{"orders", "customers"}},
		{sql: "SELECT window_start, count(*) FROM TUMBLE(orders, ts, INTERVAL '10' MINUTE) GROUP BY window_start",
			cols: "window_start timestamp without time zone, count bigint", index: flow.IndexSpec{KeyCols: []int{0}, Unique: true}, inputs: []string{"orders"}},
		{sql: "SELECT 1 AS one, 'x' AS x", cols: "one integer, x text"},
	} {
		v, err := Compile(tc.sql, cat)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		var cols []string
		for _, c := range v.Columns {
			cols = append(cols, c.Name+" "+c.Type.Name())
		}
		if got := strings.Join(cols, ", "); got != tc.cols {
			t.Errorf("%s: columns %s, want %s", tc.sql, got, tc.cols)
		}
		if !slices.Equal(v.Index.KeyCols, tc.index.KeyCols) || v.Index.Unique != tc.index.Unique {
			t.Errorf("%s: index %+v, want %+v", tc.sql, v.Index, tc.index)
		}
		if !slices.Equal(v.Inputs, tc.inputs) {
			t.Errorf("%s: inputs %v, want %v", tc.sql, v.Inputs, tc.inputs)
		}
		if len(v.Notices) != tc.notices {
			t.Errorf("%s: notices %q, want %d", tc.sql, v.Notices, tc.notices)
		}
	}
}

// TestConstant: a view without FROM holds its row from the first
// epoch, once.
func TestConstant(t *testing.T) {
	v, err := Compile("SELECT 1 AS one, 'x' AS x UNION ALL SELECT n, 'y' FROM generate_series(2, 3) AS g(n)", testCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	rows := run(t, v, flow.NewMemStore(), []flow.Epoch{{}, {}})
	var got []string
	for _, r := range rows {
		got = append(got, formatRow(r))
	}
	slices.Sort(got)
	if want := []string{"(1,x)", "(2,y)", "(3,y)"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

func formatRow(r types.Row) string {
	s := make([]string, len(r))
	for i, v := range r {
		s[i] = types.Format(v)
	}
	return "(" + strings.Join(s, ",") + ")"
}
