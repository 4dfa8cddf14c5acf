package pgwire_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/xdg-go/scram"

	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// users is an Auth over SCRAM credentials made from passwords here, the
// way a SCRAM client salts them.
type users struct {
	method pgwire.AuthMethod
	creds  map[string]pgwire.Credential
}

func newUsers(t *testing.T, method pgwire.AuthMethod, passwords map[string]string) *users {
	u := &users{method: method, creds: map[string]pgwire.Credential{}}
	for user, pw := range passwords {
		cl, err := scram.SHA256.NewClient(user, pw, "")
		if err != nil {
			t.Fatal(err)
		}
		kf := scram.KeyFactors{Salt: "salt-of-" + user, Iters: 4096}
		sc := cl.GetStoredCredentials(kf)
		u.creds[user] = pgwire.Credential{Salt: []byte(kf.Salt), Iterations: kf.Iters, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}
	}
	return u
}

func (u *users) Method() (pgwire.AuthMethod, string) {
	return u.method, "no authentication is configured"
}
func (u *users) Credential(user string) (pgwire.Credential, bool, error) {
	c, ok := u.creds[user]
	return c, ok, nil
}

type server struct {
	addr string
	ca   *certstest.CA
}

// startServer serves cfg (Engine and Auth defaulted) on a loopback port.
func startServer(t *testing.T, cfg pgwire.Config, withTLS bool) server {
	t.Helper()
	var srv server
	if cfg.Engine == nil {
		cfg.Engine = engine.New(nil, "test")
	}
	if withTLS {
		srv.ca = certstest.NewCA(t, "sql")
		pair := srv.ca.Server(t, "server")
		s, err := certs.NewServer(certs.ServerFiles{CertFile: pair.CertFile, KeyFile: pair.KeyFile}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = s.Config()
	}
	s, err := pgwire.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	srv.addr = ln.Addr().String()
	return srv
}

func (s server) url(user, password, sslmode string) string {
	host, port, _ := net.SplitHostPort(s.addr)
	u := fmt.Sprintf("postgres://%s:%s@%s:%s/strand?sslmode=%s", user, password, host, port, sslmode)
	if s.ca != nil && sslmode == "verify-full" {
		u += "&sslrootcert=" + s.ca.CertFile
	}
	return u
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestSCRAMOverTLS(t *testing.T) {
	srv := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthSCRAM, map[string]string{"alice": "s3cret"})}, true)
	conn := connect(t, srv.url("alice", "s3cret", "verify-full"))
	if !conn.PgConn().Conn().(interface{ ConnectionState() tlsState }).ConnectionState().HandshakeComplete {
		t.Fatal("connection is not TLS")
	}
	var n int32
	var version string
	if err := conn.QueryRow(context.Background(), "SELECT 1 + 1, version()").Scan(&n, &version); err != nil {
		t.Fatal(err)
	}
	if n != 2 || !strings.Contains(version, "Strand") {
		t.Fatalf("got %d, %q", n, version)
	}
	for name, want := range map[string]string{
		"server_version": engine.ServerVersion, "client_encoding": "UTF8", "server_encoding": "UTF8",
		"DateStyle": "ISO, MDY", "integer_datetimes": "on", "standard_conforming_strings": "on",
		"TimeZone": "UTC", "session_authorization": "alice", "is_superuser": "off",
	} {
		if got := conn.PgConn().ParameterStatus(name); got != want {
			t.Errorf("ParameterStatus %s = %q, want %q", name, got, want)
		}
	}
}

func TestSCRAMFailures(t *testing.T) {
	srv := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthSCRAM, map[string]string{"alice": "s3cret"})}, true)
	for _, c := range []struct{ user, password string }{{"alice", "wrong"}, {"mallory", "s3cret"}} {
		_, err := pgx.Connect(context.Background(), srv.url(c.user, c.password, "require"))
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != pgwire.CodeInvalidPassword || pe.Message != fmt.Sprintf("password authentication failed for user %q", c.user) {
			t.Errorf("%s/%s: got %v, want 28P01 as PostgreSQL words it", c.user, c.password, err)
		}
	}
}

func TestTrustAndRefuse(t *testing.T) {
	trust := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthTrust, nil)}, false)
	conn := connect(t, trust.url("anyone", "", "disable"))
	var s string
	if err := conn.QueryRow(context.Background(), "SHOW session_authorization").Scan(&s); err != nil || s != "anyone" {
		t.Fatalf("got %q, %v", s, err)
	}
	refuse := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthRefuse, nil)}, false)
	_, err := pgx.Connect(context.Background(), refuse.url("anyone", "", "disable"))
	if pgCode(err) != pgwire.CodeInvalidAuthorization {
		t.Fatalf("got %v, want 28000", err)
	}
}

func TestQueries(t *testing.T) {
	srv := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthTrust, nil)}, false)
	conn := connect(t, srv.url("u", "", "disable"))
	ctx := context.Background()

	// Extended protocol, parameters typed by their casts, binary
	// formats (pgx sends int8 and receives int8/float8 in binary).
	var a int64
	var b string
	var f float64
	var isNull *int32
	if err := conn.QueryRow(ctx, "SELECT $1::int8 * 2, $2::text || '!', 1.5::float8 / 2, NULL::int4", int64(21), "hi").Scan(&a, &b, &f, &isNull); err != nil {
		t.Fatal(err)
	}
	if a != 42 || b != "hi!" || f != 0.75 || isNull != nil {
		t.Fatalf("got %d %q %v %v", a, b, f, isNull)
	}
	// The same in text format through the simple protocol.
	rows, err := conn.Query(ctx, "SELECT 7::int4, 'x', true, 2.50::numeric + 1", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(vals[:3]); got != "[7 x true]" {
		t.Fatalf("got %s", got)
	}
	// Text parameters into an untyped $1 (text).
	var echo string
	if err := conn.QueryRow(ctx, "SELECT $1", pgx.QueryExecModeExec, "42").Scan(&echo); err != nil || echo != "42" {
		t.Fatalf("got %q, %v", echo, err)
	}

	// SET reports a reported setting; SHOW reads it back.
	if _, err := conn.Exec(ctx, "SET application_name = 'strand-test'"); err != nil {
		t.Fatal(err)
	}
	if got := conn.PgConn().ParameterStatus("application_name"); got != "strand-test" {
		t.Fatalf("application_name status %q", got)
	}
	var app string
	if err := conn.QueryRow(ctx, "SHOW application_name").Scan(&app); err != nil || app != "strand-test" {
		t.Fatalf("SHOW: %q, %v", app, err)
	}

	// Transactions: status, and a failed block refusing until ROLLBACK.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if conn.PgConn().TxStatus() != 'T' {
		t.Fatalf("status %c in a block", conn.PgConn().TxStatus())
	}
	if _, err := tx.Exec(ctx, "SELECT 1/0"); pgCode(err) != pgwire.CodeDivisionByZero {
		t.Fatalf("got %v, want 22012", err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); pgCode(err) != pgwire.CodeInFailedSQLTransaction {
		t.Fatalf("got %v, want 25P02", err)
	}
	if err := tx.Rollback(ctx); err != nil || conn.PgConn().TxStatus() != 'I' {
		t.Fatalf("rollback: %v, status %c", err, conn.PgConn().TxStatus())
	}

	// Errors carry PostgreSQL's codes and the session goes on.
	for sql, code := range map[string]string{
		"SELEC 1":                           pgwire.CodeSyntaxError,
		"CREATE TABLE t (a int)":            pgwire.CodeFeatureNotSupported,
		"SELECT * FROM pg_catalog.pg_class": pgwire.CodeFeatureNotSupported,
		"SELECT * FROM orders":              pgwire.CodeUndefinedTable,
		"SELECT 2147483647 + 1":             pgwire.CodeNumericValueOutOfRange,
		"SELECT 'x'::int4":                  pgwire.CodeInvalidTextRepresentation,
		"SHOW no_such_setting":              pgwire.CodeUndefinedObject,
	} {
		if _, err := conn.Exec(ctx, sql); pgCode(err) != code {
			t.Errorf("%s: got %v, want %s", sql, err, code)
		}
	}
	// Several statements in one Query, and an empty one.
	if _, err := conn.PgConn().Exec(ctx, "SELECT 1; SET extra_float_digits = 3; SHOW extra_float_digits").ReadAll(); err != nil {
		t.Fatal(err)
	}
	// An empty query is answered with EmptyQueryResponse: one result
	// with no tag.
	if res, err := conn.PgConn().Exec(ctx, " ; ").ReadAll(); err != nil || len(res) != 1 || res[0].CommandTag.String() != "" {
		t.Fatalf("empty query: %v, %v", res, err)
	}
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPortalRowLimit drives the extended protocol by hand: Execute with
// a row limit suspends the portal, and the next Execute resumes it.
func TestPortalRowLimit(t *testing.T) {
	srv := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthTrust, nil)}, false)
	nc, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "u"}})
	fe.Flush()
	expect := func(want ...string) []pgproto3.BackendMessage {
		t.Helper()
		var got []pgproto3.BackendMessage
		for len(got) < len(want) {
			m, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.(*pgproto3.ParameterStatus); ok {
				continue
			}
			if name := fmt.Sprintf("%T", m)[len("*pgproto3."):]; name != want[len(got)] {
				t.Fatalf("message %d is %s (%+v), want %s", len(got), name, m, want[len(got)])
			}
			got = append(got, m)
		}
		return got
	}
	expect("AuthenticationOk", "BackendKeyData", "ReadyForQuery")
	fe.Send(&pgproto3.Parse{Name: "all", Query: "SHOW ALL"})
	fe.Send(&pgproto3.Bind{PreparedStatement: "all", DestinationPortal: "p"})
	fe.Send(&pgproto3.Execute{Portal: "p", MaxRows: 2})
	fe.Send(&pgproto3.Execute{Portal: "p", MaxRows: 2})
	fe.Send(&pgproto3.Execute{Portal: "p"})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	expect("ParseComplete", "BindComplete", "DataRow", "DataRow", "PortalSuspended", "DataRow", "DataRow", "PortalSuspended")
	var n int
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if cc, ok := m.(*pgproto3.CommandComplete); ok {
			if string(cc.CommandTag) != "SHOW" {
				t.Fatalf("tag %q", cc.CommandTag)
			}
			break
		}
		n++
	}
	if n < 5 {
		t.Fatalf("the rest of SHOW ALL was %d rows", n)
	}
	expect("ReadyForQuery")

	// After an error the server skips to Sync: the Execute is ignored.
	fe.Send(&pgproto3.Bind{PreparedStatement: "nope"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	msgs := expect("ErrorResponse", "ReadyForQuery")
	if e := msgs[0].(*pgproto3.ErrorResponse); e.Code != pgwire.CodeInvalidSQLStatementName {
		t.Fatalf("error %s %s", e.Code, e.Message)
	}
}

// started wraps an engine so a test learns when a statement runs.
type started struct {
	pgwire.Engine
	ch chan struct{}
}

func (e started) NewSession(ctx context.Context, info pgwire.SessionInfo) (pgwire.Session, error) {
	s, err := e.Engine.NewSession(ctx, info)
	return startedSession{s, e.ch}, err
}

type startedSession struct {
	pgwire.Session
	ch chan struct{}
}

func (s startedSession) Prepare(ctx context.Context, sql string, types []uint32) ([]pgwire.Statement, error) {
	sts, err := s.Session.Prepare(ctx, sql, types)
	for i := range sts {
		sts[i] = startedStatement{sts[i], s.ch}
	}
	return sts, err
}

type startedStatement struct {
	pgwire.Statement
	ch chan struct{}
}

func (s startedStatement) Start(ctx context.Context, args []any) (pgwire.Rows, error) {
	r, err := s.Statement.Start(ctx, args)
	s.ch <- struct{}{}
	return r, err
}

func TestCancel(t *testing.T) {
	ch := make(chan struct{}, 1)
	srv := startServer(t, pgwire.Config{Engine: started{engine.New(nil, ""), ch}, Auth: newUsers(t, pgwire.AuthTrust, nil)}, false)
	conn := connect(t, srv.url("u", "", "disable"))
	go func() {
		<-ch
		conn.PgConn().CancelRequest(context.Background())
	}()
	_, err := conn.Exec(context.Background(), "SELECT pg_sleep(3600)")
	if pgCode(err) != pgwire.CodeQueryCanceled {
		t.Fatalf("got %v, want 57014", err)
	}
	go func() { <-ch }()
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatalf("the session did not survive the cancel: %v", err)
	}
}

func TestLimits(t *testing.T) {
	srv := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthTrust, nil), MaxMessageBytes: 1024, MaxConnections: 1}, false)
	conn := connect(t, srv.url("u", "", "disable"))
	_, err := conn.Exec(context.Background(), "SELECT '"+strings.Repeat("x", 2000)+"'")
	if pgCode(err) != pgwire.CodeProtocolViolation {
		t.Fatalf("oversized message: got %v, want 08P01", err)
	}
	if !conn.IsClosed() && conn.Ping(context.Background()) == nil {
		t.Fatal("the connection stayed open after an oversized message")
	}
	conn.Close(context.Background())
	// The first connection's slot is freed once the server has seen it
	// close; hold one and ask for another.
	hold := connect(t, srv.url("u", "", "disable"))
	_, err = pgx.Connect(context.Background(), srv.url("u", "", "disable"))
	if pgCode(err) != pgwire.CodeTooManyConnections {
		t.Fatalf("second connection: got %v, want 53300", err)
	}
	hold.Close(context.Background())
}

// TestPsql runs Debian's psql against the server over TLS with SCRAM.
func TestPsql(t *testing.T) {
	psql, err := testproc.FindBinary("psql", "/usr/lib/postgresql/*/bin")
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	srv := startServer(t, pgwire.Config{Auth: newUsers(t, pgwire.AuthSCRAM, map[string]string{"alice": "s3cret"})}, true)
	host, port, _ := net.SplitHostPort(srv.addr)
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(psql, append([]string{"-X", "-A", "-t", "-v", "VERBOSITY=verbose",
			fmt.Sprintf("host=%s port=%s user=alice dbname=strand sslmode=require", host, port)}, args...)...)
		cmd.Env = append(os.Environ(), "PGPASSWORD=s3cret", "PGCONNECT_TIMEOUT=30")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	out, errOut, err := run("-c", "SELECT 1", "-c", "SHOW server_version", "-c", "SET application_name = 'p'; SHOW application_name")
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, errOut)
	}
	if want := "1\n" + engine.ServerVersion + "\nSET\np\n"; out != want {
		t.Fatalf("psql printed %q, want %q", out, want)
	}
	_, errOut, err = run("-c", "CREATE TABLE t (a int)")
	if err == nil || !strings.Contains(errOut, "0A000") {
		t.Fatalf("unsupported statement: %v, stderr %q; want 0A000", err, errOut)
	}
	_, errOut, err = run("-c", `\dt`)
	if err == nil || !strings.Contains(errOut, "0A000") {
		t.Fatalf(`\dt: %v, stderr %q; want 0A000 until the catalog exists`, err, errOut)
	}
}

type tlsState = tls.ConnectionState

// streamEngine's one statement streams the int8s sent on rows, waiting
// for each (a StreamingRows, as SUBSCRIBE's).
type streamEngine struct{ rows chan int64 }

func (e streamEngine) NewSession(context.Context, pgwire.SessionInfo) (pgwire.Session, error) {
	return streamSession(e), nil
}

type streamSession streamEngine

func (s streamSession) Prepare(context.Context, string, []uint32) ([]pgwire.Statement, error) {
	return []pgwire.Statement{streamStatement(s)}, nil
}
func (streamSession) TxStatus() byte { return 'I' }
func (streamSession) Fail()          {}
func (streamSession) Close()         {}

type streamStatement streamEngine

func (streamStatement) Params() []uint32 { return nil }
func (streamStatement) Columns() []pgwire.Column {
	return []pgwire.Column{{Name: "n", Type: pgtype.Int8OID, TypeSize: 8, TypeMod: -1}}
}
func (s streamStatement) Start(context.Context, []any) (pgwire.Rows, error) {
	return streamRows(s), nil
}

type streamRows streamEngine

func (r streamRows) Next(ctx context.Context) ([]any, bool, error) {
	select {
	case n := <-r.rows:
		return []any{n}, true, nil
	case <-ctx.Done():
		return nil, false, context.Cause(ctx)
	}
}
func (r streamRows) Ready() bool { return len(r.rows) > 0 }
func (streamRows) Tag() string   { return "STREAM" }
func (streamRows) Close()        {}

// TestStreamingRows: each row of a StreamingRows reaches the client
// while the statement waits for the next (a buffering wire layer would
// hold it until a buffer fills or the statement ends), and a
// CancelRequest ends the wait with 57014.
func TestStreamingRows(t *testing.T) {
	e := streamEngine{rows: make(chan int64)}
	srv := startServer(t, pgwire.Config{Engine: e, Auth: newUsers(t, pgwire.AuthTrust, nil)}, false)
	conn := connect(t, srv.url("u", "", "disable"))
	ctx := context.Background()
	got := make(chan int64)
	end := make(chan error, 1)
	go func() {
		rows, err := conn.Query(ctx, "stream")
		if err != nil {
			end <- err
			return
		}
		defer rows.Close()
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				end <- err
				return
			}
			got <- n
		}
		end <- rows.Err()
	}()
	for _, n := range []int64{7, 8, 9} {
		select {
		case e.rows <- n:
		case err := <-end:
			t.Fatalf("statement ended: %v", err)
		}
		select {
		case g := <-got:
			if g != n {
				t.Fatalf("got %d, want %d", g, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("row %d did not reach the client while the statement waits", n)
		}
	}
	if err := conn.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-end:
		if pgCode(err) != pgwire.CodeQueryCanceled {
			t.Fatalf("got %v, want 57014", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("canceled stream did not end")
	}
}

// panicking wraps an engine so a statement containing "boom" panics
// when it starts, as a planner bug would.
type panicking struct{ pgwire.Engine }

func (e panicking) NewSession(ctx context.Context, info pgwire.SessionInfo) (pgwire.Session, error) {
	s, err := e.Engine.NewSession(ctx, info)
	return panickingSession{s}, err
}

type panickingSession struct{ pgwire.Session }

func (s panickingSession) Prepare(ctx context.Context, sql string, types []uint32) ([]pgwire.Statement, error) {
	if strings.Contains(sql, "boom") {
		panic("boom in the planner")
	}
	return s.Session.Prepare(ctx, sql, types)
}

// TestStatementPanic checks that a statement whose handler panics fails
// with XX000, in the simple and the extended protocol, and that the
// session (and the server) go on.
func TestStatementPanic(t *testing.T) {
	srv := startServer(t, pgwire.Config{Engine: panicking{engine.New(nil, "")}, Auth: newUsers(t, pgwire.AuthTrust, nil)}, false)
	conn := connect(t, srv.url("u", "", "disable"))
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement} {
		// With an argument pgx sends Parse in the extended modes
		// (the panic comes at Parse) and an interpolated Query in the
		// simple one.
		_, err := conn.Exec(ctx, "SELECT 'boom' WHERE $1::int = 1", mode, 1)
		if pgCode(err) != pgwire.CodeInternalError {
			t.Fatalf("mode %v: got %v, want XX000", mode, err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT 41 + 1", mode).Scan(&n); err != nil || n != 42 {
			t.Fatalf("mode %v: the session did not survive the panic: %d, %v", mode, n, err)
		}
	}
	other := connect(t, srv.url("u", "", "disable"))
	if err := other.Ping(ctx); err != nil {
		t.Fatalf("the server did not survive the panic: %v", err)
	}
}
