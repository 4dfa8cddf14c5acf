package agent_test

import (
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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs/certstest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestSQLPsqlAndPgxOverTLS is issue 29's acceptance for clients: Debian's
// psql and pgx connect over TLS (verify-full against the agent's CA) as
// SCRAM users, run DDL, read a view kept up to date as records arrive,
// and SUBSCRIBE to it (pgx: psql buffers a result until it ends, and a
// subscription never ends); a user without READ on the view is refused
// with 42501 by both.
func TestSQLPsqlAndPgxOverTLS(t *testing.T) {
	psqlPath, err := testproc.FindBinary("psql", "/usr/lib/postgresql/*/bin")
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	ctx := context.Background()
	ca := certstest.NewCA(t, "sql")
	pair := ca.Server(t, "agent")
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0", SQLTLS: true,
		TLSCertFile: pair.CertFile, TLSKeyFile: pair.KeyFile,
		Authorizer: "standard", SuperUsers: "User:ANONYMOUS"}, nil)
	kcl := client(t, a.KafkaAddr())
	createTopic(t, a.KafkaAddr(), "orders", 2)
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
	// alice creates and reads; bob may read the topic over Kafka, but no
	// relation.
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

	// counts is the oracle: orders per customer, from what was produced.
	counts := map[string]int{}
	next := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for range n {
			next++
			cust := fmt.Sprintf("c%d", next%3)
			counts[cust]++
			recs = append(recs, &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, `{"id": %d, "customer": %q}`, next, cust)})
		}
		if err := kcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want := func() string {
		var b strings.Builder
		for _, c := range []string{"c0", "c1", "c2"} {
			if counts[c] > 0 {
				fmt.Fprintf(&b, "%s|%d\n", c, counts[c])
			}
		}
		return b.String()
	}

	host, port, _ := net.SplitHostPort(a.SQLAddr())
	psql := func(user string, commands ...string) (string, error) {
		args := []string{"-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose", "-h", host, "-p", port, "-U", user, "-d", "strand"}
		for _, c := range commands {
			args = append(args, "-c", c)
		}
		cmd := exec.Command(psqlPath, args...)
		cmd.Env = append(os.Environ(), "PGPASSWORD="+user+"-pw", "PGSSLMODE=verify-full", "PGSSLROOTCERT="+ca.CertFile,
			"PGCONNECT_TIMEOUT=10")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// DDL through psql, over TLS, as alice.
	if out, err := psql("alice",
		"CREATE SOURCE orders (id int8, customer text) WITH (topic = 'orders', format = 'json')",
		"CREATE MATERIALIZED VIEW per_customer AS SELECT customer, count(*) AS n FROM orders GROUP BY customer"); err != nil {
		t.Fatalf("psql DDL: %v\n%s", err, out)
	}
	produce(10)
	waitPsql := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := psql("alice", "SELECT customer, n FROM per_customer ORDER BY customer")
			if err == nil && out == want() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("psql read of the view: %q (err %v), want %q", out, err, want())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitPsql()

	// bob is refused: psql prints the SQLSTATE with VERBOSITY=verbose.
	out, err := psql("bob", "SELECT * FROM per_customer")
	if err == nil || !strings.Contains(out, "42501") {
		t.Fatalf("psql as bob: err %v, output %q: want 42501", err, out)
	}

	// pgx over TLS: the same view, then SUBSCRIBE.
	url := func(user string) string {
		return fmt.Sprintf("postgres://%s:%s-pw@%s:%s/strand?sslmode=verify-full&sslrootcert=%s", user, user, host, port, ca.CertFile)
	}
	alice, err := pgx.Connect(ctx, url("alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(ctx)
	if _, ok := alice.PgConn().Conn().(*tls.Conn); !ok {
		t.Fatalf("pgx's connection is a %T, not TLS", alice.PgConn().Conn())
	}
	var n int64
	if err := alice.QueryRow(ctx, "SELECT n FROM per_customer WHERE customer = $1", "c1").Scan(&n); err != nil || n != int64(counts["c1"]) {
		t.Fatalf("pgx point read: %d, %v; want %d", n, err, counts["c1"])
	}
	bob, err := pgx.Connect(ctx, url("bob"))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close(ctx)
	var pe *pgconn.PgError
	if _, err := bob.Exec(ctx, "SUBSCRIBE TO per_customer"); !errors.As(err, &pe) || pe.Code != "42501" {
		t.Fatalf("bob's SUBSCRIBE: %v, want 42501", err)
	}

	// SUBSCRIBE: the snapshot, then the changes of more records, applied
	// to it, give the oracle.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := alice.Query(sctx, "SUBSCRIBE TO per_customer")
	if err != nil {
		t.Fatal(err)
	}
	// Cancel before Close: pgx's Close reads the rest of a result, and a
	// subscription has no end.
	defer func() { cancel(); rows.Close() }()
	state := map[string]int64{}
	got := func() string {
		var b strings.Builder
		for _, c := range []string{"c0", "c1", "c2"} {
			for row, copies := range state {
				if strings.HasPrefix(row, c+"|") && copies == 1 {
					b.WriteString(row + "\n")
				}
			}
		}
		return b.String()
	}
	readUntil := func() {
		t.Helper()
		for got() != want() {
			if !rows.Next() {
				t.Fatalf("subscription ended: %v; state %v, want %q", rows.Err(), state, want())
			}
			var ts, diff, n int64
			var c string
			if err := rows.Scan(&ts, &diff, &c, &n); err != nil {
				t.Fatal(err)
			}
			state[fmt.Sprintf("%s|%d", c, n)] += diff
		}
	}
	readUntil()
	produce(7)
	readUntil()
	waitPsql()
}
