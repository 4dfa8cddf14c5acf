package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Reason is why a record is bad: a closed set, so it can label metrics.
type Reason string

const (
	// ReasonWireFormat: an Avro or Protobuf value without the schema
	// registry's header.
	ReasonWireFormat Reason = "wire_format"
	// ReasonUnknownSchema: the header names a schema id the registry
	// does not hold, or one of another format.
	ReasonUnknownSchema Reason = "unknown_schema"
	// ReasonPayload: the value does not decode in its format (JSON that
	// does not parse or is no object, text that is not UTF-8, Avro or
	// Protobuf bytes that do not match their schema).
	ReasonPayload Reason = "payload"
	// ReasonColumn: a field's value does not convert to its column's
	// type (22P02, 22003, 22001, ...).
	ReasonColumn Reason = "column"
	// ReasonKey: the key is missing where an upsert source needs it, or
	// is not text where _key is.
	ReasonKey Reason = "key"
)

// Reasons are all the reasons, for metrics that want every label.
var Reasons = []Reason{ReasonWireFormat, ReasonUnknownSchema, ReasonPayload, ReasonColumn, ReasonKey}

// BadRecord is the error of a record that does not decode: why, and
// the error (a *sqlerr.Error where PostgreSQL has a SQLSTATE for it).
// Any other error of Decode is not the record's fault (the schema
// registry could not be read) and is worth retrying.
type BadRecord struct {
	Reason Reason
	Err    error
}

func (b *BadRecord) Error() string { return string(b.Reason) + ": " + b.Err.Error() }
func (b *BadRecord) Unwrap() error { return b.Err }

// SQLState is the error's SQLSTATE, "" if it has none.
func (b *BadRecord) SQLState() string {
	var e *sqlerr.Error
	if errors.As(b.Err, &e) {
		return e.Code
	}
	return ""
}

func bad(reason Reason, err error) *BadRecord { return &BadRecord{Reason: reason, Err: err} }

func badf(reason Reason, code, format string, args ...any) *BadRecord {
	return bad(reason, sqlerr.Errorf(code, format, args...))
}

// Decoder decodes a source's records into rows. Safe for concurrent
// use (the schema cache is shared and locked).
type Decoder struct {
	def     *Def
	schemas *Schemas
	payload []int
	// general turns the JSON fast path off (a test's, to compare).
	general bool
}

// NewDecoder returns def's decoder. Avro and Protobuf need schemas.
func NewDecoder(def *Def, schemas *Schemas) (*Decoder, error) {
	if (def.Format == FormatAvro || def.Format == FormatProtobuf) && schemas == nil {
		return nil, fmt.Errorf("source %s: format %s needs the schema registry", def.Name, def.Format)
	}
	d := &Decoder{def: def, schemas: schemas, payload: def.payloadColumns()}
	if (def.Format == FormatText || def.Format == FormatBytes) && len(d.payload) != 1 {
		return nil, sqlerr.Errorf(sqlerr.InvalidObjectDefinition, "format %s reads the value into one column", def.Format)
	}
	return d, nil
}

// Decode returns r's row, its values of the columns' types. A record
// that does not decode is a *BadRecord; another error means the record
// could not be judged yet. A null value is NULL payload columns (an
// upsert reader handles tombstones before decoding).
func (d *Decoder) Decode(ctx context.Context, r *kgo.Record) (types.Row, error) {
	row := make(types.Row, len(d.def.Columns))
	if err := d.metadata(r, row); err != nil {
		return nil, err
	}
	if r.Value == nil {
		return row, nil
	}
	var err error
	switch d.def.Format {
	case FormatJSON:
		err = d.json(r.Value, row)
	case FormatText:
		err = d.text(r.Value, row)
	case FormatBytes:
		row[d.payload[0]] = r.Value
	case FormatAvro:
		err = d.avro(ctx, r.Value, row)
	case FormatProtobuf:
		err = d.protobuf(ctx, r.Value, row)
	}
	if err != nil {
		return nil, err
	}
	return row, nil
}

func (d *Decoder) metadata(r *kgo.Record, row types.Row) error {
	for i, c := range d.def.Columns {
		switch c.kind {
		case colKey:
			if r.Key == nil {
				continue
			}
			if c.Type.OID == types.OIDBytea {
				row[i] = r.Key
				continue
			}
			s, err := validText(r.Key)
			if err != nil {
				return bad(ReasonKey, fmt.Errorf("_key: %w", err))
			}
			row[i] = s
		case colPartition:
			row[i] = r.Partition
		case colOffset:
			row[i] = r.Offset
		case colTimestamp:
			row[i] = r.Timestamp.UTC().Truncate(time.Microsecond)
		case colHeaders:
			keys := make([]string, 0, len(r.Headers))
			vals := make([]types.JSON, 0, len(r.Headers))
			for _, h := range r.Headers {
				keys = append(keys, h.Key)
				switch {
				case h.Value == nil:
					vals = append(vals, types.JSON{})
				default:
					s, err := validText(h.Value)
					if err != nil {
						return bad(ReasonPayload, fmt.Errorf("_headers: header %q: %w", h.Key, err))
					}
					vals = append(vals, types.MakeJSONString(s))
				}
			}
			row[i] = types.MakeJSONObject(keys, vals)
		}
	}
	return nil
}

// validText is b as PostgreSQL text: UTF-8 without NUL.
func validText(b []byte) (string, error) {
	if err := checkText(b); err != nil {
		return "", err
	}
	return string(b), nil
}

// checkText is validText's check, without the copy.
func checkText(b []byte) error {
	if !utf8.Valid(b) {
		return sqlerr.Errorf(sqlerr.CharacterNotInRepertoire, "invalid byte sequence for encoding \"UTF8\"")
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return sqlerr.Errorf(sqlerr.CharacterNotInRepertoire, "invalid byte sequence for encoding \"UTF8\": 0x00")
	}
	return nil
}

func (d *Decoder) text(v []byte, row types.Row) error {
	i := d.payload[0]
	s, err := validText(v)
	if err != nil {
		return bad(ReasonPayload, err)
	}
	val, err := types.Parse(d.def.Columns[i].Type, s)
	if err != nil {
		return d.columnErr(i, err)
	}
	row[i] = val
	return nil
}

func (d *Decoder) columnErr(i int, err error) error {
	return bad(ReasonColumn, fmt.Errorf("column %q: %w", d.def.Columns[i].Name, err))
}

func (d *Decoder) json(v []byte, row types.Row) error {
	if err := checkText(v); err != nil {
		return bad(ReasonPayload, err)
	}
	if !d.general {
		if ok, err := d.jsonFast(v, row); ok {
			return err
		}
	}
	j, err := types.ParseJSON(string(v))
	if err != nil {
		return bad(ReasonPayload, err)
	}
	return d.jsonObject(j, row)
}

// jsonObject fills the payload columns from an object's fields, as
// jsonb_to_record does.
func (d *Decoder) jsonObject(j types.JSON, row types.Row) error {
	if j.Kind() != types.JSONObject {
		return badf(ReasonPayload, sqlerr.InvalidParameterValue, "the value is a JSON %s, not an object", jsonKindName(j.Kind()))
	}
	for _, i := range d.payload {
		f, ok := j.Field(d.def.Columns[i].Name)
		if !ok {
			continue
		}
		val, err := fromJSON(d.def.Columns[i].Type, f)
		if err != nil {
			return d.columnErr(i, err)
		}
		row[i] = val
	}
	return nil
}

func jsonKindName(k types.JSONKind) string {
	return [...]string{"null", "string", "number", "boolean", "array", "object"}[k]
}

// fromJSON converts a JSON value to t: null is NULL (in a jsonb column
// too, as jsonb_to_record has it), jsonb takes any other value whole,
// any other type reads its text with t's input function.
func fromJSON(t types.Type, j types.JSON) (any, error) {
	if j.Kind() == types.JSONNull {
		return nil, nil
	}
	if t.OID == types.OIDJSONB {
		return j, nil
	}
	var text string
	switch j.Kind() {
	case types.JSONString:
		text = j.Str()
	case types.JSONNumber:
		text = types.FormatDecimal(j.Num())
	case types.JSONBool:
		text = strconv.FormatBool(j.BoolValue())
	default:
		text = j.String()
	}
	return types.Parse(t, text)
}

// cannotCoerce is the error for a native value no input reads into t.
func cannotCoerce(from string, t types.Type) error {
	return sqlerr.Errorf(sqlerr.CannotCoerce, "cannot cast type %s to %s", from, t.Name())
}

// fromNative converts a value an Avro or Protobuf decoder gave (after
// unwrapping unions) to t, by the rules of the package doc.
func fromNative(t types.Type, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case types.JSON:
		return fromJSON(t, x)
	case string:
		if t.OID == types.OIDJSONB {
			return types.MakeJSONString(x), nil
		}
		if _, err := validText([]byte(x)); err != nil {
			return nil, err
		}
		return types.Parse(t, x)
	case bool:
		if t.OID == types.OIDJSONB {
			return types.MakeJSONBool(x), nil
		}
		return types.Parse(t, strconv.FormatBool(x))
	case int:
		return fromInt(t, int64(x))
	case int32:
		return fromInt(t, int64(x))
	case int64:
		return fromInt(t, x)
	case uint32:
		return fromInt(t, int64(x))
	case uint64:
		if x > math.MaxInt64 {
			return fromText(t, strconv.FormatUint(x, 10), "numeric")
		}
		return fromInt(t, int64(x))
	case float32:
		return fromFloat(t, float64(x), 32)
	case float64:
		return fromFloat(t, x, 64)
	case *apd.Decimal:
		if t.OID == types.OIDNumeric {
			return types.CoerceNumeric(x, t)
		}
		return fromText(t, types.FormatDecimal(x), "numeric")
	case []byte:
		switch t.OID {
		case types.OIDBytea:
			return x, nil
		case types.OIDText, types.OIDVarchar:
			s, err := validText(x)
			if err != nil {
				return nil, err
			}
			return types.Parse(t, s)
		}
		return nil, cannotCoerce("bytea", t)
	case time.Time:
		x = x.UTC().Truncate(time.Microsecond)
		switch t.OID {
		case types.OIDTimestamp, types.OIDTimestampTZ:
			return x, nil
		case types.OIDDate:
			return time.Date(x.Year(), x.Month(), x.Day(), 0, 0, 0, 0, time.UTC), nil
		case types.OIDText, types.OIDVarchar:
			return types.Parse(t, types.FormatTyped(types.TimestampTZ, x))
		}
		return nil, cannotCoerce("timestamp with time zone", t)
	case time.Duration:
		iv := types.IntervalValue{Micros: x.Microseconds()}
		switch t.OID {
		case types.OIDInterval:
			return iv, nil
		case types.OIDText, types.OIDVarchar:
			return types.Parse(t, types.FormatInterval(iv))
		}
		return nil, cannotCoerce("interval", t)
	}
	return nil, fmt.Errorf("no conversion of a %T", v)
}

// fromText reads text with t's input function (jsonb: as a JSON number
// when from says the text is one).
func fromText(t types.Type, text, from string) (any, error) {
	if t.OID == types.OIDJSONB && from == "numeric" {
		d, err := types.ParseDecimal(text)
		if err != nil {
			return nil, err
		}
		return types.MakeJSONNumber(d), nil
	}
	return types.Parse(t, text)
}

func fromInt(t types.Type, n int64) (any, error) {
	switch t.OID {
	case types.OIDInt2:
		if n < math.MinInt16 || n > math.MaxInt16 {
			return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "smallint out of range")
		}
		return int16(n), nil
	case types.OIDInt4:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "integer out of range")
		}
		return int32(n), nil
	case types.OIDInt8:
		return n, nil
	}
	return fromText(t, strconv.FormatInt(n, 10), "numeric")
}

func fromFloat(t types.Type, f float64, bitSize int) (any, error) {
	if t.OID == types.OIDJSONB && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return nil, sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "%v is no JSON number", f)
	}
	return fromText(t, types.FormatFloat(f, bitSize), "numeric")
}

// header decodes the schema registry's wire format (franz-go's sr, the
// clients' own code).
var header sr.ConfluentHeader

// maxMessageIndexes bounds a Protobuf payload's message indexes: one
// per level of nesting.
const maxMessageIndexes = 128

func schemaID(v []byte) (int32, []byte, error) {
	id, payload, err := header.DecodeID(v)
	if err != nil {
		return 0, nil, badf(ReasonWireFormat, sqlerr.InvalidParameterValue, "the value is not in the schema registry's wire format (magic byte 0 and a 4-byte schema id)")
	}
	if id <= 0 || id > math.MaxInt32 {
		return 0, nil, badf(ReasonUnknownSchema, sqlerr.InvalidParameterValue, "the value names schema id %d, which no registry assigns", id)
	}
	return int32(id), payload, nil
}
