package jdbcsink

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/connect/avroconv"
)

// kind is a column's type as the records say it: from the Debezium
// schema when the record carries one, else inferred from the JSON.
type kind uint8

const (
	kNull kind = iota // only nulls seen: no type known
	kBool
	kInt16
	kInt32
	kInt64
	kFloat32
	kFloat64
	kDecimal
	kString
	kBytes
	kDate
	kTimestamp   // no zone: MicroTimestamp, Timestamp, NanoTimestamp
	kTimestampTZ // ZonedTimestamp, kept in UTC
	kTime
	kJSON
	kUUID
)

var kindNames = [...]string{"null", "boolean", "int16", "int32", "int64", "float32", "float64", "decimal",
	"string", "bytes", "date", "timestamp", "timestamp with zone", "time", "json", "uuid"}

func (k kind) String() string { return kindNames[k] }

// column is one column of a change: its name (folded as the target
// wants it) and kind; unit is the tick of an integer time (Debezium's
// Timestamp ms, MicroTimestamp µs, NanoTimestamp ns).
type column struct {
	name      string
	kind      kind
	unit      time.Duration
	scale     int // kDecimal; -1 variable
	precision int // kDecimal; 0 unknown
}

// change is one record, decoded: a row to write or a key to delete, in
// the table its topic maps to.
type change struct {
	table  string
	delete bool
	// keyCols and key are the primary key's columns and values (none
	// with primary.key.mode=none).
	keyCols []column
	key     []any
	// cols and vals are the row (nil for a delete).
	cols []column
	vals []any
}

// keyString identifies a change's key within a table, for coalescing.
func (c *change) keyString() string {
	b, _ := json.Marshal(c.key)
	return string(b)
}

// decoder turns records into changes by a configuration. Not safe for
// concurrent use.
type decoder struct {
	cfg *Config
	// ctx, keyAvro and valueAvro: the AvroConverters of the keys and
	// values (nil: JSON), and the context of their registry lookups.
	ctx                context.Context
	keyAvro, valueAvro *avroconv.Converter
	// schemas caches parsed schemas by their JSON text: every record of
	// a table carries the same schema, and parsing it is most of the
	// cost of decoding a change event. At most maxSchemas entries.
	schemas map[string]map[string]any
}

// maxSchemas bounds the schema cache (a table's schema changes rarely;
// the cache is emptied when full).
const maxSchemas = 256

// errSkip: the record changes nothing (a delete with delete.enabled
// off, a truncate, a message), as Debezium's sink skips it.
var errSkip = fmt.Errorf("skip")

func (d *decoder) decode(r *kgo.Record) (*change, error) {
	ch, err := d.decodeValue(r)
	if err != nil && err != errSkip {
		return nil, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	return ch, err
}

// fromAvro turns an Avro record's key and value into what the
// JsonConverter would have read, so the rest of decoding is the same
// for both converters. The record is the caller's and left alone.
func (d *decoder) fromAvro(r *kgo.Record) (*kgo.Record, error) {
	if d.keyAvro == nil && d.valueAvro == nil {
		return r, nil
	}
	c := *r
	var err error
	if d.keyAvro != nil {
		if c.Key, err = d.keyAvro.ToConnect(d.ctx, r.Key); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
	}
	if d.valueAvro != nil {
		if c.Value, err = d.valueAvro.ToConnect(d.ctx, r.Value); err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
	}
	return &c, nil
}

func (d *decoder) decodeValue(r *kgo.Record) (*change, error) {
	r, err := d.fromAvro(r)
	if err != nil {
		return nil, err
	}
	ch := &change{table: d.cfg.TableName(r.Topic)}
	var payload, schema any
	if r.Value != nil {
		var err error
		if payload, schema, err = d.split(r.Value); err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
	}
	if payload == nil { // a tombstone
		return d.deleteByKey(r, ch)
	}
	obj, ok := payload.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("value is %T, not a JSON object (a row or a Debezium envelope)", payload)
	}
	row, rowSchema := obj, asMap(schema)
	if op, ok := obj["op"].(string); ok && (has(obj, "after") || has(obj, "before")) {
		switch op {
		case "c", "r", "u":
			after, ok := obj["after"].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("op %q with no \"after\" object", op)
			}
			row, rowSchema = after, fieldSchema(rowSchema, "after")
		case "d":
			return d.deleteByKey(r, ch)
		default: // "t" (truncate), "m" (message): not rows.
			return nil, errSkip
		}
	}
	cols, vals, err := d.columns(row, rowSchema)
	if err != nil {
		return nil, err
	}
	ch.cols, ch.vals = cols, vals
	switch d.cfg.PKMode {
	case PKRecordKey:
		if ch.keyCols, ch.key, err = d.recordKey(r); err != nil {
			return nil, err
		}
		// The key's values win over the row's, as the key is what
		// the record is about; a key column the row lacks is added.
		for i, kc := range ch.keyCols {
			if j := slices.IndexFunc(ch.cols, func(c column) bool { return c.name == kc.name }); j >= 0 {
				ch.vals[j] = ch.key[i]
				if ch.cols[j].kind == kNull {
					ch.cols[j] = kc
				}
			} else {
				ch.cols, ch.vals = append(ch.cols, kc), append(ch.vals, ch.key[i])
			}
		}
	case PKRecordValue:
		for _, f := range d.cfg.PKFields {
			name := d.cfg.foldIdent(f)
			j := slices.IndexFunc(ch.cols, func(c column) bool { return c.name == name })
			if j < 0 || ch.vals[j] == nil {
				return nil, fmt.Errorf("primary.key.fields: the value has no %q (or it is null)", f)
			}
			ch.keyCols, ch.key = append(ch.keyCols, ch.cols[j]), append(ch.key, ch.vals[j])
		}
	}
	return ch, nil
}

func (d *decoder) deleteByKey(r *kgo.Record, ch *change) (*change, error) {
	if !d.cfg.DeleteEnabled {
		return nil, errSkip
	}
	var err error
	if ch.keyCols, ch.key, err = d.recordKey(r); err != nil {
		return nil, err
	}
	ch.delete = true
	return ch, nil
}

// recordKey reads the key's columns from the record key: a JSON object
// (bare or as {"schema","payload"}), filtered by primary.key.fields
// when set, or a primitive named by the one field primary.key.fields
// gives.
func (d *decoder) recordKey(r *kgo.Record) ([]column, []any, error) {
	if r.Key == nil {
		return nil, nil, fmt.Errorf("no record key, and primary.key.mode=record_key")
	}
	payload, schema, err := d.split(r.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	if obj, ok := payload.(map[string]any); ok {
		cols, vals, err := d.columns(obj, asMap(schema))
		if err != nil {
			return nil, nil, fmt.Errorf("key: %w", err)
		}
		if len(d.cfg.PKFields) > 0 {
			var kc []column
			var kv []any
			for _, f := range d.cfg.PKFields {
				name := d.cfg.foldIdent(f)
				j := slices.IndexFunc(cols, func(c column) bool { return c.name == name })
				if j < 0 {
					return nil, nil, fmt.Errorf("primary.key.fields: the key has no %q", f)
				}
				kc, kv = append(kc, cols[j]), append(kv, vals[j])
			}
			cols, vals = kc, kv
		}
		if len(cols) == 0 {
			return nil, nil, fmt.Errorf("key: an empty object")
		}
		for i, v := range vals {
			if v == nil {
				return nil, nil, fmt.Errorf("key: %q is null", cols[i].name)
			}
		}
		return cols, vals, nil
	}
	if payload == nil {
		return nil, nil, fmt.Errorf("key: null")
	}
	if len(d.cfg.PKFields) != 1 {
		return nil, nil, fmt.Errorf("key is a %T, not an object: name its column with one primary.key.fields", payload)
	}
	col := column{name: d.cfg.foldIdent(d.cfg.PKFields[0])}
	if s := asMap(schema); s != nil {
		col = schemaColumn(col.name, s)
	} else {
		col.kind = inferKind(payload)
	}
	val, err := convert(col, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	return []column{col}, []any{val}, nil
}

// columns reads a row: in the schema's field order when there is a
// schema, else in the order of the names.
func (d *decoder) columns(row map[string]any, schema map[string]any) ([]column, []any, error) {
	var cols []column
	var vals []any
	if fields, ok := schema["fields"].([]any); ok {
		for _, f := range fields {
			fs := asMap(f)
			name, _ := fs["field"].(string)
			if name == "" {
				return nil, nil, fmt.Errorf("schema: a field with no name")
			}
			col := schemaColumn(d.cfg.foldIdent(name), fs)
			v, err := convert(col, row[name])
			if err != nil {
				return nil, nil, err
			}
			cols, vals = append(cols, col), append(vals, v)
		}
		return cols, vals, nil
	}
	names := make([]string, 0, len(row))
	for k := range row {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		col := column{name: d.cfg.foldIdent(name), kind: inferKind(row[name])}
		v, err := convert(col, row[name])
		if err != nil {
			return nil, nil, err
		}
		cols, vals = append(cols, col), append(vals, v)
	}
	return cols, vals, nil
}

// schemaColumn reads a Kafka Connect schema field: its type, and the
// logical type Debezium names (its time, decimal and JSON types).
func schemaColumn(name string, s map[string]any) column {
	col := column{name: name}
	typ, _ := s["type"].(string)
	params := asMap(s["parameters"])
	switch lname, _ := s["name"].(string); lname {
	case "io.debezium.time.Date", "org.apache.kafka.connect.data.Date":
		col.kind = kDate
	case "io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp":
		col.kind, col.unit = kTimestamp, time.Millisecond
	case "io.debezium.time.MicroTimestamp":
		col.kind, col.unit = kTimestamp, time.Microsecond
	case "io.debezium.time.NanoTimestamp":
		col.kind, col.unit = kTimestamp, time.Nanosecond
	case "io.debezium.time.ZonedTimestamp":
		col.kind = kTimestampTZ
	case "io.debezium.time.Time", "org.apache.kafka.connect.data.Time":
		col.kind, col.unit = kTime, time.Millisecond
	case "io.debezium.time.MicroTime":
		col.kind, col.unit = kTime, time.Microsecond
	case "io.debezium.time.NanoTime":
		col.kind, col.unit = kTime, time.Nanosecond
	case "org.apache.kafka.connect.data.Decimal":
		col.kind = kDecimal
		col.scale, _ = strconv.Atoi(fmt.Sprint(params["scale"]))
		col.precision, _ = strconv.Atoi(fmt.Sprint(params["connect.decimal.precision"]))
	case "io.debezium.data.VariableScaleDecimal":
		col.kind, col.scale = kDecimal, -1
	case "io.debezium.data.Json", "io.debezium.data.Xml":
		col.kind = kJSON
		if strings.HasSuffix(lname, "Xml") {
			col.kind = kString
		}
	case "io.debezium.data.Uuid":
		col.kind = kUUID
	}
	if col.kind != kNull {
		return col
	}
	switch typ {
	case "boolean":
		col.kind = kBool
	case "int8", "int16":
		col.kind = kInt16
	case "int32":
		col.kind = kInt32
	case "int64":
		col.kind = kInt64
	case "float32", "float":
		col.kind = kFloat32
	case "float64", "double":
		col.kind = kFloat64
	case "bytes":
		col.kind = kBytes
	case "struct", "array", "map":
		col.kind = kJSON
	default: // string, and logical types carried as strings (ZonedTime, Enum, Bits...)
		col.kind = kString
	}
	return col
}

func inferKind(v any) kind {
	switch v := v.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return kInt64
		}
		return kFloat64
	case string:
		return kString
	default:
		return kJSON
	}
}

// convert turns a JSON value into the Go value the database driver
// takes for the column's kind: time.Time for dates and timestamps (in
// UTC), a decimal's digits as a string, bytes decoded from base64.
func convert(col column, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	bad := func(err error) error {
		if err == nil {
			err = fmt.Errorf("%T %v is not a %s", v, v, col.kind)
		}
		return fmt.Errorf("column %q: %w", col.name, err)
	}
	num, isNum := v.(json.Number)
	str, isStr := v.(string)
	switch col.kind {
	case kBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case kInt16, kInt32, kInt64:
		if isNum {
			n, err := num.Int64()
			if err != nil {
				return nil, bad(err)
			}
			return n, nil
		}
	case kFloat32, kFloat64:
		switch {
		case isNum:
			f, err := num.Float64()
			if err != nil {
				return nil, bad(err)
			}
			return f, nil
		case isStr: // Connect's JSON writes NaN and infinities as strings.
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, bad(err)
			}
			return f, nil
		}
	case kDecimal:
		return decimal(col, v, bad)
	case kBytes:
		if isStr {
			b, err := base64.StdEncoding.DecodeString(str)
			if err != nil {
				return nil, bad(err)
			}
			return b, nil
		}
	case kDate:
		switch {
		case isNum:
			days, err := num.Int64()
			if err != nil {
				return nil, bad(err)
			}
			return time.Unix(days*86400, 0).UTC(), nil
		case isStr:
			t, err := time.Parse(time.DateOnly, str)
			if err != nil {
				return nil, bad(err)
			}
			return t, nil
		}
	case kTimestamp, kTimestampTZ:
		switch {
		case isNum:
			n, err := num.Int64()
			if err != nil {
				return nil, bad(err)
			}
			unit := col.unit
			if unit == 0 {
				unit = time.Millisecond
			}
			return time.Unix(0, 0).Add(time.Duration(n) * unit).UTC(), nil
		case isStr:
			for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
				if t, err := time.Parse(layout, str); err == nil {
					return t.UTC(), nil
				}
			}
			return nil, bad(fmt.Errorf("%q is not an ISO-8601 timestamp", str))
		}
	case kTime:
		switch {
		case isNum:
			n, err := num.Int64()
			if err != nil {
				return nil, bad(err)
			}
			d := time.Duration(n) * col.unit
			if d < 0 || d > 24*time.Hour {
				return nil, bad(fmt.Errorf("time of day %v out of range", d))
			}
			return fmt.Sprintf("%02d:%02d:%02d.%06d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60,
				(d%time.Second)/time.Microsecond), nil
		case isStr:
			return strings.TrimSuffix(str, "Z"), nil
		}
	case kJSON:
		if isStr && col.kind == kJSON && json.Valid([]byte(str)) {
			// Debezium's Json type is a string holding the document.
			return str, nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, bad(err)
		}
		return string(b), nil
	case kString, kUUID, kNull:
		if isStr {
			return str, nil
		}
		if isNum {
			return num.String(), nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, bad(err)
		}
		return string(b), nil
	}
	return nil, bad(nil)
}

// maxScale bounds a decimal's scale, so that a hostile schema cannot
// make one value a gigabyte of zeros. PostgreSQL's numeric allows 16383
// digits after the point; MariaDB's 38.
const maxScale = 16383

// decimal reads Connect's Decimal (base64 of the unscaled value, big
// endian two's complement, the scale in the schema), Debezium's
// VariableScaleDecimal ({"scale", "value"}), or a decimal sent as a
// string or a number (decimal.handling.mode string or double).
func decimal(col column, v any, bad func(error) error) (any, error) {
	scale := col.scale
	var raw string
	switch v := v.(type) {
	case json.Number:
		return v.String(), nil
	case string:
		raw = v
	case map[string]any:
		s, ok := v["scale"].(json.Number)
		r, ok2 := v["value"].(string)
		if !ok || !ok2 {
			return nil, bad(nil)
		}
		n, err := s.Int64()
		if err != nil || n < 0 || n > maxScale {
			return nil, bad(fmt.Errorf("scale %v", s))
		}
		scale, raw = int(n), r
	default:
		return nil, bad(nil)
	}
	if scale > maxScale {
		return nil, bad(fmt.Errorf("scale %d is above %d", scale, maxScale))
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || scale < 0 {
		// Not base64 (or no scale known): a decimal as text, as
		// decimal.handling.mode=string writes it.
		if decimalText.MatchString(raw) {
			return raw, nil
		}
		return nil, bad(fmt.Errorf("%q is neither base64 nor a decimal", raw))
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 { // negative: two's complement
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return scaled(n, scale), nil
}

// decimalText is a decimal as text. Its exponent is bounded: parsing
// 1e999999999 is the database's work, and an unbounded one a way to
// make it do much.
var decimalText = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,4})?$`)

// scaled writes n × 10^-scale in decimal.
func scaled(n *big.Int, scale int) string {
	s := new(big.Int).Abs(n).String()
	neg := n.Sign() < 0
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// split reads a key or value: Connect's JsonConverter form with
// schemas, {"schema": ..., "payload": ...} (the schema from the cache
// when seen before), or a bare value.
func (d *decoder) split(b []byte) (payload, schema any, err error) {
	var top map[string]json.RawMessage
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' && json.Unmarshal(t, &top) == nil && len(top) == 2 {
		rawSchema, ok1 := top["schema"]
		rawPayload, ok2 := top["payload"]
		if ok1 && ok2 {
			if payload, err = parseJSON(rawPayload); err != nil {
				return nil, nil, err
			}
			if s, ok := d.schemas[string(rawSchema)]; ok {
				return payload, s, nil
			}
			v, err := parseJSON(rawSchema)
			if err != nil {
				return nil, nil, err
			}
			s := asMap(v)
			if s != nil {
				if d.schemas == nil || len(d.schemas) >= maxSchemas {
					d.schemas = map[string]map[string]any{}
				}
				d.schemas[string(rawSchema)] = s
				return payload, s, nil
			}
			return payload, v, nil
		}
	}
	v, err := parseJSON(b)
	if err != nil {
		return nil, nil, err
	}
	payload, schema = unwrap(v)
	return payload, schema, nil
}

func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// unwrap splits Connect's JsonConverter form with schemas,
// {"schema": ..., "payload": ...}, from a bare value.
func unwrap(v any) (payload, schema any) {
	if m, ok := v.(map[string]any); ok && len(m) == 2 && has(m, "schema") && has(m, "payload") {
		return m["payload"], m["schema"]
	}
	return v, nil
}

// fieldSchema returns the schema of a struct schema's field.
func fieldSchema(s map[string]any, name string) map[string]any {
	fields, _ := s["fields"].([]any)
	for _, f := range fields {
		if fm := asMap(f); fm["field"] == name {
			return fm
		}
	}
	return nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}
