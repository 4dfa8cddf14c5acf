package types

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// The key encoding: memcmp order of encodings is Compare order of values.
//
//	NULL         0x02
//	value        0x01 body
//
// so NULL sorts after every value. Bodies:
//
//	bool         0x00 | 0x01
//	int2/4/8     8 bytes, big-endian int64 with the sign bit flipped (all
//	             widths alike, so equal integers encode equal)
//	float4/8     8 bytes: the float64's IEEE bits, sign bit flipped for
//	             positives and all bits flipped for negatives; -0 as 0,
//	             every NaN as one NaN above +Inf
//	numeric      class byte: 0 -Inf, 1 negative, 2 zero, 3 positive,
//	             4 +Inf, 5 NaN; positives then hold 4 bytes of the
//	             adjusted exponent (digits before the point, int32, sign
//	             flipped, big-endian), the significant digits as ASCII
//	             without trailing zeros, and 0x00; negatives the same
//	             bytes complemented, so larger magnitudes sort first
//	text, bytea  the bytes with 0x00 escaped as 0x00 0xFF, then 0x00 0x01
//	date, timestamp[tz]
//	             8 bytes: microseconds since 1970-01-01 UTC as int8 above
//	interval     16 bytes: the span in microseconds (a month 30 days) as
//	             a 128-bit two's complement number, sign flipped,
//	             big-endian
//	jsonb        top level: an object is 0x01 then its member encoding
//	             below; a scalar or an array 0x00, a 4-byte big-endian
//	             element count (1 for a scalar), 0x00 and the scalar's
//	             member encoding, or 0x01 and the elements'. Members:
//	             kind byte (JSONKind) then: null nothing; string as
//	             text; number as numeric; bool one byte; array a 4-byte
//	             count then the elements; object the count, then each
//	             key as text and value as a member
//
// The order of arrays and objects by count first, and the top level's
// raw scalars, are jsonb's (see compareJSON).

const (
	keyValue byte = 0x01
	keyNull  byte = 0x02
)

// AppendKey appends v's key encoding to b.
func AppendKey(b []byte, v any) []byte {
	if v == nil {
		return append(b, keyNull)
	}
	b = append(b, keyValue)
	switch x := v.(type) {
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case int16, int32, int64:
		return appendOrderedInt(b, asInt(x))
	case float32:
		return appendOrderedFloat(b, float64(x))
	case float64:
		return appendOrderedFloat(b, x)
	case *apd.Decimal:
		return appendKeyDecimal(b, x)
	case string:
		return appendKeyBytes(b, x)
	case []byte:
		return appendKeyBytes(b, x)
	case time.Time:
		return appendOrderedInt(b, x.UnixMicro())
	case IntervalValue:
		hi, lo := x.span()
		b = binary.BigEndian.AppendUint64(b, uint64(hi)^(1<<63))
		return binary.BigEndian.AppendUint64(b, lo)
	case JSON:
		if x.kind == JSONObject {
			return appendKeyJSON(append(b, 1), x)
		}
		b = binary.BigEndian.AppendUint32(append(b, 0), uint32(x.topCount()))
		if x.kind != JSONArray {
			return appendKeyJSON(append(b, 0), x)
		}
		b = append(b, 1)
		for _, e := range x.elems {
			b = appendKeyJSON(b, e)
		}
		return b
	}
	panic(fmt.Sprintf("types: AppendKey of %T, which is no SQL value", v))
}

func appendOrderedInt(b []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(n)^(1<<63))
}

func appendOrderedFloat(b []byte, f float64) []byte {
	if f == 0 {
		f = 0 // -0 to +0
	}
	u := math.Float64bits(f)
	if math.IsNaN(f) {
		u = 0x7ff8000000000000
	}
	if u&(1<<63) != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(b, u)
}

func appendKeyBytes[S string | []byte](b []byte, s S) []byte {
	// Copied whole, then escaped only if it holds a NUL (text rarely
	// does): byte by byte, a view over whole rows (Nexmark's q0, a
	// bid's 100-byte extra) spent a tenth of its CPU here.
	start := len(b)
	b = append(b, s...)
	if bytes.IndexByte(b[start:], 0) >= 0 {
		b = b[:start]
		for i := 0; i < len(s); i++ {
			if s[i] == 0 {
				b = append(b, 0, 0xff)
			} else {
				b = append(b, s[i])
			}
		}
	}
	return append(b, 0, 1)
}

func appendKeyDecimal(b []byte, d *apd.Decimal) []byte {
	switch {
	case d.Form == apd.NaN || d.Form == apd.NaNSignaling:
		return append(b, 5)
	case d.Form == apd.Infinite && d.Negative:
		return append(b, 0)
	case d.Form == apd.Infinite:
		return append(b, 4)
	case d.IsZero():
		return append(b, 2)
	}
	class := byte(3)
	if d.Negative {
		class = 1
	}
	b = append(b, class)
	start := len(b)
	var digits [64]byte
	ds := d.Coeff.Append(digits[:0], 10)
	if len(ds) > 0 && ds[0] == '-' {
		ds = ds[1:]
	}
	adj := int64(len(ds)) + int64(d.Exponent)
	for len(ds) > 1 && ds[len(ds)-1] == '0' {
		ds = ds[:len(ds)-1]
	}
	b = binary.BigEndian.AppendUint32(b, uint32(int32(adj))^(1<<31))
	b = append(b, ds...)
	b = append(b, 0)
	if d.Negative {
		for i := start; i < len(b); i++ {
			b[i] = ^b[i]
		}
	}
	return b
}

func appendKeyJSON(b []byte, j JSON) []byte {
	b = append(b, byte(j.kind))
	switch j.kind {
	case JSONString:
		return appendKeyBytes(b, j.str)
	case JSONNumber:
		return appendKeyDecimal(b, j.num)
	case JSONBool:
		if j.b {
			return append(b, 1)
		}
		return append(b, 0)
	case JSONArray, JSONObject:
		b = binary.BigEndian.AppendUint32(b, uint32(len(j.elems)))
		for i, e := range j.elems {
			if j.kind == JSONObject {
				b = appendKeyBytes(b, j.keys[i])
			}
			b = appendKeyJSON(b, e)
		}
	}
	return b
}

// ErrCorrupt is returned (wrapped) for bytes that are no encoding.
var ErrCorrupt = errors.New("types: corrupt encoding")

func corrupt(what string) error { return fmt.Errorf("%w: %s", ErrCorrupt, what) }

// DecodeKey decodes one value of type t from the front of b, returning
// the rest.
func DecodeKey(b []byte, t Type) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, corrupt("empty key")
	}
	switch b[0] {
	case keyNull:
		return nil, b[1:], nil
	case keyValue:
	default:
		return nil, nil, corrupt("bad key marker")
	}
	b = b[1:]
	switch t.OID {
	case OIDBool:
		if len(b) < 1 || b[0] > 1 {
			return nil, nil, corrupt("bool")
		}
		return b[0] == 1, b[1:], nil
	case OIDInt2, OIDInt4, OIDInt8:
		if len(b) < 8 {
			return nil, nil, corrupt("int")
		}
		n := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
		switch t.OID {
		case OIDInt2:
			if n != int64(int16(n)) {
				return nil, nil, corrupt("int2 out of range")
			}
			return int16(n), b[8:], nil
		case OIDInt4:
			if n != int64(int32(n)) {
				return nil, nil, corrupt("int4 out of range")
			}
			return int32(n), b[8:], nil
		}
		return n, b[8:], nil
	case OIDFloat4, OIDFloat8:
		if len(b) < 8 {
			return nil, nil, corrupt("float")
		}
		u := binary.BigEndian.Uint64(b)
		if u&(1<<63) != 0 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		f := math.Float64frombits(u)
		if t.OID == OIDFloat4 {
			return float32(f), b[8:], nil
		}
		return f, b[8:], nil
	case OIDNumeric:
		return decodeKeyDecimal(b)
	case OIDText, OIDVarchar, OIDUnknown:
		s, rest, err := decodeKeyBytes(b)
		return string(s), rest, err
	case OIDBytea:
		return decodeKeyBytes(b)
	case OIDDate, OIDTimestamp, OIDTimestampTZ:
		if len(b) < 8 {
			return nil, nil, corrupt("time")
		}
		return time.UnixMicro(int64(binary.BigEndian.Uint64(b) ^ (1 << 63))).UTC(), b[8:], nil
	case OIDInterval:
		if len(b) < 16 {
			return nil, nil, corrupt("interval")
		}
		hi := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
		lo := binary.BigEndian.Uint64(b[8:])
		iv, ok := intervalFromSpan(hi, lo)
		if !ok {
			return nil, nil, corrupt("interval span")
		}
		return iv, b[16:], nil
	case OIDJSONB:
		if len(b) < 1 || b[0] > 1 {
			return nil, nil, corrupt("jsonb class")
		}
		if b[0] == 1 {
			j, rest, err := decodeKeyJSON(b[1:], 0)
			if err == nil && j.kind != JSONObject {
				err = corrupt("jsonb class")
			}
			return j, rest, err
		}
		if len(b) < 6 || b[5] > 1 {
			return nil, nil, corrupt("jsonb top level")
		}
		n := binary.BigEndian.Uint32(b[1:])
		if b[5] == 0 {
			j, rest, err := decodeKeyJSON(b[6:], 0)
			if err == nil && (n != 1 || j.kind == JSONArray || j.kind == JSONObject) {
				err = corrupt("jsonb raw scalar")
			}
			return j, rest, err
		}
		b = b[6:]
		if uint64(n) > uint64(len(b)) {
			return nil, nil, corrupt("jsonb count")
		}
		j := JSON{kind: JSONArray, elems: make([]JSON, 0, n)}
		for range n {
			e, rest, err := decodeKeyJSON(b, 1)
			if err != nil {
				return nil, nil, err
			}
			j.elems, b = append(j.elems, e), rest
		}
		return j, b, nil
	}
	return nil, nil, fmt.Errorf("types: no key encoding for %s", t.Name())
}

// intervalFromSpan rebuilds an interval from its span, as whole days
// (months when days overflow int32) and microseconds.
func intervalFromSpan(hi int64, lo uint64) (IntervalValue, bool) {
	neg := hi < 0
	h, l := uint64(hi), lo
	if neg {
		h, l = neg128(h, l)
	}
	if h >= microsPerDay {
		return IntervalValue{}, false
	}
	days, micros := bits64Div(h, l, microsPerDay)
	// Months only take what days cannot hold; int32's negative range
	// is one larger.
	limit := uint64(math.MaxInt32)
	if neg {
		limit++
	}
	var months uint64
	if days > limit {
		months = min(days/daysPerMonth, limit)
		days -= months * daysPerMonth
	}
	if days > limit {
		// The rest goes into the time part, which holds 106751 days.
		extra := days - limit
		if extra > (math.MaxInt64-micros)/microsPerDay {
			return IntervalValue{}, false
		}
		days, micros = limit, micros+extra*microsPerDay
	}
	if neg {
		return IntervalValue{int32(-int64(months)), int32(-int64(days)), -int64(micros)}, true
	}
	return IntervalValue{int32(months), int32(days), int64(micros)}, true
}

func bits64Div(h, l, d uint64) (q, r uint64) {
	// h < d, checked by the caller, so the quotient fits 64 bits.
	return divU128(h, l, d)
}

func decodeKeyBytes(b []byte) ([]byte, []byte, error) {
	out := []byte{}
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return nil, nil, corrupt("unterminated text")
		}
		switch b[i+1] {
		case 0xff:
			out = append(out, 0)
			i++
		case 1:
			return out, b[i+2:], nil
		default:
			return nil, nil, corrupt("bad text escape")
		}
	}
	return nil, nil, corrupt("unterminated text")
}

func decodeKeyDecimal(b []byte) (any, []byte, error) {
	if len(b) < 1 {
		return nil, nil, corrupt("numeric")
	}
	class := b[0]
	b = b[1:]
	switch class {
	case 0:
		return &apd.Decimal{Form: apd.Infinite, Negative: true}, b, nil
	case 2:
		return apd.New(0, 0), b, nil
	case 4:
		return &apd.Decimal{Form: apd.Infinite}, b, nil
	case 5:
		return &apd.Decimal{Form: apd.NaN}, b, nil
	case 1, 3:
	default:
		return nil, nil, corrupt("numeric class")
	}
	neg := class == 1
	get := func(i int) byte {
		if neg {
			return ^b[i]
		}
		return b[i]
	}
	if len(b) < 5 {
		return nil, nil, corrupt("numeric")
	}
	var e [4]byte
	for i := range e {
		e[i] = get(i)
	}
	adj := int32(binary.BigEndian.Uint32(e[:]) ^ (1 << 31))
	if adj > numericMaxWeightDigits || adj < -numericMaxScale {
		return nil, nil, corrupt("numeric exponent")
	}
	var digits []byte
	i := 4
	for ; i < len(b) && get(i) != 0; i++ {
		c := get(i)
		if c < '0' || c > '9' {
			return nil, nil, corrupt("numeric digit")
		}
		digits = append(digits, c)
	}
	if i >= len(b) || len(digits) == 0 || len(digits) > numericMaxWeightDigits+numericMaxScale {
		return nil, nil, corrupt("numeric digits")
	}
	var coeff apd.BigInt
	if _, ok := coeff.SetString(string(digits), 10); !ok {
		return nil, nil, corrupt("numeric digits")
	}
	d := apd.NewWithBigInt(&coeff, adj-int32(len(digits)))
	d.Negative = neg
	if d.Exponent > 0 {
		d = withoutPositiveExponent(d)
	}
	return d, b[i+1:], nil
}

func decodeKeyJSON(b []byte, depth int) (JSON, []byte, error) {
	if len(b) < 1 || depth > maxJSONDepth {
		return JSON{}, nil, corrupt("jsonb")
	}
	kind := JSONKind(b[0])
	b = b[1:]
	switch kind {
	case JSONNull:
		return JSON{}, b, nil
	case JSONString:
		s, rest, err := decodeKeyBytes(b)
		return MakeJSONString(string(s)), rest, err
	case JSONNumber:
		d, rest, err := decodeKeyDecimal(b)
		if err != nil {
			return JSON{}, nil, err
		}
		return MakeJSONNumber(d.(*apd.Decimal)), rest, nil
	case JSONBool:
		if len(b) < 1 || b[0] > 1 {
			return JSON{}, nil, corrupt("jsonb bool")
		}
		return MakeJSONBool(b[0] == 1), b[1:], nil
	case JSONArray, JSONObject:
		if len(b) < 4 {
			return JSON{}, nil, corrupt("jsonb count")
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		// Each member takes at least 2 bytes: bound the allocation by
		// the input.
		if uint64(n) > uint64(len(b)) {
			return JSON{}, nil, corrupt("jsonb count")
		}
		j := JSON{kind: kind, elems: make([]JSON, 0, n)}
		for range n {
			if kind == JSONObject {
				k, rest, err := decodeKeyBytes(b)
				if err != nil {
					return JSON{}, nil, err
				}
				j.keys = append(j.keys, string(k))
				b = rest
			}
			e, rest, err := decodeKeyJSON(b, depth+1)
			if err != nil {
				return JSON{}, nil, err
			}
			j.elems = append(j.elems, e)
			b = rest
		}
		return j, b, nil
	}
	return JSON{}, nil, corrupt("jsonb kind")
}
