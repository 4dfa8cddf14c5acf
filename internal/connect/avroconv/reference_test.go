package avroconv

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
)

// The reference conversion the tests hold write to: a payload to the
// Go values hamba/avro's generic encoder takes.

// value converts a JsonConverter payload (decoded with UseNumber) of
// Connect schema s to the Go value hamba/avro writes for its Avro
// schema.
func value(s map[string]any, v any) (any, error) {
	if v == nil {
		if s["optional"] != true {
			if d, ok := s["default"]; ok && d != nil {
				return value(s, d)
			}
			// A required column a delete's old tuple does not carry
			// (REPLICA IDENTITY DEFAULT sends the key only): Debezium
			// writes its type's fallback, the zero value, since Avro has
			// no null for it.
			if z, ok := zero(s); ok {
				return z, nil
			}
			return nil, fmt.Errorf("null for a required %v", s["type"])
		}
		return nil, nil
	}
	typ, _ := s["type"].(string)
	bad := func() error { return fmt.Errorf("%T %v is not a %s", v, v, typ) }
	num, isNum := v.(json.Number)
	str, isStr := v.(string)
	switch typ {
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "string":
		if isStr {
			return str, nil
		}
	case "int8", "int16", "int32":
		if isNum {
			n, err := strconv.ParseInt(string(num), 10, 32)
			if err != nil {
				return nil, bad()
			}
			return int32(n), nil
		}
	case "int64":
		if isNum {
			n, err := num.Int64()
			if err != nil {
				return nil, bad()
			}
			return n, nil
		}
	case "float", "float32", "double", "float64":
		var f float64
		var err error
		switch {
		case isNum:
			f, err = num.Float64()
		case isStr: // NaN and the infinities
			f, err = strconv.ParseFloat(str, 64)
		default:
			return nil, bad()
		}
		if err != nil {
			return nil, bad()
		}
		if typ == "float" || typ == "float32" {
			return float32(f), nil
		}
		return f, nil
	case "bytes":
		if !isStr {
			return nil, bad()
		}
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			return nil, fmt.Errorf("bytes: %w", err)
		}
		if name, _ := s["name"].(string); name == decimalName {
			p, _ := s["parameters"].(map[string]any)
			scale, _ := strconv.Atoi(fmt.Sprint(p["scale"]))
			return decimalRat(b, scale), nil
		}
		return b, nil
	case "array":
		items, _ := s["items"].(map[string]any)
		list, ok := v.([]any)
		if !ok {
			return nil, bad()
		}
		out := make([]any, len(list))
		for i, e := range list {
			var err error
			if out[i], err = value(items, e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "map":
		values, _ := s["values"].(map[string]any)
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, bad()
		}
		out := make(map[string]any, len(obj))
		for k, e := range obj {
			var err error
			if out[k], err = value(values, e); err != nil {
				return nil, err
			}
		}
		return inUnion(s, "map", out), nil
	case "struct":
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, bad()
		}
		fields, _ := s["fields"].([]any)
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			fs, _ := f.(map[string]any)
			name, _ := fs["field"].(string)
			fv, err := value(fs, obj[name])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out[name] = fv
		}
		name, _ := s["name"].(string)
		if name == "" {
			name = "io.confluent.connect.avro.ConnectDefault"
		}
		return inUnion(s, name, out), nil
	}
	return nil, bad()
}

// decimalRat reads Connect's Decimal: the unscaled value as big-endian
// two's complement bytes.
func decimalRat(b []byte, scale int) *big.Rat {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

// inUnion wraps a map value of an optional schema as hamba/avro takes
// a union's branch given as a map: keyed by the branch's type name.
func inUnion(s map[string]any, typeName string, v map[string]any) any {
	if s["optional"] != true {
		return v
	}
	return map[string]any{typeName: v}
}
