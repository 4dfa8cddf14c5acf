package types

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// The value encoding: a tag byte, then the body. Lossless, and
// self-describing in the Go type (the SQL type is the column's: date,
// timestamp and timestamptz share a tag, as they share time.Time).
//
//	0  NULL
//	1  false            2  true
//	3  int2  zigzag varint      4  int4  zigzag varint
//	5  int8  zigzag varint
//	6  float4  4 bytes IEEE, little-endian
//	7  float8  8 bytes IEEE, little-endian
//	8  numeric  form byte (0 finite, 1 +Inf, 2 -Inf, 3 NaN); finite:
//	            sign byte, zigzag varint exponent, uvarint n, n bytes of
//	            the coefficient's magnitude, big-endian
//	9  text     uvarint n, n bytes
//	10 bytea    uvarint n, n bytes
//	11 time     zigzag varint microseconds since 1970-01-01 UTC
//	12 interval zigzag varints: months, days, microseconds
//	13 jsonb    uvarint n, n bytes of canonical text
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagInt2
	tagInt4
	tagInt8
	tagFloat4
	tagFloat8
	tagNumeric
	tagText
	tagBytea
	tagTime
	tagInterval
	tagJSON
)

// AppendValue appends v's value encoding to b.
func AppendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, tagNull)
	case bool:
		if x {
			return append(b, tagTrue)
		}
		return append(b, tagFalse)
	case int16:
		return binary.AppendVarint(append(b, tagInt2), int64(x))
	case int32:
		return binary.AppendVarint(append(b, tagInt4), int64(x))
	case int64:
		return binary.AppendVarint(append(b, tagInt8), x)
	case float32:
		return binary.LittleEndian.AppendUint32(append(b, tagFloat4), math.Float32bits(x))
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat8), math.Float64bits(x))
	case *apd.Decimal:
		b = append(b, tagNumeric)
		switch {
		case x.Form == apd.Infinite && !x.Negative:
			return append(b, 1)
		case x.Form == apd.Infinite:
			return append(b, 2)
		case x.Form != apd.Finite:
			return append(b, 3)
		}
		b = append(b, 0)
		if x.Negative {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendVarint(b, int64(x.Exponent))
		var mag apd.BigInt
		mag.Abs(&x.Coeff)
		c := mag.Bytes()
		b = binary.AppendUvarint(b, uint64(len(c)))
		return append(b, c...)
	case string:
		b = binary.AppendUvarint(append(b, tagText), uint64(len(x)))
		return append(b, x...)
	case []byte:
		b = binary.AppendUvarint(append(b, tagBytea), uint64(len(x)))
		return append(b, x...)
	case time.Time:
		return binary.AppendVarint(append(b, tagTime), x.UnixMicro())
	case IntervalValue:
		b = binary.AppendVarint(append(b, tagInterval), int64(x.Months))
		b = binary.AppendVarint(b, int64(x.Days))
		return binary.AppendVarint(b, x.Micros)
	case JSON:
		text := x.AppendText(nil)
		b = binary.AppendUvarint(append(b, tagJSON), uint64(len(text)))
		return append(b, text...)
	}
	panic("types: AppendValue of a value that is no SQL value")
}

// AppendRow appends the values of row, preceded by their count.
func AppendRow(b []byte, row Row) []byte {
	b = binary.AppendUvarint(b, uint64(len(row)))
	for _, v := range row {
		b = AppendValue(b, v)
	}
	return b
}

// maxRowColumns bounds a decoded row's width (PostgreSQL's 1664 target
// list entries), so a corrupt count cannot allocate without bound.
const maxRowColumns = 1664

// DecodeRow decodes a row written by AppendRow, returning the rest.
func DecodeRow(b []byte) (Row, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxRowColumns || n > uint64(len(b)) {
		return nil, nil, corrupt("row width")
	}
	b = b[k:]
	row := make(Row, n)
	for i := range row {
		var err error
		if row[i], b, err = DecodeValue(b); err != nil {
			return nil, nil, err
		}
	}
	return row, b, nil
}

// DecodeValue decodes one value from the front of b, returning the rest.
func DecodeValue(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, corrupt("empty value")
	}
	tag, b := b[0], b[1:]
	varint := func() (int64, bool) {
		n, k := binary.Varint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return n, true
	}
	bytesN := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		out := b[k : k+int(n)]
		b = b[k+int(n):]
		return out, true
	}
	switch tag {
	case tagNull:
		return nil, b, nil
	case tagFalse:
		return false, b, nil
	case tagTrue:
		return true, b, nil
	case tagInt2, tagInt4, tagInt8:
		n, ok := varint()
		switch {
		case !ok:
			return nil, nil, corrupt("int")
		case tag == tagInt2 && n == int64(int16(n)):
			return int16(n), b, nil
		case tag == tagInt4 && n == int64(int32(n)):
			return int32(n), b, nil
		case tag == tagInt8:
			return n, b, nil
		}
		return nil, nil, corrupt("int out of range")
	case tagFloat4:
		if len(b) < 4 {
			return nil, nil, corrupt("float4")
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), b[4:], nil
	case tagFloat8:
		if len(b) < 8 {
			return nil, nil, corrupt("float8")
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:], nil
	case tagNumeric:
		if len(b) < 1 {
			return nil, nil, corrupt("numeric")
		}
		form := b[0]
		b = b[1:]
		switch form {
		case 1:
			return &apd.Decimal{Form: apd.Infinite}, b, nil
		case 2:
			return &apd.Decimal{Form: apd.Infinite, Negative: true}, b, nil
		case 3:
			return &apd.Decimal{Form: apd.NaN}, b, nil
		case 0:
		default:
			return nil, nil, corrupt("numeric form")
		}
		if len(b) < 1 || b[0] > 1 {
			return nil, nil, corrupt("numeric sign")
		}
		neg := b[0] == 1
		b = b[1:]
		exp, ok := varint()
		if !ok || exp != int64(int32(exp)) {
			return nil, nil, corrupt("numeric exponent")
		}
		mag, ok := bytesN()
		if !ok {
			return nil, nil, corrupt("numeric coefficient")
		}
		if exp > numericMaxWeightDigits || exp < -numericMaxScale-int64(len(mag))*3 {
			return nil, nil, corrupt("numeric exponent")
		}
		var coeff apd.BigInt
		coeff.SetBytes(mag)
		d := apd.NewWithBigInt(&coeff, int32(exp))
		d.Negative = neg
		return d, b, nil
	case tagText:
		s, ok := bytesN()
		if !ok {
			return nil, nil, corrupt("text")
		}
		return string(s), b, nil
	case tagBytea:
		s, ok := bytesN()
		if !ok {
			return nil, nil, corrupt("bytea")
		}
		return append([]byte{}, s...), b, nil
	case tagTime:
		us, ok := varint()
		if !ok {
			return nil, nil, corrupt("time")
		}
		return time.UnixMicro(us).UTC(), b, nil
	case tagInterval:
		m, ok1 := varint()
		d, ok2 := varint()
		us, ok3 := varint()
		if !ok1 || !ok2 || !ok3 || m != int64(int32(m)) || d != int64(int32(d)) {
			return nil, nil, corrupt("interval")
		}
		return IntervalValue{int32(m), int32(d), us}, b, nil
	case tagJSON:
		text, ok := bytesN()
		if !ok {
			return nil, nil, corrupt("jsonb")
		}
		j, err := ParseJSON(string(text))
		if err != nil {
			return nil, nil, corrupt("jsonb text")
		}
		return j, b, nil
	}
	return nil, nil, corrupt("value tag")
}
