package types

import (
	"errors"
	"strings"
)

// Arrays are not a type of this package yet. Until they are, the SQL
// endpoint shows a one-dimensional array as its text form, PostgreSQL's
// array literal ('{a,"b c",NULL}'), in a text value: ARRAY(subquery)
// makes one (exec), the system catalog's array functions and = ANY read
// one (pgcatalog). These two functions are that form's output and
// input, as PostgreSQL's array_out and array_in write and read a
// one-dimensional array.

// errArrayLiteral is a malformed array literal (22P02).
var errArrayLiteral = errors.New("malformed array literal")

// FormatTextArray writes elems (nil for NULL) as an array literal.
func FormatTextArray(elems []*string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case e == nil:
			b.WriteString("NULL")
		case arrayNeedsQuotes(*e):
			b.WriteByte('"')
			for _, r := range *e {
				if r == '"' || r == '\\' {
					b.WriteByte('\\')
				}
				b.WriteRune(r)
			}
			b.WriteByte('"')
		default:
			b.WriteString(*e)
		}
	}
	b.WriteByte('}')
	return b.String()
}

func arrayNeedsQuotes(s string) bool {
	if s == "" || strings.EqualFold(s, "NULL") {
		return true
	}
	return strings.ContainsAny(s, "{},\"\\ \t\n\r\v\f")
}

// ParseTextArray reads a one-dimensional array literal: its elements,
// nil for NULL. An optional dimension decoration ("[1:2]=") is skipped.
func ParseTextArray(s string) ([]*string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "="); i > 0 {
			s = strings.TrimSpace(s[i+1:])
		}
	}
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, errArrayLiteral
	}
	body := s[1 : len(s)-1]
	var out []*string
	if strings.TrimSpace(body) == "" {
		return out, nil
	}
	for i := 0; ; {
		for i < len(body) && isArraySpace(body[i]) {
			i++
		}
		var elem strings.Builder
		quoted := false
		if i < len(body) && body[i] == '"' {
			quoted = true
			i++
			for ; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				elem.WriteByte(body[i])
			}
			if i >= len(body) {
				return nil, errArrayLiteral
			}
			i++
			for i < len(body) && isArraySpace(body[i]) {
				i++
			}
		} else {
			for ; i < len(body) && body[i] != ','; i++ {
				if body[i] == '{' || body[i] == '}' || body[i] == '"' {
					return nil, errArrayLiteral // nested arrays are not read
				}
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				elem.WriteByte(body[i])
			}
		}
		v := elem.String()
		if !quoted {
			v = strings.TrimRight(v, " \t\n\r\v\f")
		}
		if !quoted && strings.EqualFold(v, "NULL") {
			out = append(out, nil)
		} else {
			out = append(out, &v)
		}
		if i >= len(body) {
			return out, nil
		}
		if body[i] != ',' {
			return nil, errArrayLiteral
		}
		i++
	}
}

func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}
