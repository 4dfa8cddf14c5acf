package mariadbtest

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestShared(t *testing.T) {
	db, err := sql.Open("mysql", DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s", v)
}

// TestKillRestart: a committed row survives kill -9 of the server.
func TestKillRestart(t *testing.T) {
	s, err := Start()
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	defer s.Stop()
	ctx := context.Background()
	db, err := sql.Open("mysql", s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE t (k INT PRIMARY KEY)", "INSERT INTO t VALUES (1)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("rows after crash: %d, want 1", n)
	}
}
