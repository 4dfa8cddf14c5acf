package avroconv

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hamba/avro/v2"
)

// write appends v, a JsonConverter payload (decoded with UseNumber) of
// Connect schema s, to w in the Avro binary encoding of the schema
// toAvro made of s, with hamba/avro's Writer for every primitive.
// It is value and hamba's generic encoder in one walk: the generic
// encoder builds a union's record encoder again for each value, which
// made it most of a captured row's cost. TestRoundTripSchema holds the
// two to the same values.
func write(w *avro.Writer, s map[string]any, v any) error {
	if s["optional"] == true {
		// The union's branches, as optional ordered them: null first,
		// or the type first when the field has a default.
		nullFirst := true
		if d, ok := s["default"]; ok && d != nil {
			nullFirst = false
		}
		switch {
		case v == nil && nullFirst:
			w.WriteInt(0)
			return nil
		case v == nil:
			w.WriteInt(1)
			return nil
		case nullFirst:
			w.WriteInt(1)
		default:
			w.WriteInt(0)
		}
	} else if v == nil {
		if d, ok := s["default"]; ok && d != nil {
			v = d
		} else if z, ok := zero(s); ok {
			// value's fallback, for the same reason.
			return writeZero(w, s, z)
		} else {
			return fmt.Errorf("null for a required %v", s["type"])
		}
	}
	typ, _ := s["type"].(string)
	bad := func() error { return fmt.Errorf("%T %v is not a %s", v, v, typ) }
	num, isNum := v.(json.Number)
	str, isStr := v.(string)
	switch typ {
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		w.WriteBool(b)
	case "string":
		if !isStr {
			return bad()
		}
		w.WriteString(str)
	case "int8", "int16", "int32":
		if !isNum {
			return bad()
		}
		n, err := strconv.ParseInt(string(num), 10, 32)
		if err != nil {
			return bad()
		}
		w.WriteInt(int32(n))
	case "int64":
		if !isNum {
			return bad()
		}
		n, err := num.Int64()
		if err != nil {
			return bad()
		}
		w.WriteLong(n)
	case "float", "float32", "double", "float64":
		var f float64
		var err error
		switch {
		case isNum:
			f, err = num.Float64()
		case isStr: // NaN and the infinities
			f, err = strconv.ParseFloat(str, 64)
		default:
			return bad()
		}
		if err != nil {
			return bad()
		}
		if typ == "float" || typ == "float32" {
			w.WriteFloat(float32(f))
		} else {
			w.WriteDouble(f)
		}
	case "bytes":
		// A Decimal's Connect bytes are already Avro's decimal: the
		// unscaled value, big-endian two's complement, at the
		// schema's scale.
		if !isStr {
			return bad()
		}
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			return fmt.Errorf("bytes: %w", err)
		}
		w.WriteBytes(b)
	case "array":
		items, _ := s["items"].(map[string]any)
		list, ok := v.([]any)
		if !ok {
			return bad()
		}
		if len(list) > 0 {
			w.WriteBlockHeader(int64(len(list)), 0)
			for _, e := range list {
				if err := write(w, items, e); err != nil {
					return err
				}
			}
		}
		w.WriteBlockHeader(0, 0)
	case "map":
		values, _ := s["values"].(map[string]any)
		obj, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		if len(obj) > 0 {
			w.WriteBlockHeader(int64(len(obj)), 0)
			for k, e := range obj {
				w.WriteString(k)
				if err := write(w, values, e); err != nil {
					return err
				}
			}
		}
		w.WriteBlockHeader(0, 0)
	case "struct":
		obj, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		fields, _ := s["fields"].([]any)
		for _, f := range fields {
			fs, _ := f.(map[string]any)
			name, _ := fs["field"].(string)
			if err := write(w, fs, obj[name]); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	default:
		return bad()
	}
	return w.Error
}

// writeZero writes a required primitive's fallback (zero's value).
func writeZero(w *avro.Writer, s map[string]any, z any) error {
	switch x := z.(type) {
	case bool:
		w.WriteBool(x)
	case string:
		w.WriteString(x)
	case int32:
		w.WriteInt(x)
	case int64:
		w.WriteLong(x)
	case float32:
		w.WriteFloat(x)
	case float64:
		w.WriteDouble(x)
	case []byte:
		w.WriteBytes(x)
	default: // a Decimal's zero: no bytes is 0
		w.WriteBytes(nil)
	}
	return w.Error
}
