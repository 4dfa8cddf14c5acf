package jdbcsink

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// TestFlatJSON: flat JSON rows, without schemas (types inferred), keyed
// by fields of the value, upserted into a table the sink creates
// (auto.create, as the issue names it).
func TestFlatJSON(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		topic := uniq("orders")
		kafka := cluster(t, 2, topic)
		p := newProducer(t, kafka)
		p.send(topic, "", `{"order_id": 1, "customer": "ann", "total": 12.5, "paid": false, "meta": {"x": 1}}`)
		p.send(topic, "", `{"order_id": 2, "customer": "bob", "total": 3, "paid": true, "meta": null}`)
		p.send(topic, "", `{"order_id": 1, "customer": "ann", "total": 13.25, "paid": true, "meta": [1, "two"]}`)
		name := uniq("flat")
		m := NewMetrics()
		r := start(t, name, d.config(topic, "insert.mode", "upsert", "primary.key.mode", "record_value",
			"primary.key.fields", "order_id", "auto.create", "true"), kafka, m)
		waitCaughtUp(t, d, name, p, r)
		// Order 1's two records count once if one batch held both.
		if n := metricValue(t, m.rows.WithLabelValues(name, "upsert")); n < 2 || n > 3 {
			t.Errorf("rows upserted: %v, want 2 or 3", n)
		}
		if n := metricValue(t, m.batches.WithLabelValues(name)); n < 1 {
			t.Errorf("batches: %v", n)
		}
		if n := metricValue(t, m.lag.WithLabelValues(name)); n != 0 {
			t.Errorf("lag once caught up: %v records", n)
		}
		got := d.rows(t, topic, d.text("order_id"), d.text("customer"), d.text("total"), d.text("paid"), d.text("meta"))
		want := map[string][]string{
			"postgresql": {`1|ann|13.25|true|[1, "two"]`, "2|bob|3|true|∅"},
			"mariadb":    {`1|ann|13.25|1|[1,"two"]`, "2|bob|3|1|∅"},
		}[d.name]
		if !slices.Equal(got, want) {
			t.Errorf("rows:\n got %q\nwant %q", got, want)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// flatEnvelope is a row with its schema (Connect's JsonConverter with
// schemas, no Debezium envelope): id int32 and string columns.
func flatEnvelope(id int, cols ...string) string {
	fields := []string{`{"field":"id","type":"int32"}`}
	vals := []string{fmt.Sprintf(`"id":%d`, id)}
	for i := 0; i+1 < len(cols); i += 2 {
		fields = append(fields, fmt.Sprintf(`{"field":%q,"type":"string","optional":true}`, cols[i]))
		vals = append(vals, fmt.Sprintf(`%q:%q`, cols[i], cols[i+1]))
	}
	return `{"schema":{"type":"struct","fields":[` + strings.Join(fields, ",") + `]},"payload":{` + strings.Join(vals, ",") + `}}`
}

// TestSchemaEvolution: a column that appears half-way is added to the
// table (schema.evolution=basic); rows written before it read NULL.
// Half of the records come in one batch with rows of both shapes.
func TestSchemaEvolution(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		topic := uniq("evolve")
		kafka := cluster(t, 1, topic)
		p := newProducer(t, kafka)
		name := uniq("evolve")
		cfg := d.config(topic, "insert.mode", "upsert", "primary.key.mode", "record_value",
			"primary.key.fields", "id", "schema.evolution", "basic")
		p.send(topic, "", flatEnvelope(1, "a", "x"))
		p.send(topic, "", flatEnvelope(2, "a", "y"))
		r := start(t, name, cfg, kafka, nil)
		waitCaughtUp(t, d, name, p, r)
		p.send(topic, "", flatEnvelope(3, "a", "z", "b", "new"))
		p.send(topic, "", flatEnvelope(1, "a", "x2", "b", "changed"))
		p.send(topic, "", flatEnvelope(4, "a", "w"))
		waitCaughtUp(t, d, name, p, r)
		got := d.rows(t, topic, d.text("id"), d.text("a"), d.text("b"))
		want := []string{"1|x2|changed", "2|y|∅", "3|z|new", "4|w|∅"}
		if !slices.Equal(got, want) {
			t.Errorf("rows:\n got %q\nwant %q", got, want)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMismatchRefused: a table that cannot take the records stops the
// sink with an error naming the table and the column, and writes
// nothing: a column of another type, a column missing without schema
// evolution, a table missing without auto-create.
func TestMismatchRefused(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		cases := []struct {
			name   string
			ddl    string // %s: the table
			record string
			want   []string // in the error
		}{
			{"type", "CREATE TABLE %s (id integer PRIMARY KEY, n integer)", `{"id": 1, "n": "not a number"}`,
				[]string{`table "%s"`, `column "n"`, "string"}},
			{"column", "CREATE TABLE %s (id integer PRIMARY KEY, n integer)", `{"id": 1, "n": 2, "extra": "x"}`,
				[]string{`table "%s"`, `no column "extra"`, "schema.evolution=basic"}},
			{"table", "", `{"id": 1}`, []string{`table "%s" does not exist`, "auto.create"}},
			{"bytes", "CREATE TABLE %s (id integer PRIMARY KEY, n integer)",
				`{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"},{"field":"n","type":"bytes"}]},"payload":{"id":1,"n":"aGk="}}`,
				[]string{`table "%s"`, `column "n"`, "bytes"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				topic := uniq("mismatch")
				if c.ddl != "" {
					d.exec(t, fmt.Sprintf(c.ddl, d.q(topic)))
				}
				kafka := cluster(t, 1, topic)
				p := newProducer(t, kafka)
				p.send(topic, "", c.record)
				r := start(t, uniq("mismatch"), d.config(topic, "insert.mode", "upsert",
					"primary.key.mode", "record_value", "primary.key.fields", "id"), kafka, nil)
				var err error
				select {
				case err = <-r.done:
					r.done <- err
				case <-time.After(30 * time.Second):
					t.Fatal("the sink did not refuse the records in 30s")
				}
				if err == nil {
					t.Fatal("the sink ended without an error")
				}
				for _, w := range c.want {
					if w = strings.ReplaceAll(w, "%s", topic); !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if c.ddl != "" {
					if rows := d.rows(t, topic, d.text("id")); len(rows) != 0 {
						t.Errorf("rows written: %q", rows)
					}
				}
			})
		}
	})
}

// TestUpdateMode: insert.mode=update changes existing rows by key and
// creates none, as Debezium's update mode; plain insert.mode=insert with
// a key inserts, and a delete by tombstone removes.
func TestUpdateMode(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		topic := uniq("upd")
		d.exec(t, fmt.Sprintf("CREATE TABLE %s (id integer PRIMARY KEY, a varchar(20), b integer)", d.q(topic)))
		d.exec(t, fmt.Sprintf("INSERT INTO %s (id, a, b) VALUES (1, 'one', 10), (2, 'two', 20)", d.q(topic)))
		kafka := cluster(t, 1, topic)
		p := newProducer(t, kafka)
		p.send(topic, `{"id": 1}`, `{"id": 1, "a": "uno", "b": 11}`)
		p.send(topic, `{"id": 3}`, `{"id": 3, "a": "tres", "b": 33}`) // no row 3: no change
		p.send(topic, `{"id": 2}`, `{"id": 2, "b": 22}`)              // a's value kept
		name := uniq("upd")
		r := start(t, name, d.config(topic, "insert.mode", "update", "primary.key.mode", "record_key"), kafka, nil)
		waitCaughtUp(t, d, name, p, r)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if got, want := d.rows(t, topic, d.text("id"), d.text("a"), d.text("b")), []string{"1|uno|11", "2|two|22"}; !slices.Equal(got, want) {
			t.Errorf("update mode:\n got %q\nwant %q", got, want)
		}

		// Insert mode with a key and deletes, on a topic of its own.
		topic = uniq("ins")
		kafka = cluster(t, 1, topic)
		p = newProducer(t, kafka)
		p.send(topic, `{"id": 5}`, `{"id": 5, "a": "five"}`)
		p.send(topic, `{"id": 6}`, `{"id": 6, "a": "six"}`)
		p.send(topic, `{"id": 6}`, nil)
		p.send(topic, `{"id": 7}`, `{"id": 7, "a": "seven"}`)
		name = uniq("ins")
		r = start(t, name, d.config(topic, "insert.mode", "insert", "primary.key.mode", "record_key",
			"delete.enabled", "true", "auto.create", "true"), kafka, nil)
		waitCaughtUp(t, d, name, p, r)
		p.send(topic, `{"id": 5}`, nil)
		p.send(topic, `{"id": 5}`, `{"id": 5, "a": "cinq"}`) // deleted, then inserted anew
		waitCaughtUp(t, d, name, p, r)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if got, want := d.rows(t, topic, d.text("id"), d.text("a")), []string{"5|cinq", "7|seven"}; !slices.Equal(got, want) {
			t.Errorf("insert mode:\n got %q\nwant %q", got, want)
		}
	})
}

// TestPostgresCurrentSchema: the JDBC URL's currentSchema is where the
// sink finds and creates tables, its offsets table included.
func TestPostgresCurrentSchema(t *testing.T) {
	d := postgresDB(t, pgtest.URL(t))
	schema := uniq("sch")
	d.exec(t, "CREATE SCHEMA "+schema)
	topic := uniq("cs")
	kafka := cluster(t, 1, topic)
	p := newProducer(t, kafka)
	p.send(topic, "", `{"id": 1}`)
	cfg := d.config(topic, "auto.create", "true")
	cfg["connection.url"] += "?currentSchema=" + schema
	name := uniq("cs")
	r := start(t, name, cfg, kafka, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := d.sql.QueryRow("SELECT COUNT(*) FROM " + schema + "." + topic).Scan(&n)
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no row in %s.%s after 30s: %v", schema, topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.sql.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2", schema, OffsetsTable).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s in schema %s: %d, %v", OffsetsTable, schema, n, err)
	}
}

// TestSessionSettings: the sink's sessions run in UTC, and end a
// transaction left idle (the task's machine gone) so that its lock on
// the offsets does not hold up the connector's next task.
func TestSessionSettings(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		cfg, err := Parse(d.config("t"))
		if err != nil {
			t.Fatal(err)
		}
		tg, err := openTarget(t.Context(), cfg, "settings")
		if err != nil {
			t.Fatal(err)
		}
		defer tg.close()
		q := map[string]string{
			"postgresql": "SELECT current_setting('TimeZone') || ' ' || current_setting('idle_in_transaction_session_timeout')",
			"mariadb":    "SELECT CONCAT(@@session.time_zone, ' ', @@session.wait_timeout)",
		}[d.name]
		want := map[string]string{"postgresql": "UTC 2min", "mariadb": "+00:00 120"}[d.name]
		var got string
		if err := tg.db.QueryRow(q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("session settings %q, want %q", got, want)
		}
	})
}
