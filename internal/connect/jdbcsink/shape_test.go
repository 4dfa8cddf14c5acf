package jdbcsink

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
		r := start(t, name, d.config(topic, "insert.mode", "upsert", "primary.key.mode", "record_value",
			"primary.key.fields", "order_id", "auto.create", "true"), kafka, nil)
		waitCaughtUp(t, d, name, p, r)
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
