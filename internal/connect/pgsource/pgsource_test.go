package pgsource_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestEnvelopes: inserts, updates and deletes as Debezium documents
// their events: op, before/after per replica identity, source fields,
// the key, a delete's tombstone, a key change as delete + create, and
// the value types' mapping.
func TestEnvelopes(t *testing.T) {
	f := newFixture(t, "envelopes")
	f.exec(`CREATE TABLE items (
		id int PRIMARY KEY, name text NOT NULL, small int2, big int8, ok bool, r real, d float8,
		price numeric(10,2), anyn numeric, blob bytea, day date, at timestamp, at3 timestamp(3), atz timestamptz,
		tm time, u uuid, doc jsonb, iv interval)`,
		`CREATE TABLE full_rows (id int PRIMARY KEY, v text)`,
		`ALTER TABLE full_rows REPLICA IDENTITY FULL`,
	)
	r := f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.waitConfirmed(r, f.currentLSN()) // the snapshot (empty) is done
	f.exec(`INSERT INTO items VALUES (1, 'one', -3, 9007199254740993, true, 1.5, 0.1,
		12.30, -1234.5678, '\xdeadbeef', '2024-02-29', '2024-05-01 10:00:00.123456', '1999-12-31 23:59:59.5',
		'2024-05-01 12:00:00.25+02', '10:00:00.5', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', '1 day 2 hours')`,
		`UPDATE items SET name = 'uno' WHERE id = 1`,
		`UPDATE items SET id = 2 WHERE id = 1`,
		`DELETE FROM items WHERE id = 2`,
		`INSERT INTO full_rows VALUES (1, 'a')`,
		`UPDATE full_rows SET v = 'b' WHERE id = 1`,
		`DELETE FROM full_rows WHERE id = 1`,
	)
	f.waitConfirmed(r, f.currentLSN())

	evs := f.read("public.items")
	var ops []string
	for _, e := range evs {
		if e.value == nil {
			ops = append(ops, "tombstone")
			continue
		}
		ops = append(ops, e.op())
	}
	if got, want := strings.Join(ops, " "), "c u d tombstone c d tombstone"; got != want {
		t.Fatalf("items ops: %s, want %s", got, want)
	}
	c := evs[0]
	if c.before() != nil {
		t.Errorf("create's before: %v", c.before())
	}
	a := c.after()
	want := map[string]string{
		"id": "1", "name": `"one"`, "small": "-3", "big": "9007199254740993", "ok": "true", "r": "1.5", "d": "0.1",
		// 1230 unscaled, big-endian two's complement: 0x04ce.
		"price": fmt.Sprintf("%q", base64.StdEncoding.EncodeToString([]byte{0x04, 0xce})),
		"blob":  fmt.Sprintf("%q", base64.StdEncoding.EncodeToString([]byte{0xde, 0xad, 0xbe, 0xef})),
		"day":   "19782", // 2024-02-29
		"at":    "1714557600123456",
		"at3":   "946684799500", // timestamp(3): milliseconds (io.debezium.time.Timestamp)
		"atz":   `"2024-05-01T10:00:00.25Z"`,
		"tm":    "36000500000",
		"u":     `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`,
		"doc":   `"{\"a\": [1, 2]}"`,
		"iv":    "93600000000",
	}
	for col, w := range want {
		got, _ := json.Marshal(a[col])
		if string(got) != w {
			t.Errorf("after.%s = %s, want %s", col, got, w)
		}
	}
	// numeric without a scale: VariableScaleDecimal {scale, value}.
	if v, ok := a["anyn"].(map[string]any); !ok || fmt.Sprint(v["scale"]) != "4" ||
		v["value"] != base64.StdEncoding.EncodeToString([]byte{0xff, 0x43, 0x9e, 0xb2}) { // -12345678: 0xff439eb2, Java's BigInteger.toByteArray
		t.Errorf("after.anyn = %v", a["anyn"])
	}
	src := c.source()
	for k, w := range map[string]string{"connector": "postgresql", "name": f.prefix, "db": f.db, "schema": "public",
		"table": "items", "snapshot": "false", "version": "strand"} {
		if src[k] != w {
			t.Errorf("source.%s = %v, want %s", k, src[k], w)
		}
	}
	if num(t, src["txId"]) <= 0 || num(t, src["lsn"]) <= 0 || num(t, src["ts_ms"]) <= 0 {
		t.Errorf("source txId/lsn/ts_ms: %v", src)
	}
	if fmtKey(c.key) != "map[id:1]" {
		t.Errorf("key %v", c.key)
	}
	// The schema names Debezium gives.
	fields := map[string]map[string]any{}
	for _, fd := range c.schema["fields"].([]any) {
		m := fd.(map[string]any)
		fields[m["field"].(string)] = m
	}
	if c.schema["name"] != f.prefix+".public.items.Envelope" {
		t.Errorf("envelope schema name %v", c.schema["name"])
	}
	if fields["source"]["name"] != "io.debezium.connector.postgresql.Source" {
		t.Errorf("source schema %v", fields["source"]["name"])
	}
	names := map[string]string{}
	optional := map[string]bool{}
	for _, fd := range fields["after"]["fields"].([]any) {
		m := fd.(map[string]any)
		n, _ := m["name"].(string)
		names[m["field"].(string)] = m["type"].(string) + " " + n
		optional[m["field"].(string)] = m["optional"].(bool)
	}
	for col, w := range map[string]string{
		"id": "int32 ", "small": "int16 ", "big": "int64 ", "ok": "boolean ", "r": "float ", "d": "double ",
		"price": "bytes org.apache.kafka.connect.data.Decimal", "anyn": "struct io.debezium.data.VariableScaleDecimal",
		"blob": "bytes ", "day": "int32 io.debezium.time.Date", "at": "int64 io.debezium.time.MicroTimestamp",
		"at3": "int64 io.debezium.time.Timestamp", "atz": "string io.debezium.time.ZonedTimestamp",
		"tm": "int64 io.debezium.time.MicroTime", "u": "string io.debezium.data.Uuid", "doc": "string io.debezium.data.Json",
		"iv": "int64 io.debezium.time.MicroDuration", "name": "string ",
	} {
		if names[col] != w {
			t.Errorf("schema of %s: %q, want %q", col, names[col], w)
		}
	}
	if optional["id"] || optional["name"] || !optional["small"] {
		t.Errorf("optional: id %v name %v small %v", optional["id"], optional["name"], optional["small"])
	}

	// REPLICA IDENTITY DEFAULT: an update has no before image.
	u := evs[1]
	if u.before() != nil || u.after()["name"] != "uno" {
		t.Errorf("update: before %v after %v", u.before(), u.after())
	}
	if num(t, u.source()["txId"]) == num(t, c.source()["txId"]) {
		t.Errorf("two transactions with one txId")
	}
	// The key changed: delete of id 1 (key columns only), its
	// tombstone, create of id 2.
	if d := evs[2]; d.op() != "d" || fmtKey(d.key) != "map[id:1]" || d.after() != nil || fmt.Sprint(d.before()["id"]) != "1" || d.before()["name"] != nil {
		t.Errorf("key change's delete: key %v before %v", d.key, d.before())
	}
	if tomb := evs[3]; fmtKey(tomb.key) != "map[id:1]" {
		t.Errorf("tombstone key %v", tomb.key)
	}
	if cr := evs[4]; fmtKey(cr.key) != "map[id:2]" || cr.after()["name"] != "uno" {
		t.Errorf("key change's create: %v %v", cr.key, cr.after())
	}
	if d := evs[5]; fmtKey(d.key) != "map[id:2]" || fmt.Sprint(d.before()["id"]) != "2" {
		t.Errorf("delete: %v %v", d.key, d.before())
	}

	// REPLICA IDENTITY FULL: updates and deletes carry the old row.
	fr := f.read("public.full_rows")
	if len(fr) != 4 {
		t.Fatalf("full_rows: %d events", len(fr))
	}
	if fr[1].op() != "u" || fr[1].before()["v"] != "a" || fr[1].after()["v"] != "b" {
		t.Errorf("full update: %v -> %v", fr[1].before(), fr[1].after())
	}
	if fr[2].op() != "d" || fr[2].before()["v"] != "b" || fr[3].value != nil {
		t.Errorf("full delete: %v, then %v", fr[2].before(), fr[3].value)
	}
}

// sortedKeys is for stable messages.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
