package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestSQLPsqlDescribe: psql's \d NAME of a source and of a materialized
// view prints what it prints for the same table and materialized view
// in a real PostgreSQL (its queries need regclass, correlated
// subqueries, arrays as ANY/ARRAY()/array_to_string and
// generate_series in FROM); \l and \du list Strand's database and
// users.
func TestSQLPsqlDescribe(t *testing.T) {
	ctx := context.Background()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0"}, nil)
	createTopic(t, a.KafkaAddr(), "dorders", 1)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pgURL := pgtest.URL(t)
	pgConn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pgConn.Close(ctx)
	// In public, as Strand's relations are: \d titles them by schema.
	for _, s := range []string{"DROP TABLE IF EXISTS public.dorders CASCADE",
		"CREATE TABLE public.dorders (id int8, customer text, amount numeric(10,2), qty int4, at timestamptz, note varchar(20))",
		"CREATE MATERIALIZED VIEW public.dtotals AS SELECT customer, count(*) AS n, sum(amount) AS total, max(at) AS last FROM public.dorders GROUP BY customer"} {
		if _, err := pgConn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{
		"CREATE SOURCE dorders (id int8, customer text, amount numeric(10,2), qty int4, at timestamptz, note varchar(20)) WITH (topic = 'dorders', format = 'json')",
		"CREATE MATERIALIZED VIEW dtotals AS SELECT customer, count(*) AS n, sum(amount) AS total, max(at) AS last FROM dorders GROUP BY customer",
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	psql := testPsql(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(psql, append([]string{"-X"}, args...)...)
		cmd.Env = append(os.Environ(), "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
		out, err := cmd.CombinedOutput()
		if _, exit := err.(*exec.ExitError); err != nil && !exit {
			t.Fatalf("psql %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	host, port, _ := strings.Cut(a.SQLAddr(), ":")
	strand := func(command string) string {
		return run("-h", host, "-p", port, "-U", "alice", "-d", "strand", "-c", command)
	}
	postgres := func(command string) string { return run(pgURL, "-c", command) }
	for _, name := range []string{"dorders", "dtotals"} {
		want := postgres(`\d ` + name)
		// The view's columns are its dataflow's, known once its task
		// has compiled it on this agent.
		deadline := time.Now().Add(opTimeout)
		var got string
		for {
			if got = strand(`\d ` + name); got == want || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got != want {
			t.Errorf(`\d %s: Strand prints
%s
PostgreSQL prints
%s`, name, got, want)
		}
	}
	// What the queries above needed, answered as PostgreSQL answers
	// (psql's unaligned text, so an array prints as its literal in
	// both).
	for _, q := range []string{
		"SELECT 'x' = ANY('{a,x}'), 'q' = ANY('{a,NULL}'), 'q' = ANY('{}'), NULL::text = ANY('{a}')",
		"SELECT 1.0 = ANY('{2,1}'), 3 = ANY('{1,2}'), 7::int8 = ANY('{7}'), 'a b' = ANY('{\"a b\"}')",
		"SELECT 1 = ANY('{x}')",
		`SELECT array_to_string('{a,NULL,"b c"}'::text[], '-'), array_to_string('{a,NULL}'::text[], ',', '*'), array_upper('{1,2,3}'::int2[], 1), array_upper('{}'::int2[], 1)`,
		"SELECT ('{5,6,7}'::int2[])[2], ('{5,6,7}'::int2[])[4]",
		"SELECT ARRAY(SELECT x FROM (VALUES ('b'), ('a c'), (NULL), ('')) v(x) ORDER BY x)",
		"SELECT c.oid::regclass, c.relname FROM pg_class c WHERE c.relname IN ('dorders', 'dtotals') ORDER BY c.oid::regclass::text",
		"SELECT count(*) FROM pg_class WHERE oid = 'dorders'::regclass",
		"SELECT n.nspname, (SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid AND c.relname LIKE 'dto%') FROM pg_namespace n WHERE n.nspname = 'public'",
		"SELECT s, (SELECT string_agg(x::text, ',') FROM generate_series(1, s) x) FROM generate_series(1, 3) s",
		"SELECT x, x IS NULL FROM unnest('{a,NULL,\"b c\"}'::text[]) x",
		"SELECT '16'::oid = 16, '16'::oid::text",
		"SELECT pg_size_pretty(0::bigint), pg_size_pretty(10239::bigint), pg_size_pretty(10240::bigint), pg_size_pretty(-10240::bigint), pg_size_pretty(10485760::bigint), pg_size_pretty(1099511627776::bigint), pg_size_pretty(9223372036854775807::bigint), pg_size_pretty(-9223372036854775807::bigint), pg_size_pretty(20971519::bigint)",
	} {
		got := run("-h", host, "-p", port, "-U", "alice", "-d", "strand", "-At", "-c", q)
		want := run(pgURL, "-At", "-c", q)
		if strings.HasPrefix(want, "ERROR:") {
			// The message; PostgreSQL reads the literal while parsing
			// and points at it, Strand when it runs.
			got, _, _ = strings.Cut(got, "\n")
			want, _, _ = strings.Cut(want, "\n")
		}
		if got != want {
			t.Errorf("%s: Strand %q, PostgreSQL %q", q, got, want)
		}
	}
	// \d+ adds storage, compression, statistics target and description
	// columns, and a view's definition. PostgreSQL's footers say more
	// (the access method; its own pretty print of the definition):
	// the columns must agree.
	columns := func(out string) string {
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "View definition:") || strings.HasPrefix(l, "Access method:") {
				break
			}
			keep = append(keep, l)
		}
		return strings.TrimRight(strings.Join(keep, "\n"), "\n")
	}
	for _, name := range []string{"dorders", "dtotals"} {
		got := strand(`\d+ ` + name)
		if want := postgres(`\d+ ` + name); columns(got) != columns(want) {
			t.Errorf(`\d+ %s: Strand prints
%s
PostgreSQL prints
%s`, name, got, want)
		}
	}
	if got := strand(`\d+ dtotals`); !strings.Contains(got, "View definition:\n SELECT customer, count(*) AS n, sum(amount) AS total, max(at) AS last FROM dorders GROUP BY customer;") {
		t.Errorf(`\d+ dtotals has no definition:\n%s`, got)
	}
	// \dm+ shows the view's state size on this agent.
	if got := strand(`\dm+`); !regexp.MustCompile(`public \| dtotals \| materialized view \| alice \| permanent +\| +\| \d+ (bytes|kB)`).MatchString(got) {
		t.Errorf(`\dm+:\n%s`, got)
	}
	if got := strand(`\dt+`); !strings.Contains(got, "| 0 bytes |") {
		t.Errorf(`\dt+ (a source keeps nothing locally):\n%s`, got)
	}
	if got := strand(`\d nothing_here`); !strings.Contains(got, `Did not find any relation named "nothing_here".`) {
		t.Errorf(`\d of nothing: %s`, got)
	}
	for cmd, wants := range map[string][]string{
		`\l`:  {"List of databases", " strand | alice | UTF8"},
		`\du`: {"List of roles", " alice     |            | {}"},
	} {
		out := strand(cmd)
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in\n%s", cmd, w, out)
			}
		}
	}
}

// testPsql is Debian's psql; without it the test skips, but in CI
// (CI=true) it fails.
func testPsql(t *testing.T) string {
	t.Helper()
	path, err := testproc.FindBinary("psql", "/usr/lib/postgresql/*/bin")
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	return path
}
