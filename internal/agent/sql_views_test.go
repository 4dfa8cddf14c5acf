package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// TestSQLViews: materialized views maintained by the agent from its
// topics, read with SELECT and compared with what a real PostgreSQL
// computes over the same rows: an aggregate and a join with an upsert
// source and a view over the aggregate, then after more records (upsert updates and a tombstone),
// then after a restart on the same data directory and more records
// (no change lost or counted twice); DROP deletes a view's local state.
func TestSQLViews(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := agent.Config{DataDir: dir, SQLListen: "127.0.0.1:0"}
	a := startWith(t, cfg, nil)
	createTopic(t, a.KafkaAddr(), "orders", 2)
	// customers' partition 1 has records only after the restart: a
	// partition the checkpoint has not seen yet is read too.
	createTopic(t, a.KafkaAddr(), "customers", 2)

	// The oracle: PostgreSQL, in a schema of this test's own.
	pgConn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pgConn.Close(ctx)
	for _, s := range []string{"DROP SCHEMA IF EXISTS sqlviews CASCADE", "CREATE SCHEMA sqlviews", "SET search_path = sqlviews"} {
		if _, err := pgConn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := sqltest.CreateTables(ctx, pgConn, []sqltest.Table{
		{Name: "orders", Columns: []sqltest.Column{{Name: "id", Type: "int8"}, {Name: "customer", Type: "text"},
			{Name: "amount", Type: "numeric(10,2)"}, {Name: "qty", Type: "int4"}}},
		{Name: "customers", Columns: []sqltest.Column{{Name: "_key", Type: "text"}, {Name: "name", Type: "text"}, {Name: "city", Type: "text"}}},
	}); err != nil {
		t.Fatal(err)
	}

	// produce sends orders and customer changes to the agent and makes
	// the same changes in PostgreSQL.
	produce := func(a *agent.Agent, orders []int, customers []struct{ key, value string }) {
		t.Helper()
		var recs []*kgo.Record
		for _, id := range orders {
			cust, amount, qty := fmt.Sprintf("c%d", 1+id%5), fmt.Sprintf("%d.%02d", id*7%100, id*13%100), id%4
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(id % 2),
				Value: fmt.Appendf(nil, `{"id": %d, "customer": %q, "amount": %s, "qty": %d}`, id, cust, amount, qty)})
			if _, err := pgConn.Exec(ctx, "INSERT INTO orders VALUES ($1, $2, $3::numeric, $4)", id, cust, amount, qty); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range customers {
			r := &kgo.Record{Topic: "customers", Key: []byte(c.key)}
			if c.key == "c5" {
				r.Partition = 1
			}
			if _, err := pgConn.Exec(ctx, "DELETE FROM customers WHERE _key = $1", c.key); err != nil {
				t.Fatal(err)
			}
			if c.value != "" {
				r.Value = []byte(c.value)
				if _, err := pgConn.Exec(ctx, "INSERT INTO customers SELECT $1, j->>'name', j->>'city' FROM (SELECT $2::jsonb AS j) x", c.key, c.value); err != nil {
					t.Fatal(err)
				}
			}
			recs = append(recs, r)
		}
		pcl := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	connect := func(a *agent.Agent) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	views := []struct{ name, query string }{
		{"totals", "SELECT customer, count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(qty) AS hi FROM orders GROUP BY customer"},
		{"joined", "SELECT o.id, c.name, c.city, o.amount * o.qty AS value FROM orders o JOIN customers c ON c._key = o.customer"},
		// A view over a view (PostgreSQL's oracle reads its view totals).
		{"sizes", "SELECT n, count(*) AS customers, sum(total) AS total FROM totals WHERE hi > 1 GROUP BY n"},
	}
	if _, err := pgConn.Exec(ctx, "CREATE VIEW totals AS "+views[0].query); err != nil {
		t.Fatal(err)
	}
	// check polls each view until it equals PostgreSQL's answer to its
	// query (a view catching up answers a prefix of its inputs).
	check := func(conn *pgx.Conn, phase string) {
		t.Helper()
		for _, v := range views {
			want, err := sqltest.Collect(must(pgConn.Query(ctx, v.query)))
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Rows) == 0 {
				t.Fatalf("%s: the oracle returns no rows: a weak check", v.name)
			}
			want.Name = phase + ": " + v.name
			deadline := time.Now().Add(30 * time.Second)
			var diff string
			for {
				var got sqltest.Result
				rows, err := conn.Query(ctx, "SELECT * FROM "+v.name)
				if err == nil {
					got, err = sqltest.Collect(rows)
				}
				if err == nil {
					diff, err = sqltest.Compare(want, got, sqltest.Options{})
				}
				if err == nil && diff == "" {
					break
				}
				if err != nil {
					diff = err.Error()
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: view differs from PostgreSQL after 30s:\n%s", want.Name, diff)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	produce(a, []int{1, 2, 3, 4, 5, 6, 7, 8}, []struct{ key, value string }{
		{"c1", `{"name": "ann", "city": "oslo"}`}, {"c2", `{"name": "bob", "city": "rome"}`},
		{"c3", `{"name": "cy", "city": "lima"}`}, {"c4", `{"name": "dee", "city": "nuuk"}`},
	})
	conn := connect(a)
	if _, err := conn.Exec(ctx, "CREATE SOURCE orders (id int8, customer text, amount numeric(10,2), qty int4) WITH (topic = 'orders', format = 'json')"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE SOURCE customers (_key text, name text, city text) WITH (topic = 'customers', format = 'json', envelope = 'upsert')"); err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if _, err := conn.Exec(ctx, "CREATE MATERIALIZED VIEW "+v.name+" AS "+v.query); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
	}
	check(conn, "initial")
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_sql_view_epochs_total", labels: map[string]string{"view": "totals"}},
		{name: "strand_sql_view_input_changes_total", labels: map[string]string{"view": "joined"}},
		{name: "strand_sql_view_last_epoch_timestamp_seconds", labels: map[string]string{"view": "sizes"}},
		{name: "strand_sql_view_input_offsets", labels: map[string]string{"view": "totals"}},
		{name: "strand_sql_source_records_total", labels: map[string]string{"source": "customers"}},
	})

	// Upsert updates and a tombstone retract the join's rows.
	produce(a, []int{9, 10, 11, 12, 13}, []struct{ key, value string }{
		{"c1", `{"name": "ann", "city": "kyiv"}`}, {"c3", ""},
	})
	check(conn, "updated")

	// A restart resumes each view from its checkpoint: counting the
	// records before it again would show in count(*) and the join.
	stop(t, a)
	a = startWith(t, cfg, nil)
	conn = connect(a)
	check(conn, "restarted")
	produce(a, []int{14, 15, 16, 17}, []struct{ key, value string }{{"c3", `{"name": "cy", "city": "pisa"}`}, {"c2", ""}, {"c5", `{"name": "eve", "city": "baku"}`}})
	check(conn, "after restart")

	// DROP deletes the view's local state.
	stateDirs := func() []string {
		ents, err := os.ReadDir(filepath.Join(dir, "views"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	if got := stateDirs(); len(got) != 3 {
		t.Fatalf("view state directories %v, want 3", got)
	}
	if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW joined"); err != nil {
		t.Fatal(err)
	}
	views = append(views[:1], views[2:]...)
	deadline := time.Now().Add(10 * time.Second)
	for len(stateDirs()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("view state directories %v after DROP, want 2", stateDirs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	check(conn, "after drop")

	// A view that cannot run (its topic deleted) shows as failed, is
	// refused with 55000, and stops nothing else.
	createTopic(t, a.KafkaAddr(), "gone", 1)
	for _, ddl := range []string{
		"CREATE SOURCE gone (x int4) WITH (topic = 'gone', format = 'json')",
		"CREATE MATERIALIZED VIEW broken AS SELECT x, count(*) FROM gone GROUP BY x",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	if _, err := kadm.NewClient(client(t, a.KafkaAddr())).DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	status := func() map[string]string {
		rows, err := conn.Query(ctx, "SHOW MATERIALIZED VIEWS")
		if err != nil {
			t.Fatal(err)
		}
		res, err := sqltest.Collect(rows)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range res.Rows {
			out[r[0].(string)] = r[len(r)-1].(string)
		}
		return out
	}
	deadline = time.Now().Add(30 * time.Second)
	for !strings.HasPrefix(status()["broken"], "failed: ") {
		if time.Now().After(deadline) {
			t.Fatalf("SHOW MATERIALIZED VIEWS: %v, want broken failed", status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var pe *pgconn.PgError
	if _, err := conn.Exec(ctx, "SELECT * FROM broken"); !errors.As(err, &pe) || pe.Code != "55000" {
		t.Fatalf("SELECT from a failed view: %v, want 55000", err)
	}
	if got := status(); got["totals"] != "running" || got["sizes"] != "running" {
		t.Fatalf("SHOW MATERIALIZED VIEWS: %v, want totals and sizes running", got)
	}
	produce(a, []int{18, 19}, nil)
	check(conn, "beside a failed view")
}
