package avroconv

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// fromAvro maps an Avro schema (decoded JSON) back to a Connect schema
// in the JsonConverter's form, as AvroData.toConnectSchema does: the
// connect.* properties restore names, versions, parameters and int8 and
// int16; a union with null is an optional field.
type fromAvro struct {
	named map[string]map[string]any // full name -> Connect schema
}

func (f *fromAvro) schema(a any, ns string) (map[string]any, error) {
	switch t := a.(type) {
	case string:
		switch t {
		case "null":
			return nil, fmt.Errorf("a bare null type")
		case "boolean", "string", "bytes":
			return map[string]any{"type": t, "optional": false}, nil
		case "int":
			return map[string]any{"type": "int32", "optional": false}, nil
		case "long":
			return map[string]any{"type": "int64", "optional": false}, nil
		case "float":
			return map[string]any{"type": "float", "optional": false}, nil
		case "double":
			return map[string]any{"type": "double", "optional": false}, nil
		}
		full := t
		if !strings.Contains(t, ".") && ns != "" {
			full = ns + "." + t
		}
		if s, ok := f.named[full]; ok {
			return clone(s), nil
		}
		if s, ok := f.named[t]; ok {
			return clone(s), nil
		}
		return nil, fmt.Errorf("unknown Avro type %q", t)
	case []any:
		var other []any
		null := false
		for _, b := range t {
			if b == "null" {
				null = true
			} else {
				other = append(other, b)
			}
		}
		if len(other) != 1 {
			return nil, fmt.Errorf("a union of %d non-null types: Strand's Avro converter reads unions of null and one type", len(other))
		}
		s, err := f.schema(other[0], ns)
		if err != nil {
			return nil, err
		}
		s["optional"] = null
		return s, nil
	case map[string]any:
		typ, _ := t["type"].(string)
		var s map[string]any
		switch typ {
		case "record":
			name, _ := t["name"].(string)
			if n, ok := t["namespace"].(string); ok && !strings.Contains(name, ".") {
				ns = n
			}
			full := name
			if !strings.Contains(name, ".") && ns != "" {
				full = ns + "." + name
			}
			if i := strings.LastIndexByte(full, '.'); i >= 0 {
				ns = full[:i]
			}
			s = map[string]any{"type": "struct", "optional": false}
			if cn, ok := t[propName].(string); ok {
				s["name"] = cn
			} else if !strings.HasPrefix(full, "io.confluent.connect.avro.ConnectDefault") {
				s["name"] = full
			}
			fields, _ := t["fields"].([]any)
			out := make([]any, 0, len(fields))
			f.named[full] = s // a recursive reference sees the struct
			for _, fd := range fields {
				fm, _ := fd.(map[string]any)
				fs, err := f.schema(fm["type"], ns)
				if err != nil {
					return nil, fmt.Errorf("field %v: %w", fm["name"], err)
				}
				fs["field"] = fm["name"]
				if d, ok := fm["default"]; ok && d != nil {
					fs["default"] = d
				}
				out = append(out, fs)
			}
			s["fields"] = out
		case "enum":
			s = map[string]any{"type": "string", "optional": false}
		case "fixed":
			s = map[string]any{"type": "bytes", "optional": false}
		case "array":
			it, err := f.schema(t["items"], ns)
			if err != nil {
				return nil, err
			}
			s = map[string]any{"type": "array", "items": it, "optional": false}
		case "map":
			v, err := f.schema(t["values"], ns)
			if err != nil {
				return nil, err
			}
			s = map[string]any{"type": "map", "keys": map[string]any{"type": "string", "optional": false}, "values": v, "optional": false}
		default:
			var err error
			if s, err = f.schema(typ, ns); err != nil {
				return nil, err
			}
			if ct, ok := t[propType].(string); ok && (ct == "int8" || ct == "int16") {
				s["type"] = ct
			}
			switch t["logicalType"] {
			case "decimal":
				s["name"] = decimalName
				p := map[string]any{"scale": fmt.Sprint(t["scale"])}
				if pr, ok := t["precision"]; ok {
					p[precisionParam] = fmt.Sprint(pr)
				}
				s["parameters"] = p
			case "date":
				s["name"], s["version"] = "org.apache.kafka.connect.data.Date", 1
			case "time-millis":
				s["name"], s["version"] = "org.apache.kafka.connect.data.Time", 1
			case "timestamp-millis":
				s["name"], s["version"] = "org.apache.kafka.connect.data.Timestamp", 1
			}
		}
		if cn, ok := t[propName].(string); ok {
			s["name"] = cn
		}
		if v, ok := t[propVersion]; ok {
			s["version"] = v
		}
		if p, ok := t[propParameters].(map[string]any); ok {
			params, _ := s["parameters"].(map[string]any)
			if params == nil {
				params = map[string]any{}
			}
			for k, v := range p {
				params[k] = v
			}
			s["parameters"] = params
		}
		if d, ok := t[propDoc].(string); ok {
			s["doc"] = d
		}
		return s, nil
	}
	return nil, fmt.Errorf("unreadable Avro schema %T", a)
}

func clone(s map[string]any) map[string]any {
	c := make(map[string]any, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// appendJSON appends v, as hamba/avro decoded it, in the JsonConverter's
// form for Connect schema s.
func appendJSON(b []byte, s map[string]any, v any) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	typ, _ := s["type"].(string)
	if s["optional"] == true && (typ == "struct" || typ == "map" || typ == "array") {
		// hamba/avro decodes a union's record, map or array branch as
		// a map of the branch's type name to the value.
		if u, ok := v.(map[string]any); ok && len(u) == 1 {
			for _, inner := range u {
				v = inner
			}
		}
	}
	switch typ {
	case "struct":
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%T for a struct", v)
		}
		b = append(b, '{')
		fields, _ := s["fields"].([]any)
		for i, fd := range fields {
			fs, _ := fd.(map[string]any)
			name, _ := fs["field"].(string)
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = appendString(b, name)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, fs, obj[name]); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		return append(b, '}'), nil
	case "array":
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%T for an array", v)
		}
		items, _ := s["items"].(map[string]any)
		b = append(b, '[')
		for i, e := range list {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, items, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case "map":
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%T for a map", v)
		}
		values, _ := s["values"].(map[string]any)
		b = append(b, '{')
		i := 0
		for k, e := range obj {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b, _ = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, values, e); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	switch x := v.(type) {
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return appendString(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float32:
		return appendFloat(b, float64(x), 32), nil
	case float64:
		return appendFloat(b, x, 64), nil
	case []byte:
		return appendString(b, base64.StdEncoding.EncodeToString(x))
	case *big.Rat:
		p, _ := s["parameters"].(map[string]any)
		scale, err := strconv.Atoi(fmt.Sprint(p["scale"]))
		if err != nil {
			return nil, fmt.Errorf("decimal with no scale")
		}
		return appendString(b, base64.StdEncoding.EncodeToString(decimalBytes(x, scale)))
	}
	return nil, fmt.Errorf("%T for a %s", v, typ)
}

func appendString(b []byte, s string) ([]byte, error) {
	q, err := json.Marshal(s)
	return append(b, q...), err
}

// appendFloat writes NaN and the infinities as strings, as the
// JsonConverter reads them back.
func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		b = append(b, '"')
		b = strconv.AppendFloat(b, f, 'g', -1, bits)
		return append(b, '"')
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}
