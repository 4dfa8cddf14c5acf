package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/sql/catalog"
	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// trust lets every user in: the tests are about what users may do once
// in, not how they get in.
type trust struct{}

func (trust) Method() (pgwire.AuthMethod, string) { return pgwire.AuthTrust, "" }
func (trust) Credential(string) (pgwire.Credential, bool, error) {
	return pgwire.Credential{}, false, nil
}

// server is a SQL endpoint over a metadata database with topics orders
// and out, at level.
type server struct {
	db   *metatest.DB
	addr string
}

// leveled is a store that, like the agent's replica, refuses a command
// the log's metadata level does not write (metatest.DB writes any).
type leveled struct{ *metatest.DB }

func (l leveled) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	v := l.View()
	f, err := v.Features()
	v.Close()
	if err != nil {
		return meta.Result{}, err
	}
	if _, err := meta.EncodeCommandAt(c, f.MetadataLevel()); err != nil {
		return meta.Result{}, err
	}
	return l.DB.Propose(ctx, c)
}

func startServer(t *testing.T, level int16, authorize catalog.Authorize) server {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: level}}})
	for _, topic := range []string{"orders", "out"} {
		db.MustPropose(t, meta.CreateTopic{Name: topic, Partitions: 1})
	}
	cat, err := catalog.New(catalog.Config{Store: leveled{db}, Authorize: authorize, Next: engine.New(nil, "")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := pgwire.NewServer(pgwire.Config{Engine: cat, Auth: trust{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return server{db: db, addr: ln.Addr().String()}
}

func (s server) connect(t *testing.T, user string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@%s/strand?sslmode=disable", user, s.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// exec runs sql (simple protocol, as psql sends) and returns the tag or
// the error's SQLSTATE.
func exec(t *testing.T, conn *pgx.Conn, sql string) (string, *pgconn.PgError) {
	t.Helper()
	tag, err := conn.Exec(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		return tag.String(), nil
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: %v, want a PostgreSQL error or none", sql, err)
	}
	return "", pe
}

func mustExec(t *testing.T, conn *pgx.Conn, sql, wantTag string) {
	t.Helper()
	if tag, pe := exec(t, conn, sql); pe != nil || tag != wantTag {
		t.Fatalf("%s: tag %q, %v; want %q", sql, tag, pe, wantTag)
	}
}

func wantCode(t *testing.T, conn *pgx.Conn, sql, code string) *pgconn.PgError {
	t.Helper()
	_, pe := exec(t, conn, sql)
	if pe == nil || pe.Code != code {
		t.Fatalf("%s: %v, want SQLSTATE %s", sql, pe, code)
	}
	return pe
}

// TestDDL: definitions go into the catalog as the metadata holds them
// (read back through a View, apart from the endpoint), and every bad one
// is refused with PostgreSQL's SQLSTATE, changing nothing.
func TestDDL(t *testing.T) {
	s := startServer(t, meta.MetadataLevel7, nil)
	conn := s.connect(t, "alice")
	src := "CREATE SOURCE orders (id int8, amount numeric(10,2), note varchar(20), _key text, _partition int4, _offset int8, _timestamp timestamptz, _headers jsonb) WITH (topic = 'orders', FORMAT = JSON)"
	mustExec(t, conn, src, "CREATE SOURCE")
	mustExec(t, conn, "CREATE MATERIALIZED VIEW totals AS WITH big AS (SELECT * FROM orders WHERE amount > 10) SELECT count(*) AS n FROM big JOIN public.orders o USING (id)", "CREATE MATERIALIZED VIEW")
	mustExec(t, conn, "CREATE SINK totals_out WITH (topic = 'out', format = 'json', envelope = 'upsert') AS SELECT n FROM totals", "CREATE SINK")

	v := s.db.View()
	rels, err := v.Relations()
	v.Close()
	if err != nil || len(rels) != 3 {
		t.Fatalf("Relations = %+v, %v", rels, err)
	}
	o, tot, sink := rels[0], rels[1], rels[2]
	wantCols := []meta.RelationColumn{{Name: "id", Type: 20, TypeMod: -1}, {Name: "amount", Type: 1700, TypeMod: 10<<16 | 2 + 4}, {Name: "note", Type: 1043, TypeMod: 24},
		{Name: "_key", Type: 25, TypeMod: -1}, {Name: "_partition", Type: 23, TypeMod: -1}, {Name: "_offset", Type: 20, TypeMod: -1},
		{Name: "_timestamp", Type: 1184, TypeMod: -1}, {Name: "_headers", Type: 3802, TypeMod: -1}}
	if o.Name != "orders" || o.Kind != meta.RelationSource || o.Topic != "orders" || o.Format != "json" || o.SQL != src || o.Owner != "User:alice" ||
		!slices.Equal(o.Columns, wantCols) || !slices.Equal(o.Options, []meta.RelationOption{{Key: "format", Value: "json"}, {Key: "topic", Value: "orders"}}) {
		t.Errorf("source: %+v", o)
	}
	// The CTE is not a relation; orders read twice is one dependency.
	if tot.Name != "totals" || tot.Kind != meta.RelationView || !slices.Equal(tot.DependsOn, []uint64{o.ID}) ||
		tot.Query != "WITH big AS (SELECT * FROM orders WHERE amount > 10) SELECT count(*) AS n FROM big JOIN public.orders o USING (id)" {
		t.Errorf("view: %+v", tot)
	}
	if sink.Name != "totals_out" || sink.Kind != meta.RelationSink || sink.Topic != "out" || !slices.Equal(sink.DependsOn, []uint64{tot.ID}) || sink.Query != "SELECT n FROM totals" {
		t.Errorf("sink: %+v", sink)
	}

	for _, c := range []struct {
		sql, code string
		near      string // what the error position points at
	}{
		{"CREATE SOURCE orders (a text) WITH (topic = 'orders', format = 'text')", "42P07", ""},
		{"CREATE MATERIALIZED VIEW orders AS SELECT 1", "42P07", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'nope', format = 'text')", "42704", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'xml')", "22023", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders')", "42P17", ""},
		{"CREATE SOURCE s (a text) WITH (format = 'text')", "42P17", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'text', colour = 'red')", "22023", "colour"},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'text', envelope = 'sideways')", "22023", ""},
		{"CREATE SOURCE s (a timestamptz) WITH (topic = 'orders', format = 'json', watermark.column = 'b')", "42703", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'json', watermark.column = 'a')", "42804", ""},
		{"CREATE SOURCE s (a timestamptz) WITH (topic = 'orders', format = 'json', watermark.column = 'a', watermark.delay = '1 month')", "22023", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'json', bad.records = 'dead-letter')", "42P17", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'json', bad.records = 'dead-letter', deadletter.topic = 'nope')", "42704", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'json', scan.startup = 'middle')", "22023", ""},
		{"CREATE SOURCE s (a money) WITH (topic = 'orders', format = 'json')", "42704", "money"},
		{"CREATE SOURCE s (a int4, _offset text) WITH (topic = 'orders', format = 'json')", "42804", "_offset"},
		{"CREATE SOURCE s (a int4, _key int4) WITH (topic = 'orders', format = 'json')", "42804", "_key"},
		{"CREATE SOURCE s (a int4 NOT NULL) WITH (topic = 'orders', format = 'json')", "0A000", "a int4"},
		{"CREATE SOURCE s (a int4[]) WITH (topic = 'orders', format = 'json')", "0A000", ""},
		{"CREATE SOURCE s (a int4, b int4) WITH (topic = 'orders', format = 'text')", "42P17", ""},
		{"CREATE SOURCE s (a text) WITH (topic = 'orders', format = 'avro')", "42704", ""},
		{"CREATE SOURCE s (a varchar(0)) WITH (topic = 'orders', format = 'json')", "22023", ""},
		{"CREATE SOURCE other.s (a text) WITH (topic = 'orders', format = 'text')", "3F000", "other"},
		{"CREATE SOURCE s (a text,) WITH (topic = 'orders', format = 'text')", "42601", ")"},
		{"CREATE MATERIALIZED VIEW v AS SELECT * FROM nope", "42P01", "nope"},
		{"CREATE MATERIALIZED VIEW v AS SELECT * FROM totals_out", "42809", "totals_out"},
		{"CREATE MATERIALIZED VIEW v AS SELECT * FROM pg_catalog.pg_class", "42P01", "pg_catalog"},
		// What the dataflow cannot keep is refused at CREATE, not left
		// to fail in every agent's runner.
		{"CREATE MATERIALIZED VIEW v AS SELECT id FROM orders LIMIT 3", "0A000", ""},
		{"CREATE MATERIALIZED VIEW v AS SELECT id, rank() OVER (ORDER BY id) FROM orders", "0A000", ""},
		{"CREATE SINK k WITH (topic = 'out', format = 'avro') AS SELECT * FROM orders", "22023", ""},
		{"CREATE SINK k WITH (topic = 'nope', format = 'json') AS SELECT * FROM orders", "42704", ""},
		{"CREATE TABLE t (a int)", "0A000", ""},
		{"CREATE VIEW w AS SELECT 1", "0A000", ""},
		{"DROP SOURCE nope", "42P01", ""},
		{"DROP SOURCE totals", "42809", ""},
		{"DROP SOURCE orders", "2BP01", ""},
		{"DROP MATERIALIZED VIEW totals", "2BP01", ""},
		{"SELECT * FROM totals", "0A000", ""},
		{"SUBSCRIBE TO totals", "0A000", ""},
		{"SUBSCRIBE TO nope", "42P01", "nope"},
		// A source has no changes to stream: only views are subscribed to.
		{"SUBSCRIBE TO orders", "42809", "orders"},
		{"SUBSCRIBE TO totals_out", "42809", ""},
		{"SELECT * FROM totals_out", "42809", ""},
	} {
		pe := wantCode(t, conn, c.sql, c.code)
		if c.near != "" && (pe.Position < 1 || !strings.HasPrefix(c.sql[pe.Position-1:], c.near)) {
			t.Errorf("%s: position %d, want it at %q", c.sql, pe.Position, c.near)
		}
	}
	v = s.db.View()
	after, err := v.Relations()
	v.Close()
	if err != nil || len(after) != 3 {
		t.Fatalf("refusals changed the catalog: %+v, %v", after, err)
	}

	// IF [NOT] EXISTS: a notice, no error.
	var notices []string
	cfg := conn.Config().Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Code+" "+n.Message) }
	nconn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nconn.Close(context.Background())
	mustExec(t, nconn, "CREATE SOURCE IF NOT EXISTS orders (a text) WITH (topic = 'orders', format = 'text')", "CREATE SOURCE")
	mustExec(t, nconn, "DROP SINK IF EXISTS nope, totals_out", "DROP SINK")
	if !slices.Equal(notices, []string{`42P07 relation "orders" already exists, skipping`, `42P01 sink "nope" does not exist, skipping`}) {
		t.Errorf("notices: %q", notices)
	}
	mustExec(t, nconn, "DROP SOURCE orders CASCADE", "DROP SOURCE")
	v = s.db.View()
	after, err = v.Relations()
	v.Close()
	if err != nil || len(after) != 0 {
		t.Fatalf("after DROP ... CASCADE: %+v, %v", after, err)
	}
}

// TestSourceOptions: a source's reading options, written as PostgreSQL's
// grammar reads a one-dot name (namespace.name), stored as package
// source reads them: lower-case names, closed values lower case.
func TestSourceOptions(t *testing.T) {
	s := startServer(t, meta.MetadataLevel7, nil)
	conn := s.connect(t, "alice")
	mustExec(t, conn, "CREATE SOURCE clicks (at timestamptz, n int4) WITH (topic = 'orders', format = 'json', envelope = 'UPSERT', Bad.Records = 'Dead-Letter', deadletter.topic = 'out', watermark.column = 'at', watermark.delay = '5 seconds', scan.startup = 'latest')", "CREATE SOURCE")
	v := s.db.View()
	defer v.Close()
	rel, ok, err := v.Relation("clicks")
	if err != nil || !ok {
		t.Fatalf("clicks: %v %v", ok, err)
	}
	want := []meta.RelationOption{{Key: "bad.records", Value: "dead-letter"}, {Key: "deadletter.topic", Value: "out"}, {Key: "envelope", Value: "upsert"},
		{Key: "format", Value: "json"}, {Key: "scan.startup", Value: "latest"}, {Key: "topic", Value: "orders"},
		{Key: "watermark.column", Value: "at"}, {Key: "watermark.delay", Value: "5 seconds"}}
	if !slices.Equal(rel.Options, want) {
		t.Fatalf("options %v\nwant %v", rel.Options, want)
	}
}

// TestColumnTypesMatchPostgres: the OIDs and type modifiers a source
// stores for its columns are the ones PostgreSQL stores for a table of
// the same columns (pg_attribute).
func TestColumnTypesMatchPostgres(t *testing.T) {
	cols := "a int, b integer, c bigint, d smallint, e boolean, f real, g double precision, h numeric, i numeric(12), j decimal(7,3), " +
		"k text, l varchar, m varchar(40), n character varying(3), o char, p char(5), q bytea, r date, s time, tt timestamp, " +
		"u timestamp(3), v timestamptz, w timestamp(0) with time zone, x interval, y uuid, z json, zz jsonb, _key bytea"
	ctx := context.Background()
	pgc, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pgc.Close(ctx)
	table := "strand_types_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	if _, err := pgc.Exec(ctx, "DROP TABLE IF EXISTS "+table+"; CREATE TABLE "+table+" ("+cols+")"); err != nil {
		t.Fatal(err)
	}
	prows, err := pgc.Query(ctx, "SELECT attname, atttypid, atttypmod FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 ORDER BY attnum", table)
	if err != nil {
		t.Fatal(err)
	}
	var want []meta.RelationColumn
	for prows.Next() {
		var c meta.RelationColumn
		if err := prows.Scan(&c.Name, &c.Type, &c.TypeMod); err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
	}
	if prows.Err() != nil || len(want) != 28 {
		t.Fatalf("PostgreSQL's columns: %v, %v", want, prows.Err())
	}

	s := startServer(t, meta.MetadataLevel7, nil)
	mustExec(t, s.connect(t, "alice"), "CREATE SOURCE s ("+cols+") WITH (topic = 'orders', format = 'json')", "CREATE SOURCE")
	v := s.db.View()
	defer v.Close()
	rel, ok, err := v.Relation("s")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !slices.Equal(rel.Columns, want) {
		t.Fatalf("columns\n%v\nPostgreSQL has\n%v", rel.Columns, want)
	}
}

// TestACLMatrix: who may do what, per package acl's doc, decided by an
// authorizer over bindings.
func TestACLMatrix(t *testing.T) {
	b := func(typ acl.ResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op acl.Operation) acl.Binding {
		return acl.Binding{ResourceType: typ, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	}
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	rel, topic := acl.ResourceTypeRelation, kmsg.ACLResourceTypeTopic
	az := acl.New(acl.Config{SuperUsers: []auth.Principal{auth.User("admin")}}, []acl.Binding{
		// alice creates on the cluster and reads the topic orders.
		b(kmsg.ACLResourceTypeCluster, acl.ClusterName, lit, "User:alice", kmsg.ACLOperationCreate),
		b(topic, "orders", lit, "User:alice", kmsg.ACLOperationRead),
		// bob creates relations named bob_*, reads and drops them,
		// reads the topic orders, writes no topic.
		b(rel, "bob_", pre, "User:bob", kmsg.ACLOperationCreate),
		b(rel, "bob_", pre, "User:bob", kmsg.ACLOperationRead),
		b(rel, "bob_", pre, "User:bob", kmsg.ACLOperationDelete),
		b(topic, "orders", lit, "User:bob", kmsg.ACLOperationRead),
		// carol may create anything but read no topic; she may read the
		// relation src.
		b(rel, "*", lit, "User:carol", kmsg.ACLOperationCreate),
		b(rel, "src", lit, "User:carol", kmsg.ACLOperationRead),
		b(topic, "out", lit, "User:carol", kmsg.ACLOperationWrite),
	})
	s := startServer(t, meta.MetadataLevel7, func(r acl.Request, op acl.Operation, typ acl.ResourceType, name string) (bool, error) {
		return az.Authorize(r, op, typ, name), nil
	})
	admin := s.connect(t, "admin")
	mustExec(t, admin, "CREATE SOURCE src (v text) WITH (topic = 'orders', format = 'text')", "CREATE SOURCE")
	mustExec(t, admin, "CREATE MATERIALIZED VIEW bob_v AS SELECT v FROM src", "CREATE MATERIALIZED VIEW")
	alice, bob, carol := s.connect(t, "alice"), s.connect(t, "bob"), s.connect(t, "carol")
	for _, c := range []struct {
		who  *pgx.Conn
		name string
		sql  string
		code string // "" for success
	}{
		{alice, "alice: CREATE on the cluster and READ on the topic", "CREATE SOURCE a1 (v text) WITH (topic = 'orders', format = 'text')", ""},
		{alice, "alice: no READ on the topic", "CREATE SOURCE a2 (v text) WITH (topic = 'out', format = 'text')", "42501"},
		{alice, "alice: a view over src needs READ on src", "CREATE MATERIALIZED VIEW a3 AS SELECT * FROM src", "42501"},
		{alice, "alice: no READ on src", "SELECT * FROM src", "42501"},
		{alice, "alice: no DELETE on a1, not even her own", "DROP SOURCE a1", "42501"},
		{alice, "alice: EXPLAIN needs DESCRIBE on src", "EXPLAIN src", "42501"},
		{alice, "alice: EXPLAIN SELECT needs READ on src", "EXPLAIN SELECT * FROM src", "42501"},
		{alice, "alice: an EXPLAIN of nothing", "EXPLAIN nothing_here", "42P01"},
		{carol, "carol: READ on src implies DESCRIBE", "EXPLAIN src", ""},
		// Past the ACL, to an engine given no relations in this test.
		{carol, "carol: READ on src", "EXPLAIN SELECT v FROM src WHERE v > 'a' ORDER BY v", "42P01"},
		{bob, "bob: EXPLAIN of a view needs the views' runner", "EXPLAIN MATERIALIZED VIEW bob_v", "0A000"},
		{bob, "bob: CREATE on bob_ and READ on the topic", "CREATE SOURCE bob_s (v text) WITH (topic = 'orders', format = 'text')", ""},
		{bob, "bob: no CREATE outside bob_", "CREATE SOURCE s2 (v text) WITH (topic = 'orders', format = 'text')", "42501"},
		{bob, "bob: READ on bob_v, which is not maintained yet", "SELECT * FROM bob_v", "0A000"},
		{bob, "bob: SUBSCRIBE needs READ too", "SUBSCRIBE bob_v", "0A000"},
		{bob, "bob: no READ on src", "SUBSCRIBE src", "42501"},
		{bob, "bob: a sink needs WRITE on its topic", "CREATE SINK bob_k WITH (topic = 'out', format = 'json') AS SELECT * FROM bob_s", "42501"},
		{bob, "bob: DELETE on bob_s", "DROP SOURCE bob_s", ""},
		{carol, "carol: CREATE but no READ on the topic", "CREATE SOURCE c1 (v text) WITH (topic = 'orders', format = 'text')", "42501"},
		{carol, "carol: a view over src", "CREATE MATERIALIZED VIEW c2 AS SELECT * FROM src", ""},
		{carol, "carol: a sink into out", "CREATE SINK c3 WITH (topic = 'out', format = 'json') AS SELECT * FROM src", ""},
		{carol, "carol: no DELETE", "DROP SINK c3", "42501"},
		{bob, "bob: DELETE on bob_v, which nothing reads", "DROP MATERIALIZED VIEW bob_v", ""},
	} {
		tag, pe := exec(t, c.who, c.sql)
		switch {
		case c.code == "" && pe != nil:
			t.Errorf("%s: %v, want success", c.name, pe)
		case c.code != "" && (pe == nil || pe.Code != c.code):
			t.Errorf("%s: tag %q, %v; want %s", c.name, tag, pe, c.code)
		}
	}
	// SHOW lists what the caller may describe: bob sees no source
	// (bob_s is dropped, src is not his), carol src.
	showNames := func(conn *pgx.Conn, sql string) []string {
		t.Helper()
		rows, err := conn.Query(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, vals[0].(string))
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return names
	}
	if got := showNames(bob, "SHOW SOURCES"); len(got) != 0 {
		t.Errorf("bob's SHOW SOURCES: %v", got)
	}
	if got := showNames(carol, "SHOW SOURCES"); !slices.Equal(got, []string{"src"}) {
		t.Errorf("carol's SHOW SOURCES: %v", got)
	}
	if got := showNames(admin, "SHOW SOURCES"); !slices.Equal(got, []string{"a1", "src"}) {
		t.Errorf("admin's SHOW SOURCES: %v", got)
	}
	if got := showNames(admin, "SHOW MATERIALIZED VIEWS"); !slices.Equal(got, []string{"c2"}) {
		t.Errorf("admin's SHOW MATERIALIZED VIEWS: %v", got)
	}
}

// TestBelowLevel7: a log that has not raised strand.metadata.version to
// 7 takes no catalog command, and says what to raise.
func TestBelowLevel7(t *testing.T) {
	s := startServer(t, meta.MetadataLevel6, nil)
	pe := wantCode(t, s.connect(t, "alice"), "CREATE SOURCE s (v text) WITH (topic = 'orders', format = 'text')", "55000")
	if !strings.Contains(pe.Hint, "strand.metadata.version=7") {
		t.Fatalf("hint %q does not say what to raise", pe.Hint)
	}
}

// TestStatementsAround: the catalog's statements beside the next
// engine's in one text, transaction blocks, and error positions in a
// later statement counted from the text's start.
func TestStatementsAround(t *testing.T) {
	s := startServer(t, meta.MetadataLevel7, nil)
	conn := s.connect(t, "alice")
	ctx := context.Background()
	rs, err := conn.Exec(ctx, "SET application_name = 'x'; CREATE SOURCE s (v text) WITH (topic = 'orders', format = 'text'); SELECT 1", pgx.QueryExecModeSimpleProtocol)
	if err != nil || rs.String() != "SELECT 1" {
		t.Fatalf("mixed text: %q, %v", rs, err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT 40 + $1::int4", 2).Scan(&n); err != nil || n != 42 {
		t.Fatalf("the next engine's statement: %d, %v", n, err)
	}
	sql := "SELECT 1; CREATE MATERIALIZED VIEW v AS SELECT * FROM nope"
	pe := wantCode(t, conn, sql, "42P01")
	if !strings.HasPrefix(sql[pe.Position-1:], "nope") {
		t.Fatalf("position %d in %q, want it at nope", pe.Position, sql)
	}
	mustExec(t, conn, "BEGIN", "BEGIN")
	wantCode(t, conn, "CREATE SOURCE t (v text) WITH (topic = 'orders', format = 'text')", "25001")
	wantCode(t, conn, "SHOW SOURCES", "25P02")
	mustExec(t, conn, "ROLLBACK", "ROLLBACK")
	// The extended protocol: prepared, described, run.
	rows, err := conn.Query(ctx, "SHOW SOURCES")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Topic, Format, Owner string }])
	if err != nil || len(vals) != 1 || vals[0].Name != "s" || vals[0].Topic != "orders" || vals[0].Format != "text" || vals[0].Owner != "User:alice" {
		t.Fatalf("SHOW SOURCES: %+v, %v", vals, err)
	}
}
