package types

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// inputs are texts for each type's input function: edges, forms, and
// text that must fail.
var inputs = map[Type][]string{
	Bool:    {"t", "true", " TRUE ", "yes", "y", "on", "1", "f", "false", "no", "off", "0", "o", "tr", "maybe", ""},
	Int2:    {"0", "-32768", "32767", "32768", " 12 ", "+5", "1.5", "abc", "", "-0"},
	Int4:    {"0", "-2147483648", "2147483647", "2147483648", "-2147483649", "007", "1e3", "12a"},
	Int8:    {"0", "-9223372036854775808", "9223372036854775807", "9223372036854775808", "  -42  ", "--1"},
	Float4:  {"0", "-0", "1.5", "3.4028235e38", "3.5e38", "1e-50", "NaN", "Infinity", "-Infinity", "inf", "123456", "1234567", "0.0001", "0.00001", "1.1", "x"},
	Float8:  {"0", "-0", "0.1", "1e15", "1e14", "123456789012345678", "1e308", "1e309", "1e-320", "NaN", "-inf", "1.7976931348623157e308", "0.0001", "0.00001234", "12.5e-3", "abc", "1,5"},
	Numeric: {"0", "-0", "1.50", "-1.50", "1e2", "1.5e-3", "  12.340  ", "NaN", "Infinity", "-Infinity", "123456789012345678901234567890.123456789", "0.000", "1e", ".5", "5.", "-.5e1", "abc", ""},
	Text:    {"", "abc", " spaced ", "é"},
	Bytea:   {`\x`, `\x00ff`, `\xDEAD`, `abc`, `a\\b`, `\001\377`, `\x0`, `\q`},
	Date: {"2024-01-02", "1999-12-31", "0001-01-01", "2024-02-29", "2023-02-29", "2024-13-01", "2024-01-02 10:11:12", "0044-03-15 BC", "junk", "2024-1-2",
		"1700000000", "2024-01-32", "2024-00-01", "2024-02-30", "", "2024-01", "2024-01-02 25:00:00", "2024-01-02 xx", "-1", "99999",
		"20240102", "240102", "991231", "99999990101", "99999999999999999999999", "2024-01-02 03:04:05+16"},
	Timestamp: {"2024-01-02 03:04:05", "2024-01-02T03:04:05.123456", "2024-01-02 03:04:05.1234567", "2024-01-02",
		"2024-01-02 03:04:05+02", "2024-01-02 24:00:00", "2024-01-02 25:00:00", "2024-01-02 03:04", "1970-01-01 00:00:00.5", "x",
		"1700000000", "1700000000.5", "2024-01-32 00:00:00", "2024-13-01 00:00:00", "2024-01-02 03:60:00", "2024-01-02 03:04:61", "2024-01-02 03:04:05+16",
		"", "2024-01", "2024-01-02 03:04:05 xyz", "2024-01-02 03:04:05.5.5", "2024-01-02 3:4:5", "-1", "99999", "2024-01-02 24:00:01",
		"20240102", "20240102 03:04:05", "20240102T03:04:05", "240102 03:04", "2024-01-02 03:04:05-1600"},
	TimestampTZ: {"2024-01-02 03:04:05+00", "2024-01-02 03:04:05+05:30", "2024-01-02 03:04:05-08", "2024-01-02 03:04:05Z", "2024-01-02T03:04:05.5Z", "2024-01-02", "2024-06-30 23:59:59.999999-0130",
		"2024-01-02 03:04:05+16", "2024-01-02 03:04:05+15:59", "2024-01-02 03:04:05+1", "2024-01-02 03:04:05+0a", "1700000000"},
	Interval: {"1 day", "2 hours", "1 year 2 months 3 days 04:05:06", "-1 day +02:00:00", "1.5 days", "1.5 months", "@ 3 days ago",
		"10:00", "100:00:00", "-00:00:01", "0", "1 week", "3 mons", "1 min 30 sec", "90 minutes", "500 ms", "1 decade", "foo", "1 fortnight"},
	JSONB: {`{"b": 1, "a": [1, 2.50, "x"]}`, `{"a":1,"a":2}`, `[]`, `{}`, `null`, `true`, `"str"`, `-0.0`, `1e2`, `1.5E-3`, `[1, [2, [3]]]`, `{"aa": 1, "b": 2, "c": {"z": null}}`, `"\u00e9\t\u0001"`, `{`, `[1,]`, `01`},
}

// TestParseFormatMatchesPostgres runs each text through our input and
// output functions and through PostgreSQL's ('text'::type::text), and
// compares the output, or the SQLSTATE when PostgreSQL refuses it.
func TestParseFormatMatchesPostgres(t *testing.T) {
	conn := pgConn(t)
	ctx := context.Background()
	for _, typ := range allTypes {
		for _, in := range inputs[typ] {
			// The output function's own text, as the wire carries it.
			res := conn.PgConn().ExecParams(ctx, "SELECT $1::text::"+pgName(typ), [][]byte{[]byte(in)}, nil, nil, nil).Read()
			err := res.Err
			var want string
			if err == nil {
				want = string(res.Rows[0][0])
			}
			v, ourErr := Parse(typ, in)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				if sqlerr.Code(ourErr) != pgErr.Code {
					t.Errorf("%s %q: PostgreSQL fails with %s (%s); we give %v, %v", typ, in, pgErr.Code, pgErr.Message, Format(v), ourErr)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if ourErr != nil {
				t.Errorf("%s %q: PostgreSQL reads %q; we fail: %v", typ, in, want, ourErr)
				continue
			}
			if got := FormatTyped(typ, v); got != want {
				t.Errorf("%s %q: PostgreSQL writes %q, we write %q", typ, in, want, got)
			}
		}
	}
}

// TestCompareMatchesPostgres sorts each type's valid inputs with
// PostgreSQL's ORDER BY and with Compare, ties broken by position.
func TestCompareMatchesPostgres(t *testing.T) {
	conn := pgConn(t)
	ctx := context.Background()
	for _, typ := range allTypes {
		var valid []string
		var vals []any
		for _, in := range inputs[typ] {
			if v, err := Parse(typ, in); err == nil {
				valid, vals = append(valid, in), append(vals, v)
			}
		}
		valid, vals = append(valid, ""), append(vals, nil) // NULL
		rows, err := conn.Query(ctx, "SELECT ord FROM unnest($1::text[]) WITH ORDINALITY AS u(v, ord) ORDER BY (CASE WHEN ord = $2 THEN NULL ELSE v END)::"+pgName(typ)+", ord", valid, len(valid))
		if err != nil {
			t.Fatal(err)
		}
		want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		got := make([]int64, len(vals))
		for i := range got {
			got[i] = int64(i + 1)
		}
		slices.SortStableFunc(got, func(a, b int64) int { return Compare(vals[a-1], vals[b-1]) })
		if !slices.Equal(got, want) {
			t.Errorf("%s: PostgreSQL orders %v as %v, Compare as %v", typ, valid, want, got)
		}
	}
}

func pgName(t Type) string {
	if t.OID == OIDTimestamp {
		return "timestamp"
	}
	if t.OID == OIDTimestampTZ {
		return "timestamptz"
	}
	return t.Name()
}

func pgConn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET extra_float_digits = 1; SET IntervalStyle = postgres; SET DateStyle = 'ISO, MDY'"); err != nil {
		t.Fatal(err)
	}
	return conn
}
