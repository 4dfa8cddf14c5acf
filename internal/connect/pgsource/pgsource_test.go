package pgsource_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/connect/pgsource"
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
	f.sync(r)
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

	// Metrics: records by op, committed transactions.
	for name, want := range map[string]float64{
		"strand_connect_pgsource_records_total":             9, // items c u d c d, full_rows c u d, strand_marker c
		"strand_connect_pgsource_source_transactions_total": 8,
	} {
		if got := f.metric(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if f.metric("strand_connect_pgsource_confirmed_lsn") == 0 {
		t.Errorf("confirmed LSN gauge not set")
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

// fold applies events to a map of key -> after image, as a consumer
// of the topic would, and fails on a create of a key already there or
// an update or delete of one that is not.
func fold(t *testing.T, evs []ev) map[string]map[string]any {
	t.Helper()
	state := map[string]map[string]any{}
	for _, e := range evs {
		if e.value == nil {
			continue
		}
		k := fmtKey(e.key)
		switch e.op() {
		case "r", "c":
			if _, ok := state[k]; ok {
				t.Fatalf("%s of key %s already there (offset %d)", e.op(), k, e.offset)
			}
			state[k] = e.after()
		case "u":
			if _, ok := state[k]; !ok {
				t.Fatalf("update of key %s not there (offset %d)", k, e.offset)
			}
			state[k] = e.after()
		case "d":
			if _, ok := state[k]; !ok {
				t.Fatalf("delete of key %s not there (offset %d)", k, e.offset)
			}
			delete(state, k)
		}
	}
	return state
}

// tableState is the table's rows as fold keys them, id and v only.
func (f *fixture) tableState(t *testing.T, table string) map[string]string {
	t.Helper()
	rows, err := f.conn.Query(t.Context(), "SELECT id, v FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, v int64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("map[id:%d]", id)] = fmt.Sprint(v)
	}
	return out
}

func compareState(t *testing.T, got map[string]map[string]any, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("topic folds to %d rows, the table has %d", len(got), len(want))
	}
	bad := 0
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok || fmt.Sprint(g["v"]) != want[k] {
			if bad++; bad <= 5 {
				t.Errorf("row %s: topic %v, table v=%s", k, g, want[k])
			}
		}
	}
}

// TestSnapshotThenStreaming: rows inserted and updated while the task
// starts and snapshots are each in the snapshot or streamed, never
// both and never neither; the topic folds to the table.
func TestSnapshotThenStreaming(t *testing.T) {
	f := newFixture(t, "snapstream")
	f.exec(`CREATE TABLE t (id serial PRIMARY KEY, v int8 NOT NULL)`,
		`INSERT INTO t (v) SELECT g FROM generate_series(1, 20000) g`)
	w := f.connect()
	defer w.Close(t.Context())
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := w.Exec(t.Context(), `INSERT INTO t (v) VALUES ($1)`, i); err != nil {
				done <- err
				return
			}
			if _, err := w.Exec(t.Context(), `UPDATE t SET v = v + 1 WHERE id = $1`, 1+(i*7919)%20000); err != nil {
				done <- err
				return
			}
		}
	}()
	r := f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	f.sync(r) // more streamed
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.waitConfirmed(r, f.currentLSN())

	evs := f.read("public.t")
	var snap, streamed, last int
	for i, e := range evs {
		switch e.op() {
		case "r":
			snap++
			if e.source()["snapshot"] == "last" {
				last++
				if i+1 < len(evs) && evs[i+1].op() == "r" {
					t.Errorf("snapshot's last record at offset %d is followed by another", e.offset)
				}
			}
		default:
			streamed++
			if e.source()["snapshot"] != "false" {
				t.Errorf("streamed event with snapshot %v", e.source()["snapshot"])
			}
		}
	}
	if snap < 20000 || streamed == 0 || last != 1 {
		t.Errorf("%d snapshot events (%d last), %d streamed", snap, last, streamed)
	}
	compareState(t, fold(t, evs), f.tableState(t, "t"))
	t.Logf("%d snapshot events, %d streamed", snap, streamed)
}

// TestLargeTransaction: a transaction larger than the task's bounds
// (max.queue.size, the producer's buffer) streams through one open
// Kafka transaction. While it is open, a read_committed consumer sees
// none of it; the task stopped then and started again writes it whole,
// once, together with the transaction's change to a second table.
func TestLargeTransaction(t *testing.T) {
	const rows = 60000
	f := newFixture(t, "large")
	f.config["max.queue.size"] = "100"
	f.exec(`CREATE TABLE big (id int PRIMARY KEY, v int8 NOT NULL, pad text)`,
		`CREATE TABLE other (id int PRIMARY KEY, v int8 NOT NULL)`,
		`INSERT INTO other VALUES (1, 1), (2, 2)`)
	r := f.start()
	f.sync(r)
	f.exec(fmt.Sprintf(`DO $$ BEGIN
		INSERT INTO big SELECT g, g, repeat('x', 100) FROM generate_series(1, %d) g;
		UPDATE other SET v = 10 WHERE id = 1;
		DELETE FROM other WHERE id = 2;
	END $$`, rows))
	end := f.currentLSN()
	topic := f.prefix + ".public.big"
	// Wait for records of the open transaction in the topic.
	for f.endOffsets(topic, false) == 0 {
	}
	if n := f.endOffsets(topic, true); n != 0 {
		t.Fatalf("read_committed end offset %d while the transaction is open", n)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if n := f.endOffsets(topic, true); n != 0 && n < rows {
		t.Fatalf("read_committed sees %d of the transaction's %d records", n, rows)
	}
	r = f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.waitConfirmed(r, end)
	evs := f.read("public.big")
	if len(evs) != rows {
		t.Fatalf("%d records, want %d", len(evs), rows)
	}
	tx := num(t, evs[0].source()["txId"])
	seen := map[string]bool{}
	for _, e := range evs {
		if num(t, e.source()["txId"]) != tx || e.op() != "c" {
			t.Fatalf("event of txId %v op %s", e.source()["txId"], e.op())
		}
		k := fmtKey(e.key)
		if seen[k] {
			t.Fatalf("key %s twice", k)
		}
		seen[k] = true
	}
	oth := f.read("public.other")
	var mine []string
	for _, e := range oth {
		if e.value != nil && e.op() != "r" {
			if num(t, e.source()["txId"]) != tx {
				t.Errorf("other's %s in txId %v, not %d", e.op(), e.source()["txId"], tx)
			}
			mine = append(mine, e.op())
		}
	}
	if strings.Join(mine, " ") != "u d" {
		t.Errorf("other's events of the transaction: %v", mine)
	}
}

// TestSchemaChange: a column added, then one dropped, half-way: the
// next events' schema and payload show it.
func TestSchemaChange(t *testing.T) {
	f := newFixture(t, "schema")
	f.exec(`CREATE TABLE s (id int PRIMARY KEY, v int8)`, `INSERT INTO s VALUES (1, 1)`)
	r := f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	f.exec(`INSERT INTO s VALUES (2, 2)`,
		`ALTER TABLE s ADD COLUMN extra text DEFAULT 'x'`,
		`INSERT INTO s VALUES (3, 3, 'three')`,
		`ALTER TABLE s DROP COLUMN v`,
		`INSERT INTO s VALUES (4, 'four')`)
	f.waitConfirmed(r, f.currentLSN())
	evs := f.read("public.s")
	var got []string
	for _, e := range evs {
		var fields []string
		for _, fd := range e.schema["fields"].([]any) {
			m := fd.(map[string]any)
			if m["field"] == "after" {
				for _, c := range m["fields"].([]any) {
					fields = append(fields, c.(map[string]any)["field"].(string))
				}
			}
		}
		got = append(got, fmt.Sprintf("%s%v=%v", e.op(), fields, e.after()))
	}
	want := []string{
		"r[id v]=map[id:1 v:1]",
		"c[id v]=map[id:2 v:2]",
		"c[id v extra]=map[extra:three id:3 v:3]",
		"c[id extra]=map[extra:four id:4]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// supervisor runs a task as the connectors' runner does: started
// again after it fails, until stopped.
type supervisor struct {
	f        *fixture
	mu       sync.Mutex
	cur      *running
	quit     chan struct{}
	done     chan struct{}
	failures int
}

func (f *fixture) supervise() *supervisor {
	s := &supervisor{f: f, quit: make(chan struct{}), done: make(chan struct{})}
	s.cur = f.start()
	go func() {
		defer close(s.done)
		for {
			cur := s.running()
			select {
			case <-cur.done:
				s.mu.Lock()
				if s.cur == cur { // not replaced by restart meanwhile
					s.failures++
					s.f.t.Logf("task failed (restarting): %v", cur.err)
					time.Sleep(200 * time.Millisecond)
					s.cur = s.f.start()
				}
				s.mu.Unlock()
			case <-s.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return s
}

// restart stops the task (as a cancel, or a kill -9 of its agent,
// leaves it: its Kafka transaction open, nothing confirmed after its
// last commit) and starts a new one.
func (s *supervisor) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.cancel()
	<-s.cur.done
	s.cur = s.f.start()
}

func (s *supervisor) running() *running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *supervisor) stop() {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	s.cur.cancel()
	<-s.cur.done
	s.mu.Unlock()
}

// TestRestarts: a workload of small transactions while the task is
// stopped and started again twice and the PostgreSQL server crashes
// (kill -9) and restarts once: every transaction is in the topic whole
// and once, and the topic folds to the table.
func TestRestarts(t *testing.T) {
	const txns = 300
	f := newFixture(t, "restarts")
	f.exec(`CREATE TABLE w (id int PRIMARY KEY, v int8 NOT NULL)`)
	s := f.supervise()
	defer s.stop()
	f.sync(s.running())

	// Transaction i: creates 2i and 2i+1, updates 2i-1, deletes 2i-2:
	// c, c, u, d, whole or not at all.
	milestone := make(chan int, txns)
	werr := make(chan error, 1)
	go func() {
		var conn *pgx.Conn
		failures := 0
		for i := 0; i < txns; {
			if failures > 100 {
				close(milestone)
				werr <- fmt.Errorf("workload: %d failures", failures)
				return
			}
			if conn == nil {
				c, err := pgx.Connect(context.Background(), f.dbURL)
				if err != nil {
					failures++
					time.Sleep(100 * time.Millisecond)
					continue
				}
				conn = c
			}
			// A transaction whose commit failed may have committed:
			// the next attempt at i finds out by the row it creates.
			var exists bool
			if err := conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM w WHERE id = $1)", 2*i).Scan(&exists); err != nil {
				t.Logf("workload: %v", err)
				failures++
				conn.Close(context.Background())
				conn = nil
				continue
			}
			if !exists {
				err := pgx.BeginFunc(context.Background(), conn, func(tx pgx.Tx) error {
					if _, err := tx.Exec(context.Background(), "INSERT INTO w VALUES ($1, $2), ($3, $4)", 2*i, 2*i, 2*i+1, 2*i+1); err != nil {
						return err
					}
					if i > 0 {
						if _, err := tx.Exec(context.Background(), "UPDATE w SET v = v + 1000 WHERE id = $1", 2*i-1); err != nil {
							return err
						}
						if _, err := tx.Exec(context.Background(), "DELETE FROM w WHERE id = $1", 2*i-2); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Logf("workload: %v", err)
					failures++
					conn.Close(context.Background())
					conn = nil
					continue
				}
			}
			i++
			milestone <- i
			time.Sleep(5 * time.Millisecond)
		}
		if conn != nil {
			conn.Close(context.Background())
		}
		close(milestone)
		werr <- nil
	}()
	for i := range milestone {
		switch i {
		case 60, 220:
			s.restart()
		case 140:
			f.conn.Close(context.Background())
			if err := shared.pg.Crash(); err != nil {
				t.Fatal(err)
			}
			f.conn = f.connect()
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	f.sync(s.running())
	evs := f.read("public.w")
	compareState(t, fold(t, evs), f.tableState(t, "w"))
	byTx := map[int64][]string{}
	for _, e := range evs {
		if e.value == nil || e.op() == "r" {
			continue
		}
		tx := num(t, e.source()["txId"])
		byTx[tx] = append(byTx[tx], e.op())
	}
	if len(byTx) != txns {
		t.Errorf("%d transactions in the topic, want %d", len(byTx), txns)
	}
	first := 0
	for tx, ops := range byTx {
		switch strings.Join(ops, " ") {
		case "c c u d":
		case "c c":
			first++
		default:
			t.Errorf("txId %d: %v", tx, ops)
		}
	}
	if first != 1 {
		t.Errorf("%d transactions without an update and delete, want 1", first)
	}
	t.Logf("%d events, %d task failures restarted, %v transactions resent by the server and skipped",
		len(evs), s.failures, f.metric("strand_connect_pgsource_skipped_transactions_total"))
}

// TestResentSkipped: the server resends from the slot's confirmed LSN,
// which may be behind the committed offset (a task stopped between its
// Kafka commit and telling the server). Here the slot is put back to
// an older position by hand: every transaction resent is skipped, none
// written twice.
func TestResentSkipped(t *testing.T) {
	f := newFixture(t, "resent")
	f.exec(`CREATE TABLE e (id int PRIMARY KEY, v int8 NOT NULL)`)
	slot := f.config["slot.name"]
	r := f.start()
	f.sync(r)
	f.exec("SELECT pg_copy_logical_replication_slot('" + slot + "', '" + slot + "_old')")
	for i := range 20 {
		f.exec(fmt.Sprintf("INSERT INTO e VALUES (%d, %d)", i, i))
	}
	f.sync(r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	// The walsender may not have seen the task's connection go yet.
	for i := 0; ; i++ {
		_, err := f.conn.Exec(t.Context(), "SELECT pg_drop_replication_slot('"+slot+"')")
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.exec("SELECT pg_copy_logical_replication_slot('"+slot+"_old', '"+slot+"')",
		"SELECT pg_drop_replication_slot('"+slot+"_old')")
	skipped := f.metric("strand_connect_pgsource_skipped_transactions_total")
	// Asked to start from the committed offset, the server skips to
	// it by itself; from the slot, it resends.
	pgsource.StartFromSlot(true)
	defer pgsource.StartFromSlot(false)
	r = f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	for i := 20; i < 25; i++ {
		f.exec(fmt.Sprintf("INSERT INTO e VALUES (%d, %d)", i, i))
	}
	f.sync(r)
	evs := f.read("public.e")
	compareState(t, fold(t, evs), f.tableState(t, "e"))
	if len(evs) != 25 {
		t.Errorf("%d events, want 25", len(evs))
	}
	if got := f.metric("strand_connect_pgsource_skipped_transactions_total") - skipped; got < 20 {
		t.Errorf("%v transactions skipped, want at least the 20 resent", got)
	}
}

// TestSnapshotInterrupted: a task stopped after part of its snapshot
// was committed snapshots again from the start on its next run (the
// first part's rows twice, as Debezium), then streams from the new
// slot's consistent point: every row in the end, one "last".
func TestSnapshotInterrupted(t *testing.T) {
	const rows = 6000
	f := newFixture(t, "interrupted")
	f.exec(`CREATE TABLE i (id int PRIMARY KEY, v int8 NOT NULL)`,
		fmt.Sprintf(`INSERT INTO i SELECT g, g FROM generate_series(1, %d) g`, rows))
	parted := make(chan struct{})
	var once sync.Once
	pgsource.SnapshotParts(1000, func(ctx context.Context, _ int) {
		once.Do(func() { close(parted) })
		<-ctx.Done() // hold the snapshot half-way until the task is stopped
	})
	defer pgsource.SnapshotParts(0, nil)
	r := f.start()
	select {
	case <-parted:
	case <-r.done:
		t.Fatalf("task ended: %v", r.err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	// The first part's 1000 records and its commit marker.
	if n := f.endOffsets(f.prefix+".public.i", true); n != 1001 {
		t.Fatalf("last stable offset %d after the interrupted snapshot, want its first part's, 1001", n)
	}
	pgsource.SnapshotParts(1000, nil)
	r = f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	f.exec(`INSERT INTO i VALUES (0, 0)`, `UPDATE i SET v = -1 WHERE id = 1`)
	f.sync(r)
	evs := f.read("public.i")
	var snap, last int
	state := map[string]map[string]any{}
	for _, e := range evs {
		switch e.op() {
		case "r":
			snap++
			if e.source()["snapshot"] == "last" {
				last++
			}
		}
		state[fmtKey(e.key)] = e.after()
	}
	// sync's marker row may be in the second snapshot (the old slot
	// counts as there): the last snapshot event is then the marker's.
	for _, e := range f.read("public.strand_marker") {
		if e.source()["snapshot"] == "last" {
			last++
		}
	}
	if snap != rows+1000 || last != 1 {
		t.Errorf("%d snapshot events (%d last), want %d (one last)", snap, last, rows+1000)
	}
	compareState(t, state, f.tableState(t, "i"))
}

// TestFilteredSchemaless: publication.autocreate.mode=filtered creates
// the publication for the included tables only; with the converters'
// schemas off, keys and values are the bare payloads; string decimals.
func TestFilteredSchemaless(t *testing.T) {
	f := newFixture(t, "filtered")
	f.config["publication.autocreate.mode"] = "filtered"
	f.config["publication.name"] = "filtered_pub"
	f.config["table.include.list"] = "public\\.(a|strand_marker)"
	f.config["key.converter.schemas.enable"] = "false"
	f.config["value.converter.schemas.enable"] = "false"
	f.config["decimal.handling.mode"] = "string"
	f.exec(`CREATE TABLE a (id int PRIMARY KEY, price numeric(6,2))`, `CREATE TABLE b (id int PRIMARY KEY)`,
		`INSERT INTO a VALUES (1, 1.50)`, `INSERT INTO b VALUES (1)`)
	r := f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	f.exec(`INSERT INTO a VALUES (2, 2.25)`, `INSERT INTO b VALUES (2)`)
	f.sync(r)
	var tables []string
	rows, err := f.conn.Query(t.Context(), `SELECT tablename FROM pg_publication_tables WHERE pubname = 'filtered_pub' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if strings.Join(tables, ",") != "a,strand_marker" {
		t.Errorf("publication's tables: %v", tables)
	}
	evs := f.read("public.a")
	if len(evs) != 2 || evs[0].schema != nil || evs[0].op() != "r" || evs[1].op() != "c" {
		t.Fatalf("events of a: %+v", evs)
	}
	if evs[0].after()["price"] != "1.50" || evs[1].after()["price"] != "2.25" || fmtKey(evs[1].key) != "map[id:2]" {
		t.Errorf("a: %v %v, key %v", evs[0].after(), evs[1].after(), evs[1].key)
	}
	if n := f.endOffsets(f.prefix+".public.b", false); n != 0 {
		t.Errorf("b, not included, has %d records", n)
	}
}

// TestSnapshotNever: snapshot.mode=never writes no existing row and
// streams from the slot's creation.
func TestSnapshotNever(t *testing.T) {
	f := newFixture(t, "never")
	f.config["snapshot.mode"] = "never"
	f.exec(`CREATE TABLE n (id int PRIMARY KEY)`, `INSERT INTO n VALUES (1)`)
	r := f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	f.exec(`INSERT INTO n VALUES (2)`)
	f.sync(r)
	evs := f.read("public.n")
	if len(evs) != 1 || evs[0].op() != "c" || fmtKey(evs[0].key) != "map[id:2]" {
		t.Errorf("events: %+v", evs)
	}
}

// TestOffsetsShared: offsets of other connectors in the shared topic,
// among them an open transaction ahead of this connector's last commit
// and more than a read window of records after it, do not hide that
// commit: the task resumes from it and writes nothing twice.
func TestOffsetsShared(t *testing.T) {
	f := newFixture(t, "shared")
	f.exec(`CREATE TABLE s (id int PRIMARY KEY, v int8 NOT NULL)`)
	r := f.start()
	f.sync(r)
	f.exec(`INSERT INTO s VALUES (1, 1)`)
	f.sync(r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Another connector's transaction, left open.
	open, err := kgo.NewClient(append(f.kafka(), kgo.TransactionalID("strand-connect-other-open"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, &kgo.Record{Topic: pgsource.OffsetsTopic, Key: []byte(`["other",{"server":"x"}]`), Value: []byte(`{"lsn":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Then many committed records of others: more than a window.
	busy, err := kgo.NewClient(f.kafka()...)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var recs []*kgo.Record
	for i := range 3000 {
		recs = append(recs, &kgo.Record{Topic: pgsource.OffsetsTopic, Key: []byte(fmt.Sprintf(`["busy%d",{"server":"x"}]`, i%7)), Value: []byte(`{"lsn":2}`)})
	}
	if err := busy.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pgsource.StartFromSlot(true) // the server would skip to the offset by itself otherwise
	defer pgsource.StartFromSlot(false)
	f.exec(`INSERT INTO s VALUES (2, 2)`)
	r = f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	evs := f.read("public.s")
	compareState(t, fold(t, evs), f.tableState(t, "s"))
	if len(evs) != 2 {
		t.Errorf("%d events, want 2", len(evs))
	}
}

// TestTwoOwners: a second task of the same connector (the task placed
// on another agent while the first still runs, idle) fences the first,
// takes the slot from it, and goes on with nothing lost or repeated.
func TestTwoOwners(t *testing.T) {
	f := newFixture(t, "owners")
	f.exec(`CREATE TABLE o (id int PRIMARY KEY, v int8 NOT NULL)`)
	a := f.start()
	f.sync(a)
	f.exec(`INSERT INTO o VALUES (1, 1)`)
	f.sync(a)
	b := f.start()
	defer func() {
		if err := b.stop(); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-a.done:
		t.Logf("first owner ended: %v", a.err)
	case <-time.After(opTimeout):
		t.Fatal("the first owner still runs")
	}
	if a.err == nil {
		t.Error("the first owner ended without an error")
	}
	f.exec(`INSERT INTO o VALUES (2, 2)`, `UPDATE o SET v = 10 WHERE id = 1`)
	f.sync(b)
	evs := f.read("public.o")
	compareState(t, fold(t, evs), f.tableState(t, "o"))
	if len(evs) != 3 {
		t.Errorf("%d events, want 3", len(evs))
	}
}
