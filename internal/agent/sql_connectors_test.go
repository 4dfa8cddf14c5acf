package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/connect"
)

// TestSQLConnectors: CREATE/ALTER/DROP CONNECTOR and SHOW CONNECTORS
// over pgx do what the Connect REST API does, as SCRAM users under
// CONNECTOR ACLs: the connector appears in GET /connectors, its secret
// is stored in the object store, masked in the API and absent from the
// agent's log, the class's refusal is 22023 with its message, a name
// that exists 42710, a missing one 42704, a missing right 42501.
func TestSQLConnectors(t *testing.T) {
	dir := t.TempDir()
	objects := filepath.Join(dir, "objects")
	cls := (&runningClass{}).class()
	cls.Validate = func(cfg map[string]string) error {
		if cfg["database.hostname"] == "" {
			return errors.New("database.hostname is required")
		}
		return nil
	}
	cfg := agent.Config{
		DataDir: filepath.Join(dir, "data"), ObjStore: "file://" + filepath.ToSlash(objects),
		SQLListen: "127.0.0.1:0", ConnectListen: "127.0.0.1:0",
		Authorizer: "standard", SuperUsers: "User:ANONYMOUS",
	}
	agent.SetConnectClasses(&cfg, cls)
	logs := &logBuffer{}
	a := startWith(t, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	kcl := client(t, a.KafkaAddr())
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
	pre := kmsg.ACLResourcePatternTypePrefixed
	for i, err := range createACLs(t, kcl,
		connectorACL("User:alice", "alice_", pre, kmsg.ACLOperationCreate),
		connectorACL("User:alice", "alice_", pre, kmsg.ACLOperationAlter),
		connectorACL("User:alice", "alice_", pre, kmsg.ACLOperationDelete),
	) {
		if err != nil {
			t.Fatalf("ACL %d: %v", i, err)
		}
	}
	var notices []string
	sqlAs := func(user string) *pgx.Conn {
		t.Helper()
		cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s-pw@%s/strand?sslmode=disable", user, user, a.SQLAddr()))
		if err != nil {
			t.Fatal(err)
		}
		cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Code+" "+n.Message) }
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	alice, bob := sqlAs("alice"), sqlAs("bob")
	exec := func(conn *pgx.Conn, sql, code, msg string) {
		t.Helper()
		_, err := conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		switch {
		case code == "" && err != nil:
			t.Errorf("%s: %v", sql, err)
		case code == "":
		case !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, msg):
			t.Errorf("%s: %v, want %s with %q", sql, err, code, msg)
		}
	}
	const secret = "pw-secret-sql-1"
	create := "CREATE CONNECTOR alice_pg WITH ('connector.class' = 'TestSourceConnector', 'database.hostname' = 'db', " +
		"'database.port' = 5432, 'database.password' = '" + secret + "')"
	exec(alice, create, "", "")
	exec(alice, create, "42710", `connector "alice_pg" already exists`)
	notices = nil
	exec(alice, strings.Replace(create, "CONNECTOR", "CONNECTOR IF NOT EXISTS", 1), "", "")
	if len(notices) != 1 || !strings.HasPrefix(notices[0], "42710 ") {
		t.Errorf("CREATE IF NOT EXISTS of an existing name: notices %q", notices)
	}
	exec(alice, "CREATE CONNECTOR alice_bad WITH ('connector.class' = 'TestSourceConnector')", "22023", "database.hostname is required")
	exec(alice, "CREATE CONNECTOR alice_bad WITH ('connector.class' = 'NoSuchConnector', 'database.hostname' = 'db')", "22023", "NoSuchConnector")
	exec(alice, "CREATE CONNECTOR other WITH ('connector.class' = 'TestSourceConnector', 'database.hostname' = 'db')", "42501", `connector "other"`)
	exec(alice, "BEGIN; CREATE CONNECTOR alice_tx WITH ('connector.class' = 'TestSourceConnector', 'database.hostname' = 'db')", "25001", "transaction block")
	exec(alice, "ROLLBACK", "", "")
	exec(bob, "DROP CONNECTOR alice_pg", "42501", `connector "alice_pg"`)
	exec(bob, "ALTER CONNECTOR alice_pg SET ('database.hostname' = 'evil')", "42501", `connector "alice_pg"`)
	exec(alice, "ALTER CONNECTOR alice_none SET ('database.hostname' = 'db')", "42704", `connector "alice_none" does not exist`)

	// The REST API sees what SQL made: owned by alice, the port kept as
	// text, the password masked.
	base := "http://" + a.ConnectAddr()
	rest := func(method, path string) connAnswer {
		return connDo(t, base, connReq{method: method, path: path, user: "alice", pass: "alice-pw"})
	}
	var names []string
	if got := rest("GET", "/connectors"); json.Unmarshal([]byte(got.body), &names) != nil || !slices.Equal(names, []string{"alice_pg"}) {
		t.Errorf("GET /connectors: %d %s", got.status, got.body)
	}
	var conf map[string]string
	got := rest("GET", "/connectors/alice_pg/config")
	if err := json.Unmarshal([]byte(got.body), &conf); err != nil || conf["database.password"] != connect.Mask ||
		conf["database.port"] != "5432" || conf["database.hostname"] != "db" || conf["name"] != "alice_pg" {
		t.Errorf("config: %d %s", got.status, got.body)
	}
	// ALTER changes one key and keeps the stored password.
	exec(alice, "ALTER CONNECTOR alice_pg SET ('database.hostname' = 'db2', 'database.port' = NONE)", "", "")
	got = rest("GET", "/connectors/alice_pg/config")
	conf = nil
	if err := json.Unmarshal([]byte(got.body), &conf); err != nil || conf["database.password"] != connect.Mask ||
		conf["database.hostname"] != "db2" || conf["database.port"] != "" {
		t.Errorf("config after ALTER: %d %s", got.status, got.body)
	}
	exec(alice, "ALTER CONNECTOR alice_pg SET ('database.hostname' = NONE)", "22023", "database.hostname is required")

	// The secret is in the object store, and nowhere in the log.
	stored := false
	_ = filepath.WalkDir(objects, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) && strings.Contains(p, "secrets") {
				stored = true
			}
		}
		return nil
	})
	if !stored {
		t.Errorf("the password is not among the object store's secrets")
	}

	// SHOW CONNECTORS: alice sees hers, running; bob sees none.
	show := func(conn *pgx.Conn) [][]any {
		t.Helper()
		rows, err := conn.Query(ctx, "SHOW CONNECTORS")
		if err != nil {
			t.Fatal(err)
		}
		var out [][]any
		for rows.Next() {
			v, _ := rows.Values()
			out = append(out, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if fs := rows.FieldDescriptions(); len(fs) != 7 || fs[0].Name != "name" || fs[4].Name != "task_state" {
			t.Errorf("SHOW CONNECTORS columns: %v", fs)
		}
		return out
	}
	if rows := show(bob); len(rows) != 0 {
		t.Errorf("bob's SHOW CONNECTORS: %v", rows)
	}
	for deadline := time.Now().Add(opTimeout); ; time.Sleep(20 * time.Millisecond) {
		rows := show(alice)
		if len(rows) != 1 || rows[0][0] != "alice_pg" || rows[0][1] != "TestSourceConnector" || rows[0][2] != "source" || rows[0][3] != "RUNNING" {
			t.Fatalf("alice's SHOW CONNECTORS: %v", rows)
		}
		if rows[0][4] == "RUNNING" {
			if w, _ := rows[0][5].(string); w == "" || rows[0][6] != nil {
				t.Errorf("a running task: worker %v, trace %v", rows[0][5], rows[0][6])
			}
			break
		}
		if rows[0][4] == "FAILED" || time.Now().After(deadline) {
			t.Fatalf("alice_pg's task: %v", rows[0])
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the password is in the agent's log")
	}

	exec(alice, "DROP CONNECTOR alice_pg", "", "")
	if got := rest("GET", "/connectors/alice_pg"); got.status != 404 {
		t.Errorf("GET a dropped connector: %d %s", got.status, got.body)
	}
	exec(alice, "DROP CONNECTOR alice_pg", "42704", `connector "alice_pg" does not exist`)
	notices = nil
	exec(alice, "DROP CONNECTOR IF EXISTS alice_pg", "", "")
	if len(notices) != 1 || !strings.HasPrefix(notices[0], "42704 ") {
		t.Errorf("DROP IF EXISTS of a missing name: notices %q", notices)
	}
}
