package parse_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestParseStrandKinds(t *testing.T) {
	sql := "CREATE SOURCE orders (id int8, _key text) WITH (topic = 'orders', format = 'json');\n" +
		"create sink out WITH (topic = 'out') AS SELECT id FROM orders;" +
		"CREATE MATERIALIZED VIEW v AS SELECT count(*) FROM orders;" +
		" SUBSCRIBE TO v; subscribe \"V\";" +
		"DROP SOURCE IF EXISTS a, b CASCADE; DROP SINK out; DROP MATERIALIZED VIEW v;" +
		"SHOW SOURCES; SHOW SINKS; SHOW MATERIALIZED   VIEWS; SHOW VIEWS;" +
		"SELECT 'create source x' AS \"source\"; CREATE TABLE t (a int); SHOW search_path"
	stmts, err := parse.ParseStrand(sql)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind parse.Kind
		node string
		text string
	}{
		{parse.KindSource, "CreateStmt", "CREATE SOURCE orders (id int8, _key text) WITH (topic = 'orders', format = 'json')"},
		{parse.KindSink, "ViewStmt", "\ncreate sink out WITH (topic = 'out') AS SELECT id FROM orders"},
		{parse.KindMaterializedView, "CreateTableAsStmt", "CREATE MATERIALIZED VIEW v AS SELECT count(*) FROM orders"},
		{parse.KindSubscribe, "SelectStmt", " SUBSCRIBE TO v"},
		{parse.KindSubscribe, "SelectStmt", " subscribe \"V\""},
		{parse.KindSource, "DropStmt", "DROP SOURCE IF EXISTS a, b CASCADE"},
		{parse.KindSink, "DropStmt", " DROP SINK out"},
		{parse.KindMaterializedView, "DropStmt", " DROP MATERIALIZED VIEW v"},
		{parse.KindSource, "VariableShowStmt", "SHOW SOURCES"},
		{parse.KindSink, "VariableShowStmt", " SHOW SINKS"},
		{parse.KindMaterializedView, "VariableShowStmt", " SHOW MATERIALIZED   VIEWS"},
		{parse.KindMaterializedView, "VariableShowStmt", " SHOW VIEWS"},
		{parse.KindOther, "SelectStmt", "SELECT 'create source x' AS \"source\""},
		{parse.KindOther, "CreateStmt", " CREATE TABLE t (a int)"},
		{parse.KindOther, "VariableShowStmt", " SHOW search_path"},
	}
	if len(stmts) != len(want) {
		t.Fatalf("%d statements, want %d", len(stmts), len(want))
	}
	for i, w := range want {
		s := stmts[i]
		if s.Kind != w.kind || nodeName(s.Stmt) != w.node || s.Text != w.text {
			t.Errorf("statement %d: %v %s %q; want %v %s %q", i, s.Kind, nodeName(s.Stmt), s.Text, w.kind, w.node, w.text)
		}
		if sql[s.Offset:s.Offset+len(s.Text)] != s.Text {
			t.Errorf("statement %d: Offset %d does not point at its text", i, s.Offset)
		}
	}
	// What the trees say: the source's columns and options, the sink's
	// query, the drop's names and behaviour, the subscription's target.
	src := stmts[0].Node.GetCreateStmt()
	if src.Relation.Relname != "orders" || len(src.TableElts) != 2 || len(src.Options) != 2 || src.Options[1].GetDefElem().Defname != "format" {
		t.Errorf("CREATE SOURCE tree: %v", src)
	}
	if q := stmts[1].Node.GetViewStmt(); q.View.Relname != "out" || q.Query.GetSelectStmt() == nil || len(q.Options) != 1 {
		t.Errorf("CREATE SINK tree: %v", q)
	}
	if rv := parse.SubscribeTarget(stmts[3]); rv == nil || rv.Relname != "v" {
		t.Errorf("SUBSCRIBE TO v names %v", rv)
	}
	if rv := parse.SubscribeTarget(stmts[4]); rv == nil || rv.Relname != "V" {
		t.Errorf("SUBSCRIBE \"V\" names %v", rv)
	}
	if d := stmts[5].Node.GetDropStmt(); d.RemoveType != pg.ObjectType_OBJECT_TABLE || !d.MissingOk || d.Behavior != pg.DropBehavior_DROP_CASCADE || len(d.Objects) != 2 {
		t.Errorf("DROP SOURCE tree: %v", d)
	}
	if d := stmts[6].Node.GetDropStmt(); d.RemoveType != pg.ObjectType_OBJECT_VIEW {
		t.Errorf("DROP SINK tree: %v", d)
	}
}

// TestParseStrandErrorsMatchPostgres: a syntax error in a statement of
// the dialect is reported as PostgreSQL reports it for the statement's
// PostgreSQL form, at the same position, which is a position in what the
// user wrote (the swap keeps lengths).
func TestParseStrandErrorsMatchPostgres(t *testing.T) {
	conn := pgConn(t)
	for _, c := range []struct {
		strand, postgres string
		near             string // what the position points at in the user's text
	}{
		{"CREATE SOURCE s (a int4,, b text) WITH (topic = 't')", "CREATE TABLE  s (a int4,, b text) WITH (topic = 't')", ","},
		{"CREATE SOURCE s (a int4) WITH (topic = 't' format = 'json')", "CREATE TABLE  s (a int4) WITH (topic = 't' format = 'json')", "format"},
		{"SELECT 1; CREATE SOURCE s (a int4) WITH topic = 't'", "SELECT 1; CREATE TABLE  s (a int4) WITH topic = 't'", "topic"},
		{"CREATE SINK k WITH (topic = 't') AS SELEC 1", "CREATE VIEW k WITH (topic = 't') AS SELEC 1", "SELEC"},
		{"DROP SOURCE IF EXIST s", "DROP TABLE  IF EXIST s", "EXIST"},
		{"SUBSCRIBE TO v WHERE x", "    TABLE    v WHERE x", "WHERE"},
	} {
		t.Run(c.strand, func(t *testing.T) {
			_, perr := parse.ParseStrand(c.strand)
			var got *parse.Error
			if !errors.As(perr, &got) {
				t.Fatalf("ParseStrand: %v, want a syntax error", perr)
			}
			_, err := conn.Exec(context.Background(), c.postgres, pgx.QueryExecModeSimpleProtocol)
			var want *pgconn.PgError
			if !errors.As(err, &want) || want.Code != "42601" {
				t.Fatalf("PostgreSQL: %v, want a syntax error", err)
			}
			if got.Message != want.Message || int32(got.Position) != want.Position {
				t.Fatalf("got %q at %d, PostgreSQL says %q at %d", got.Message, got.Position, want.Message, want.Position)
			}
			if !strings.HasPrefix(c.strand[got.Position-1:], c.near) {
				t.Fatalf("position %d points at %q, want %q", got.Position, c.strand[got.Position-1:], c.near)
			}
		})
	}
}

func TestParseStrandRefusesSubscribeToAQuery(t *testing.T) {
	for _, sql := range []string{"SUBSCRIBE", "SUBSCRIBE TO", "SUBSCRIBE (SELECT 1)"} {
		if _, err := parse.ParseStrand(sql); !parse.IsSyntax(err) {
			t.Errorf("ParseStrand(%q) = %v, want a syntax error", sql, err)
		}
	}
}

func TestParseStrandOpenQuote(t *testing.T) {
	// The scanner refuses it; the grammar's error still comes back.
	_, err := parse.ParseStrand("CREATE SOURCE s (a text) WITH (topic = 'open")
	if !parse.IsSyntax(err) || !strings.Contains(err.Error(), "unterminated") {
		t.Fatalf("got %v, want PostgreSQL's unterminated string error", err)
	}
}

func pgConn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

func FuzzParseStrand(f *testing.F) {
	for _, s := range []string{"CREATE SOURCE s (a int) WITH (topic='t')", "SUBSCRIBE TO v", "SHOW MATERIALIZED VIEWS", "drop sink;", "SUBSCRIBE 'x", "CREATE SINK",
		"CREATE CONNECTOR c WITH ('a.b' = 'x', \"c\" = 1)", "ALTER CONNECTOR c SET ('a' = NONE)", "drop connector if exists c", "CREATE CONNECTOR c WITH ('a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		stmts, err := parse.ParseStrand(sql)
		if err != nil {
			var pe *parse.Error
			if errors.As(err, &pe) && (pe.Position < 0 || pe.Position > len(sql)+1) {
				t.Fatalf("position %d outside a %d-byte text", pe.Position, len(sql))
			}
			return
		}
		for _, s := range stmts {
			if s.Offset < 0 || s.Offset+len(s.Text) > len(sql) || sql[s.Offset:s.Offset+len(s.Text)] != s.Text || s.Node == nil {
				t.Fatalf("statement %q at %d is not a piece of %q", s.Text, s.Offset, sql)
			}
			defs := s.Node.GetDefineStmt().GetDefinition()
			defs = append(defs, s.Node.GetAlterTypeStmt().GetOptions()...)
			for _, d := range defs {
				if de := d.GetDefElem(); de != nil && len(parse.OptionKey(s, de)) > len(s.Text) {
					t.Fatalf("key %q longer than its statement %q", parse.OptionKey(s, de), s.Text)
				}
			}
		}
	})
}

// BenchmarkParseStrand: what the dialect adds to a parse (a scan of
// the text, then the grammar), against Parse of its PostgreSQL form.
func BenchmarkParseStrand(b *testing.B) {
	sql := "CREATE SOURCE orders (id int8, amount numeric(10,2), _key text, _offset int8) WITH (topic = 'orders', format = 'json')"
	if _, err := parse.ParseStrand(sql); err != nil { // compile outside the timings
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   func(string) error
	}{
		{"Parse", func(s string) error { _, err := parse.Parse(strings.Replace(s, "SOURCE", "TABLE ", 1)); return err }},
		{"ParseStrand", func(s string) error { _, err := parse.ParseStrand(s); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(sql)))
			for b.Loop() {
				if err := c.fn(sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestParseStrandExplain: EXPLAIN of a name (with or without
// MATERIALIZED VIEW) is Strand's; EXPLAIN of a query stays PostgreSQL's.
func TestParseStrandExplain(t *testing.T) {
	for _, c := range []struct {
		sql    string
		kind   parse.Kind
		target string
	}{
		{"EXPLAIN totals", parse.KindExplain, "totals"},
		{"EXPLAIN nothing", parse.KindExplain, "nothing"}, // an unreserved keyword
		{"explain materialized view \"Totals\"", parse.KindExplain, "Totals"},
		{"EXPLAIN SELECT * FROM totals", parse.KindOther, ""},
		{"EXPLAIN (COSTS off) SELECT 1", parse.KindOther, ""},
		{"EXPLAIN VALUES (1)", parse.KindOther, ""},
	} {
		stmts, err := parse.ParseStrand(c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if len(stmts) != 1 || stmts[0].Kind != c.kind {
			t.Fatalf("%s: %v, want one %v", c.sql, stmts, c.kind)
		}
		rv := parse.ExplainTarget(stmts[0])
		if c.target == "" {
			if rv != nil || stmts[0].Node.GetExplainStmt() == nil {
				t.Errorf("%s: target %v, node %s; want PostgreSQL's ExplainStmt", c.sql, rv, nodeName(stmts[0].Stmt))
			}
			continue
		}
		if rv == nil || rv.Relname != c.target {
			t.Errorf("%s: target %v, want %s", c.sql, rv, c.target)
		}
	}
	if _, err := parse.ParseStrand("EXPLAIN MATERIALIZED VIEW"); err == nil {
		t.Error("EXPLAIN MATERIALIZED VIEW without a name parsed")
	}
}

// TestParseConnector: CREATE/ALTER/DROP CONNECTOR and SHOW CONNECTORS
// parse as PostgreSQL statements of their kind, the quoted keys read
// back as written (dots, case, past PostgreSQL's 63-byte identifiers),
// a connector's keyword in a string or a quoted name left alone.
func TestParseConnector(t *testing.T) {
	long := strings.Repeat("k.", 40) + "end"
	sql := "CREATE CONNECTOR inv WITH ('connector.class' = 'PostgresConnector', 'Database.Port' = 5432, \"tasks.max\" = '1', '" + long + "' = 'x');" +
		"create connector if not exists \"My-Conn\" with ('a' = 'it''s');" +
		"ALTER CONNECTOR inv SET ('database.password' = 'pw', 'topic.prefix' = NONE);" +
		"DROP CONNECTOR IF EXISTS inv, other; SHOW CONNECTORS;" +
		"SELECT 'create connector x WITH (''a'' = 1)'; CREATE COLLATION c (locale = 'C')"
	stmts, err := parse.ParseStrand(sql)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []parse.Kind{parse.KindConnector, parse.KindConnector, parse.KindConnector, parse.KindConnector, parse.KindConnector, parse.KindOther, parse.KindOther}
	nodes := []string{"DefineStmt", "DefineStmt", "AlterTypeStmt", "DropStmt", "VariableShowStmt", "SelectStmt", "DefineStmt"}
	if len(stmts) != len(kinds) {
		t.Fatalf("%d statements, want %d", len(stmts), len(kinds))
	}
	for i, s := range stmts {
		if s.Kind != kinds[i] || nodeName(s.Stmt) != nodes[i] {
			t.Errorf("statement %d (%q): %v %s, want %v %s", i, s.Text, s.Kind, nodeName(s.Stmt), kinds[i], nodes[i])
		}
	}
	keys := func(s parse.Statement, defs []*pg.Node) []string {
		var out []string
		for _, d := range defs {
			out = append(out, parse.OptionKey(s, d.GetDefElem()))
		}
		return out
	}
	def := stmts[0].Node.GetDefineStmt()
	if got, want := keys(stmts[0], def.Definition), []string{"connector.class", "Database.Port", "tasks.max", long}; !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	if def.IfNotExists || def.Defnames[0].GetString_().Sval != "inv" {
		t.Errorf("CREATE: %v", def)
	}
	def = stmts[1].Node.GetDefineStmt()
	if !def.IfNotExists || def.Defnames[0].GetString_().Sval != "My-Conn" || def.Definition[0].GetDefElem().Arg.GetString_().Sval != "it's" {
		t.Errorf("CREATE IF NOT EXISTS: %v", def)
	}
	alter := stmts[2].Node.GetAlterTypeStmt()
	if got := keys(stmts[2], alter.Options); !slices.Equal(got, []string{"database.password", "topic.prefix"}) || alter.Options[1].GetDefElem().Arg != nil {
		t.Errorf("ALTER: keys %q, %v", got, alter)
	}
	if d := stmts[3].Node.GetDropStmt(); !d.MissingOk || len(d.Objects) != 2 {
		t.Errorf("DROP: %v", d)
	}
	// A key that is no plain string is the grammar's to refuse, at the
	// key.
	_, err = parse.ParseStrand("CREATE CONNECTOR c WITH (E'a' = 'b')")
	var pe *parse.Error
	if !errors.As(err, &pe) || pe.Position != 26 {
		t.Errorf("E'a' as a key: %v", err)
	}
}
