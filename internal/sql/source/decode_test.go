package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// col is a column as a test declares it: "name type", the type in SQL.
func columnsOf(t testing.TB, decl string) []meta.RelationColumn {
	t.Helper()
	var out []meta.RelationColumn
	for _, c := range strings.Split(decl, ", ") {
		name, typ, _ := strings.Cut(strings.TrimSpace(c), " ")
		out = append(out, meta.RelationColumn{Name: name, Type: typeOf(t, typ).OID, TypeMod: typeOf(t, typ).Mod})
	}
	return out
}

func typeOf(t testing.TB, typ string) types.Type {
	t.Helper()
	var p, s, n int32
	switch {
	case typ == "json":
		return types.Type{OID: 114, Mod: -1}
	case strings.HasPrefix(typ, "numeric("):
		if _, err := fmt.Sscanf(typ, "numeric(%d,%d)", &p, &s); err != nil {
			t.Fatal(err)
		}
		return types.NumericPS(p, s)
	case strings.HasPrefix(typ, "varchar("):
		if _, err := fmt.Sscanf(typ, "varchar(%d)", &n); err != nil {
			t.Fatal(err)
		}
		return types.VarcharN(n)
	}
	ty, ok := types.ByName(typ)
	if !ok {
		t.Fatalf("type %q", typ)
	}
	return ty
}

func defOf(t testing.TB, format, decl string, opts ...meta.RelationOption) *source.Def {
	t.Helper()
	d, err := source.DefOf(meta.Relation{ID: 1, Kind: meta.RelationSource, Name: "s", Topic: "t", Format: format,
		Columns: columnsOf(t, decl), Options: opts})
	if err != nil {
		t.Fatalf("DefOf: %v", err)
	}
	return d
}

// texts are a row's values as PostgreSQL's ::text writes them, nil for
// NULL.
func texts(def *source.Def, row types.Row) []*string {
	out := make([]*string, len(row))
	for i, v := range row {
		if v != nil {
			s := types.CastText(def.Columns[i].Type, v)
			out[i] = &s
		}
	}
	return out
}

func show(v []*string) string {
	var b strings.Builder
	for i, s := range v {
		if i > 0 {
			b.WriteString(" | ")
		}
		if s == nil {
			b.WriteString("NULL")
		} else {
			b.WriteString(*s)
		}
	}
	return b.String()
}

// TestDecodeJSONAgainstPostgres decodes JSON values into columns of
// every type and checks each row (or the SQLSTATE of the failure)
// against PostgreSQL's jsonb_to_record over the same value and column
// list: the source's rule is PostgreSQL's.
func TestDecodeJSONAgainstPostgres(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'"); err != nil {
		t.Fatal(err)
	}
	const all = "b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric, np numeric(5,2), s text, v varchar(3), by bytea, d date, ts timestamp, tz timestamptz, iv interval, j jsonb"
	cases := []struct{ decl, value string }{
		{all, `{"b": true, "i2": 1, "i4": -2147483648, "i8": 9223372036854775807, "f4": 1.5, "f8": 0.1, "n": 1.50, "np": 123.456, "s": "x", "v": "abc", "by": "\\x0aff", "d": "2024-02-29", "ts": "2024-01-02T03:04:05.123456", "tz": "2024-01-02T03:04:05+02:00", "iv": "1 day 02:03:04", "j": {"z": [1, "a", null], "a": {}}}`},
		{all, `{}`},
		{all, `{"b": null, "i4": null, "j": null}`},
		{"b bool", `{"b": "yes"}`},
		{"b bool", `{"b": 1}`},
		{"b bool", `{"b": "maybe"}`},
		{"i2 int2", `{"i2": 70000}`},
		{"i4 int4", `{"i4": "42"}`},
		{"i4 int4", `{"i4": 1.5}`},
		{"i4 int4", `{"i4": 2147483648}`},
		{"i8 int8", `{"i8": 1e3}`},
		{"i8 int8", `{"i8": "  7  "}`},
		{"f8 float8", `{"f8": 1e308}`},
		{"f8 float8", `{"f8": "NaN"}`},
		{"f8 float8", `{"f8": 1e-400}`},
		{"f4 float4", `{"f4": 1e39}`},
		{"f4 float4", `{"f4": 3.14159265358979}`},
		{"n numeric", `{"n": 12345678901234567890.123456789}`},
		{"n numeric", `{"n": 1E+2}`},
		{"n numeric", `{"n": "abc"}`},
		{"np numeric(5,2)", `{"np": 999.995}`},
		{"np numeric(5,2)", `{"np": -0.004}`},
		{"s text", `{"s": 12.50}`},
		{"s text", `{"s": {"b": 1, "a": [true]}}`},
		{"s text", `{"s": false}`},
		{"s text", `{"S": "upper", "s": "lower"}`},
		{"v varchar(3)", `{"v": "abcd"}`},
		{"v varchar(3)", `{"v": "ab  "}`},
		{"v varchar(3)", `{"v": "äöü"}`},
		{"by bytea", `{"by": "plain"}`},
		{"by bytea", `{"by": "\\xzz"}`},
		{"d date", `{"d": "2023-02-29"}`},
		{"d date", `{"d": "2024-01-02 10:00"}`},
		{"ts timestamp", `{"ts": "2024-01-02 03:04:05+05"}`},
		{"ts timestamp", `{"ts": "not a time"}`},
		{"tz timestamptz", `{"tz": "2024-01-02T03:04:05Z"}`},
		{"tz timestamptz", `{"tz": "2024-01-02 03:04:05.5-07:30"}`},
		{"tz timestamptz", `{"tz": true}`},
		{"iv interval", `{"iv": "1 year 2 mons 3 days 04:05:06.5"}`},
		{"iv interval", `{"iv": "90 minutes"}`},
		{"j jsonb", `{"j": "str"}`},
		{"j jsonb", `{"j": 1.0}`},
		{"j jsonb", `{"j": [3, {"b": 2, "a": 1}]}`},
		{"i4 int4", `[1, 2]`},
		{"i4 int4", `"a string"`},
		{"i4 int4", `{"i4": 1`},
		{"MixedCase int4, lower int4", `{"MixedCase": 1, "mixedcase": 2, "lower": 3}`},
	}
	for _, c := range cases {
		t.Run(c.decl+" "+c.value, func(t *testing.T) {
			def := defOf(t, "json", c.decl)
			dec, err := source.NewDecoder(def, nil)
			if err != nil {
				t.Fatal(err)
			}
			row, gotErr := dec.Decode(ctx, &kgo.Record{Value: []byte(c.value)})
			want, wantCode := pgRecord(t, conn, def, c.value)
			var br *source.BadRecord
			switch {
			case wantCode != "" && gotErr == nil:
				t.Fatalf("PostgreSQL fails with %s; decoded %s", wantCode, show(texts(def, row)))
			case wantCode != "" && !errors.As(gotErr, &br):
				t.Fatalf("PostgreSQL fails with %s; got %v, not a bad record", wantCode, gotErr)
			case wantCode != "" && br.SQLState() != wantCode:
				t.Fatalf("PostgreSQL fails with %s; got %s: %v", wantCode, br.SQLState(), gotErr)
			case wantCode == "" && gotErr != nil:
				t.Fatalf("PostgreSQL reads %s; got %v", show(want), gotErr)
			case wantCode == "" && show(texts(def, row)) != show(want):
				t.Fatalf("got  %s\nwant %s", show(texts(def, row)), show(want))
			}
		})
	}
}

// pgRecord is what PostgreSQL makes of value under def's columns: each
// column's ::text, or the SQLSTATE of its error.
func pgRecord(t *testing.T, conn *pgx.Conn, def *source.Def, value string) ([]*string, string) {
	t.Helper()
	var decl, sel []string
	for _, c := range def.Columns {
		name := pgx.Identifier{c.Name}.Sanitize()
		decl = append(decl, name+" "+c.Type.Name())
		sel = append(sel, name+"::text")
	}
	q := fmt.Sprintf("SELECT %s FROM jsonb_to_record($1::jsonb) AS x(%s)", strings.Join(sel, ", "), strings.Join(decl, ", "))
	out := make([]*string, len(def.Columns))
	dst := make([]any, len(out))
	for i := range out {
		dst[i] = &out[i]
	}
	err := conn.QueryRow(context.Background(), q, value).Scan(dst...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return nil, pe.Code
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out, ""
}

// TestDecodeMetadataColumns: the reserved columns take the record's
// metadata, with the key as bytea or text and the headers as jsonb.
func TestDecodeMetadataColumns(t *testing.T) {
	def := defOf(t, "text", "_key text, _partition int4, _offset int8, _timestamp timestamptz, _headers jsonb, body text")
	dec, err := source.NewDecoder(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	r := &kgo.Record{Key: []byte("k1"), Value: []byte("hello"), Partition: 3, Offset: 99, Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: "b", Value: []byte("2")}, {Key: "a", Value: nil}, {Key: "b", Value: []byte("3")}}}
	row, err := dec.Decode(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	got := show(texts(def, row))
	want := `k1 | 3 | 99 | 2024-05-06 06:08:09.123456+00 | {"a": null, "b": "3"} | hello`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// A key that is not UTF-8 cannot be text; as bytea it can.
	r.Key = []byte{0xff, 0}
	var br *source.BadRecord
	if _, err := dec.Decode(context.Background(), r); !errors.As(err, &br) || br.Reason != source.ReasonKey || br.SQLState() != "22021" {
		t.Fatalf("binary key into text: %v", err)
	}
	defB := defOf(t, "bytes", "_key bytea, body bytea")
	decB, err := source.NewDecoder(defB, nil)
	if err != nil {
		t.Fatal(err)
	}
	row, err = decB.Decode(context.Background(), &kgo.Record{Key: []byte{0xff, 0}, Value: []byte{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := show(texts(defB, row)); got != `\xff00 | \x000102` {
		t.Fatalf("bytes: %s", got)
	}
	// A null value is a row of NULL payload columns, its metadata kept.
	row, err = dec.Decode(context.Background(), &kgo.Record{Key: []byte("k"), Partition: 1})
	if err != nil || row[5] != nil || row[0] != "k" || row[1] != int32(1) {
		t.Fatalf("null value: %v %v", row, err)
	}
}

// TestDecodeText: the text format reads the value with the column's
// input function, refusing what PostgreSQL's text cannot hold.
func TestDecodeText(t *testing.T) {
	for _, c := range []struct {
		decl, value, want, code string
	}{
		{"body text", "héllo wörld", "héllo wörld", ""},
		{"body varchar(3)", "abcd", "", "22001"},
		{"body varchar(3)", "abc   ", "abc", ""},
		{"body text", "a\x00b", "", "22021"},
		{"body text", "\xff\xfe", "", "22021"},
		{"body text", "", "", ""},
	} {
		def := defOf(t, "text", c.decl)
		dec, err := source.NewDecoder(def, nil)
		if err != nil {
			t.Fatal(err)
		}
		row, err := dec.Decode(context.Background(), &kgo.Record{Value: []byte(c.value)})
		var br *source.BadRecord
		switch {
		case c.code != "" && (!errors.As(err, &br) || br.SQLState() != c.code):
			t.Errorf("%q into %s: got %v, want SQLSTATE %s", c.value, c.decl, err, c.code)
		case c.code == "" && (err != nil || row[0] != c.want):
			t.Errorf("%q into %s: got %v %v, want %q", c.value, c.decl, row, err, c.want)
		}
	}
}

// TestDefOptions: the options a source takes and what each refuses.
func TestDefOptions(t *testing.T) {
	opt := func(kv ...string) []meta.RelationOption {
		var out []meta.RelationOption
		for i := 0; i < len(kv); i += 2 {
			out = append(out, meta.RelationOption{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	cols := columnsOf(t, "ts timestamptz, n int4")
	for _, c := range []struct {
		opts []meta.RelationOption
		code string
	}{
		{opt("envelope", "upsert", "watermark.column", "ts", "watermark.delay", "5 seconds"), ""},
		{opt("bad.records", "dead-letter", "deadletter.topic", "dlq"), ""},
		{opt("bad.records", "dead-letter"), "42P17"},
		{opt("deadletter.topic", "dlq"), "42P17"},
		{opt("bad.records", "dead-letter", "deadletter.topic", "t"), "42P17"},
		{opt("bad.records", "retry"), "22023"},
		{opt("envelope", "debezium"), "22023"},
		{opt("watermark.column", "n"), "42804"},
		{opt("watermark.column", "nope"), "42703"},
		{opt("watermark.delay", "1 second"), "42P17"},
		{opt("watermark.column", "ts", "watermark.delay", "1 month"), "22023"},
		{opt("watermark.column", "ts", "watermark.delay", "-1 second"), "22023"},
		{opt("watermark.column", "ts", "watermark.delay", "soon"), "22007"},
		{opt("scan.startup", "latest"), ""},
		{opt("scan.startup", "middle"), "22023"},
		{opt("colour", "red"), "22023"},
	} {
		err := source.Check("s", "t", "json", cols, c.opts)
		code := ""
		if err != nil {
			code = "?"
			var e *sqlerr.Error
			if errors.As(err, &e) {
				code = e.Code
			}
		}
		if code != c.code {
			t.Errorf("%v: got %v (%s), want %s", c.opts, err, code, c.code)
		}
	}
	d := defOf(t, "json", "ts timestamptz, n int4", opt("watermark.column", "ts", "watermark.delay", "1 min 30 s")...)
	if d.WatermarkColumn != 0 || d.WatermarkDelay != 90*time.Second {
		t.Fatalf("watermark: column %d delay %v", d.WatermarkColumn, d.WatermarkDelay)
	}
}

// FuzzDecode: no value makes the decoder panic, and a value it decodes
// holds values of its columns' types only (their text reads back).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"i": 1, "s": "x", "j": {"a": [1]}, "t": "2024-01-02T03:04:05Z"}`, `[]`, `{"n": 1e400}`, `{"s": "\u0000"}`, "\xff"} {
		f.Add([]byte(s))
	}
	def := defOf(f, "json", "i int4, s varchar(4), n numeric(6,2), j jsonb, t timestamptz, b bytea, iv interval, f float4")
	dec, err := source.NewDecoder(def, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		row, err := dec.Decode(context.Background(), &kgo.Record{Value: value})
		var br *source.BadRecord
		if err != nil && !errors.As(err, &br) {
			t.Fatalf("not a bad record: %v", err)
		}
		for i, v := range row {
			if v == nil {
				continue
			}
			typ := def.Columns[i].Type
			back, err := types.Parse(typ, types.FormatTyped(typ, v))
			if err != nil || !types.Equal(back, v) {
				t.Fatalf("column %s: %v does not read back as %s: %v %v", def.Columns[i].Name, v, typ, back, err)
			}
		}
	})
}

// BenchmarkDecodeJSON decodes a six-column order record.
//
//	go test -run '^$' -bench BenchmarkDecodeJSON ./internal/sql/source/
func BenchmarkDecodeJSON(b *testing.B) {
	def := defOf(b, "json", "id int8, qty int4, price numeric(10,2), note text, at timestamptz, tags jsonb")
	dec, err := source.NewDecoder(def, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := &kgo.Record{Value: []byte(`{"id": 123456, "qty": 3, "price": 19.99, "note": "fragile, this side up", "at": "2024-01-02T03:04:05.123Z", "tags": {"a": 1, "b": [true, null]}, "extra": "ignored"}`)}
	b.SetBytes(int64(len(r.Value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}
