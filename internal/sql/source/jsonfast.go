package source

import (
	"math"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/types"
)

// The JSON format's fast path. The general path (Decoder.json) parses
// the whole value into a types.JSON (every number an apd decimal, every
// object's keys sorted) and then reads the payload columns' fields out
// of it, as jsonb_to_record does; that costs tens of allocations per
// record and dominated a view's CPU. jsonFast makes one pass over the
// bytes instead: it checks the value's syntax as it goes, skips the
// fields no column declares, and keeps the text of the declared ones,
// which it converts once the value has been read whole, with the same
// input functions (types.Parse) in the same order.
//
// It decides only what it can decide exactly as the general path would.
// Anything else (a syntax error, an escape it does not unescape, a
// \u0000 anywhere, a number the general path's apd parse might refuse, a
// number a column would read through its canonical form, a nested value
// or a jsonb column, more columns than it tracks) makes it give up
// before it has written anything, and the general path decides,
// errors included: the fast path changes the cost, never the result.
// FuzzDecodeJSONFast checks that.

// maxFastColumns bounds the payload columns the fast path tracks in its
// stack-allocated table; a source with more takes the general path.
const maxFastColumns = 64

// maxFastDepth bounds the nesting the fast path skips through; deeper
// values take the general path (whose own bound, 1000, is an error).
const maxFastDepth = 512

// fieldKind is what a declared field held.
type fieldKind uint8

const (
	fieldAbsent fieldKind = iota
	fieldNull
	fieldText // a string's content or a number's literal, in the text buffer
	fieldTrue
	fieldFalse
)

// fieldSpan is a declared field's value: its kind and, for fieldText,
// where its text lies in the text buffer.
type fieldSpan struct {
	kind       fieldKind
	start, end int
}

// jsonFast fills row's payload columns from v, already checked to be
// UTF-8 without NUL. ok false: it gave up, row untouched; decide with
// the general path. ok true: err is the record's column error, if any.
func (d *Decoder) jsonFast(v []byte, row types.Row) (ok bool, err error) {
	if len(d.payload) > maxFastColumns {
		return false, nil
	}
	var spans [maxFastColumns]fieldSpan
	// The declared fields' texts, gathered so that the row's strings
	// share one allocation.
	var stack [512]byte
	buf := stack[:0]
	s := jsonScanner{b: v}
	s.space()
	if !s.eat('{') {
		return false, nil
	}
	s.space()
	if !s.eat('}') {
		for {
			key, ok := s.key()
			if !ok {
				return false, nil
			}
			s.space()
			if !s.eat(':') {
				return false, nil
			}
			s.space()
			k := d.payloadField(key)
			if k < 0 {
				if !s.skip(0) {
					return false, nil
				}
			} else {
				var sp fieldSpan
				if buf, sp, ok = s.field(buf, d.def.Columns[d.payload[k]].Type); !ok {
					return false, nil
				}
				// A repeated key: the last wins, as in jsonb.
				spans[k] = sp
			}
			s.space()
			if s.eat(',') {
				s.space()
				continue
			}
			if s.eat('}') {
				break
			}
			return false, nil
		}
	}
	s.space()
	if s.i != len(s.b) {
		return false, nil
	}
	text := string(buf)
	for k, i := range d.payload {
		var in string
		switch sp := spans[k]; sp.kind {
		case fieldAbsent, fieldNull:
			continue
		case fieldTrue:
			in = "true"
		case fieldFalse:
			in = "false"
		default:
			in = text[sp.start:sp.end]
		}
		t := d.def.Columns[i].Type
		if v, ok := parseSmallInt(t, in); ok {
			row[i] = v
			continue
		}
		val, err := types.Parse(t, in)
		if err != nil {
			return true, d.columnErr(i, err)
		}
		row[i] = val
	}
	return true, nil
}

// payloadField is the index in d.payload of the column named key, -1
// if none. A linear scan: sources declare a handful of columns, and
// comparing a []byte converted in the comparison allocates nothing.
func (d *Decoder) payloadField(key []byte) int {
	for k, i := range d.payload {
		if d.def.Columns[i].Name == string(key) {
			return k
		}
	}
	return -1
}

// jsonScanner reads JSON text from b at i.
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// key reads an object key without escapes (one with escapes gives up:
// it could unescape to a column's name, or hold \u0000).
func (s *jsonScanner) key() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// field reads a declared field's value of a column of type t, appending
// its text to buf. It gives up where the general path's conversion is
// not the input function over the value's own text: a jsonb column, a
// nested value, a number whose canonical form might differ.
func (s *jsonScanner) field(buf []byte, t types.Type) ([]byte, fieldSpan, bool) {
	if s.i >= len(s.b) {
		return buf, fieldSpan{}, false
	}
	jsonb := t.OID == types.OIDJSONB
	switch c := s.b[s.i]; {
	case c == '"':
		if jsonb {
			return buf, fieldSpan{}, false
		}
		start := len(buf)
		var ok bool
		if buf, ok = s.appendString(buf); !ok {
			return buf, fieldSpan{}, false
		}
		return buf, fieldSpan{kind: fieldText, start: start, end: len(buf)}, true
	case c == 'n':
		return buf, fieldSpan{kind: fieldNull}, s.literal("null")
	case c == 't':
		return buf, fieldSpan{kind: fieldTrue}, !jsonb && s.literal("true")
	case c == 'f':
		return buf, fieldSpan{kind: fieldFalse}, !jsonb && s.literal("false")
	case c == '-' || (c >= '0' && c <= '9'):
		lit, frac, plain, ok := s.number()
		if !ok || !plain || !numberReadsAsIs(t, lit, frac) {
			return buf, fieldSpan{}, false
		}
		start := len(buf)
		buf = append(buf, lit...)
		return buf, fieldSpan{kind: fieldText, start: start, end: len(buf)}, true
	}
	return buf, fieldSpan{}, false
}

// numberReadsAsIs reports whether the general path, which reads a JSON
// number into an apd decimal and gives the column its FormatDecimal
// text, gives the column what its input function makes of the literal
// itself: a plain literal (no exponent) and not a negative zero (whose
// canonical text drops the sign), into an integer column (integer
// literals only), numeric or a float.
func numberReadsAsIs(t types.Type, lit []byte, frac bool) bool {
	if lit[0] == '-' {
		zero := true
		for _, c := range lit[1:] {
			if c >= '1' && c <= '9' {
				zero = false
				break
			}
		}
		if zero {
			return false
		}
	}
	switch t.OID {
	case types.OIDInt2, types.OIDInt4, types.OIDInt8:
		return !frac
	case types.OIDNumeric, types.OIDFloat4, types.OIDFloat8:
		return true
	}
	return false
}

func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// appendString reads a string, appending its content to buf, unescaped
// as encoding/json (the general path's parser) unescapes: a \u escape
// of a surrogate pairs with a following one or is U+FFFD. \u0000 gives
// up: jsonb refuses it, and the general path says how.
func (s *jsonScanner) appendString(buf []byte) ([]byte, bool) {
	if !s.eat('"') {
		return buf, false
	}
	for s.i < len(s.b) {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] != '"' && s.b[s.i] != '\\' && s.b[s.i] >= 0x20 {
			s.i++
		}
		buf = append(buf, s.b[start:s.i]...)
		if s.i >= len(s.b) {
			return buf, false
		}
		switch c := s.b[s.i]; c {
		case '"':
			s.i++
			return buf, true
		case '\\':
			if s.i+1 >= len(s.b) {
				return buf, false
			}
			var u byte
			switch s.b[s.i+1] {
			case '"', '\\', '/':
				u = s.b[s.i+1]
			case 'b':
				u = '\b'
			case 'f':
				u = '\f'
			case 'n':
				u = '\n'
			case 'r':
				u = '\r'
			case 't':
				u = '\t'
			case 'u':
				r, ok := s.u4(s.i)
				if !ok || r == 0 {
					return buf, false
				}
				s.i += 6
				if utf16.IsSurrogate(r) {
					if r2, ok := s.u4(s.i); ok {
						if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
							r = dec
							s.i += 6
							buf = utf8.AppendRune(buf, r)
							continue
						}
					}
					r = unicode.ReplacementChar
				}
				buf = utf8.AppendRune(buf, r)
				continue
			default:
				return buf, false
			}
			buf = append(buf, u)
			s.i += 2
		default:
			return buf, false // a control character: invalid JSON
		}
	}
	return buf, false
}

// skipString passes over a string no column reads, checking its syntax:
// any escape but \u0000 (which jsonb refuses) is fine here.
func (s *jsonScanner) skipString() bool {
	if !s.eat('"') {
		return false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				h := s.b[s.i+2 : s.i+6]
				for _, x := range h {
					if !isHex(x) {
						return false
					}
				}
				if string(h) == "0000" {
					return false
				}
				s.i += 6
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

// u4 is the rune of the \uXXXX escape at i; ok false if there is none.
func (s *jsonScanner) u4(i int) (rune, bool) {
	if i+6 > len(s.b) || s.b[i] != '\\' || s.b[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range s.b[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// maxPlainNumber is the longest number literal a declared field takes
// as is: apd reads any literal without exponent, but a bound keeps that
// claim obviously true.
const maxPlainNumber = 64

// number reads a number literal by JSON's grammar. frac reports a
// fraction; plain that it has no exponent and is at most maxPlainNumber
// long. One that is not plain is taken only if apd reads it (the
// general path fails the record if not).
func (s *jsonScanner) number() (lit []byte, frac, plain, ok bool) {
	start := s.i
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, false, false, false
	}
	if s.eat('.') {
		frac = true
		if !s.digits() {
			return nil, false, false, false
		}
	}
	exp := false
	if s.eat('e') || s.eat('E') {
		exp = true
		if !s.eat('+') {
			s.eat('-')
		}
		if !s.digits() {
			return nil, false, false, false
		}
	}
	lit = s.b[start:s.i]
	if exp || len(lit) > maxPlainNumber {
		if _, _, err := apd.NewFromString(string(lit)); err != nil {
			return nil, false, false, false
		}
		return lit, frac, false, true
	}
	return lit, frac, true, true
}

// digits passes over one or more digits.
func (s *jsonScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// skip passes over a value no column reads, checking its syntax.
func (s *jsonScanner) skip(depth int) bool {
	if s.i >= len(s.b) || depth > maxFastDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.skipString()
	case c == 'n':
		return s.literal("null")
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == '-' || (c >= '0' && c <= '9'):
		_, _, _, ok := s.number()
		return ok
	case c == '[':
		s.i++
		s.space()
		if s.eat(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			s.space()
			if s.eat(',') {
				s.space()
				continue
			}
			return s.eat(']')
		}
	case c == '{':
		s.i++
		s.space()
		if s.eat('}') {
			return true
		}
		for {
			if s.i >= len(s.b) || s.b[s.i] != '"' || !s.skipString() {
				return false
			}
			s.space()
			if !s.eat(':') {
				return false
			}
			s.space()
			if !s.skip(depth + 1) {
				return false
			}
			s.space()
			if s.eat(',') {
				s.space()
				continue
			}
			return s.eat('}')
		}
	}
	return false
}

// parseSmallInt is types.Parse of an integer column's text when the text
// is an optional minus and at most 18 digits, which no int8 overflows:
// the same value strconv.ParseInt gives, without its checks for spaces,
// underscores and bases (a tenth of a bid's decoding). ok false: parse
// it with types.Parse, which also makes the errors.
func parseSmallInt(t types.Type, in string) (any, bool) {
	switch t.OID {
	case types.OIDInt2, types.OIDInt4, types.OIDInt8:
	default:
		return nil, false
	}
	digits := in
	neg := len(in) > 0 && in[0] == '-'
	if neg {
		digits = in[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return nil, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return nil, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	switch t.OID {
	case types.OIDInt2:
		if n < math.MinInt16 || n > math.MaxInt16 {
			return nil, false
		}
		return int16(n), true
	case types.OIDInt4:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return nil, false
		}
		return int32(n), true
	}
	return n, true
}
