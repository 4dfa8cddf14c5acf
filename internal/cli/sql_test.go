package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs/certstest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// everyType is a query with a column of each common type, NULLs among
// them, and text holding what output formats must escape.
const everyType = `SELECT * FROM (VALUES
  (1::int2, 2::int4, 3000000000::int8, 1.5::float4, -2.25::float8, 12345.678::numeric,
   'plain'::text, 'vc'::varchar(5), true, DATE '2024-02-29', TIMESTAMP '2024-02-29 12:34:56.789',
   TIMESTAMPTZ '2024-02-29 12:34:56+02', INTERVAL '1 day 02:03:04', '6f1c4a36-0d8b-4c4e-9c55-8f0e4f6b1a2c'::uuid,
   '{"a": [1, 2]}'::json, '{"b": null}'::jsonb, '\x00ff'::bytea, ARRAY[1, NULL, 3], 'NaN'::float8, 'Infinity'::numeric),
  (NULL, NULL, NULL, NULL, NULL, NULL,
   'a,b "quoted"; ünïcödé', '', false, NULL, NULL,
   NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL)
) AS t(i2, i4, i8, f4, f8, num, txt, vc, b, d, ts, tstz, iv, id, js, jsb, bin, arr, fnan, ninf)`

// runSQLCmd runs `strand sql ARGS` in-process with stdin.
func runSQLCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	root := &cobra.Command{Use: "strand", SilenceUsage: true, SilenceErrors: true}
	AddCommands(root)
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"sql"}, args...))
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("strand sql %s: hit the %v deadlock guard", strings.Join(args, " "), commandDeadline)
	}
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// psql runs Debian's psql, the oracle for the text format and errors;
// the test skips without it, and fails under CI=true.
func psql(t *testing.T, url string, args ...string) (stdout, stderr string) {
	t.Helper()
	bin, err := testproc.FindBinary("psql", "/usr/lib/postgresql/*/bin")
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"-X", "--no-password", "-d", url}, args...)...)
	// The session must be strand sql's: no PGTZ or PGOPTIONS of the
	// caller's changing what the server prints.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run() // a failing statement is the point of some calls
	return out.String(), errOut.String()
}

func pgConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestSQLTextMatchesPsql: the aligned table of every type, NULLs and
// several results of one -e are what psql prints for the same text.
func TestSQLTextMatchesPsql(t *testing.T) {
	url := pgtest.URL(t)
	for _, q := range []string{
		everyType,
		"SELECT 1 AS one",
		"SELECT 'x' AS a_long_column_name, 12 AS n UNION ALL SELECT 'a much longer value', 123456",
		"SELECT 1 WHERE false",
		"SELECT 1 AS a; SELECT 'b' AS b, NULL::int AS c",
		"SET search_path = public",
		// More rows than the text format holds to align them: the rest
		// stream in the widths measured.
		fmt.Sprintf("SELECT n, 'row ' || n AS label FROM generate_series(1, %d) n", maxAlignedRows+5),
		"SELECT E'one\\ntwo' AS a, 10 AS n, E'x\\ny\\nlonger z' AS last UNION ALL SELECT 'p', 2, 'q'",
	} {
		want, _ := psql(t, url, "-c", q)
		got := runSQLCmd(t, "", "--url", url, "-e", q)
		if got.err != nil {
			t.Fatalf("%s: %v\n%s", q, got.err, got.stderr)
		}
		if got.stdout != want {
			t.Errorf("strand sql -e %q:\n%s\npsql -c:\n%s", q, got.stdout, want)
		}
	}
	// --null as psql's \pset null.
	want, _ := psql(t, url, "-P", "null=(null)", "-c", everyType)
	if got := runSQLCmd(t, "", "--url", url, "--null", "(null)", "-e", everyType); got.stdout != want {
		t.Errorf("--null (null):\n%s\npsql -P null=(null):\n%s", got.stdout, want)
	}
}

// TestSQLCSVMatchesCopy: --format csv holds the records PostgreSQL's
// own COPY ... (FORMAT csv, HEADER) writes.
func TestSQLCSVMatchesCopy(t *testing.T) {
	url := pgtest.URL(t)
	conn := pgConnect(t, url)
	var buf bytes.Buffer
	if _, err := conn.PgConn().CopyTo(t.Context(), &buf, "COPY ("+everyType+") TO STDOUT WITH (FORMAT csv, HEADER, NULL 'NULL')"); err != nil {
		t.Fatal(err)
	}
	want, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := runSQLCmd(t, "", "--url", url, "--format", "csv", "--null", "NULL", "-e", everyType)
	if got.err != nil {
		t.Fatalf("%v\n%s", got.err, got.stderr)
	}
	records, err := csv.NewReader(strings.NewReader(got.stdout)).ReadAll()
	if err != nil {
		t.Fatalf("output is not CSV: %v\n%s", err, got.stdout)
	}
	if !slices.EqualFunc(records, want, slices.Equal) {
		t.Fatalf("csv:\n%q\nCOPY:\n%q", records, want)
	}
}

// TestSQLJSON: --format json has each row as an object of its columns,
// with the values PostgreSQL's to_json gives numbers, booleans, text
// and json, and the text of the rest (what ::text gives).
func TestSQLJSON(t *testing.T) {
	url := pgtest.URL(t)
	conn := pgConnect(t, url)
	got := runSQLCmd(t, "", "--url", url, "--format", "json", "-e", everyType)
	if got.err != nil {
		t.Fatalf("%v\n%s", got.err, got.stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(got.stdout), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, got.stdout)
	}
	// The oracle: to_json of the types JSON has, ::text of the others
	// (to_json writes timestamps in ISO 8601, psql their text).
	var oracle string
	if err := conn.QueryRow(t.Context(), `SELECT json_agg(json_build_object(
	  'i2', i2, 'i4', i4, 'i8', i8, 'f4', f4, 'f8', f8, 'num', num, 'txt', txt, 'vc', vc, 'b', b,
	  'd', d::text, 'ts', ts::text, 'tstz', tstz::text, 'iv', iv::text, 'id', id::text, 'js', js, 'jsb', jsb,
	  'bin', bin::text, 'arr', arr::text, 'fnan', fnan::text, 'ninf', ninf::text)) FROM (`+everyType+`) q`).Scan(&oracle); err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	if err := json.Unmarshal([]byte(oracle), &want); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), got.stdout)
	}
	for i := range want {
		g, _ := json.Marshal(rows[i])
		w, _ := json.Marshal(want[i])
		if !bytes.Equal(g, w) {
			t.Errorf("row %d:\n got %s\nwant %s", i, g, w)
		}
	}
	// Key order is the columns' order, not json's sorted one.
	if i, j := strings.Index(got.stdout, `"i2"`), strings.Index(got.stdout, `"arr"`); i < 0 || j < i {
		t.Errorf("keys out of column order:\n%s", got.stdout)
	}
}

// TestSQLErrors: an error prints as psql's, with the SQLSTATE the
// server sent, and fails the command.
func TestSQLErrors(t *testing.T) {
	url := pgtest.URL(t)
	conn := pgConnect(t, url)
	for _, q := range []string{
		"SELEC 1",
		"SELECT 1,\n  nosuchcolumn FROM (SELECT 1) t",
		"SELECT 1/0",
		"SELECT 'ünï' || nosuch",
	} {
		_, pgErr := conn.Exec(t.Context(), q)
		var pe *pgconn.PgError
		if !errors.As(pgErr, &pe) {
			t.Fatalf("%q: PostgreSQL gave %v, want an error", q, pgErr)
		}
		_, want := psql(t, url, "-c", q)
		// psql's default verbosity leaves the SQLSTATE out; strand sql
		// puts it before the message as psql's verbose one does.
		want = strings.Replace(want, "ERROR:  ", "ERROR:  "+pe.Code+": ", 1)
		got := runSQLCmd(t, "", "--url", url, "-e", q)
		if !errors.Is(got.err, ErrSQLFailed) {
			t.Errorf("%q: err %v, want ErrSQLFailed", q, got.err)
		}
		if got.stderr != want {
			t.Errorf("%q: stderr\n%s\nwant (psql's)\n%s", q, got.stderr, want)
		}
	}
}

// TestSQLScript: -f splits at ';' outside strings, comments and dollar
// quotes, and --on-error decides whether a failed statement ends it;
// the table the script fills is the oracle.
func TestSQLScript(t *testing.T) {
	url := pgtest.URL(t)
	conn := pgConnect(t, url)
	script := func(table string) string {
		return fmt.Sprintf(`CREATE TABLE %[1]s (n int, v text); -- a comment; with a ';'
INSERT INTO %[1]s VALUES (1, 'a;b'), (2, $$c;
d$$);
/* block; comment */ INSERT INTO %[1]s VALUES (3, E'it''s; \x41');
INSERT INTO %[1]s VALUES ('not a number', 'x');
INSERT INTO %[1]s VALUES (5, $tag$ $$; $tag$);
`, table)
	}
	contents := func(table string) []string {
		rows, err := conn.Query(t.Context(), "SELECT n || '=' || v FROM "+table+" ORDER BY n")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := []string{"1=a;b", "2=c;\nd", "3=it's; A"}
	for _, tc := range []struct {
		onError string
		want    []string
	}{
		{"stop", first},
		{"continue", append(slices.Clone(first), "5= $$; ")},
	} {
		table := "script_" + tc.onError
		file := filepath.Join(t.TempDir(), "script.sql")
		if err := os.WriteFile(file, []byte(script(table)), 0o600); err != nil {
			t.Fatal(err)
		}
		got := runSQLCmd(t, "", "--url", url, "-f", file, "--on-error", tc.onError)
		if !errors.Is(got.err, ErrSQLFailed) || !strings.Contains(got.stderr, "ERROR:  22P02: invalid input syntax for type integer") {
			t.Errorf("--on-error %s: err %v, stderr %q; want ErrSQLFailed and 22P02", tc.onError, got.err, got.stderr)
		}
		if rows := contents(table); !slices.Equal(rows, tc.want) {
			t.Errorf("--on-error %s: table holds %q, want %q", tc.onError, rows, tc.want)
		}
	}
	// From stdin (-f - and no terminal), a clean script exits zero and
	// prints what psql -f prints for it.
	const clean = "SELECT ';' AS s; -- done;\nSELECT 2 AS n, $$;$$ AS d"
	file := filepath.Join(t.TempDir(), "clean.sql")
	if err := os.WriteFile(file, []byte(clean), 0o600); err != nil {
		t.Fatal(err)
	}
	want, _ := psql(t, url, "-f", file)
	for _, args := range [][]string{{"-f", "-"}, nil} {
		got := runSQLCmd(t, clean, append([]string{"--url", url}, args...)...)
		if got.err != nil || got.stdout != want {
			t.Errorf("stdin %v: %v, %q\n%s\npsql -f: %q", args, got.err, got.stdout, got.stderr, want)
		}
	}
}

// TestSQLUsage: bad flags are usage errors, found before connecting.
func TestSQLUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--format", "yaml", "-e", "SELECT 1"},
		{"--on-error", "maybe", "-e", "SELECT 1"},
		{"-e", "SELECT 1", "-f", "x.sql"},
		{"--url", "postgres://[bad", "-e", "SELECT 1"},
		{"--password-file", filepath.Join(t.TempDir(), "missing"), "-e", "SELECT 1"},
		{"--tls-cert", "c.pem", "-e", "SELECT 1"},
	} {
		if got := runSQLCmd(t, "", args...); !errors.Is(got.err, ErrUsage) {
			t.Errorf("strand sql %q: %v, want a usage error", args, got.err)
		}
	}
}

// TestSQLAgent runs strand sql against an agent's --sql-listen over
// TLS as a SCRAM user: the answers are PostgreSQL's for the same
// statements, Strand's own statements work, the agent's refusals carry
// their SQLSTATE, and the TLS flags make TLS required and verified.
func TestSQLAgent(t *testing.T) {
	ca := certstest.NewCA(t, "sql")
	pair := ca.Server(t, "agent")
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		SQLListen: "127.0.0.1:0", SQLTLS: true, TLSCertFile: pair.CertFile, TLSKeyFile: pair.KeyFile,
		SnapshotInterval: agent.SnapshotsOff,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), commandDeadline)
		defer cancel()
		a.Stop(ctx)
	})
	kcl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	res, err := kadm.NewClient(kcl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("alice-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://%s/strand", a.SQLAddr())
	alice := []string{"--url", url, "--user", "alice", "--password-file", pwFile, "--tls-ca", ca.CertFile}

	const q = "SELECT 1 AS one, 'two' AS two, NULL::int AS three"
	want := runSQLCmd(t, "", "--url", pgtest.URL(t), "-e", q)
	got := runSQLCmd(t, "", append(alice, "-e", q)...)
	if got.err != nil || got.stdout != want.stdout {
		t.Errorf("agent: %v\n%s%s\nPostgreSQL:\n%s", got.err, got.stdout, got.stderr, want.stdout)
	}
	got = runSQLCmd(t, "", append(alice, "-e", "SHOW SOURCES")...)
	if got.err != nil || !strings.HasSuffix(got.stdout, "(0 rows)\n\n") {
		t.Errorf("SHOW SOURCES: %v\n%s%s", got.err, got.stdout, got.stderr)
	}
	got = runSQLCmd(t, "", append(alice, "-e", "SELECT * FROM nosuch")...)
	if !errors.Is(got.err, ErrSQLFailed) || !strings.HasPrefix(got.stderr, "ERROR:  42P01: ") {
		t.Errorf("unknown relation: %v, %q", got.err, got.stderr)
	}

	// The password from the environment; a wrong one is 28P01.
	t.Setenv("STRAND_SQL_PASSWORD", "alice-pw")
	if got := runSQLCmd(t, "", "--url", url, "--user", "alice", "--tls-ca", ca.CertFile, "-e", "SELECT 1"); got.err != nil {
		t.Errorf("password from STRAND_SQL_PASSWORD: %v", got.err)
	}
	t.Setenv("STRAND_SQL_PASSWORD", "wrong")
	var pe *pgconn.PgError
	if got := runSQLCmd(t, "", "--url", url, "--user", "alice", "--tls-ca", ca.CertFile, "-e", "SELECT 1"); !errors.As(got.err, &pe) || pe.Code != "28P01" {
		t.Errorf("wrong password: %v, want 28P01", got.err)
	}
	// A certificate from another CA is refused: --tls-ca leaves no
	// plaintext or unverified fallback.
	other := certstest.NewCA(t, "other")
	if got := runSQLCmd(t, "", append(alice, "--tls-ca", other.CertFile, "-e", "SELECT 1")...); got.err == nil || !strings.Contains(got.err.Error(), "certificate") {
		t.Errorf("another CA: %v, want a certificate error", got.err)
	}
}

// fakeLines is a prompt fed from a list, recording the prompts shown.
type fakeLines struct {
	lines   []string
	prompts []string
}

func (f *fakeLines) SetPrompt(p string) { f.prompts = append(f.prompts, p) }

func (f *fakeLines) ReadLine() (string, error) {
	if len(f.lines) == 0 {
		return "", io.EOF
	}
	l := f.lines[0]
	f.lines = f.lines[1:]
	return l, nil
}

// TestSQLInteractive: at the prompt a statement runs when a line ends
// it, goes on over lines (and inside a string) until then, and prints
// what psql -f prints for the same text; a refused statement does not
// end the session, \q does.
func TestSQLInteractive(t *testing.T) {
	url := pgtest.URL(t)
	lines := []string{
		"SELECT 'a;",
		"b' AS x",
		"  ;",
		"",
		"SELECT 1 AS n; SELECT",
		"2 AS m; -- the end;",
		"SELEC 3;",
		"SELECT $$;$$ AS d;",
		`\q`,
		"SELECT 'not run';",
	}
	// psql -f stops nothing on an error either; its stderr differs
	// only by the SQLSTATE and "psql:FILE:LINE: " prefix, so only
	// stdout is compared with it.
	file := filepath.Join(t.TempDir(), "typed.sql")
	if err := os.WriteFile(file, []byte(strings.Join(lines[:8], "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	want, _ := psql(t, url, "-f", file)

	conn := pgConnect(t, url)
	var out, errOut bytes.Buffer
	s := &sqlSession{conn: conn.PgConn(), out: &out, errOut: &errOut, opts: &sqlOptions{Format: sqlFormatText, OnError: "continue"}}
	lr := &fakeLines{lines: lines}
	if err := s.interactive(t.Context(), lr); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("stdout:\n%s\npsql -f:\n%s", out.String(), want)
	}
	if !strings.HasPrefix(errOut.String(), "ERROR:  42601: syntax error at or near \"SELEC\"\nLINE 1: SELEC 3\n        ^\n") {
		t.Errorf("stderr: %q", errOut.String())
	}
	wantPrompts := []string{promptNew, promptMore, promptMore, promptNew, promptNew, promptMore, promptNew, promptNew, promptNew}
	if !slices.Equal(lr.prompts, wantPrompts) || len(lr.lines) != 1 {
		t.Errorf("prompts %q (%d lines left), want %q and the line after \\q left", lr.prompts, len(lr.lines), wantPrompts)
	}
}
