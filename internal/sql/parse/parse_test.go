package parse_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// catalogQueries are the queries psql sends for its \d family.
func catalogQueries(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/psql_catalog.sql")
	if err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, block := range strings.Split(string(b), "-- ----\n") {
		var lines []string
		for _, l := range strings.Split(block, "\n") {
			if !strings.HasPrefix(l, "-- ") {
				lines = append(lines, l)
			}
		}
		if q := strings.TrimSpace(strings.Join(lines, "\n")); q != "" {
			qs = append(qs, q)
		}
	}
	if len(qs) < 10 {
		t.Fatalf("testdata holds %d queries, want the 13 captured", len(qs))
	}
	return qs
}

func TestParseSplitsStatements(t *testing.T) {
	sql := "SELECT 1; SET search_path = public ;SHOW server_version;\n BEGIN"
	stmts, err := parse.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ text, node string }{
		{"SELECT 1", "SelectStmt"},
		{" SET search_path = public ", "VariableSetStmt"},
		{"SHOW server_version", "VariableShowStmt"},
		{"\n BEGIN", "TransactionStmt"},
	}
	if len(stmts) != len(want) {
		t.Fatalf("got %d statements, want %d", len(stmts), len(want))
	}
	for i, w := range want {
		if stmts[i].Text != w.text {
			t.Errorf("statement %d text %q, want %q", i, stmts[i].Text, w.text)
		}
		if got := nodeName(stmts[i]); got != w.node {
			t.Errorf("statement %d is %s, want %s", i, got, w.node)
		}
	}
}

func nodeName(s parse.Stmt) string {
	return string(s.Node.ProtoReflect().WhichOneof(s.Node.ProtoReflect().Descriptor().Oneofs().Get(0)).Message().Name())
}

func TestParseEmpty(t *testing.T) {
	for _, sql := range []string{"", "  ", ";", " ; ;", "-- only a comment"} {
		stmts, err := parse.Parse(sql)
		if err != nil || len(stmts) != 0 {
			t.Errorf("Parse(%q) = %d statements, %v; want none", sql, len(stmts), err)
		}
	}
}

func TestParsePsqlCatalogQueries(t *testing.T) {
	for i, q := range catalogQueries(t) {
		stmts, err := parse.Parse(q)
		if err != nil {
			t.Fatalf("query %d: %v\n%s", i, err, q)
		}
		if len(stmts) != 1 || nodeName(stmts[0]) != "SelectStmt" {
			t.Fatalf("query %d: %d statements, first %s; want one SelectStmt", i, len(stmts), nodeName(stmts[0]))
		}
	}
}

func TestParseTooLong(t *testing.T) {
	_, err := parse.Parse("SELECT '" + strings.Repeat("x", parse.MaxQueryBytes) + "'")
	if !errors.Is(err, parse.ErrTooLong) {
		t.Fatalf("got %v, want ErrTooLong", err)
	}
}

// TestSyntaxErrorsMatchPostgres checks messages and positions against a
// real PostgreSQL server: the point of parsing with its grammar.
func TestSyntaxErrorsMatchPostgres(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		"SELEC 1",
		"SELECT 1 FROM",
		"SELECT (1",
		"SELECT 'unterminated",
		"SELECT 1; SELECT * FROM WHERE",
		"CREATE MATERIALIZED VIEW v AS",
	} {
		t.Run(sql, func(t *testing.T) {
			_, perr := parse.Parse(sql)
			var got *parse.Error
			if !errors.As(perr, &got) || !parse.IsSyntax(perr) {
				t.Fatalf("Parse: %v, want a syntax error", perr)
			}
			_, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
			var want *pgconn.PgError
			if !errors.As(err, &want) {
				t.Fatalf("PostgreSQL: %v, want an error", err)
			}
			if want.Code != "42601" {
				t.Fatalf("PostgreSQL answered %s, want 42601 for %q", want.Code, sql)
			}
			if got.Message != want.Message || int32(got.Position) != want.Position {
				t.Fatalf("got %q at %d, PostgreSQL says %q at %d", got.Message, got.Position, want.Message, want.Position)
			}
		})
	}
}

func TestParseConcurrent(t *testing.T) {
	qs := catalogQueries(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(qs))
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, q := range qs {
				stmts, err := parse.Parse(q)
				if err == nil && (len(stmts) != 1 || stmts[0].Text != strings.TrimSuffix(q, ";")) {
					err = errors.New("wrong statement back for " + q)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"SELECT 1", "SELECT $1::int8, 'a''b', E'\\x00'", "SET a = 1; SHOW a", "SELEC", "/* open comment", "SELECT '\xff'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		stmts, err := parse.Parse(sql)
		if err != nil {
			return
		}
		for _, s := range stmts {
			if !strings.Contains(sql, s.Text) || s.Node == nil {
				t.Fatalf("statement %q is not a piece of %q", s.Text, sql)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	qs := catalogQueries(b)
	cases := []struct{ name, sql string }{
		{"select1", "SELECT 1"},
		{"typical", "SELECT region, count(*), sum(amount) FROM orders WHERE ts > now() - interval '1 hour' AND status = $1 GROUP BY region HAVING count(*) > 10 ORDER BY 2 DESC LIMIT 20"},
		{"psql_dt", qs[1]},
		{"psql_d_table", qs[len(qs)-3]},
	}
	if _, err := parse.Parse("SELECT 1"); err != nil { // compile outside the timings
		b.Fatal(err)
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.sql)))
			for b.Loop() {
				if _, err := parse.Parse(c.sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFirstParse times the module's compilation, which the first
// parse in a process pays; run it with -benchtime=1x -count=N, one
// process per measurement (-count reuses the process, so only the first
// is a compile).
func BenchmarkFirstParse(b *testing.B) {
	for b.Loop() {
		if _, err := parse.Parse("SELECT 1"); err != nil {
			b.Fatal(err)
		}
	}
}
