package avroconv

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// This file maps Kafka Connect schemas (in the JsonConverter's JSON
// form, the form the connectors already write) to Avro schemas and
// values, as Confluent's AvroData does with connect.meta.data on (its
// default), and back.

// Property names AvroData writes into Avro schemas to keep what Avro
// cannot say.
const (
	propName       = "connect.name"
	propVersion    = "connect.version"
	propParameters = "connect.parameters"
	propDoc        = "connect.doc"
	propDefault    = "connect.default"
	propType       = "connect.type"
	decimalName    = "org.apache.kafka.connect.data.Decimal"
	precisionParam = "connect.decimal.precision"
	// defaultPrecision is AvroData's precision of a Decimal with no
	// connect.decimal.precision parameter.
	defaultPrecision = 64
)

// avroName is what Avro allows in a name's part.
var avroName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// toAvro renders a Connect schema (decoded JSON) as an Avro schema,
// tracking the named types already defined (a name's second use is a
// reference, as Avro requires).
type toAvro struct {
	defined map[string]bool
	anon    int
}

// schema returns the Avro schema of s, not counting its optionality
// (the caller wraps an optional field in a union with null).
func (a *toAvro) schema(s map[string]any) (any, error) {
	typ, _ := s["type"].(string)
	name, _ := s["name"].(string)
	props := map[string]any{}
	if v, ok := s["version"]; ok && v != nil {
		props[propVersion] = v
	}
	if p, ok := s["parameters"].(map[string]any); ok && len(p) > 0 {
		props[propParameters] = p
	}
	if d, ok := s["doc"].(string); ok {
		props[propDoc] = d
	}
	if d, ok := s["default"]; ok && d != nil && typ != "struct" {
		props[propDefault] = d
	}
	prim := func(avroType string) map[string]any {
		props["type"] = avroType
		if name != "" {
			props[propName] = name
		}
		return props
	}
	// bare: a primitive with no properties is written as its name, as
	// Avro's own rendering (and so the registry's text) has it.
	bare := func(m map[string]any) any {
		if len(m) == 1 {
			return m["type"]
		}
		return m
	}
	switch typ {
	case "boolean", "string":
		return bare(prim(typ)), nil
	case "int8", "int16":
		m := prim("int")
		m[propType] = typ
		return m, nil
	case "int32":
		m := prim("int")
		switch name {
		case "org.apache.kafka.connect.data.Date":
			m["logicalType"] = "date"
		case "org.apache.kafka.connect.data.Time":
			m["logicalType"] = "time-millis"
		}
		return bare(m), nil
	case "int64":
		m := prim("long")
		if name == "org.apache.kafka.connect.data.Timestamp" {
			m["logicalType"] = "timestamp-millis"
		}
		return bare(m), nil
	case "float", "float32":
		return bare(prim("float")), nil
	case "double", "float64":
		return bare(prim("double")), nil
	case "bytes":
		m := prim("bytes")
		if name == decimalName {
			p, _ := s["parameters"].(map[string]any)
			scale, err := strconv.Atoi(fmt.Sprint(p["scale"]))
			if err != nil {
				return nil, fmt.Errorf("decimal with no scale parameter")
			}
			prec := defaultPrecision
			if v, ok := p[precisionParam]; ok {
				if prec, err = strconv.Atoi(fmt.Sprint(v)); err != nil || prec < 1 {
					return nil, fmt.Errorf("decimal precision %v", v)
				}
			}
			if scale > prec {
				// Avro forbids a scale above the precision; AvroData then
				// cannot write the schema either.
				return nil, fmt.Errorf("decimal scale %d above its precision %d", scale, prec)
			}
			m["logicalType"], m["scale"], m["precision"] = "decimal", scale, prec
		}
		return bare(m), nil
	case "array":
		items, ok := s["items"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("array with no items schema")
		}
		it, err := a.optional(items)
		if err != nil {
			return nil, err
		}
		m := prim("array")
		m["items"] = it
		return m, nil
	case "map":
		keys, _ := s["keys"].(map[string]any)
		values, _ := s["values"].(map[string]any)
		if keys == nil || values == nil {
			return nil, fmt.Errorf("map with no keys or values schema")
		}
		if kt, _ := keys["type"].(string); kt != "string" || keys["optional"] == true {
			return nil, fmt.Errorf("a map with %v keys: Strand's Avro converter writes maps with string keys only", keys["type"])
		}
		v, err := a.optional(values)
		if err != nil {
			return nil, err
		}
		m := prim("map")
		m["values"] = v
		return m, nil
	case "struct":
		full := name
		if full == "" {
			// AvroData's name for an unnamed struct.
			a.anon++
			full = "io.confluent.connect.avro.ConnectDefault"
			if a.anon > 1 {
				full += strconv.Itoa(a.anon)
			}
		}
		if a.defined[full] {
			return full, nil
		}
		a.defined[full] = true
		ns, short := "", full
		if i := strings.LastIndexByte(full, '.'); i >= 0 {
			ns, short = full[:i], full[i+1:]
		}
		for _, part := range strings.Split(full, ".") {
			if !avroName.MatchString(part) {
				return nil, fmt.Errorf("record name %q is not a valid Avro name (letters, digits and _ between dots)", full)
			}
		}
		fields, _ := s["fields"].([]any)
		out := make([]any, 0, len(fields))
		for _, f := range fields {
			fs, _ := f.(map[string]any)
			fname, _ := fs["field"].(string)
			if !avroName.MatchString(fname) {
				return nil, fmt.Errorf("field %q of %s is not a valid Avro name", fname, full)
			}
			ft, err := a.optional(fs)
			if err != nil {
				return nil, fmt.Errorf("field %s of %s: %w", fname, full, err)
			}
			af := map[string]any{"name": fname, "type": ft}
			if fs["optional"] == true {
				if d, ok := fs["default"]; ok && d != nil {
					af["default"] = d
				} else {
					af["default"] = nil
				}
			} else if d, ok := fs["default"]; ok && d != nil {
				af["default"] = d
			}
			out = append(out, af)
		}
		m := map[string]any{"type": "record", "name": short, "fields": out}
		if ns != "" {
			m["namespace"] = ns
		}
		for k, v := range props {
			m[k] = v
		}
		if name != "" {
			m[propName] = name
		}
		return m, nil
	}
	return nil, fmt.Errorf("connect type %q is not served", typ)
}

// optional wraps s's Avro schema in a union with null when s is
// optional: null first (default null), or the type first when the
// field's default is a value, as AvroData orders them.
func (a *toAvro) optional(s map[string]any) (any, error) {
	t, err := a.schema(s)
	if err != nil || s["optional"] != true {
		return t, err
	}
	if d, ok := s["default"]; ok && d != nil {
		return []any{t, "null"}, nil
	}
	return []any{"null", t}, nil
}

// decimalBytes writes r scaled to scale digits as Connect's Decimal:
// the shortest big-endian two's complement bytes.
func decimalBytes(r *big.Rat, scale int) []byte {
	n := new(big.Int).Mul(r.Num(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	n.Quo(n, r.Denom())
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// Negative: 2^(8k) + n for the smallest k holding it.
	k := (n.BitLen() + 8) / 8
	m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(k)*8), n)
	b := m.Bytes()
	for len(b) < k {
		b = append([]byte{0xff}, b...)
	}
	return b
}

// zero is a required primitive's fallback value.
func zero(s map[string]any) (any, bool) {
	switch s["type"] {
	case "boolean":
		return false, true
	case "string":
		return "", true
	case "int8", "int16", "int32":
		return int32(0), true
	case "int64":
		return int64(0), true
	case "float", "float32":
		return float32(0), true
	case "double", "float64":
		return float64(0), true
	case "bytes":
		if s["name"] == decimalName {
			return new(big.Rat), true
		}
		return []byte{}, true
	}
	return nil, false
}
