package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The CDC acceptance test's checks, apart from any running system so
// that they are tested on their own (cdc_check_unit_test.go): values
// from three databases and from Debezium's JSON made comparable, a
// table's ordered checksum, and the per-transaction check of what a
// read_committed consumer read.

// nullText is how a NULL reads in the canonical form: no value of a
// column renders so.
const nullText = `\N`

// canonValue renders v, read from any of the databases (pgx's Go
// values, go-sql-driver's text) or from Debezium's JSON (decoded by
// encoding/json with UseNumber), as the one text the same value has
// everywhere: integers and decimals without leading or trailing
// zeros, times in UTC to the microsecond, booleans as t and f.
func canonValue(k cdcKind, v any) (string, error) {
	if v == nil {
		return nullText, nil
	}
	if b, ok := v.([]byte); ok {
		if k == kindBool && len(b) == 1 && b[0] <= 1 {
			// MariaDB's BIT(1) reads as one raw byte.
			return map[byte]string{0: "f", 1: "t"}[b[0]], nil
		}
		v = string(b)
	}
	if b, ok := v.(sql.RawBytes); ok {
		v = string(b)
	}
	switch k {
	case kindText:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case kindInt:
		switch x := v.(type) {
		case int64, int32, int16, int8, int, uint64, uint32:
			return fmt.Sprint(x), nil
		case json.Number:
			return canonDecimal(string(x))
		case float64:
			return canonDecimal(strconv.FormatFloat(x, 'f', -1, 64))
		case string:
			return canonDecimal(x)
		}
	case kindNumeric:
		switch x := v.(type) {
		case pgtype.Numeric:
			if !x.Valid {
				return nullText, nil
			}
			r := new(big.Rat).SetInt(x.Int)
			if x.Exp > 0 {
				r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Exp)), nil)))
			} else if x.Exp < 0 {
				r.Quo(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-x.Exp)), nil)))
			}
			return canonRat(r), nil
		case json.Number:
			return canonDecimal(string(x))
		case float64:
			return canonDecimal(strconv.FormatFloat(x, 'f', -1, 64))
		case string:
			return canonDecimal(x)
		}
	case kindTime:
		switch x := v.(type) {
		case time.Time:
			return x.UTC().Format(canonTimeLayout), nil
		case string:
			t, err := parseAnyTime(x)
			if err != nil {
				return "", err
			}
			return t.UTC().Format(canonTimeLayout), nil
		}
	case kindBool:
		switch x := v.(type) {
		case bool:
			if x {
				return "t", nil
			}
			return "f", nil
		case int64, int32, int8, int:
			return map[bool]string{true: "t", false: "f"}[fmt.Sprint(x) != "0"], nil
		case string:
			switch strings.ToLower(x) {
			case "t", "true", "1":
				return "t", nil
			case "f", "false", "0":
				return "f", nil
			}
		}
	}
	return "", fmt.Errorf("value %#v (%T) is not of kind %d", v, v, k)
}

const canonTimeLayout = "2006-01-02T15:04:05.000000Z"

// timeLayouts are the forms a time may take: Debezium's ZonedTimestamp
// (ISO-8601 with an offset), PostgreSQL's text, MariaDB's DATETIME
// (no zone: the sinks write UTC, database.time_zone's default).
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"}

func parseAnyTime(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q in none of the known forms", s)
}

// canonDecimal renders a decimal's text without leading zeros,
// trailing fractional zeros, a dangling point or a negative zero.
func canonDecimal(s string) (string, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return "", fmt.Errorf("decimal %q does not parse", s)
	}
	return canonRat(r), nil
}

func canonRat(r *big.Rat) string {
	// Every value here has at most 6 fractional digits (numeric(10,3),
	// timestamps are not decimals); 9 is exact for all of them.
	s := r.FloatString(9)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// cdcRows are a table's rows in canonical form, columns in the
// source's order, the primary key first.
type cdcRows [][]string

// sortByKey orders rows by their key as the source orders it: integers
// numerically, text by bytes (whatever a target's collation says).
func (rs cdcRows) sortByKey(k cdcKind) {
	slices.SortFunc(rs, func(a, b []string) int {
		if k == kindInt {
			x, _ := new(big.Rat).SetString(a[0])
			y, _ := new(big.Rat).SetString(b[0])
			if x != nil && y != nil {
				return x.Cmp(y)
			}
		}
		return strings.Compare(a[0], b[0])
	})
}

// digest is the ordered checksum of rows (sorted first): SHA-256 over
// each row's columns, tab-separated, a line each.
func (rs cdcRows) digest() string {
	h := sha256.New()
	for _, r := range rs {
		h.Write([]byte(strings.Join(r, "\t")))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// diffRows describes how got differs from want (both sorted), at most
// limit rows of it, or "" if they are equal.
func diffRows(want, got cdcRows, limit int) string {
	var b strings.Builder
	n := 0
	note := func(format string, args ...any) {
		if n < limit {
			fmt.Fprintf(&b, format+"\n", args...)
		}
		n++
	}
	wm := map[string][]string{}
	for _, r := range want {
		wm[r[0]] = r
	}
	gm := map[string][]string{}
	for _, r := range got {
		if _, dup := gm[r[0]]; dup {
			note("  key %s twice", r[0])
		}
		gm[r[0]] = r
	}
	for _, r := range want {
		g, ok := gm[r[0]]
		switch {
		case !ok:
			note("  missing %v", r)
		case !slices.Equal(g, r):
			note("  differs: want %v\n           got  %v", r, g)
		}
	}
	for _, r := range got {
		if _, ok := wm[r[0]]; !ok {
			note("  extra   %v", r)
		}
	}
	if n == 0 {
		return ""
	}
	if n > limit {
		fmt.Fprintf(&b, "  ... %d differences in all\n", n)
	}
	return fmt.Sprintf("%d rows want, %d got:\n%s", len(want), len(got), b.String())
}

// readPGRows reads a table's columns from PostgreSQL in canonical form,
// sorted by key.
func readPGRows(ctx context.Context, c *pgx.Conn, table string, cols []cdcColumn) (cdcRows, error) {
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = pgx.Identifier{col.name}.Sanitize()
	}
	rows, err := c.Query(ctx, fmt.Sprintf("SELECT %s FROM %s", strings.Join(names, ", "), pgx.Identifier{table}.Sanitize()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out cdcRows
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		r, err := canonRow(cols, vals)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out.sortByKey(cols[0].kind)
	return out, nil
}

// readSQLRows reads a table's columns through database/sql (MariaDB),
// in canonical form, sorted by key. The query has no arguments, so the
// driver uses the text protocol and every value arrives as text.
func readSQLRows(ctx context.Context, db *sql.DB, table string, cols []cdcColumn) (cdcRows, error) {
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = "`" + col.name + "`"
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM `%s`", strings.Join(names, ", "), table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out cdcRows
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		vals := make([]any, len(cols))
		for i, b := range raw {
			if b != nil {
				vals[i] = string(b)
			}
		}
		r, err := canonRow(cols, vals)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out.sortByKey(cols[0].kind)
	return out, nil
}

func canonRow(cols []cdcColumn, vals []any) ([]string, error) {
	r := make([]string, len(cols))
	for i, col := range cols {
		s, err := canonValue(col.kind, vals[i])
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", col.name, err)
		}
		r[i] = s
	}
	return r, nil
}

// capturedRecord is one record a consumer of the captured topics read.
type capturedRecord struct {
	topic      string
	partition  int32
	offset     int64
	key, value []byte
}

// dbzEvent is the part of Debezium's change event the checks read.
type dbzEvent struct {
	Op     string         `json:"op"`
	Before map[string]any `json:"before"`
	After  map[string]any `json:"after"`
	TsMs   *int64         `json:"ts_ms"`
	Source struct {
		TxID     *int64 `json:"txId"`
		LSN      *int64 `json:"lsn"`
		Schema   string `json:"schema"`
		Table    string `json:"table"`
		Snapshot any    `json:"snapshot"`
	} `json:"source"`
}

// unwrapPayload returns the payload of Debezium's JSON with schemas
// (JsonConverter's schemas.enable, the default) or the value itself
// when it has none.
func unwrapPayload(b []byte) ([]byte, error) {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	if p, ok := env["payload"]; ok {
		if _, ok := env["schema"]; ok {
			return p, nil
		}
	}
	return b, nil
}

func decodeEvent(value []byte) (dbzEvent, error) {
	var ev dbzEvent
	p, err := unwrapPayload(value)
	if err != nil {
		return ev, err
	}
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	err = d.Decode(&ev)
	return ev, err
}

// canonKey renders a record key (Debezium's key struct of the primary
// key column) as the workload's key.
func canonKey(tb *cdcTable, key []byte) (string, error) {
	p, err := unwrapPayload(key)
	if err != nil {
		return "", fmt.Errorf("key %q: %w", key, err)
	}
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return "", fmt.Errorf("key %q: %w", key, err)
	}
	col := tb.columns[0]
	v, ok := m[col.name]
	if !ok || len(m) != 1 {
		return "", fmt.Errorf("key %q: want exactly the field %q", key, col.name)
	}
	return canonValue(col.kind, v)
}

// txCheck is the per-transaction check of what a read_committed
// consumer read from the captured topics.
type txCheck struct {
	// tableOf maps a topic to its source table.
	tableOf func(topic string) *cdcTable
	// want are the workload's committed transactions' events, by txId.
	want map[int64][]rowEvent
	// snapshotRows is how many rows the snapshot reads, per table.
	snapshotRows map[string]int
}

// check returns every problem found, at most limit of them described:
// a transaction split by another one's records in a partition, one
// whose records are not exactly (in order, per row) the changes it
// made, one never committed, a delete without its tombstone right
// after it, a snapshot not of the seeded rows.
func (c txCheck) check(recs []capturedRecord, limit int) []string {
	var problems []string
	n := 0
	note := func(format string, args ...any) {
		if n < limit {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
		n++
	}
	type tp struct {
		topic     string
		partition int32
	}
	byPart := map[tp][]capturedRecord{}
	for _, r := range recs {
		byPart[tp{r.topic, r.partition}] = append(byPart[tp{r.topic, r.partition}], r)
	}
	got := map[int64][]rowEvent{}
	snap := map[string]map[string]bool{}
	parts := slices.SortedFunc(func(yield func(tp) bool) {
		for k := range byPart {
			if !yield(k) {
				return
			}
		}
	}, func(a, b tp) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	for _, p := range parts {
		rs := byPart[p]
		slices.SortFunc(rs, func(a, b capturedRecord) int { return cmp.Compare(a.offset, b.offset) })
		tb := c.tableOf(p.topic)
		if tb == nil {
			note("%s: not a captured table's topic", p.topic)
			continue
		}
		var (
			run        int64  = -1 // the txId whose records are being read
			closed            = map[int64]bool{}
			delPending string // a delete's key, waiting for its tombstone
			delOffset  int64
		)
		for _, r := range rs {
			where := fmt.Sprintf("%s/%d@%d", r.topic, r.partition, r.offset)
			key, err := canonKey(tb, r.key)
			if err != nil {
				note("%s: %v", where, err)
				continue
			}
			if r.value == nil {
				if delPending != key {
					note("%s: tombstone of key %s, not right after its delete (pending delete: %q)", where, key, delPending)
				}
				delPending = ""
				continue
			}
			if delPending != "" {
				note("%s/%d@%d: delete of key %s not followed by its tombstone", r.topic, r.partition, delOffset, delPending)
				delPending = ""
			}
			ev, err := decodeEvent(r.value)
			if err != nil {
				note("%s: %v", where, err)
				continue
			}
			if ev.Source.Table != tb.name || ev.Source.Schema != "public" {
				note("%s: source.schema.table %s.%s, want public.%s", where, ev.Source.Schema, ev.Source.Table, tb.name)
			}
			if ev.Op == "r" {
				if snap[tb.name] == nil {
					snap[tb.name] = map[string]bool{}
				}
				if snap[tb.name][key] {
					note("%s: snapshot read key %s twice", where, key)
				}
				snap[tb.name][key] = true
				continue
			}
			if ev.Source.TxID == nil {
				note("%s: op %s without source.txId", where, ev.Op)
				continue
			}
			tx := *ev.Source.TxID
			if tx != run {
				if closed[tx] {
					note("%s: txId %d resumes after another transaction's records in the partition", where, tx)
				}
				if run >= 0 {
					closed[run] = true
				}
				run = tx
			}
			got[tx] = append(got[tx], rowEvent{tb.name, ev.Op, key})
			if ev.Op == "d" {
				delPending, delOffset = key, r.offset
			}
		}
		if delPending != "" {
			note("%s/%d@%d: delete of key %s, the last record, has no tombstone", p.topic, p.partition, delOffset, delPending)
		}
	}
	for tb, want := range c.snapshotRows {
		if len(snap[tb]) != want {
			note("snapshot of %s: %d rows read, %d seeded", tb, len(snap[tb]), want)
		}
	}
	for _, tx := range slices.Sorted(mapKeys(got)) {
		want, ok := c.want[tx]
		if !ok {
			note("txId %d: %d records, but no such committed transaction of the workload (first %v)", tx, len(got[tx]), got[tx][0])
			continue
		}
		if d := diffEvents(want, got[tx]); d != "" {
			note("txId %d: %s", tx, d)
		}
	}
	for _, tx := range slices.Sorted(mapKeys(c.want)) {
		if _, ok := got[tx]; !ok {
			note("txId %d: committed (%d changes, first %v), never read", tx, len(c.want[tx]), c.want[tx][0])
		}
	}
	if n > limit {
		problems = append(problems, fmt.Sprintf("... %d problems in all", n))
	}
	return problems
}

// diffEvents compares a transaction's events per row, in order: the
// topics order one row's changes (one key, one partition) but not two
// tables'.
func diffEvents(want, got []rowEvent) string {
	perRow := func(evs []rowEvent) map[string][]string {
		m := map[string][]string{}
		for _, e := range evs {
			k := e.table + " " + e.key
			m[k] = append(m[k], e.op)
		}
		return m
	}
	w, g := perRow(want), perRow(got)
	for _, k := range slices.Sorted(mapKeys(w)) {
		if !slices.Equal(w[k], g[k]) {
			return fmt.Sprintf("%d records for %d changes; row %s: ops %v, want %v", len(got), len(want), k, g[k], w[k])
		}
	}
	for _, k := range slices.Sorted(mapKeys(g)) {
		if _, ok := w[k]; !ok {
			return fmt.Sprintf("%d records for %d changes; row %s (ops %v) not changed by it", len(got), len(want), k, g[k])
		}
	}
	return ""
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// decodeDecimal decodes Debezium's precise decimal (decimal.handling.mode
// precise, the default): the unscaled value as big-endian two's
// complement bytes, base64 in JSON, with the scale in the field's schema.
func decodeDecimal(b64 string, scale int) (string, error) {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", err
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	r := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	return canonRat(r), nil
}
