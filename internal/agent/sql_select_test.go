package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// selectOrders are the orders topic's records (JSON values), loaded as
// they are into PostgreSQL, the oracle.
var selectOrders = []struct {
	id       int
	customer string
	amount   string
	qty      int
}{
	{1, "c1", "12.50", 2}, {2, "c2", "7.00", 1}, {3, "c1", "100.99", 7}, {4, "c3", "0.10", 3},
	{5, "c2", "55.55", 5}, {6, "c4", "19.99", 1}, {7, "c1", "3.00", 9}, {8, "c3", "42.00", 2},
}

// selectCustomers are the customers topic's records in produce order:
// keyed by id, later values replacing earlier ones, a nil value a
// tombstone; customersNow is what an upsert source holds after them.
var (
	selectCustomers = []struct{ key, value string }{
		{"c1", `{"name": "ann", "city": "oslo"}`},
		{"c2", `{"name": "bob", "city": "rome"}`},
		{"c3", `{"name": "cy", "city": "lima"}`},
		{"c1", `{"name": "ann", "city": "kyiv"}`},
		{"c4", `{"name": "dee", "city": "nuuk"}`},
		{"c4", ""},
	}
	customersNow = [][]any{{"c1", "ann", "kyiv"}, {"c2", "bob", "rome"}, {"c3", "cy", "lima"}}
)

// TestSQLSelect: ad-hoc SELECTs over sources through pgx against an
// agent, each compared with a real PostgreSQL holding the same rows
// (filters, ORDER BY and LIMIT, aggregates, a join of two sources and
// one with VALUES); an upsert source shows the newest value per key;
// the scan limit's 53400; a user without READ gets 42501 and does not
// see the source in pg_class. (Reading views: TestSQLViews.)
func TestSQLSelect(t *testing.T) {
	ctx := context.Background()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0",
		Authorizer: "standard", SuperUsers: "User:ANONYMOUS"}, nil)
	kcl := client(t, a.KafkaAddr())
	createTopic(t, a.KafkaAddr(), "orders", 2)
	createTopic(t, a.KafkaAddr(), "customers", 1)
	res, err := kadm.NewClient(kcl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-pw"},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	allow := func(typ acl.ResourceType, name, principal string, op acl.Operation) acl.Binding {
		return acl.Binding{ResourceType: typ, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	}
	// alice may create and read every relation (creating a source
	// takes READ on its topic); bob may read the
	// topics but no relation (his Kafka READ does not make a source
	// readable).
	for i, err := range createACLs(t, kcl,
		allow(kmsg.ACLResourceTypeCluster, acl.ClusterName, "User:alice", kmsg.ACLOperationCreate),
		allow(acl.ResourceTypeRelation, acl.Wildcard, "User:alice", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, acl.Wildcard, "User:alice", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, acl.Wildcard, "User:bob", kmsg.ACLOperationRead),
	) {
		if err != nil {
			t.Fatalf("ACL %d: %v", i, err)
		}
	}
	var recs []*kgo.Record
	for _, o := range selectOrders {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(o.id % 2),
			Value: fmt.Appendf(nil, `{"id": %d, "customer": %q, "amount": %s, "qty": %d}`, o.id, o.customer, o.amount, o.qty)})
	}
	for _, c := range selectCustomers {
		r := &kgo.Record{Topic: "customers", Key: []byte(c.key)}
		if c.value != "" {
			r.Value = []byte(c.value)
		}
		recs = append(recs, r)
	}
	pcl := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	connect := func(user string) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s-pw@%s/strand?sslmode=disable", user, user, a.SQLAddr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	alice, bob := connect("alice"), connect("bob")
	for _, ddl := range []string{
		"CREATE SOURCE orders (id int8, customer text, amount numeric(10,2), qty int4, _partition int4) WITH (topic = 'orders', format = 'json')",
		"CREATE SOURCE customers (_key text, name text, city text) WITH (topic = 'customers', format = 'json', envelope = 'upsert')",
		"CREATE MATERIALIZED VIEW big AS SELECT * FROM orders WHERE amount > 10",
	} {
		if _, err := alice.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}

	// The oracle: the same rows in PostgreSQL.
	pgConn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pgConn.Close(ctx)
	orderRows := make([][]any, len(selectOrders))
	for i, o := range selectOrders {
		orderRows[i] = []any{int64(o.id), o.customer, o.amount, int32(o.qty), int32(o.id % 2)}
	}
	if err := sqltest.CreateTables(ctx, pgConn, []sqltest.Table{
		{Name: "orders", Columns: []sqltest.Column{{Name: "id", Type: "int8"}, {Name: "customer", Type: "text"},
			{Name: "amount", Type: "numeric(10,2)"}, {Name: "qty", Type: "int4"}, {Name: "_partition", Type: "int4"}}, Rows: orderRows},
		{Name: "customers", Columns: []sqltest.Column{{Name: "_key", Type: "text"}, {Name: "name", Type: "text"}, {Name: "city", Type: "text"}},
			Rows: customersNow},
	}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql     string
		ordered bool
	}{
		{"SELECT id, customer, amount FROM orders WHERE qty > 1 AND customer <> 'c3' ORDER BY amount DESC LIMIT 3", true},
		{"SELECT * FROM orders ORDER BY id", true},
		{"SELECT customer, count(*), sum(amount), avg(qty), min(amount), max(id) FROM orders GROUP BY customer HAVING count(*) > 1", false},
		{"SELECT _partition, count(*) FROM orders GROUP BY _partition", false},
		{"SELECT o.id, c.name, c.city, o.amount * o.qty AS total FROM orders o JOIN customers c ON c._key = o.customer ORDER BY o.id", true},
		{"SELECT c.name, coalesce(sum(o.amount), 0) FROM customers c LEFT JOIN orders o ON o.customer = c._key GROUP BY c.name", false},
		{"SELECT o.id, v.label FROM orders o JOIN (VALUES ('c1', 'gold'), ('c4', 'new')) AS v(customer, label) ON v.customer = o.customer", false},
		{"SELECT * FROM customers", false},
		{"SELECT customer FROM orders WHERE amount > (SELECT avg(amount) FROM orders) ORDER BY 1", true},
	} {
		want, err := sqltest.Collect(must(pgConn.Query(ctx, q.sql)))
		if err != nil {
			t.Fatalf("PostgreSQL: %s: %v", q.sql, err)
		}
		want.Name = q.sql
		rows, err := alice.Query(ctx, q.sql)
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		got, err := sqltest.Collect(rows)
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		if len(want.Rows) == 0 {
			t.Fatalf("%s: the oracle returns no rows: a weak check", q.sql)
		}
		sqltest.Equal(t, want, got, sqltest.Options{Ordered: q.ordered})
	}

	code := func(conn *pgx.Conn, sql string) string {
		t.Helper()
		rows, err := conn.Query(ctx, sql)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return pe.Code
		}
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return ""
	}
	for _, c := range []struct {
		conn *pgx.Conn
		sql  string
		code string
	}{
		{bob, "SELECT * FROM orders", "42501"},
		{bob, "SELECT 1 WHERE EXISTS (SELECT 1 FROM customers)", "42501"},
		{alice, "SET strand.scan_max_rows = 5", ""},
		{alice, "SELECT count(*) FROM orders", "53400"},
		// An upsert source counts the rows it keeps (3), not records.
		{alice, "SELECT count(*) FROM customers", ""},
		{alice, "RESET strand.scan_max_rows", ""},
		{alice, "SELECT count(*) FROM orders", ""},
		{alice, "SET strand.scan_max_rows = 0", "22023"},
	} {
		if got := code(c.conn, c.sql); got != c.code {
			t.Fatalf("%s: code %q, want %q", c.sql, got, c.code)
		}
	}

	// pg_class shows what a user may DESCRIBE: everything to alice
	// (READ implies DESCRIBE), nothing to bob.
	relnames := func(conn *pgx.Conn) []string {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT c.relname || ':' || c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := relnames(alice), []string{"big:m", "customers:r", "orders:r"}; !slices.Equal(got, want) {
		t.Fatalf("alice's pg_class: %v, want %v", got, want)
	}
	if got := relnames(bob); len(got) != 0 {
		t.Fatalf("bob's pg_class: %v, want nothing", got)
	}

	// psql's own catalog queries, as psql sends them.
	psql := func(user, command string) string {
		t.Helper()
		out, err := runPsql(t, a.SQLAddr(), user, command)
		if err != nil {
			t.Fatalf("psql %s as %s: %v\n%s", command, user, err, out)
		}
		return out
	}
	for _, c := range []struct {
		user, command string
		want          []string
		not           []string
	}{
		{"alice", `\d`, []string{"public | big       | materialized view | alice", "public | customers | table             | alice", "public | orders    | table             | alice"}, nil},
		{"alice", `\dt`, []string{"customers | table", "orders    | table"}, []string{"big"}},
		{"alice", `\dm`, []string{"big  | materialized view"}, []string{"orders"}},
		{"alice", `\dn`, []string{"public"}, []string{"pg_catalog"}},
		{"bob", `\dt`, []string{"Did not find any relations."}, []string{"orders"}},
	} {
		out := psql(c.user, c.command)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("psql %s as %s: no %q in\n%s", c.command, c.user, w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("psql %s as %s: %q in\n%s", c.command, c.user, n, out)
			}
		}
	}
}

func must(rows pgx.Rows, err error) pgx.Rows {
	if err != nil {
		panic(err)
	}
	return rows
}

// runPsql runs Debian's psql with one command against addr; without
// psql the test skips, but in CI (CI=true) it fails.
func runPsql(t *testing.T, addr, user, command string) (string, error) {
	t.Helper()
	path, err := testproc.FindBinary("psql", "/usr/lib/postgresql/*/bin")
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(path, "-X", "-h", host, "-p", port, "-U", user, "-d", "strand", "-c", command)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+user+"-pw", "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
