package catalog_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/sql/catalog"
	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// changes is leveled as a connect.Store: a Manager never waits for a
// change.
type changes struct{ leveled }

func (changes) Changed() <-chan struct{} { return nil }

// startConnectorServer is a SQL endpoint whose connector statements go
// to a connect.Manager over db at level, with one class that needs
// database.hostname.
func startConnectorServer(t *testing.T, level int16) (server, *metatest.DB) {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: level}}})
	class := connect.Class{Name: "com.example.TestSourceConnector", Kind: connect.KindSource,
		Validate: func(cfg map[string]string) error {
			if cfg["database.hostname"] == "" {
				return errors.New("database.hostname is required")
			}
			return nil
		},
		Secret: func(k string) bool { return k == "database.password" },
		New:    func(map[string]string) (connect.Task, error) { return nil, errors.New("not run here") },
	}
	m := connect.NewManager(connect.ManagerConfig{Store: changes{leveled{db}}, Classes: connect.Classes(class), Secrets: connect.NewSecrets(memobj.New())})
	cat, err := catalog.New(catalog.Config{Store: leveled{db}, Next: engine.New(nil, ""), Connectors: m})
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
	return server{db: db, addr: ln.Addr().String()}, db
}

// TestConnectorStatements: what the catalog itself decides of the
// connector statements (the agent's TestSQLConnectors has the rest):
// the config stored as written (keys past 63 bytes, numbers as text,
// the secret sealed), the owner, and the refusals before any proposal.
func TestConnectorStatements(t *testing.T) {
	s, db := startConnectorServer(t, meta.MetadataLevel8)
	conn := s.connect(t, "alice")
	long := strings.Repeat("long.", 15) + "key"
	mustExec(t, conn, `CREATE CONNECTOR "My-Conn" WITH ('connector.class' = 'TestSourceConnector', 'database.hostname' = 'it''s', `+
		`'database.port' = 5432, '`+long+`' = 'v', 'database.password' = 'pw-1')`, "CREATE CONNECTOR")
	v := db.View()
	c, ok, err := v.Connector("My-Conn")
	v.Close()
	if err != nil || !ok {
		t.Fatalf("My-Conn: %v %v", ok, err)
	}
	if c.Config["database.hostname"] != "it's" || c.Config["database.port"] != "5432" || c.Config[long] != "v" ||
		!connect.IsRef(c.Config["database.password"]) || c.Owner != "User:alice" {
		t.Errorf("stored %+v", c)
	}
	for _, tc := range []struct{ sql, code, msg string }{
		{`CREATE CONNECTOR x WITH ('connector.class' = 'TestSourceConnector', 'connector.class' = 'x')`, "42601", "more than once"},
		{`CREATE CONNECTOR public.x WITH ('connector.class' = 'TestSourceConnector')`, "42602", "one identifier"},
		{`CREATE CONNECTOR x WITH ("connector.class")`, "22023", "needs a value"},
		{`CREATE CONNECTOR x WITH ('database.hostname' = 'db')`, "22023", "contains no connector type"},
		{`CREATE CONNECTOR x WITH ('connector.class' = 'TestSourceConnector', 'database.password' = '[hidden]', 'database.hostname' = 'db')`, "22023", "none is stored"},
		{`DROP CONNECTOR "My-Conn" CASCADE`, "0A000", "CASCADE"},
		{`ALTER CONNECTOR nope SET ('a' = 'b')`, "42704", `"nope" does not exist`},
	} {
		if pe := wantCode(t, conn, tc.sql, tc.code); !strings.Contains(pe.Message, tc.msg) {
			t.Errorf("%s: %q, want it to say %q", tc.sql, pe.Message, tc.msg)
		}
	}
	mustExec(t, conn, `DROP CONNECTOR "My-Conn"`, "DROP CONNECTOR")

	// Below metadata level 8 the log takes no connector.
	s7, _ := startConnectorServer(t, meta.MetadataLevel7)
	pe := wantCode(t, s7.connect(t, "alice"), `CREATE CONNECTOR x WITH ('connector.class' = 'TestSourceConnector', 'database.hostname' = 'db')`, "55000")
	if !strings.Contains(pe.Hint, "strand.metadata.version=8") {
		t.Errorf("hint %q does not say what to raise", pe.Hint)
	}
	// Without connectors (no Manager) the statements say so.
	wantCode(t, startServer(t, meta.MetadataLevel8, nil).connect(t, "alice"), "SHOW CONNECTORS", "0A000")
}
