package source_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/types"
)

// fastDecl are the columns the fast path is compared over: every type
// a JSON field converts to, in several names that differ in case.
const fastDecl = "a int8, b int4, c int2, d numeric, e numeric(5,2), f float8, g float4, s text, v varchar(3), t timestamp, z timestamptz, y date, o bool, j jsonb, Mixed int4, mixed text"

// sameDecoding fails unless the fast and the general path agree on
// value: both the same row, or both the same bad record (reason,
// SQLSTATE and message).
func sameDecoding(t *testing.T, def *source.Def, fast, general *source.Decoder, value []byte) {
	t.Helper()
	r := &kgo.Record{Value: value}
	gotRow, gotErr := fast.Decode(context.Background(), r)
	wantRow, wantErr := general.Decode(context.Background(), r)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s:\nfast    %v %v\ngeneral %v %v", value, show(texts(def, gotRow)), gotErr, show(texts(def, wantRow)), wantErr)
	}
	if wantErr != nil {
		var g, w *source.BadRecord
		if !errors.As(gotErr, &g) || !errors.As(wantErr, &w) || g.Reason != w.Reason || g.SQLState() != w.SQLState() || gotErr.Error() != wantErr.Error() {
			t.Fatalf("%s:\nfast    %v\ngeneral %v", value, gotErr, wantErr)
		}
		return
	}
	for i := range wantRow {
		if (gotRow[i] == nil) != (wantRow[i] == nil) || (wantRow[i] != nil && !types.Equal(gotRow[i], wantRow[i])) ||
			fmt.Sprintf("%T", gotRow[i]) != fmt.Sprintf("%T", wantRow[i]) {
			t.Fatalf("%s: column %s:\nfast    %v\ngeneral %v", value, def.Columns[i].Name, show(texts(def, gotRow)), show(texts(def, wantRow)))
		}
	}
	if show(texts(def, gotRow)) != show(texts(def, wantRow)) {
		t.Fatalf("%s:\nfast    %v\ngeneral %v", value, show(texts(def, gotRow)), show(texts(def, wantRow)))
	}
}

func fastDecoders(t testing.TB) (*source.Def, *source.Decoder, *source.Decoder) {
	def := defOf(t, "json", fastDecl)
	fast, err := source.NewDecoder(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	general, err := source.NewGeneralDecoder(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	return def, fast, general
}

// jsonFastSeeds are values at the fast path's edges.
var jsonFastSeeds = []string{
	`{"a": 1, "b": -2, "c": 3, "d": 1.50, "e": 999.995, "f": 0.1, "g": 3.14159265358979, "s": "x", "v": "abc", "t": "2015-07-15 00:00:00.000", "z": "2024-01-02T03:04:05+02:00", "y": "2024-02-29", "o": true, "j": {"k": [1]}}`,
	`{}`, ` { } `, `{"a": null, "j": null, "s": null}`, `[1]`, `"x"`, `1`, `null`, ``, `{`, `{"a": 1`, `{"a": 1,}`, `{"a" 1}`, `{"a": 1} x`, `{"a": 1}{}`,
	`{"a": -0}`, `{"d": -0.0}`, `{"f": -0}`, `{"a": 0}`, `{"a": 01}`, `{"a": 1.}`, `{"a": .5}`, `{"a": -}`, `{"a": 1e3}`, `{"d": 1E+2}`, `{"f": 1e-400}`, `{"d": 1e999999999999}`, `{"x": 1e999999999999}`, `{"x": 1e5}`,
	`{"a": 9223372036854775807}`, `{"a": 9223372036854775808}`, `{"c": 70000}`, `{"b": 2147483648}`, `{"a": 1.5}`, `{"a": "42"}`, `{"a": " 7 "}`, `{"a": true}`, `{"o": "yes"}`, `{"o": 1}`, `{"o": false}`,
	`{"d": 12345678901234567890.123456789}`, `{"d": 123456789012345678901234567890123456789012345678901234567890123456789}`, `{"e": -0.004}`, `{"g": 1e39}`, `{"g": 3.4028236e38}`,
	`{"s": 12.50}`, `{"s": 7}`, `{"s": true}`, `{"s": [1, "a"]}`, `{"s": {"b": 1}}`, `{"s": "a\"b\\c\/d\b\f\n\r\t"}`, `{"s": "\u0026\u00e9\u4e2d"}`, `{"s": "\ud83d\ude00"}`, `{"s": "\ud83d"}`, `{"s": "\ud83dx"}`, `{"s": "\ude00\ud83d"}`, `{"s": "\u0000"}`, `{"x": "\u0000"}`, `{"s": "\x"}`, `{"s": "\u12"}`, `{"s": "\u12g4"}`,
	"{\"s\": \"a\tb\"}", "{\"s\": \"\x01\"}", `{"v": "abcd"}`, `{"v": "ab  "}`, `{"v": "äöü"}`, `{"t": "not a time"}`, `{"t": 1}`, `{"y": "2023-02-29"}`, `{"z": true}`,
	`{"j": "str"}`, `{"j": 1.0}`, `{"j": true}`, `{"j": [3, {"b": 2, "a": 1}]}`, `{"a": 1, "a": "x"}`, `{"a": "x", "a": 1}`, `{"a": 1, "a": null}`,
	`{"Mixed": 1, "mixed": "m"}`, `{"MIXED": 1}`, `{"m\u0069xed": "escaped key"}`, `{"\u0000": 1}`, `{"x": {"\u0000": 1}}`, `{"x": [[[[[]]]]], "a": 2}`, `{"x": {"y": {"z": [1, 2, {"w": null}]}}, "b": 1}`,
	`{"x": [1, 2,]}`, `{"x": {"y" 1}}`, `{"x": {1: 2}}`, `{"x": tru}`, `{"x": nul}`, `{"x": falsey}`, `{"a":1 , "b" : 2 }`, "{\n\t\"a\":\r1}",
	`{"x": "` + strings.Repeat("[", 600) + `"}`, `{"x": ` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, `{"x": ` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`,
	"{\"s\": \"\xff\"}", "{\"s\": \"a\x00\"}",
}

// TestDecodeJSONFastMatchesGeneral: the fast path decides every seed
// and a random corpus (mutated seeds and generated objects) as the
// general path does.
func TestDecodeJSONFastMatchesGeneral(t *testing.T) {
	def, fast, general := fastDecoders(t)
	for _, s := range jsonFastSeeds {
		sameDecoding(t, def, fast, general, []byte(s))
	}
	r := rand.New(rand.NewPCG(29, 38))
	for range 20_000 {
		v := randomObject(r)
		sameDecoding(t, def, fast, general, v)
		// A mutation: one byte changed, dropped or doubled.
		if len(v) > 0 {
			m := append([]byte(nil), v...)
			i := r.IntN(len(m))
			switch r.IntN(3) {
			case 0:
				const alphabet = `{}[]",:\ 0123456789.eE+-tfnu`
				m[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				m = append(m[:i], m[i+1:]...)
			default:
				m = append(m[:i+1], m[i:]...)
			}
			sameDecoding(t, def, fast, general, m)
		}
	}
}

// randomObject is a JSON object of fastDecl's fields and others, with
// values of every kind, some of them the wrong kind for their column.
func randomObject(r *rand.Rand) []byte {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "s", "v", "t", "z", "y", "o", "j", "Mixed", "mixed", "x", "extra", "A"}
	var b strings.Builder
	b.WriteString("{")
	for i := range r.IntN(8) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:", names[r.IntN(len(names))])
		randomValue(r, &b, 0)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func randomValue(r *rand.Rand, b *strings.Builder, depth int) {
	strs := []string{`"x"`, `"abc"`, `"abcd"`, `" 42 "`, `"2015-07-15 00:00:00.000"`, `"2024-01-02T03:04:05Z"`, `"2024-02-29"`, `"yes"`, `"NaN"`, `"1e3"`, `"\u0026q\n"`, `"\ud83d\ude00"`, `"é"`, `""`, `"1 day"`}
	nums := []string{"0", "-0", "1", "-1", "42", "1.5", "-0.0", "0.001", "999.995", "2147483648", "9223372036854775807", "99999999999999999999", "1e3", "1E-2", "-2.5e+1", "123.4500", "3.4028236e38"}
	switch k := r.IntN(10); {
	case k < 3:
		b.WriteString(strs[r.IntN(len(strs))])
	case k < 6:
		b.WriteString(nums[r.IntN(len(nums))])
	case k == 6:
		b.WriteString([]string{"null", "true", "false"}[r.IntN(3)])
	case k == 7 && depth < 3:
		b.WriteString("[")
		for i := range r.IntN(3) {
			if i > 0 {
				b.WriteString(",")
			}
			randomValue(r, b, depth+1)
		}
		b.WriteString("]")
	case k == 8 && depth < 3:
		b.WriteString(`{"k":`)
		randomValue(r, b, depth+1)
		b.WriteString("}")
	default:
		b.WriteString(nums[r.IntN(len(nums))])
	}
}

// FuzzDecodeJSONFast: on any value the fast path and the general path
// agree.
//
//	go test -run '^$' -fuzz FuzzDecodeJSONFast ./internal/sql/source/
func FuzzDecodeJSONFast(f *testing.F) {
	for _, s := range jsonFastSeeds {
		f.Add([]byte(s))
	}
	def, fast, general := fastDecoders(f)
	f.Fuzz(func(t *testing.T, value []byte) {
		sameDecoding(t, def, fast, general, value)
	})
}
