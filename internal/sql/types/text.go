package types

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// Format is v's text as PostgreSQL's output function for its type
// writes it (DateStyle ISO, TimeZone UTC, bytea_output hex,
// extra_float_digits 1); "" for NULL.
func Format(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		if x {
			return "t"
		}
		return "f"
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case float32:
		return FormatFloat(float64(x), 32)
	case float64:
		return FormatFloat(x, 64)
	case *apd.Decimal:
		return FormatDecimal(x)
	case string:
		return x
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case time.Time:
		return formatTime(x, false)
	case IntervalValue:
		return FormatInterval(x)
	case JSON:
		return x.String()
	}
	return fmt.Sprint(v)
}

// FormatTyped is Format, but writes times as their type wants: a date
// without its time, a timestamptz with its zone.
func FormatTyped(t Type, v any) string {
	if tm, ok := v.(time.Time); ok {
		switch t.OID {
		case OIDDate:
			return formatDate(tm)
		case OIDTimestampTZ:
			return formatTime(tm, true)
		}
	}
	return Format(v)
}

// CastText is v::text: the output function's text, except that a
// boolean casts to "true"/"false" where its output function writes t/f.
func CastText(t Type, v any) string {
	if b, ok := v.(bool); ok {
		if b {
			return "true"
		}
		return "false"
	}
	return FormatTyped(t, v)
}

// FormatFloat writes f as PostgreSQL 12+ does: the shortest text that
// reads back exactly, in exponent form below 1e-4 or from 1e15 (float8)
// or 1e6 (float4) up, with at least two exponent digits.
func FormatFloat(f float64, bitSize int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	s := strconv.FormatFloat(f, 'e', -1, bitSize)
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	limit := 15
	if bitSize == 32 {
		limit = 6
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if exp < -4 || exp >= limit {
		b.WriteByte(digits[0])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if exp < 0 {
			b.WriteByte('-')
			exp = -exp
		} else {
			b.WriteByte('+')
		}
		if exp < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(exp))
		return b.String()
	}
	if exp < 0 {
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -exp-1))
		b.WriteString(digits)
		return b.String()
	}
	if len(digits) <= exp+1 {
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", exp+1-len(digits)))
		return b.String()
	}
	b.WriteString(digits[:exp+1])
	b.WriteByte('.')
	b.WriteString(digits[exp+1:])
	return b.String()
}

// FormatDecimal writes a numeric as numeric_out does: plain notation,
// the value's own scale, NaN, Infinity, -Infinity.
func FormatDecimal(d *apd.Decimal) string {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return "NaN"
	case apd.Infinite:
		if d.Negative {
			return "-Infinity"
		}
		return "Infinity"
	}
	if d.Exponent > 0 {
		// numeric has no positive exponents: 1E+2 is 100.
		d = withoutPositiveExponent(d)
	}
	s := d.Text('f')
	if d.IsZero() {
		s = strings.TrimPrefix(s, "-")
	}
	return s
}

func formatDate(t time.Time) string {
	y, m, d := t.Date()
	bc := ""
	if y <= 0 {
		y, bc = 1-y, " BC"
	}
	return fmt.Sprintf("%04d-%02d-%02d%s", y, int(m), d, bc)
}

func formatTime(t time.Time, zone bool) string {
	t = t.UTC()
	y, mo, d := t.Date()
	bc := ""
	if y <= 0 {
		y, bc = 1-y, " BC"
	}
	s := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", y, int(mo), d, t.Hour(), t.Minute(), t.Second())
	if us := t.Nanosecond() / 1000; us != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", us), "0")
	}
	if zone {
		s += "+00"
	}
	return s + bc
}

// FormatInterval writes an interval in PostgreSQL's default
// IntervalStyle, postgres: "1 year 2 mons 3 days 04:05:06.5",
// "-1 days +02:00:00", "00:00:00".
func FormatInterval(iv IntervalValue) string {
	var parts []string
	years, months := iv.Months/12, iv.Months%12
	anyNeg := false
	unit := func(n int64, name string) {
		if n == 0 {
			return
		}
		sign := ""
		// After a negative field, PostgreSQL writes + on positive ones.
		if n > 0 && anyNeg {
			sign = "+"
		}
		if n < 0 {
			anyNeg = true
		}
		s := fmt.Sprintf("%s%d %s", sign, n, name)
		if n != 1 {
			s += "s"
		}
		parts = append(parts, s)
	}
	unit(int64(years), "year")
	unit(int64(months), "mon")
	unit(int64(iv.Days), "day")
	if iv.Micros != 0 || len(parts) == 0 {
		us := iv.Micros
		sign := ""
		if us < 0 {
			sign, us = "-", -us
		} else if anyNeg {
			sign = "+"
		}
		h := us / (3600 * microsPerSecond)
		us -= h * 3600 * microsPerSecond
		m := us / (60 * microsPerSecond)
		us -= m * 60 * microsPerSecond
		sec := us / microsPerSecond
		frac := us % microsPerSecond
		s := fmt.Sprintf("%s%02d:%02d:%02d", sign, h, m, sec)
		if frac != 0 {
			s += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// Parse reads text as t's input function does, with its errors: 22P02
// for text that is no value of the type, 22003 for one out of its range,
// 22007/22008 for bad dates and times.
func Parse(t Type, text string) (any, error) {
	switch t.OID {
	case OIDBool:
		if b, ok := ParseBool(text); ok {
			return b, nil
		}
		return nil, invalidText(t, text)
	case OIDInt2, OIDInt4, OIDInt8:
		return parseInt(t, text)
	case OIDFloat4, OIDFloat8:
		return parseFloat(t, text)
	case OIDNumeric:
		d, err := ParseDecimal(text)
		if err != nil {
			return nil, err
		}
		return CoerceNumeric(d, t)
	case OIDText, OIDUnknown:
		return text, nil
	case OIDVarchar:
		return CoerceVarchar(text, t, false)
	case OIDBytea:
		return parseBytea(text)
	case OIDDate:
		return ParseDate(text)
	case OIDTimestamp:
		return ParseTimestamp(text, false)
	case OIDTimestampTZ:
		return ParseTimestamp(text, true)
	case OIDInterval:
		return ParseInterval(text)
	case OIDJSONB:
		return ParseJSON(text)
	}
	return nil, sqlerr.NotSupported("no input function for type %s", t.Name())
}

func invalidText(t Type, text string) *sqlerr.Error {
	return sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "invalid input syntax for type %s: %q", t.Name(), text)
}

// ParseBool is boolin: true/false, yes/no, on/off, 1/0 and unique
// prefixes, case-insensitive, surrounding space ignored.
func ParseBool(text string) (bool, bool) {
	s := strings.ToLower(strings.TrimSpace(text))
	if s == "" {
		return false, false
	}
	for _, c := range []struct {
		word string
		min  int
		v    bool
	}{{"true", 1, true}, {"false", 1, false}, {"yes", 1, true}, {"no", 1, false}, {"on", 2, true}, {"off", 2, false}, {"1", 1, true}, {"0", 1, false}} {
		if len(s) >= c.min && strings.HasPrefix(c.word, s) {
			return c.v, true
		}
	}
	return false, false
}

func parseInt(t Type, text string) (any, error) {
	s := strings.TrimSpace(text)
	// A switch, not a map literal: this runs per column per record.
	bitsz := 64
	switch t.OID {
	case OIDInt2:
		bitsz = 16
	case OIDInt4:
		bitsz = 32
	}
	if s == "" || strings.ContainsAny(s, " _") || strings.HasPrefix(s, "0x") {
		return nil, invalidText(t, text)
	}
	n, err := strconv.ParseInt(s, 10, bitsz)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value %q is out of range for type %s", text, t.Name())
		}
		return nil, invalidText(t, text)
	}
	switch t.OID {
	case OIDInt2:
		return int16(n), nil
	case OIDInt4:
		return int32(n), nil
	}
	return n, nil
}

func parseFloat(t Type, text string) (any, error) {
	s := strings.TrimSpace(text)
	bitsz := 64
	if t.OID == OIDFloat4 {
		bitsz = 32
	}
	var f float64
	switch strings.ToLower(s) {
	case "nan":
		f = math.NaN()
	case "infinity", "inf", "+infinity", "+inf":
		f = math.Inf(1)
	case "-infinity", "-inf":
		f = math.Inf(-1)
	default:
		if s == "" || strings.ContainsAny(s, "_xXpP") || strings.HasPrefix(strings.ToLower(strings.TrimLeft(s, "+-")), "in") || strings.HasPrefix(strings.ToLower(strings.TrimLeft(s, "+-")), "na") {
			return nil, invalidText(t, text)
		}
		var err error
		f, err = strconv.ParseFloat(s, bitsz)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "%q is out of range for type %s", s, t.Name())
			}
			return nil, invalidText(t, text)
		}
	}
	if f == 0 && strings.ContainsAny(strings.SplitN(strings.ToLower(s), "e", 2)[0], "123456789") {
		// Underflow to zero is out of range, as PostgreSQL's strtod
		// check has it; denormals read.
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "%q is out of range for type %s", s, t.Name())
	}
	if bitsz == 32 {
		return float32(f), nil
	}
	return f, nil
}

// ParseDecimal is numeric_in without a modifier.
func ParseDecimal(text string) (*apd.Decimal, error) {
	s := strings.TrimSpace(text)
	switch strings.ToLower(s) {
	case "nan":
		return &apd.Decimal{Form: apd.NaN}, nil
	case "infinity", "+infinity", "inf", "+inf":
		return &apd.Decimal{Form: apd.Infinite}, nil
	case "-infinity", "-inf":
		return &apd.Decimal{Form: apd.Infinite, Negative: true}, nil
	}
	low := strings.ToLower(s)
	if s == "" || strings.ContainsAny(low, "_xnaiy ") {
		return nil, invalidText(Numeric, text)
	}
	d, _, err := apd.NewFromString(s)
	if err != nil || d.Form != apd.Finite {
		return nil, invalidText(Numeric, text)
	}
	if d.IsZero() {
		// 0e999999999 is 0, and numeric has no negative zero.
		return apd.New(0, max(d.Exponent, -numericMaxScale)), nil
	}
	if adj := int64(d.NumDigits()) + int64(d.Exponent); adj > numericMaxWeightDigits || -int64(d.Exponent) > numericMaxScale+int64(d.NumDigits()) {
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value overflows numeric format")
	}
	return withoutPositiveExponent(d), nil
}

// numericMaxDigitsBeforePoint bounds a numeric without a modifier,
// PostgreSQL's 131072 digits before the point and 16383 after.
const (
	numericMaxWeightDigits = 131072
	numericMaxScale        = 16383
)

// CoerceNumeric applies numeric(p,s)'s modifier to d: rounds to s
// places (half away from zero), and fails with 22003 when the result
// needs more than p-s digits before the point.
func CoerceNumeric(d *apd.Decimal, t Type) (*apd.Decimal, error) {
	if d.Form != apd.Finite {
		if _, _, ok := t.PrecisionScale(); ok && d.Form == apd.Infinite {
			return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "numeric field overflow")
		}
		return d, nil
	}
	p, s, ok := t.PrecisionScale()
	if !ok {
		if int64(d.NumDigits())+int64(d.Exponent) > numericMaxWeightDigits || -d.Exponent > numericMaxScale {
			return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value overflows numeric format")
		}
		return d, nil
	}
	z := new(apd.Decimal)
	c := apd.BaseContext.WithPrecision(uint32(max(p, 1)) + 2 + uint32(max(0, d.NumDigits())))
	c.Rounding = apd.RoundHalfUp
	if _, err := c.Quantize(z, d, -s); err != nil {
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "numeric field overflow")
	}
	if !z.IsZero() && int64(z.NumDigits())+int64(z.Exponent) > int64(p-s) {
		e := sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "numeric field overflow")
		e.Detail = fmt.Sprintf("A field with precision %d, scale %d must round to an absolute value less than 10^%d.", p, s, p-s)
		return nil, e
	}
	if z.IsZero() {
		z.Negative = false
	}
	return z, nil
}

// CoerceVarchar applies varchar(n)'s length: an explicit cast truncates,
// an assignment of longer text fails with 22001 unless the excess is
// spaces.
func CoerceVarchar(s string, t Type, explicit bool) (string, error) {
	n, ok := t.Length()
	if !ok {
		return s, nil
	}
	runes := []rune(s)
	if len(runes) <= int(n) {
		return s, nil
	}
	if explicit || strings.TrimRight(string(runes[n:]), " ") == "" {
		return string(runes[:n]), nil
	}
	return "", sqlerr.Errorf(sqlerr.StringDataRightTruncation, "value too long for type character varying(%d)", n)
}

func parseBytea(text string) ([]byte, error) {
	if strings.HasPrefix(text, `\x`) {
		b, err := hex.DecodeString(strings.ReplaceAll(text[2:], " ", ""))
		if err != nil {
			return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "invalid hexadecimal data: %q", text)
		}
		return b, nil
	}
	var out []byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(text) && text[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(text) && isOctal(text[i+1]) && isOctal(text[i+2]) && isOctal(text[i+3]) && text[i+1] <= '3':
			out = append(out, (text[i+1]-'0')<<6|(text[i+2]-'0')<<3|(text[i+3]-'0'))
			i += 3
		default:
			return nil, sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "invalid input syntax for type bytea")
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// withoutPositiveExponent writes 1E+2 as 100: numeric has no positive
// exponents, its scale is never negative.
func withoutPositiveExponent(d *apd.Decimal) *apd.Decimal {
	if d.Form != apd.Finite || d.Exponent <= 0 {
		return d
	}
	var pow, c apd.BigInt
	pow.Exp(apd.NewBigInt(10), apd.NewBigInt(int64(d.Exponent)), nil)
	c.Mul(&d.Coeff, &pow)
	z := apd.NewWithBigInt(&c, 0)
	z.Negative = d.Negative
	return z
}
