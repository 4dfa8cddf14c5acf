package pgsource

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// PostgreSQL's type OIDs that map to more than a string.
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidOID         = 26
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestampTZ = 1184
	oidInterval    = 1186
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
)

// kind is how a column's text value becomes its Connect value.
type kind uint8

const (
	kString kind = iota
	kBool
	kInt16
	kInt32
	kInt64
	kFloat32
	kFloat64
	kDecimal      // precise, fixed scale: Connect's Decimal (bytes)
	kVarDecimal   // precise, no declared scale: VariableScaleDecimal
	kDecimalText  // decimal.handling.mode=string
	kDecimalFloat // decimal.handling.mode=double
	kBytes
	kDate
	kTimestampMillis
	kTimestampMicros
	kTimestampTZ
	kTimeMillis
	kTimeMicros
	kInterval
	kUUID
	kJSON
)

// column is one column of a captured table.
type column struct {
	name     string
	oid      uint32
	typmod   int32
	optional bool
	kind     kind
	// scale and precision of a kDecimal column.
	scale, precision int
}

// kindOf is Debezium's mapping (time.precision.mode=adaptive,
// interval.handling.mode=numeric) for the types Strand maps; any other
// type is its PostgreSQL text as a string.
func kindOf(oid uint32, typmod int32, decimalMode string) (k kind, scale, precision int) {
	switch oid {
	case oidBool:
		return kBool, 0, 0
	case oidInt2:
		return kInt16, 0, 0
	case oidInt4:
		return kInt32, 0, 0
	case oidInt8, oidOID:
		return kInt64, 0, 0
	case oidFloat4:
		return kFloat32, 0, 0
	case oidFloat8:
		return kFloat64, 0, 0
	case oidNumeric:
		switch decimalMode {
		case "string":
			return kDecimalText, 0, 0
		case "double":
			return kDecimalFloat, 0, 0
		}
		if typmod < 4 {
			return kVarDecimal, 0, 0
		}
		return kDecimal, int((typmod - 4) & 0xffff), int((typmod - 4) >> 16)
	case oidBytea:
		return kBytes, 0, 0
	case oidDate:
		return kDate, 0, 0
	case oidTimestamp:
		// typmod is the declared precision, -1 for none (6).
		if typmod >= 0 && typmod <= 3 {
			return kTimestampMillis, 0, 0
		}
		return kTimestampMicros, 0, 0
	case oidTimestampTZ:
		return kTimestampTZ, 0, 0
	case oidTime:
		if typmod >= 0 && typmod <= 3 {
			return kTimeMillis, 0, 0
		}
		return kTimeMicros, 0, 0
	case oidInterval:
		return kInterval, 0, 0
	case oidUUID:
		return kUUID, 0, 0
	case oidJSON, oidJSONB:
		return kJSON, 0, 0
	}
	return kString, 0, 0
}

// appendFieldSchema appends the Connect JSON schema of c, as
// JsonConverter writes it, named field.
func appendFieldSchema(b []byte, c *column) []byte {
	typ, name := "string", ""
	var params string
	switch c.kind {
	case kBool:
		typ = "boolean"
	case kInt16:
		typ = "int16"
	case kInt32:
		typ = "int32"
	case kInt64:
		typ = "int64"
	case kFloat32:
		typ = "float"
	case kFloat64, kDecimalFloat:
		typ = "double"
	case kDecimal:
		typ, name = "bytes", "org.apache.kafka.connect.data.Decimal"
		params = `{"scale":"` + strconv.Itoa(c.scale) + `","connect.decimal.precision":"` + strconv.Itoa(c.precision) + `"}`
	case kVarDecimal:
		b = append(b, `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],"optional":`...)
		b = strconv.AppendBool(b, c.optional)
		b = append(b, `,"name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal","field":`...)
		b = appendString(b, c.name)
		return append(b, '}')
	case kBytes:
		typ = "bytes"
	case kDate:
		typ, name = "int32", "io.debezium.time.Date"
	case kTimestampMillis:
		typ, name = "int64", "io.debezium.time.Timestamp"
	case kTimestampMicros:
		typ, name = "int64", "io.debezium.time.MicroTimestamp"
	case kTimestampTZ:
		name = "io.debezium.time.ZonedTimestamp"
	case kTimeMillis:
		typ, name = "int32", "io.debezium.time.Time"
	case kTimeMicros:
		typ, name = "int64", "io.debezium.time.MicroTime"
	case kInterval:
		typ, name = "int64", "io.debezium.time.MicroDuration"
	case kUUID:
		name = "io.debezium.data.Uuid"
	case kJSON:
		name = "io.debezium.data.Json"
	}
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","optional":`...)
	b = strconv.AppendBool(b, c.optional)
	if name != "" {
		b = append(b, `,"name":"`...)
		b = append(b, name...)
		b = append(b, `","version":1`...)
	}
	if params != "" {
		b = append(b, `,"parameters":`...)
		b = append(b, params...)
	}
	b = append(b, `,"field":`...)
	b = appendString(b, c.name)
	return append(b, '}')
}

// unavailable is Debezium's unavailable.value.placeholder: what an
// unchanged TOASTed value reads as (pgoutput does not send it).
const unavailable = "__debezium_unavailable_value"

// appendValue appends the Connect JSON value of c's PostgreSQL text
// value (the sessions run with DateStyle ISO, TimeZone UTC,
// IntervalStyle iso_8601 and extra_float_digits 3).
func appendValue(b []byte, c *column, text []byte) ([]byte, error) {
	s := string(text)
	switch c.kind {
	case kString:
		return appendString(b, s), nil
	case kUUID, kJSON:
		return appendString(b, s), nil
	case kBool:
		switch s {
		case "t":
			return append(b, "true"...), nil
		case "f":
			return append(b, "false"...), nil
		}
	case kInt16, kInt32, kInt64:
		// Re-rendered: "00" or "+1" parse but are not JSON numbers.
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return strconv.AppendInt(b, n, 10), nil
		}
	case kFloat32, kFloat64, kDecimalFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			break
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			// JSON has no NaN or infinities; Jackson would write a
			// bare NaN token, which most JSON parsers refuse.
			return appendString(b, s), nil
		}
		bits := 64
		if c.kind == kFloat32 {
			bits = 32
		}
		return strconv.AppendFloat(b, f, 'g', -1, bits), nil
	case kDecimalText:
		return appendString(b, s), nil
	case kDecimal, kVarDecimal:
		scale := c.scale
		if c.kind == kVarDecimal {
			if i := strings.IndexByte(s, '.'); i >= 0 {
				scale = len(s) - i - 1
			} else {
				scale = 0
			}
		}
		unscaled, ok := unscaledOf(s, scale)
		if !ok {
			if s == "NaN" || strings.HasSuffix(s, "Infinity") {
				// Connect's Decimal cannot hold them.
				return append(b, "null"...), nil
			}
			break
		}
		enc := base64.StdEncoding.EncodeToString(twosComplement(unscaled))
		if c.kind == kDecimal {
			return appendString(b, enc), nil
		}
		b = append(b, `{"scale":`...)
		b = strconv.AppendInt(b, int64(scale), 10)
		b = append(b, `,"value":"`...)
		b = append(b, enc...)
		return append(b, `"}`...), nil
	case kBytes:
		if strings.HasPrefix(s, `\x`) {
			raw, err := hex.DecodeString(s[2:])
			if err == nil {
				b = append(b, '"')
				b = base64.StdEncoding.AppendEncode(b, raw)
				return append(b, '"'), nil
			}
		}
	case kDate:
		if d, ok := parseDate(s); ok {
			return strconv.AppendInt(b, d, 10), nil
		}
	case kTimestampMillis, kTimestampMicros:
		us, ok := parseTimestamp(s)
		if ok {
			if c.kind == kTimestampMillis {
				us = floorDiv(us, 1000)
			}
			return strconv.AppendInt(b, us, 10), nil
		}
	case kTimestampTZ:
		if z, ok := zonedTimestamp(s); ok {
			return appendString(b, z), nil
		}
	case kTimeMillis, kTimeMicros:
		if us, ok := parseTime(s); ok {
			if c.kind == kTimeMillis {
				us /= 1000
			}
			return strconv.AppendInt(b, us, 10), nil
		}
	case kInterval:
		if us, ok := parseISOInterval(s); ok {
			return strconv.AppendInt(b, us, 10), nil
		}
	}
	return b, fmt.Errorf("column %s: cannot read %q as type oid %d", c.name, s, c.oid)
}

// appendUnavailable appends Debezium's placeholder for an unchanged
// TOASTed value: the placeholder for strings and bytes, null for what
// cannot hold it.
func appendUnavailable(b []byte, c *column) []byte {
	switch c.kind {
	case kString, kJSON, kDecimalText:
		return appendString(b, unavailable)
	case kBytes:
		return appendString(b, base64.StdEncoding.EncodeToString([]byte(unavailable)))
	}
	return append(b, "null"...)
}

// unscaledOf is the decimal text s times 10^scale, ok false when s is
// not a finite decimal or has more fractional digits than scale.
func unscaledOf(s string, scale int) (*big.Int, bool) {
	intPart, frac, _ := strings.Cut(s, ".")
	if len(frac) > scale {
		return nil, false
	}
	digits := intPart + frac + strings.Repeat("0", scale-len(frac))
	n, ok := new(big.Int).SetString(digits, 10)
	return n, ok
}

// twosComplement is Java's BigInteger.toByteArray: the shortest
// big-endian two's complement bytes of n.
func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// The shortest k with -2^(8k-1) <= n: then n + 2^(8k) in k bytes.
	k := (new(big.Int).Not(n).BitLen())/8 + 1
	m := new(big.Int).Add(n, new(big.Int).Lsh(big.NewInt(1), uint(8*k)))
	b := m.Bytes()
	for len(b) < k {
		b = append([]byte{0xff}, b...)
	}
	return b
}

var epochDate = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

// parseDate reads ISO "YYYY-MM-DD[ BC]" as days since the epoch;
// PostgreSQL's infinities become the int32 bounds.
func parseDate(s string) (int64, bool) {
	switch s {
	case "infinity":
		return math.MaxInt32, true
	case "-infinity":
		return math.MinInt32, true
	}
	t, ok := parseCivil(s, "2006-01-02")
	if !ok {
		return 0, false
	}
	return floorDiv(t.Unix(), 86400), true
}

// parseTimestamp reads ISO "YYYY-MM-DD HH:MM:SS[.ffffff][ BC]" as
// microseconds since the epoch; infinities become the int64 bounds.
func parseTimestamp(s string) (int64, bool) {
	switch s {
	case "infinity":
		return math.MaxInt64, true
	case "-infinity":
		return math.MinInt64, true
	}
	t, ok := parseCivil(s, "2006-01-02 15:04:05.999999")
	if !ok {
		return 0, false
	}
	return t.Unix()*1e6 + int64(t.Nanosecond()/1000), true
}

// parseCivil parses s by layout, reading a " BC" suffix as
// PostgreSQL's years before 1 (1 BC is year 0).
func parseCivil(s, layout string) (time.Time, bool) {
	bc := strings.HasSuffix(s, " BC")
	s = strings.TrimSuffix(s, " BC")
	t, err := time.Parse(layout, s)
	if err != nil {
		return t, false
	}
	if bc {
		t = t.AddDate(1-2*t.Year(), 0, 0)
	}
	return t, true
}

// zonedTimestamp turns timestamptz text into Debezium's ZonedTimestamp:
// ISO-8601 in UTC, as Java's ISO_OFFSET_DATE_TIME writes it (the
// fraction only as long as needed).
func zonedTimestamp(s string) (string, bool) {
	switch s {
	case "infinity", "-infinity":
		return s, true
	}
	bc := strings.HasSuffix(s, " BC")
	s = strings.TrimSuffix(s, " BC")
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999-07:00:00"} {
		t, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if bc {
			t = t.AddDate(1-2*t.Year(), 0, 0)
		}
		return t.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"), true
	}
	return "", false
}

// parseTime reads "HH:MM:SS[.ffffff]" (24:00:00 included) as
// microseconds since midnight.
func parseTime(s string) (int64, bool) {
	hms, frac, _ := strings.Cut(s, ".")
	parts := strings.Split(hms, ":")
	if len(parts) != 3 {
		return 0, false
	}
	var v [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return 0, false
		}
		v[i] = n
	}
	us := ((v[0]*60+v[1])*60 + v[2]) * 1e6
	if frac != "" {
		if len(frac) > 6 {
			return 0, false
		}
		n, err := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return 0, false
		}
		us += n
	}
	return us, true
}

// parseISOInterval reads PostgreSQL's iso_8601 IntervalStyle
// ("P1Y2M3DT4H5M6.5S", signs per field) as Debezium's MicroDuration:
// microseconds, a month counted as 365.25/12 days.
func parseISOInterval(s string) (int64, bool) {
	if !strings.HasPrefix(s, "P") {
		return 0, false
	}
	s = s[1:]
	var total float64
	inTime := false
	const day = 24 * 3600 * 1e6
	for s != "" {
		if s[0] == 'T' {
			inTime, s = true, s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] == '-' || s[i] == '+' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, false
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, false
		}
		unit := s[i]
		s = s[i+1:]
		switch {
		case unit == 'Y' && !inTime:
			total += n * 365.25 * day
		case unit == 'M' && !inTime:
			total += n * 365.25 / 12 * day
		case unit == 'W' && !inTime:
			total += n * 7 * day
		case unit == 'D' && !inTime:
			total += n * day
		case unit == 'H' && inTime:
			total += n * 3600e6
		case unit == 'M' && inTime:
			total += n * 60e6
		case unit == 'S' && inTime:
			total += n * 1e6
		default:
			return 0, false
		}
	}
	return int64(math.Round(total)), true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// appendString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD, as Jackson writes it.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, `\u00`...)
				b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
