package sqltest

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

func res(cols string, rows ...[]any) Result {
	var cs []Column
	for _, c := range strings.Split(cols, ",") {
		name, typ, _ := strings.Cut(strings.TrimSpace(c), " ")
		cs = append(cs, Column{Name: name, Type: typ})
	}
	return Result{Name: "t", Columns: cs, Rows: rows}
}

func row(v ...any) []any { return v }

func num(s string) pgtype.Numeric {
	var n pgtype.Numeric
	if err := n.Scan(s); err != nil {
		panic(err)
	}
	return n
}

func TestCompare(t *testing.T) {
	base := res("id int8, name text, price float8",
		row(int64(1), "a", 1.5),
		row(int64(2), "b", 2.5),
		row(int64(2), "b", 2.5),
		row(int64(3), nil, nil),
	)
	cases := []struct {
		name string
		got  Result
		opts Options
		// want lists substrings the diff must have; none: equal.
		want []string
	}{
		{name: "same rows other order", got: res("id int8, name text, price float8",
			row(int64(3), nil, nil), row(int64(2), "b", 2.5), row(int64(1), "a", 1.5), row(int64(2), "b", 2.5))},
		{name: "missing row", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5)),
			want: []string{"want 4 rows, got 3: 1 missing, 0 extra", "missing (wanted, not got):\n  1× (3, NULL, NULL)"}},
		{name: "missing duplicate", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5), row(int64(2), "b", 2.5), row(int64(3), nil, nil)),
			want: []string{"1 missing, 0 extra", "1× (2, 'b', 2.5)"}},
		{name: "extra duplicate", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5), row(int64(3), nil, nil)),
			want: []string{"want 4 rows, got 5: 0 missing, 1 extra", "extra (got, not wanted):\n  1× (2, 'b', 2.5)"}},
		{name: "wrong value", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5), row(int64(2), "b", 2.5), row(int64(2), "b", 2.75), row(int64(3), nil, nil)),
			want: []string{"1 missing, 1 extra", "missing (wanted, not got):\n  1× (2, 'b', 2.5)", "extra (got, not wanted):\n  1× (2, 'b', 2.75)"}},
		{name: "wrong text", got: res("id int8, name text, price float8",
			row(int64(1), "A", 1.5), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5), row(int64(3), nil, nil)),
			want: []string{"1× (1, 'a', 1.5)", "1× (1, 'A', 1.5)"}},
		{name: "NULL is not a value", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5), row(int64(3), "", 0.0)),
			want: []string{"1× (3, NULL, NULL)", "1× (3, '', 0)"}},
		{name: "float within tolerance", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5*(1+1e-12)), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5-1e-13), row(int64(3), nil, nil))},
		{name: "float beyond tolerance", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5*(1+1e-6)), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5), row(int64(3), nil, nil)),
			want: []string{"1 missing, 1 extra"}},
		{name: "exact numbers across types", got: res("id numeric, name text, price numeric",
			row(num("1"), "a", num("1.5")), row(int32(2), "b", num("2.50")), row(big.NewInt(2), "b", 2.5), row(uint64(3), nil, nil))},
		{name: "ordered wrong order", got: res("id int8, name text, price float8",
			row(int64(3), nil, nil), row(int64(2), "b", 2.5), row(int64(1), "a", 1.5), row(int64(2), "b", 2.5)),
			opts: Options{Ordered: true},
			want: []string{"row 1: want (1, 'a', 1.5)\n       got  (3, NULL, NULL)", "row 3:"}},
		{name: "ordered short", got: res("id int8, name text, price float8",
			row(int64(1), "a", 1.5), row(int64(2), "b", 2.5), row(int64(2), "b", 2.5)),
			opts: Options{Ordered: true},
			want: []string{"want 4 rows, got 3", "row 4 missing: (3, NULL, NULL)"}},
		{name: "column count", got: res("id int8, name text"),
			want: []string{"want 3 columns (id int8, name text, price float8), got 2 (id int8, name text)"}},
		{name: "column name", got: res("ID int8, nom text, price float8", base.Rows...),
			want: []string{`column 2: want name "name", got "nom"`}},
		{name: "column names ignored", got: res("x int8, y text, z float8", base.Rows...), opts: Options{IgnoreNames: true}},
		{name: "type family", got: res("id numeric, name varchar, price numeric", base.Rows...)},
		{name: "type family differs", got: res("id int8, name text, price timestamp", base.Rows...),
			want: []string{"column 3 (price): want type float8, got timestamp"}},
		{name: "types exact", got: res("id int4, name text, price float8", base.Rows...), opts: Options{Types: TypesExact},
			want: []string{"column 1 (id): want type int8, got int4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diff, err := Compare(base, tc.got, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && diff != "" {
				t.Fatalf("want equal, got diff:\n%s", diff)
			}
			if len(tc.want) > 0 && diff == "" {
				t.Fatal("want a diff, got equal")
			}
			for _, w := range tc.want {
				if !strings.Contains(diff, w) {
					t.Errorf("diff lacks %q:\n%s", w, diff)
				}
			}
		})
	}
}

func TestCompareValues(t *testing.T) {
	ts := time.Date(2024, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	cases := []struct {
		name  string
		a, b  any
		equal bool
	}{
		{"int kinds", int16(7), int64(7), true},
		{"numeric scale", num("1.50"), num("1.5"), true},
		{"numeric vs int", num("7"), int64(7), true},
		{"numeric differs", num("1.51"), num("1.5"), false},
		{"big numeric exact", num("123456789012345678901234567890"), num("123456789012345678901234567891"), false},
		{"numeric vs float", num("0.1"), 0.1, true},
		{"NaN", math.NaN(), math.NaN(), true},
		{"NaN numeric", pgtype.Numeric{NaN: true, Valid: true}, math.NaN(), true},
		{"inf", math.Inf(1), math.Inf(1), true},
		{"inf sign", math.Inf(1), math.Inf(-1), false},
		{"near zero", 1e-13, 0.0, true},
		{"time zones", ts, ts.In(time.FixedZone("x", 3600)), true},
		{"time differs", ts, ts.Add(time.Microsecond), false},
		{"interval", pgtype.Interval{Days: 1, Valid: true}, pgtype.Interval{Microseconds: 86_400_000_000, Valid: true}, true},
		{"duration", 1500 * time.Millisecond, pgtype.Interval{Microseconds: 1_500_000, Valid: true}, true},
		{"pgtype wrapper", pgtype.Int8{Int64: 5, Valid: true}, int64(5), true},
		{"pgtype null", pgtype.Text{}, nil, true},
		{"text vs number", "1", int64(1), false},
		{"bytes", []byte("ab"), []byte("ab"), true},
		{"bool", true, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := Result{Columns: []Column{{Name: "v"}}, Rows: [][]any{{tc.a}}}
			got := Result{Columns: []Column{{Name: "v"}}, Rows: [][]any{{tc.b}}}
			diff, err := Compare(want, got, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if (diff == "") != tc.equal {
				t.Fatalf("%v vs %v: equal %v, want %v; diff:\n%s", tc.a, tc.b, diff == "", tc.equal, diff)
			}
		})
	}
	if _, err := Compare(res("v"), Result{Columns: []Column{{Name: "v"}}, Rows: [][]any{{struct{}{}}}}, Options{}); err == nil {
		t.Fatal("an unsupported value compared without error")
	}
}

func TestCompareBoundedDiff(t *testing.T) {
	want := res("v int8")
	for i := range 100 {
		want.Rows = append(want.Rows, row(int64(i)))
	}
	diff, err := Compare(want, res("v int8"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(diff, "\n"); n > maxDiffRows+3 {
		t.Fatalf("diff of %d lines, want at most %d:\n%s", n, maxDiffRows+3, diff)
	}
	if !strings.Contains(diff, "and 80 more distinct rows") {
		t.Fatalf("diff does not say how many rows it left out:\n%s", diff)
	}
}

func TestPGType(t *testing.T) {
	for duck, pg := range map[string]string{
		"BIGINT": "int8", "INTEGER": "int4", "SMALLINT": "int2", "TINYINT": "int2", "HUGEINT": "numeric",
		"DOUBLE": "float8", "FLOAT": "float4", "DECIMAL(18,3)": "numeric", "VARCHAR": "text",
		"TIMESTAMP": "timestamp", "TIMESTAMP_MS": "timestamp", "TIMESTAMP WITH TIME ZONE": "timestamptz",
		"DATE": "date", "INTERVAL": "interval", "BOOLEAN": "bool", "BLOB": "bytea", "BIGINT[]": "_int8",
	} {
		if got := PGType(duck); got != pg {
			t.Errorf("PGType(%q) = %q, want %q", duck, got, pg)
		}
	}
}
