package agent_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
)

// TestSQLCatalog: the catalog's DDL through pgx against two agents
// sharing one log, as SCRAM users under ACLs: a source over a topic, a
// materialized view over it (stored, not yet maintained), SHOW on the
// other agent, DROP refused while the view depends on the source, DROP
// ... CASCADE, and a user without CREATE refused with 42501.
func TestSQLCatalog(t *testing.T) {
	shared := t.TempDir()
	logURL := memLogURL(t)
	var agents []*agent.Agent
	for node := range int32(2) {
		agents = append(agents, startWith(t, agent.Config{
			DataDir: t.TempDir(), NodeID: node + 1, Log: logURL,
			ObjStore:   "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			SQLListen:  "127.0.0.1:0",
			Authorizer: "standard", SuperUsers: "User:ANONYMOUS",
		}, nil))
	}
	a, b := agents[0], agents[1]
	ctx := context.Background()
	kcl := client(t, a.KafkaAddr())
	adm := kadm.NewClient(kcl)
	createTopic(t, a.KafkaAddr(), "orders", 2)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
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
	// alice: CREATE on the cluster, READ on the topic, READ and DELETE
	// on every relation. bob: READ on the topic, nothing else.
	for i, err := range createACLs(t, kcl,
		allow(kmsg.ACLResourceTypeCluster, acl.ClusterName, "User:alice", kmsg.ACLOperationCreate),
		allow(kmsg.ACLResourceTypeTopic, "orders", "User:alice", kmsg.ACLOperationRead),
		allow(acl.ResourceTypeRelation, acl.Wildcard, "User:alice", kmsg.ACLOperationRead),
		allow(acl.ResourceTypeRelation, acl.Wildcard, "User:alice", kmsg.ACLOperationDelete),
		allow(kmsg.ACLResourceTypeTopic, "orders", "User:bob", kmsg.ACLOperationRead),
	) {
		if err != nil {
			t.Fatalf("ACL %d: %v", i, err)
		}
	}

	connect := func(ag *agent.Agent, user string) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s-pw@%s/strand?sslmode=disable", user, user, ag.SQLAddr()))
		if err != nil {
			t.Fatalf("%s on %s: %v", user, ag.SQLAddr(), err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	run := func(conn *pgx.Conn, sql string) (string, string) {
		t.Helper()
		tag, err := conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			return tag.String(), ""
		case errors.As(err, &pe):
			return "", pe.Code
		}
		t.Fatalf("%s: %v", sql, err)
		return "", ""
	}
	expect := func(conn *pgx.Conn, sql, tag, code string) {
		t.Helper()
		if gotTag, gotCode := run(conn, sql); gotTag != tag || gotCode != code {
			t.Fatalf("%s: tag %q code %q, want tag %q code %q", sql, gotTag, gotCode, tag, code)
		}
	}
	names := func(conn *pgx.Conn, sql string) []string {
		t.Helper()
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			vals, err := r.Values()
			if err != nil {
				return "", err
			}
			return vals[0].(string), nil
		})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}

	aliceA, aliceB, bobB := connect(a, "alice"), connect(b, "alice"), connect(b, "bob")
	expect(aliceA, "CREATE SOURCE orders (id int8, amount numeric(10,2), _key text, _offset int8) WITH (topic = 'orders', format = 'json')", "CREATE SOURCE", "")
	expect(aliceA, "CREATE MATERIALIZED VIEW totals AS SELECT count(*) AS n, sum(amount) AS total FROM orders", "CREATE MATERIALIZED VIEW", "")
	// The agent maintains it: a read answers 55000 until the view's
	// task has opened its state, then rows.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, code := run(aliceA, "SELECT * FROM totals")
		if code == "" {
			break
		}
		if code != "55000" || time.Now().After(deadline) {
			t.Fatalf("SELECT * FROM totals: code %q, want rows (55000 while starting)", code)
		}
	}

	// The other agent knows both from the shared log.
	if got := names(aliceB, "SHOW SOURCES"); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf("SHOW SOURCES on the second agent: %v", got)
	}
	if got := names(aliceB, "SHOW MATERIALIZED VIEWS"); !slices.Equal(got, []string{"totals"}) {
		t.Fatalf("SHOW MATERIALIZED VIEWS on the second agent: %v", got)
	}
	expect(aliceB, "DROP SOURCE orders", "", "2BP01")
	// bob may read the topic but create nothing.
	expect(bobB, "CREATE SOURCE mine (v text) WITH (topic = 'orders', format = 'text')", "", "42501")
	expect(bobB, "SELECT * FROM totals", "", "42501")
	if got := names(bobB, "SHOW SOURCES"); len(got) != 0 {
		t.Fatalf("bob sees %v, which he may not describe", got)
	}
	// The two refusals are counted by the agent that made them (the
	// authorization log); SHOW SOURCES only filtered.
	fs := parseScrape(t, scrapeBody(t, b))
	for _, op := range []string{"CREATE", "READ"} {
		if v, _ := sample(fs, "strand_authorization_denials_total", map[string]string{"operation": op, "resource_type": "RELATION"}); v != 1 {
			t.Errorf("%s RELATION denials counted: %v, want 1", op, v)
		}
	}
	if v, ok := sample(fs, "strand_authorization_denials_total", map[string]string{"operation": "DESCRIBE", "resource_type": "RELATION"}); ok {
		t.Errorf("SHOW SOURCES counted %v denials", v)
	}

	expect(aliceB, "DROP SOURCE orders CASCADE", "DROP SOURCE", "")
	if got := names(aliceA, "SHOW MATERIALIZED VIEWS"); len(got) != 0 {
		t.Fatalf("SHOW MATERIALIZED VIEWS after the cascade, on the first agent: %v", got)
	}
	if got := names(aliceA, "SHOW SOURCES"); len(got) != 0 {
		t.Fatalf("SHOW SOURCES after the cascade: %v", got)
	}
	// Independently of SQL: the first agent's copy holds no relation.
	if rels := relationsOf(t, a); len(rels) != 0 {
		t.Fatalf("the metadata still holds %v", rels)
	}
}

// relationsOf reads the catalog from the agent's own copy, after
// bringing it to the log's end.
func relationsOf(t *testing.T, a *agent.Agent) []meta.Relation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := a.Replica().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	v := a.Replica().View()
	defer v.Close()
	rels, err := v.Relations()
	if err != nil {
		t.Fatal(err)
	}
	return rels
}

// TestSQLCatalogUpgrade: on a log at metadata level 6 (written by an
// older build) the catalog takes no DDL and says what to raise; after
// `strand features upgrade` (UpdateFeatures) to 7 it does.
func TestSQLCatalogUpgrade(t *testing.T) {
	dir := t.TempDir()
	logURL := logAtLevel(t, dir, meta.MetadataLevel6)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	a := startWith(t, agent.Config{DataDir: filepath.Join(dir, "agent"), Log: logURL, SQLListen: "127.0.0.1:0"}, nil)
	createTopic(t, a.KafkaAddr(), "orders", 1)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://anyone@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const create = "CREATE SOURCE orders (v text) WITH (topic = 'orders', format = 'text')"
	_, err = conn.Exec(ctx, create)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55000" || !strings.Contains(pe.Hint, "strand features upgrade --feature strand.metadata.version=7") {
		t.Fatalf("CREATE SOURCE at level 6: %v, want 55000 naming the upgrade", err)
	}
	res, err := kadm.NewClient(client(t, a.KafkaAddr())).UpdateFeatures(ctx, false,
		kadm.FeatureUpdate{Feature: meta.FeatureMetadata, MaxVersionLevel: meta.MetadataLevel7, UpgradeType: 1})
	if err != nil || res.Error() != nil {
		t.Fatalf("raising strand.metadata.version to 7: %v, %v", err, res.Error())
	}
	if tag, err := conn.Exec(ctx, create); err != nil || tag.String() != "CREATE SOURCE" {
		t.Fatalf("CREATE SOURCE at level 7: %q, %v", tag, err)
	}
	if rels := relationsOf(t, a); len(rels) != 1 || rels[0].Name != "orders" {
		t.Fatalf("the catalog holds %+v", rels)
	}
}
