package sinks

import (
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Envelopes a sink writes.
const (
	// EnvelopeUpsert writes the newest row per key: key the row's key
	// columns as a JSON object, value the row as a JSON object, a
	// tombstone (null value) when the key's row is gone.
	EnvelopeUpsert = "upsert"
	// EnvelopeChangelog writes every change as Debezium does:
	// {"before": row|null, "after": row|null, "op": "c"|"u"|"d"}, an
	// update as one record with both.
	EnvelopeChangelog = "changelog"
)

// record is one Kafka record a sink writes; a nil value is a tombstone.
type record struct {
	key, value []byte
}

// encoder turns an epoch's output into the records of a sink's
// envelope. Not safe for concurrent use.
type encoder struct {
	cols     []exec.Column
	keyCols  []int // the view's unique key; all columns when it has none
	unique   bool  // keyCols identify a row (a GROUP BY's key)
	idx      flow.IndexSpec
	envelope string
}

func newEncoder(cols []exec.Column, idx flow.IndexSpec, envelope string) *encoder {
	e := &encoder{cols: cols, idx: idx, envelope: envelope}
	if idx.Unique && len(idx.KeyCols) > 0 {
		e.keyCols, e.unique = idx.KeyCols, true
	} else {
		for i := range cols {
			e.keyCols = append(e.keyCols, i)
		}
	}
	return e
}

// encode returns the records for out, an epoch's consolidated output;
// pending reads the view with the epoch applied (the upsert envelope
// writes each touched key's row as it now stands).
func (e *encoder) encode(out []types.Change, pending *flow.View) ([]record, error) {
	if e.envelope == EnvelopeUpsert {
		return e.upsert(out, pending)
	}
	return e.changelog(out), nil
}

// upsert writes one record per key the epoch touched, in the order the
// output first names it: the key's row after the epoch, or a tombstone.
func (e *encoder) upsert(out []types.Change, pending *flow.View) ([]record, error) {
	seen := map[string]bool{}
	var recs []record
	for _, c := range out {
		k := e.appendKey(nil, c.Row)
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		row, err := e.current(c.Row, pending)
		if err != nil {
			return nil, err
		}
		r := record{key: k}
		if row != nil {
			r.value = e.appendRow(nil, row)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// current is the row of row's key in pending, nil if there is none.
// Without a unique key a row is its own key: present while its count
// is positive (n copies of a row are one record).
func (e *encoder) current(row types.Row, pending *flow.View) (types.Row, error) {
	var found types.Row
	if e.unique {
		key := make(types.Row, len(e.keyCols))
		for i, c := range e.keyCols {
			key[i] = row[c]
		}
		err := pending.Lookup(key, func(r types.Row, n int64) bool {
			if n > 0 {
				found = r
			}
			return false
		})
		return found, err
	}
	// The index is by its key columns, or the whole row: scan the
	// rows with row's and find this one.
	var prefix types.Row
	if len(e.idx.KeyCols) == 0 {
		prefix = row
	} else {
		for _, c := range e.idx.KeyCols {
			prefix = append(prefix, row[c])
		}
	}
	err := pending.Scan(prefix, func(r types.Row, n int64) bool {
		if n > 0 && types.CompareRows(r, row) == 0 {
			found = r
			return false
		}
		return true
	})
	return found, err
}

// changelog writes every change: with a unique key, a key's -old and
// +new in one epoch are one update; otherwise each copy added is a
// create, each removed a delete.
func (e *encoder) changelog(out []types.Change) []record {
	var recs []record
	if !e.unique {
		for _, c := range out {
			for range abs(c.Diff) {
				recs = append(recs, e.change(c.Row, c.Diff < 0))
			}
		}
		return recs
	}
	type pair struct{ before, after types.Row }
	var order []string
	byKey := map[string]*pair{}
	for _, c := range out {
		k := string(e.appendKey(nil, c.Row))
		p := byKey[k]
		if p == nil {
			p = &pair{}
			byKey[k] = p
			order = append(order, k)
		}
		if c.Diff < 0 {
			p.before = c.Row
		} else {
			p.after = c.Row
		}
	}
	for _, k := range order {
		p := byKey[k]
		op := "u"
		switch {
		case p.before == nil:
			op = "c"
		case p.after == nil:
			op = "d"
		}
		v := []byte(`{"before":`)
		v = e.appendRowOrNull(v, p.before)
		v = append(v, `,"after":`...)
		v = e.appendRowOrNull(v, p.after)
		v = append(v, `,"op":"`+op+`"}`...)
		recs = append(recs, record{key: []byte(k), value: v})
	}
	return recs
}

func (e *encoder) change(row types.Row, del bool) record {
	v := []byte(`{"before":`)
	if del {
		v = e.appendRow(v, row)
		v = append(v, `,"after":null,"op":"d"}`...)
	} else {
		v = append(v, `null,"after":`...)
		v = e.appendRow(v, row)
		v = append(v, `,"op":"c"}`...)
	}
	return record{key: e.appendKey(nil, row), value: v}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// appendKey appends the key columns of row as a JSON object.
func (e *encoder) appendKey(b []byte, row types.Row) []byte {
	return e.appendObject(b, row, e.keyCols)
}

func (e *encoder) appendRow(b []byte, row types.Row) []byte {
	b = append(b, '{')
	for i := range e.cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = types.AppendJSONQuoted(b, e.cols[i].Name)
		b = append(b, ':')
		b = AppendJSON(b, e.cols[i].Type, row[i])
	}
	return append(b, '}')
}

func (e *encoder) appendRowOrNull(b []byte, row types.Row) []byte {
	if row == nil {
		return append(b, "null"...)
	}
	return e.appendRow(b, row)
}

func (e *encoder) appendObject(b []byte, row types.Row, cols []int) []byte {
	b = append(b, '{')
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = types.AppendJSONQuoted(b, e.cols[c].Name)
		b = append(b, ':')
		b = AppendJSON(b, e.cols[c].Type, row[c])
	}
	return append(b, '}')
}

// AppendJSON appends v, of type t, as PostgreSQL's to_json writes it:
// numbers as JSON numbers (NaN and the infinities, which JSON lacks,
// as strings), booleans, jsonb as itself, dates and timestamps in ISO
// 8601 ("2024-05-01T10:00:00", a timestamptz with "+00:00": the
// session's zone is UTC), everything else as the string of its text
// form (bytea "\\x...", intervals "1 day 02:00:00").
func AppendJSON(b []byte, t types.Type, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		if x {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case int16, int32, int64:
		return append(b, types.Format(x)...)
	case float32:
		return appendFloat(b, float64(x), 32)
	case float64:
		return appendFloat(b, x, 64)
	case *apd.Decimal:
		if x.Form != apd.Finite {
			return types.AppendJSONQuoted(b, types.FormatDecimal(x))
		}
		return append(b, types.FormatDecimal(x)...)
	case string:
		return types.AppendJSONQuoted(b, x)
	case []byte:
		return types.AppendJSONQuoted(b, `\x`+hex.EncodeToString(x))
	case time.Time:
		return types.AppendJSONQuoted(b, isoTime(t, x))
	case types.IntervalValue:
		return types.AppendJSONQuoted(b, types.FormatInterval(x))
	case types.JSON:
		return x.AppendText(b)
	}
	return types.AppendJSONQuoted(b, fmt.Sprint(v))
}

func appendFloat(b []byte, f float64, bits int) []byte {
	s := types.FormatFloat(f, bits)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return types.AppendJSONQuoted(b, s)
	}
	return append(b, s...)
}

// isoTime is to_json's form of a date or timestamp: ISO 8601 with a
// T, fractional seconds only when there are any, a timestamptz's zone
// as +00:00. Years before 1 are written as PostgreSQL does (" BC").
func isoTime(t types.Type, tm time.Time) string {
	tm = tm.UTC()
	y := tm.Year()
	bc := ""
	if y <= 0 {
		y, bc = 1-y, " BC"
	}
	if t.OID == types.OIDDate {
		return fmt.Sprintf("%04d-%02d-%02d%s", y, int(tm.Month()), tm.Day(), bc)
	}
	s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", y, int(tm.Month()), tm.Day(), tm.Hour(), tm.Minute(), tm.Second())
	if us := tm.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
	}
	if t.OID == types.OIDTimestampTZ {
		s += "+00:00"
	}
	return s + bc
}
