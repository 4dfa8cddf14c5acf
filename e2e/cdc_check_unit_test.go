package e2e

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/compat"
	"github.com/strandkafka/strand/internal/agent"
)

// The CDC acceptance test's pieces, each checked against a known
// answer so that the acceptance test's verdicts mean something: the
// canonical form, the per-transaction check, the Debezium-shaped
// kafkajs consumer (fed events in Debezium's envelope written here),
// and the workload (against PostgreSQL's own logical decoding).
//
//	go test ./e2e -run 'TestCDC(Canonical|TxCheck|DebeziumScript|Workload)' -v

func TestCDCCanonical(t *testing.T) {
	ts := time.Date(2026, 3, 1, 8, 0, 1, 123456000, time.UTC)
	tests := []struct {
		kind cdcKind
		in   any
		want string
	}{
		{kindInt, int32(7), "7"},
		{kindInt, int64(-7), "-7"},
		{kindInt, json.Number("42"), "42"},
		{kindInt, "0042", "42"},
		{kindInt, []byte("13"), "13"},
		{kindText, "a\tb", "a\tb"},
		{kindText, []byte("ü"), "ü"},
		{kindText, nil, nullText},
		{kindNumeric, "12.50", "12.5"},
		{kindNumeric, "-0.00", "0"},
		{kindNumeric, "100", "100"},
		{kindNumeric, json.Number("3.140"), "3.14"},
		{kindNumeric, pgtype.Numeric{Int: big.NewInt(-1250), Exp: -2, Valid: true}, "-12.5"},
		{kindNumeric, pgtype.Numeric{Int: big.NewInt(12), Exp: 2, Valid: true}, "1200"},
		{kindTime, ts, "2026-03-01T08:00:01.123456Z"},
		{kindTime, ts.In(time.FixedZone("x", 3600)), "2026-03-01T08:00:01.123456Z"},
		{kindTime, "2026-03-01T08:00:01.123456Z", "2026-03-01T08:00:01.123456Z"},
		{kindTime, "2026-03-01T09:00:01.123456+01:00", "2026-03-01T08:00:01.123456Z"},
		{kindTime, "2026-03-01 08:00:01.123456", "2026-03-01T08:00:01.123456Z"},
		{kindTime, "2026-03-01 08:00:01.123456+00", "2026-03-01T08:00:01.123456Z"},
		{kindTime, "2026-03-01 08:00:01", "2026-03-01T08:00:01.000000Z"},
		{kindBool, true, "t"},
		{kindBool, "0", "f"},
		{kindBool, "1", "t"},
		{kindBool, int64(1), "t"},
		{kindBool, []byte{0}, "f"},
		{kindBool, sql.RawBytes("1"), "t"},
	}
	for _, tc := range tests {
		got, err := canonValue(tc.kind, tc.in)
		if err != nil || got != tc.want {
			t.Errorf("canonValue(%d, %#v) = %q, %v; want %q", tc.kind, tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []struct {
		kind cdcKind
		in   any
	}{{kindInt, "x"}, {kindBool, "maybe"}, {kindTime, "yesterday"}, {kindText, 3}} {
		if got, err := canonValue(bad.kind, bad.in); err == nil {
			t.Errorf("canonValue(%d, %#v) = %q, want an error", bad.kind, bad.in, got)
		}
	}
	for _, tc := range []struct {
		v     string
		scale int
	}{{"0", 2}, {"12.34", 2}, {"-12.34", 2}, {"-0.01", 2}, {"127", 0}, {"128", 0}, {"-128", 0}, {"-129", 0}, {"999999.999", 3}} {
		b64 := encodeDecimal(t, tc.v, tc.scale)
		got, err := decodeDecimal(b64, tc.scale)
		want, _ := canonDecimal(tc.v)
		if err != nil || got != want {
			t.Errorf("decimal %s (scale %d, %s): decoded %q, %v", tc.v, tc.scale, b64, got, err)
		}
	}
	rows := cdcRows{{"10", "b"}, {"9", "a"}, {"100", "c"}}
	rows.sortByKey(kindInt)
	if rows[0][0] != "9" || rows[2][0] != "100" {
		t.Errorf("integer keys sorted as %v", rows)
	}
	other := cdcRows{{"9", "a"}, {"10", "B"}, {"101", "c"}}
	if rows.digest() == other.digest() {
		t.Error("different rows, same digest")
	}
	d := diffRows(rows, other, 10)
	for _, want := range []string{"differs", "missing [100 c]", "extra   [101 c]"} {
		if !strings.Contains(d, want) {
			t.Errorf("diffRows says %q, lacks %q", d, want)
		}
	}
	if d := diffRows(rows, slices.Clone(rows), 10); d != "" {
		t.Errorf("diffRows of equal rows: %q", d)
	}
}

// encodeDecimal is Connect's Decimal as Debezium writes it in JSON:
// the unscaled value as minimal big-endian two's complement, base64.
func encodeDecimal(t testing.TB, v string, scale int) string {
	t.Helper()
	r, ok := new(big.Rat).SetString(v)
	if !ok {
		t.Fatalf("decimal %q", v)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !r.IsInt() {
		t.Fatalf("decimal %q has more than %d digits after the point", v, scale)
	}
	n := r.Num()
	size := 1
	for {
		lim := new(big.Int).Lsh(big.NewInt(1), uint(8*size-1))
		if n.Cmp(lim) < 0 && n.Cmp(new(big.Int).Neg(lim)) >= 0 {
			break
		}
		size++
	}
	u := new(big.Int).Set(n)
	if n.Sign() < 0 {
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), uint(8*size)))
	}
	b := u.FillBytes(make([]byte, size))
	return base64.StdEncoding.EncodeToString(b)
}

// dbzScale is the scale of each numeric column, as the source declares it.
var dbzScale = map[string]int{"balance": 2, "amount": 2, "score": 3}

// dbzValue writes a Debezium change event (JsonConverter with
// schemas) for a row of tb as the test models it: values as canonical
// text, by column name, absent or nil for NULL.
func dbzValue(t testing.TB, tb *cdcTable, cols []cdcColumn, op string, before, after map[string]any, txID, lsn int64) []byte {
	t.Helper()
	var fields []map[string]any
	for _, c := range cols {
		f := map[string]any{"field": c.name, "optional": c.name != tb.columns[0].name}
		switch c.kind {
		case kindInt:
			f["type"] = "int64"
		case kindText:
			f["type"] = "string"
		case kindNumeric:
			f["type"], f["name"], f["version"] = "bytes", "org.apache.kafka.connect.data.Decimal", 1
			f["parameters"] = map[string]string{"scale": strconv.Itoa(dbzScale[c.name])}
		case kindTime:
			f["type"], f["name"], f["version"] = "string", "io.debezium.time.ZonedTimestamp", 1
		case kindBool:
			f["type"] = "boolean"
		}
		fields = append(fields, f)
	}
	row := func(m map[string]any) any {
		if m == nil {
			return nil
		}
		out := map[string]any{}
		for _, c := range cols {
			v, ok := m[c.name]
			if !ok || v == nil {
				out[c.name] = nil
				continue
			}
			switch c.kind {
			case kindNumeric:
				out[c.name] = encodeDecimal(t, v.(string), dbzScale[c.name])
			case kindInt:
				n, _ := strconv.ParseInt(v.(string), 10, 64)
				out[c.name] = n
			case kindBool:
				out[c.name] = v == "t"
			default:
				out[c.name] = v
			}
		}
		return out
	}
	rowSchema := func(name string) map[string]any {
		return map[string]any{"type": "struct", "optional": true, "name": "cdc.public." + tb.name + ".Value", "field": name, "fields": fields}
	}
	snapshot := "false"
	if op == "r" {
		snapshot = "true"
	}
	v := map[string]any{
		"schema": map[string]any{"type": "struct", "name": "cdc.public." + tb.name + ".Envelope", "fields": []any{
			rowSchema("before"), rowSchema("after"),
			map[string]any{"type": "struct", "field": "source", "name": "io.debezium.connector.postgresql.Source", "fields": []any{}},
			map[string]any{"type": "string", "field": "op"}, map[string]any{"type": "int64", "field": "ts_ms", "optional": true},
		}},
		"payload": map[string]any{
			"before": row(before), "after": row(after), "op": op, "ts_ms": 1772352000000,
			"source": map[string]any{"version": "strand", "connector": "postgresql", "name": "cdc", "ts_ms": 1772352000000,
				"snapshot": snapshot, "db": "cdcsrc", "schema": "public", "table": tb.name, "txId": txID, "lsn": lsn},
		},
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dbzKey(t testing.TB, tb *cdcTable, key string) []byte {
	t.Helper()
	pk := tb.columns[0]
	var v any = key
	typ := "string"
	if pk.kind == kindInt {
		n, _ := strconv.ParseInt(key, 10, 64)
		v, typ = n, "int64"
	}
	b, _ := json.Marshal(map[string]any{
		"schema":  map[string]any{"type": "struct", "name": "cdc.public." + tb.name + ".Key", "fields": []any{map[string]any{"field": pk.name, "type": typ}}},
		"payload": map[string]any{pk.name: v},
	})
	return b
}

func TestCDCTxCheck(t *testing.T) {
	acc, tags := cdcTableNamed("accounts"), cdcTableNamed("tags")
	topicOf := func(tb *cdcTable) string { return "cdc.public." + tb.name }
	tableOf := func(topic string) *cdcTable {
		for _, tb := range cdcTables {
			if topicOf(tb) == topic {
				return tb
			}
		}
		return nil
	}
	// rec builds the records of one event: a change, plus the
	// tombstone after a delete.
	rec := func(tb *cdcTable, op, key string, tx int64) []capturedRecord {
		row := map[string]any{tb.columns[0].name: key}
		var before, after map[string]any
		if op == "d" {
			before = row
		} else {
			after = row
		}
		r := capturedRecord{topic: topicOf(tb), key: dbzKey(t, tb, key), value: dbzValue(t, tb, tb.columns[:1], op, before, after, tx, 100)}
		if op == "d" {
			return []capturedRecord{r, {topic: r.topic, key: r.key}}
		}
		return []capturedRecord{r}
	}
	// stream numbers records per partition in the order given.
	stream := func(groups ...[]capturedRecord) []capturedRecord {
		next := map[string]int64{}
		var out []capturedRecord
		for _, g := range groups {
			for _, r := range g {
				r.offset = next[r.topic]
				next[r.topic]++
				out = append(out, r)
			}
		}
		return out
	}
	want := map[int64][]rowEvent{
		10: {{"accounts", "c", "1"}, {"tags", "c", "x"}, {"accounts", "u", "1"}},
		11: {{"accounts", "d", "2"}},
	}
	good := [][]capturedRecord{
		rec(acc, "r", "2", 5), rec(tags, "r", "y", 5),
		rec(acc, "c", "1", 10), rec(tags, "c", "x", 10), rec(acc, "u", "1", 10),
		rec(acc, "d", "2", 11),
	}
	c := txCheck{tableOf: tableOf, want: want, snapshotRows: map[string]int{"accounts": 1, "tags": 1}}
	if p := c.check(stream(good...), 10); len(p) != 0 {
		t.Fatalf("a correct stream: %v", p)
	}
	bad := []struct {
		name    string
		records []capturedRecord
		problem string
	}{
		{"split by another transaction", stream(good[0], good[1], rec(acc, "c", "1", 10), good[5], rec(tags, "c", "x", 10), rec(acc, "u", "1", 10)),
			"txId 10 resumes after another transaction"},
		{"a change lost", stream(good[0], good[1], good[2], good[3], good[5]), "txId 10: 2 records for 3 changes"},
		{"a change twice (the source resent after a crash)", stream(append(slices.Clone(good), rec(acc, "u", "1", 10))...), "txId 10 resumes"},
		{"changes of a row out of order", stream(good[0], good[1], rec(acc, "u", "1", 10), rec(tags, "c", "x", 10), rec(acc, "c", "1", 10), good[5]),
			"row accounts 1: ops [u c], want [c u]"},
		{"a transaction never committed", stream(append(slices.Clone(good), rec(acc, "c", "9", 12))...), "txId 12: 1 records, but no such"},
		{"a transaction never read", stream(good[:5]...), "txId 11: committed"},
		{"no tombstone", stream(good[0], good[1], good[2], good[3], good[4], good[5][:1], rec(acc, "c", "3", 13)), "not followed by its tombstone"},
		{"a snapshot row missing", stream(good[1:]...), "snapshot of accounts: 0 rows read, 1 seeded"},
		{"a snapshot row twice", stream(append([][]capturedRecord{good[0]}, good...)...), "snapshot read key 2 twice"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p := c.check(tc.records, 10)
			if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tc.problem) }) {
				t.Fatalf("problems %q, want one saying %q", p, tc.problem)
			}
		})
	}
}

// kafkajsScript returns the argv to run the Debezium-shaped consumer
// and its environment, or skips (fails in CI) without node and kafkajs.
func kafkajsScript(t testing.TB) ([]string, []string) {
	t.Helper()
	node := requireCommand(t, "node")
	dir, err := compat.KafkaJSDir()
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(dir, "node_modules")
	// The script loads kafkajs and the snappy and lz4 codecs (franz-go,
	// which the source produces with, compresses with snappy).
	for _, m := range []string{"kafkajs", "kafkajs-snappy", "kafkajs-lz4"} {
		requireTool(t, m, func() error {
			_, err := os.Stat(filepath.Join(modules, m, "package.json"))
			return err
		})
	}
	script, err := filepath.Abs("testdata/cdc_debezium_kafkajs.js")
	if err != nil {
		t.Fatal(err)
	}
	return []string{node, script}, []string{"NODE_PATH=" + modules}
}

// debeziumResult is the consumer script's one line.
type debeziumResult struct {
	Tables map[string][]map[string]any `json:"tables"`
	Counts map[string]int              `json:"counts"`
	Read   map[string]int              `json:"read"`
	Errors []string                    `json:"errors"`
}

// runDebeziumConsumer runs the script over topics, reading expect[t]
// records of each.
func runDebeziumConsumer(t *testing.T, bootstrap string, expect map[string]int, timeout time.Duration) (res debeziumResult) {
	t.Helper()
	argv, env := kafkajsScript(t)
	var parts []string
	for _, tp := range slices.Sorted(mapKeys(expect)) {
		parts = append(parts, fmt.Sprintf("%s=%d", tp, expect[tp]))
	}
	argv = append(argv, "--bootstrap", bootstrap, "--expect", strings.Join(parts, ","), "--timeout-ms", strconv.Itoa(int(timeout.Milliseconds())))
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s\nstderr:\n%s", strings.Join(argv, " "), err, out, lastBytes(stderr.String(), 8000))
	}
	defer func() {
		if slices.ContainsFunc(res.Errors, func(e string) bool {
			return strings.HasPrefix(e, "timed out") || strings.HasPrefix(e, "consumer crashed")
		}) {
			t.Logf("consumer script's stderr:\n%s", lastBytes(stderr.String(), 8000))
		}
	}()
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&res); err != nil {
		t.Fatalf("consumer script's line %q: %v", line, err)
	}
	return res
}

// debeziumRows are the script's rows of a table in canonical form,
// sorted by key; a column absent from a row (written before the
// schema change added it) reads NULL.
func debeziumRows(tb *cdcTable, cols []cdcColumn, rows []map[string]any) (cdcRows, error) {
	var out cdcRows
	for _, m := range rows {
		vals := make([]any, len(cols))
		for i, c := range cols {
			vals[i] = m[c.name]
		}
		r, err := canonRow(cols, vals)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	out.sortByKey(cols[0].kind)
	return out, nil
}

// TestCDCDebeziumScript feeds the Debezium-shaped consumer events
// written here in Debezium's envelope, in Kafka transactions, and
// checks the table it rebuilds and the faults it reports.
func TestCDCDebeziumScript(t *testing.T) {
	a := startAgent(t, agent.Config{})
	kafkajsScript(t)
	acc, tags := cdcTableNamed("accounts"), cdcTableNamed("tags")
	row := func(tb *cdcTable, vals ...any) map[string]any {
		m := map[string]any{}
		for i, c := range tb.columnsAt(true) {
			if i < len(vals) {
				m[c.name] = vals[i]
			}
		}
		return m
	}
	ts := "2026-03-01T08:00:01.123456Z"
	a1 := row(acc, "1", "ann", "-12.05", ts, "t", nil)
	a2 := row(acc, "2", "bob", "0.00", ts, "f", "note")
	a1u := row(acc, "1", "ann", "99999999.99", "2026-03-02T00:00:00Z", "f", nil, "gold")
	t1 := row(tags, "tag-b", "5", "1.5", ts, "t", "l")
	t2 := row(tags, "tag-a", "-1", "0.001", ts, "f", nil, "red")
	type ev struct {
		tb            *cdcTable
		op            string
		before, after map[string]any
	}
	txns := [][]ev{
		{{acc, "r", nil, a1}, {acc, "r", nil, a2}, {tags, "r", nil, t1}},
		{{acc, "u", nil, a1u}, {tags, "c", nil, t2}},
		{{acc, "d", row(acc, "2"), nil}},
	}
	cl := newClient(t, a.KafkaAddr(), kgo.TransactionalID("cdc-script-test"))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	expect := map[string]int{}
	for _, tb := range []*cdcTable{acc, tags} {
		createTopic(t, a.KafkaAddr(), "cdc.public."+tb.name, 1)
	}
	for i, txn := range txns {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, e := range txn {
			r := e.after
			if r == nil {
				r = e.before
			}
			key := r[e.tb.columns[0].name].(string)
			topic := "cdc.public." + e.tb.name
			recs := []*kgo.Record{{Topic: topic, Key: dbzKey(t, e.tb, key), Value: dbzValue(t, e.tb, e.tb.columnsAt(i > 0), e.op, e.before, e.after, int64(500+i), int64(1000*i))}}
			if e.op == "d" {
				recs = append(recs, &kgo.Record{Topic: topic, Key: recs[0].Key})
			}
			expect[topic] += len(recs)
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	res := runDebeziumConsumer(t, a.KafkaAddr(), expect, time.Minute)
	if len(res.Errors) != 0 {
		t.Fatalf("the consumer found faults in correct events: %v", res.Errors)
	}
	if want := map[string]int{"c": 1, "u": 1, "d": 1, "r": 3, "tombstones": 1}; !equalCounts(res.Counts, want) {
		t.Errorf("counts %v, want %v", res.Counts, want)
	}
	for _, tc := range []struct {
		tb   *cdcTable
		want []map[string]any
	}{{acc, []map[string]any{a1u}}, {tags, []map[string]any{t1, t2}}} {
		cols := tc.tb.columnsAt(true)
		got, err := debeziumRows(tc.tb, cols, res.Tables[tc.tb.name])
		if err != nil {
			t.Fatal(err)
		}
		want, err := debeziumRows(tc.tb, cols, tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffRows(want, got, 10); d != "" {
			t.Errorf("%s as the consumer rebuilt it: %s", tc.tb.name, d)
		}
	}

	// A delete without its tombstone, and an event without source.txId:
	// the consumer says so.
	topic := "cdc.public.accounts"
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	noTx := dbzValue(t, acc, acc.columnsAt(true), "c", nil, row(acc, "7", "x", "1", ts, "t"), 0, 1)
	noTx = []byte(strings.Replace(string(noTx), `"txId":0,`, "", 1))
	recs := []*kgo.Record{
		{Topic: topic, Key: dbzKey(t, acc, "1"), Value: dbzValue(t, acc, acc.columnsAt(true), "d", row(acc, "1"), nil, 600, 5000)},
		{Topic: topic, Key: dbzKey(t, acc, "7"), Value: noTx},
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	expect[topic] += 2
	res = runDebeziumConsumer(t, a.KafkaAddr(), expect, time.Minute)
	for _, want := range []string{"has no tombstone", "source.txId undefined"} {
		if !slices.ContainsFunc(res.Errors, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("errors %q, want one saying %q", res.Errors, want)
		}
	}
}

// lastBytes is the last n bytes of s.
func lastBytes(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func equalCounts(got, want map[string]int) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return len(got) == len(want)
}
