package types

import (
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// JSONKind is a JSON value's kind, in the order jsonb sorts kinds.
type JSONKind uint8

// The kinds, in PostgreSQL's jsonb order: Null < String < Number < Bool
// < Array < Object.
const (
	JSONNull JSONKind = iota
	JSONString
	JSONNumber
	JSONBool
	JSONArray
	JSONObject
)

// JSON is a jsonb value, held parsed and canonical as jsonb holds it:
// numbers as numerics, an object's keys unique (the last duplicate
// wins) and sorted as jsonb sorts them (shorter first, then bytes). Two
// JSON values that jsonb considers equal are identical here, so the
// canonical text (String) is the same. The zero value is JSON null.
// A JSON value is immutable.
type JSON struct {
	kind JSONKind
	b    bool
	num  *apd.Decimal
	str  string
	// elems are an array's elements, or an object's values in the order
	// of keys.
	elems []JSON
	keys  []string
}

// Kind is j's kind.
func (j JSON) Kind() JSONKind { return j.kind }

// Str is a string's text; Num a number; Bool a boolean.
func (j JSON) Str() string        { return j.str }
func (j JSON) Num() *apd.Decimal  { return j.num }
func (j JSON) BoolValue() bool    { return j.b }
func (j JSON) Len() int           { return len(j.elems) }
func (j JSON) Index(i int) JSON   { return j.elems[i] }
func (j JSON) Keys() []string     { return j.keys }
func (j JSON) ValueAt(i int) JSON { return j.elems[i] }

// Field is an object's value for key; ok false if j is not an object or
// lacks it.
func (j JSON) Field(key string) (JSON, bool) {
	if j.kind != JSONObject {
		return JSON{}, false
	}
	i := sort.Search(len(j.keys), func(i int) bool { return jsonKeyLess(key, j.keys[i]) || key == j.keys[i] })
	if i < len(j.keys) && j.keys[i] == key {
		return j.elems[i], true
	}
	return JSON{}, false
}

// Elem is an array's element i, negative counting from the end as
// PostgreSQL's -> does; ok false out of range or if j is no array.
func (j JSON) Elem(i int) (JSON, bool) {
	if j.kind != JSONArray {
		return JSON{}, false
	}
	if i < 0 {
		i += len(j.elems)
	}
	if i < 0 || i >= len(j.elems) {
		return JSON{}, false
	}
	return j.elems[i], true
}

// JSONString, JSONNum, JSONBool make scalar values.
func MakeJSONString(s string) JSON       { return JSON{kind: JSONString, str: s} }
func MakeJSONNumber(d *apd.Decimal) JSON { return JSON{kind: JSONNumber, num: d} }
func MakeJSONBool(b bool) JSON           { return JSON{kind: JSONBool, b: b} }

// MakeJSONArray makes an array of elems (taken, not copied).
func MakeJSONArray(elems []JSON) JSON { return JSON{kind: JSONArray, elems: elems} }

// MakeJSONObject makes an object from keys and values, canonicalizing:
// the last of duplicate keys wins, keys sorted as jsonb sorts them.
func MakeJSONObject(keys []string, vals []JSON) JSON {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return jsonKeyLess(keys[idx[a]], keys[idx[b]]) })
	out := JSON{kind: JSONObject, keys: make([]string, 0, len(keys)), elems: make([]JSON, 0, len(keys))}
	for n, i := range idx {
		// Stable sort keeps duplicates in input order: the last wins.
		if n+1 < len(idx) && keys[idx[n+1]] == keys[i] {
			continue
		}
		out.keys = append(out.keys, keys[i])
		out.elems = append(out.elems, vals[i])
	}
	return out
}

// jsonKeyLess is jsonb's key order: shorter first, then bytewise.
func jsonKeyLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// maxJSONDepth bounds nesting, as PostgreSQL's stack depth check does,
// so hostile input cannot exhaust the stack.
const maxJSONDepth = 1000

// ParseJSON parses JSON text into its canonical jsonb value. Errors are
// 22P02 invalid_text_representation, as jsonb_in's.
func ParseJSON(text string) (JSON, error) {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	j, err := parseJSONValue(d, 0)
	if err == nil {
		if _, err2 := d.Token(); err2 != io.EOF {
			err = errors.New("trailing characters")
		}
	}
	if err != nil {
		var se *sqlerr.Error
		if errors.As(err, &se) {
			return JSON{}, se
		}
		e := sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "invalid input syntax for type json")
		e.Detail = err.Error()
		return JSON{}, e
	}
	return j, nil
}

func parseJSONValue(d *json.Decoder, depth int) (JSON, error) {
	if depth > maxJSONDepth {
		return JSON{}, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "JSON nesting is deeper than %d", maxJSONDepth)
	}
	tok, err := d.Token()
	if err != nil {
		if err == io.EOF {
			err = errors.New("the input string ended unexpectedly")
		}
		return JSON{}, err
	}
	switch t := tok.(type) {
	case nil:
		return JSON{}, nil
	case bool:
		return MakeJSONBool(t), nil
	case json.Number:
		n, _, err := apd.NewFromString(string(t))
		if err != nil {
			return JSON{}, err
		}
		return MakeJSONNumber(n), nil
	case string:
		if strings.ContainsRune(t, 0) {
			return JSON{}, sqlerr.Errorf(sqlerr.UntranslatableCharacter, "unsupported Unicode escape sequence")
		}
		return MakeJSONString(t), nil
	case json.Delim:
		switch t {
		case '[':
			var elems []JSON
			for d.More() {
				e, err := parseJSONValue(d, depth+1)
				if err != nil {
					return JSON{}, err
				}
				elems = append(elems, e)
			}
			if _, err := d.Token(); err != nil {
				return JSON{}, err
			}
			return MakeJSONArray(elems), nil
		case '{':
			var keys []string
			var vals []JSON
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return JSON{}, err
				}
				ks, _ := k.(string)
				if strings.ContainsRune(ks, 0) {
					return JSON{}, sqlerr.Errorf(sqlerr.UntranslatableCharacter, "unsupported Unicode escape sequence")
				}
				v, err := parseJSONValue(d, depth+1)
				if err != nil {
					return JSON{}, err
				}
				keys, vals = append(keys, ks), append(vals, v)
			}
			if _, err := d.Token(); err != nil {
				return JSON{}, err
			}
			return MakeJSONObject(keys, vals), nil
		}
	}
	return JSON{}, errors.New("unexpected token")
}

// String is j's text as jsonb_out writes it: `{"a": 1, "b": [1, 2]}`.
func (j JSON) String() string { return string(j.AppendText(nil)) }

// AppendText appends j's canonical text.
func (j JSON) AppendText(b []byte) []byte {
	switch j.kind {
	case JSONNull:
		return append(b, "null"...)
	case JSONBool:
		return strconv.AppendBool(b, j.b)
	case JSONNumber:
		return append(b, FormatDecimal(j.num)...)
	case JSONString:
		return AppendJSONQuoted(b, j.str)
	case JSONArray:
		b = append(b, '[')
		for i, e := range j.elems {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = e.AppendText(b)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, k := range j.keys {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = AppendJSONQuoted(b, k)
		b = append(b, ": "...)
		b = j.elems[i].AppendText(b)
	}
	return append(b, '}')
}

// AppendJSONQuoted quotes s as PostgreSQL's escape_json does: only ",
// \ and control characters are escaped.
func AppendJSONQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			b = append(b, `\"`...)
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			_, n := utf8.DecodeRuneInString(s[i:])
			b = append(b, s[i:i+n]...)
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}

// compareJSON is jsonb's order of two top-level values. jsonb stores a
// top-level scalar as a one-element "raw scalar" array, and its
// comparison sees that: scalars and arrays compare by element count
// first ([] sorts before every scalar, [1, 2] after), then a scalar
// before an array of one; objects sort after all of them.
func compareJSON(a, b JSON) int {
	ac, bc := a.kind == JSONObject, b.kind == JSONObject
	switch {
	case ac && bc:
		return compareJSONNested(a, b)
	case ac:
		return 1
	case bc:
		return -1
	}
	if c := cmpInt(int64(a.topCount()), int64(b.topCount())); c != 0 {
		return c
	}
	as, bs := a.kind != JSONArray, b.kind != JSONArray
	switch {
	case as && bs, !as && !bs:
		return compareJSONNested(a, b)
	case as:
		return -1
	}
	return 1
}

// topCount is the element count of a top-level array or raw scalar.
func (j JSON) topCount() int {
	if j.kind == JSONArray {
		return len(j.elems)
	}
	return 1
}

// compareJSONNested is jsonb's order inside a container (see JSONKind);
// arrays and objects with more members sort after those with fewer,
// then member by member.
func compareJSONNested(a, b JSON) int {
	if a.kind != b.kind {
		return cmpInt(int64(a.kind), int64(b.kind))
	}
	switch a.kind {
	case JSONNull:
		return 0
	case JSONBool:
		return Compare(a.b, b.b)
	case JSONNumber:
		return CompareDecimal(a.num, b.num)
	case JSONString:
		return strings.Compare(a.str, b.str)
	}
	if len(a.elems) != len(b.elems) {
		return cmpInt(int64(len(a.elems)), int64(len(b.elems)))
	}
	for i := range a.elems {
		if a.kind == JSONObject {
			if c := strings.Compare(a.keys[i], b.keys[i]); c != 0 {
				return c
			}
		}
		if c := compareJSONNested(a.elems[i], b.elems[i]); c != 0 {
			return c
		}
	}
	return 0
}
