package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/sql/sinks/sinktest"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// TestSQLSinks: an upsert sink over a view with an aggregate and a
// changelog sink over a join with an upsert source write their topics
// in transactions; read read_committed, the upsert topic's last value
// per key and the changelog's summed changes equal PostgreSQL's
// to_json of the same queries over the same rows (so the JSON is
// PostgreSQL's too), after upsert updates and tombstones and after
// restarts of the owner: on its state as it was, on its state set back
// to an older copy (behind the committed progress: caught up without
// writing), and with its state deleted (rebuilt from the beginning
// without writing), and restored from a snapshot of its state in the
// object store. A change written twice or lost shows in the sums.
func TestSQLSinks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := agent.Config{DataDir: dir, SQLListen: "127.0.0.1:0"}
	a := startWith(t, cfg, nil)
	createTopic(t, a.KafkaAddr(), "orders", 2)
	createTopic(t, a.KafkaAddr(), "customers", 2)
	compact := "compact"
	createTopicWith(t, a.KafkaAddr(), "totals_out", 3, map[string]*string{"cleanup.policy": &compact})
	createTopic(t, a.KafkaAddr(), "joined_log", 2)

	pgConn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pgConn.Close(ctx)
	for _, s := range []string{"DROP SCHEMA IF EXISTS sqlsinks CASCADE", "CREATE SCHEMA sqlsinks", "SET search_path = sqlsinks"} {
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
	type cust struct{ key, value string }
	produce := func(a *agent.Agent, orders []int, customers []cust) {
		t.Helper()
		var recs []*kgo.Record
		for _, id := range orders {
			c, amount, qty := fmt.Sprintf("c%d", 1+id%5), fmt.Sprintf("%d.%02d", id*7%100, id*13%100), id%4
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(id % 2),
				Value: fmt.Appendf(nil, `{"id": %d, "customer": %q, "amount": %s, "qty": %d}`, id, c, amount, qty)})
			if _, err := pgConn.Exec(ctx, "INSERT INTO orders VALUES ($1, $2, $3::numeric, $4)", id, c, amount, qty); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range customers {
			r := &kgo.Record{Topic: "customers", Key: []byte(c.key), Partition: int32(len(c.key) % 2)}
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
		if err := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	totals := "SELECT customer, count(*) AS n, sum(amount) AS total, max(qty) AS hi FROM orders GROUP BY customer"
	joined := "SELECT o.id, c.name, c.city, o.amount * o.qty AS value FROM orders o JOIN customers c ON c._key = o.customer"
	sinks := []struct {
		name, topic, envelope, query string
		keyCols                      []string
	}{
		{"totals_sink", "totals_out", "upsert", "SELECT * FROM totals", []string{"customer"}},
		{"joined_sink", "joined_log", "changelog", joined, nil},
	}
	if _, err := pgConn.Exec(ctx, "CREATE VIEW totals AS "+totals); err != nil {
		t.Fatal(err)
	}
	// check waits until each sink's topic, read read_committed, holds
	// PostgreSQL's answer.
	check := func(a *agent.Agent, phase string) {
		t.Helper()
		for _, s := range sinks {
			want := map[string]int64{}
			rows, err := pgConn.Query(ctx, "SELECT to_json(x)::text FROM ("+s.query+") x")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var text string
				if err := rows.Scan(&text); err != nil {
					t.Fatal(err)
				}
				c, err := sinktest.Canonical([]byte(text))
				if err != nil {
					t.Fatal(err)
				}
				want[c]++
			}
			if err := rows.Err(); err != nil || len(want) == 0 {
				t.Fatalf("%s: the oracle: %v, %d rows", s.name, err, len(want))
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				recs, err := sinktest.ReadCommitted(rctx, []kgo.Opt{kgo.SeedBrokers(a.KafkaAddr())}, s.topic)
				cancel()
				var got map[string]int64
				if err == nil {
					if s.envelope == "upsert" {
						got, err = sinktest.Upserted(recs, s.keyCols)
					} else {
						got, err = sinktest.ChangelogSum(recs)
					}
				}
				diff := ""
				if err != nil {
					diff = err.Error()
				} else {
					diff = sinktest.Diff(want, got)
				}
				if diff == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: sink %s's topic differs from PostgreSQL after 30s:\n%s", phase, s.name, diff)
				}
				time.Sleep(100 * time.Millisecond)
			}
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

	produce(a, []int{1, 2, 3, 4, 5, 6, 7, 8}, []cust{
		{"c1", `{"name": "ann", "city": "oslo"}`}, {"c2", `{"name": "bob", "city": "rome"}`},
		{"c3", `{"name": "cy", "city": "lima"}`}, {"c4", `{"name": "dee", "city": "nuuk"}`},
	})
	conn := connect(a)
	for _, ddl := range []string{
		"CREATE SOURCE orders (id int8, customer text, amount numeric(10,2), qty int4) WITH (topic = 'orders', format = 'json')",
		"CREATE SOURCE customers (_key text, name text, city text) WITH (topic = 'customers', format = 'json', envelope = 'upsert')",
		"CREATE MATERIALIZED VIEW totals AS " + totals,
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	for _, s := range sinks {
		ddl := fmt.Sprintf("CREATE SINK %s WITH (topic = '%s', format = 'json', envelope = '%s') AS %s", s.name, s.topic, s.envelope, s.query)
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	check(a, "initial")
	// SHOW SINKS says where each runs: here, the only agent (node 0).
	res, err := sqltest.Collect(must(conn.Query(ctx, "SHOW SINKS")))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if st := r[len(r)-1].(string); st != "running on agent 0" {
			t.Fatalf("SHOW SINKS: %v, want each running on agent 0 (the default node id)", res.Rows)
		}
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_sql_sink_records_total", labels: map[string]string{"sink": "totals_sink"}},
		{name: "strand_sql_sink_transactions_total", labels: map[string]string{"sink": "joined_sink"}},
	})

	produce(a, []int{9, 10, 11, 12, 13}, []cust{{"c1", `{"name": "ann", "city": "kyiv"}`}, {"c3", ""}})
	check(a, "updated")

	// Restart on the state as it was; keep a copy of it.
	stop(t, a)
	sinksDir := filepath.Join(dir, "sinks")
	old := filepath.Join(t.TempDir(), "sinks")
	if out, err := exec.Command("cp", "-a", sinksDir, old).CombinedOutput(); err != nil {
		t.Fatalf("copying the sinks' state: %v: %s", err, out)
	}
	a = startWith(t, cfg, nil)
	produce(a, []int{14, 15, 16}, []cust{{"c3", `{"name": "cy", "city": "pisa"}`}, {"c2", ""}})
	check(a, "restarted")

	// Restart on the older copy: behind the committed progress.
	stop(t, a)
	if err := os.RemoveAll(sinksDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(old, sinksDir); err != nil {
		t.Fatal(err)
	}
	a = startWith(t, cfg, nil)
	produce(a, []int{17, 18}, []cust{{"c5", `{"name": "eve", "city": "baku"}`}, {"c4", `{"name": "dee", "city": "faro"}`}})
	check(a, "restarted behind")

	// Restart without state: rebuilt from the beginning.
	stop(t, a)
	if err := os.RemoveAll(sinksDir); err != nil {
		t.Fatal(err)
	}
	a = startWith(t, cfg, nil)
	produce(a, []int{19, 20, 21}, []cust{{"c1", ""}, {"c2", `{"name": "bo", "city": "bern"}`}})
	check(a, "restarted without state")

	// Snapshots of the sinks' state (package viewsnap), then a restart
	// without state: each sink restores its snapshot (not ahead of the
	// committed progress: it is never used if it is) and catches up
	// without writing.
	snaps, err := a.SnapshotSinks(ctx)
	if err != nil || len(snaps) != len(sinks) {
		t.Fatalf("snapshots of the sinks: %+v, %v", snaps, err)
	}
	produce(a, []int{22, 23}, []cust{{"c4", ""}})
	check(a, "after the snapshots")
	stop(t, a)
	if err := os.RemoveAll(sinksDir); err != nil {
		t.Fatal(err)
	}
	a = startWith(t, cfg, nil)
	produce(a, []int{24, 25, 26}, []cust{{"c1", `{"name": "al", "city": "riga"}`}})
	check(a, "restored from snapshots")
	fs := parseScrape(t, scrapeBody(t, a))
	for _, s := range sinks {
		if n, _ := sample(fs, "strand_sql_view_restores_total", map[string]string{"view": s.name, "result": "restored"}); n != 1 {
			t.Errorf("%s: strand_sql_view_restores_total{restored} = %v, want 1", s.name, n)
		}
		if n, _ := sample(fs, "strand_sql_sink_restored_ahead_total", map[string]string{"sink": s.name}); n != 0 {
			t.Errorf("%s: restored ahead of the committed progress %v times", s.name, n)
		}
	}

	// DROP SINK deletes the sink's progress topic (a sweep, by the
	// catalog): one sink dropped, one progress topic goes, the other
	// stays; then the other.
	progressTopics := func() []string {
		t.Helper()
		topics, err := kadm.NewClient(client(t, a.KafkaAddr())).ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, "__strand_sink_progress_") {
				out = append(out, name)
			}
		}
		return out
	}
	before := progressTopics()
	if len(before) != len(sinks) {
		t.Fatalf("progress topics %v, want one per sink", before)
	}
	for i, s := range sinks {
		if _, err := connect(a).Exec(ctx, "DROP SINK "+s.name); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(progressTopics()) != len(sinks)-1-i {
			if time.Now().After(deadline) {
				t.Fatalf("after DROP SINK %s: progress topics %v after 30s", s.name, progressTopics())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
