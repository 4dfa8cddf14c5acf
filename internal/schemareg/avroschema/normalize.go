package avroschema

import (
	"encoding/json"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// normalizedString is Confluent's normalized form of s, written as
// AvroSchemaUtils.toNormalizedString writes it: a named type in full
// the first time it appears and by its full name after that, types
// defined by references always by name; keys in a fixed order (name,
// type, then symbols, size or fields, then doc, aliases, enum default);
// fields with order, doc, aliases and default; custom properties sorted
// by key. Its quirks are kept, such as a field's order in upper case
// ("ASCENDING"), since the point is to meet Confluent's idea of "the
// same schema".
//
// Confluent re-parses this text and returns Avro Java's toString of it;
// we return the normalized text itself. Equality is what the registry
// needs from it, and two schemas have equal normalized texts here
// exactly when they do there, up to the number formats noted at
// writeValue.
func normalizedString(s avro.Schema, refNames map[string]avro.NamedSchema) string {
	env := make(map[string]bool, len(refNames))
	for name := range refNames {
		env[name] = true
	}
	var b strings.Builder
	writeNormalized(&b, env, s)
	return b.String()
}

func writeNormalized(b *strings.Builder, env map[string]bool, s avro.Schema) {
	s = Deref(s)
	switch s := s.(type) {
	case *avro.UnionSchema:
		b.WriteByte('[')
		for i, t := range s.Types() {
			if i > 0 {
				b.WriteByte(',')
			}
			writeNormalized(b, env, t)
		}
		b.WriteByte(']')
	case *avro.ArraySchema:
		b.WriteString(`{"type":"array","items":`)
		writeNormalized(b, env, s.Items())
		writeProps(b, s.Props())
		b.WriteByte('}')
	case *avro.MapSchema:
		b.WriteString(`{"type":"map","values":`)
		writeNormalized(b, env, s.Values())
		writeProps(b, s.Props())
		b.WriteByte('}')
	case *avro.RecordSchema, *avro.EnumSchema, *avro.FixedSchema:
		writeNamed(b, env, s.(avro.NamedSchema))
	case *avro.NullSchema:
		writeSimple(b, "null", nil, s.Props())
	case *avro.PrimitiveSchema:
		writeSimple(b, string(s.Type()), s.Logical(), s.Props())
	default:
		// Every type hamba parses is one of the above.
		panic("avroschema: unexpected schema type " + string(s.Type()))
	}
}

func writeNamed(b *strings.Builder, env map[string]bool, n avro.NamedSchema) {
	name := n.FullName()
	if env[name] {
		writeString(b, name)
		return
	}
	env[name] = true
	b.WriteString(`{"name":`)
	writeString(b, name)
	var (
		doc     string
		logical avro.LogicalSchema
		props   map[string]any
		enumDef string
	)
	switch s := n.(type) {
	case *avro.EnumSchema:
		b.WriteString(`,"type":"enum","symbols":[`)
		for i, sym := range s.Symbols() {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, sym)
		}
		b.WriteByte(']')
		doc, props, enumDef = s.Doc(), s.Props(), s.Default()
	case *avro.FixedSchema:
		b.WriteString(`,"type":"fixed","size":`)
		b.WriteString(strconv.Itoa(s.Size()))
		logical, props = s.Logical(), s.Props()
	case *avro.RecordSchema:
		typ := "record"
		if s.IsError() {
			typ = "error"
		}
		b.WriteString(`,"type":"` + typ + `","fields":[`)
		for i, f := range s.Fields() {
			if i > 0 {
				b.WriteByte(',')
			}
			writeField(b, env, f)
		}
		b.WriteByte(']')
		doc, props = s.Doc(), s.Props()
	}
	if logical != nil {
		writeLogical(b, logical)
	}
	if doc != "" {
		b.WriteString(`,"doc":`)
		writeString(b, doc)
	}
	if aliases := n.Aliases(); len(aliases) > 0 {
		b.WriteString(`,"aliases":`)
		writeStrings(b, aliases)
	}
	if enumDef != "" {
		b.WriteString(`,"default":`)
		writeString(b, enumDef)
	}
	writeProps(b, props)
	b.WriteByte('}')
}

func writeField(b *strings.Builder, env map[string]bool, f *avro.Field) {
	b.WriteString(`{"name":`)
	writeString(b, f.Name())
	b.WriteString(`,"type":`)
	writeNormalized(b, env, f.Type())
	// Avro Java's Field.Order has no toString of its own, so Confluent
	// writes the constant's name.
	b.WriteString(`,"order":"` + strings.ToUpper(string(f.Order())) + `"`)
	if f.Doc() != "" {
		b.WriteString(`,"doc":`)
		writeString(b, f.Doc())
	}
	if len(f.Aliases()) > 0 {
		b.WriteString(`,"aliases":`)
		writeStrings(b, f.Aliases())
	}
	if f.HasDefault() {
		b.WriteString(`,"default":`)
		writeValue(b, f.Default(), false)
	}
	writeProps(b, f.Props())
	b.WriteByte('}')
}

func writeSimple(b *strings.Builder, typ string, logical avro.LogicalSchema, props map[string]any) {
	if logical == nil && len(props) == 0 {
		writeString(b, typ)
		return
	}
	b.WriteString(`{"type":`)
	writeString(b, typ)
	if logical != nil {
		writeLogical(b, logical)
	}
	writeProps(b, props)
	b.WriteByte('}')
}

func writeLogical(b *strings.Builder, l avro.LogicalSchema) {
	b.WriteString(`,"logicalType":`)
	writeString(b, string(l.Type()))
	if d, ok := l.(*avro.DecimalLogicalSchema); ok {
		b.WriteString(`,"precision":` + strconv.Itoa(d.Precision()))
		if d.Scale() != 0 {
			b.WriteString(`,"scale":` + strconv.Itoa(d.Scale()))
		}
	}
}

// writeProps writes custom properties sorted by key, as Confluent's
// TreeMap does.
func writeProps(b *strings.Builder, props map[string]any) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteByte(',')
		writeString(b, k)
		b.WriteByte(':')
		writeValue(b, props[k], true)
	}
}

func writeStrings(b *strings.Builder, ss []string) {
	sorted := append([]string(nil), ss...)
	sort.Strings(sorted)
	b.WriteByte('[')
	for i, s := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, s)
	}
	b.WriteByte(']')
}

func writeString(b *strings.Builder, s string) {
	// Marshaling a string cannot fail.
	out, _ := json.Marshal(s)
	b.Write(out)
}

// writeValue writes a default or property value as JSON, object keys
// sorted. hamba hands defaults over converted to Go values: bytes and
// fixed defaults as bytes, written back as the JSON string whose code
// points are the byte values (the spec's encoding for them); floating
// point numbers as Java's Double.toString writes those that print as
// integers ("1.0"), except in custom properties, whose type hamba does
// not know. Other floats are written by strconv, which agrees
// with Java except for exponents (1e+21 against 1.0E21), a difference
// only a schema with such a default can see.
func writeValue(b *strings.Builder, v any, prop bool) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		writeString(b, v)
	case []byte:
		writeString(b, latin1(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int:
		b.WriteString(strconv.Itoa(v))
	case int32:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float32:
		writeFloat(b, float64(v), 32)
	case float64:
		if prop && v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			// A property is kept as the JSON it was, and JSON does
			// not tell 1 from 1.0 once decoded; integers are likelier.
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
			return
		}
		writeFloat(b, v, 64)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, e, prop)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeValue(b, v[k], prop)
		}
		b.WriteByte('}')
	default:
		// A fixed default is a byte array of the fixed's size.
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
			bs := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(bs), rv)
			writeString(b, latin1(bs))
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			out = []byte("null")
		}
		b.Write(out)
	}
}

func writeFloat(b *strings.Builder, f float64, bits int) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		b.WriteString(`"` + strconv.FormatFloat(f, 'g', -1, bits) + `"`)
	case f == math.Trunc(f) && math.Abs(f) < 1e7:
		b.WriteString(strconv.FormatFloat(f, 'f', 1, bits))
	default:
		b.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
	}
}

func latin1(bs []byte) string {
	rs := make([]rune, len(bs))
	for i, c := range bs {
		rs[i] = rune(c)
	}
	return string(rs)
}
