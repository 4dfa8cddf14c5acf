package pgtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestServer checks the server accepts connections and runs with fsync
// on, which the durability tests above it rely on.
func TestServer(t *testing.T) {
	c, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	for name, want := range map[string]string{"fsync": "on", "synchronous_commit": "on"} {
		var got string
		if err := c.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestPauseKill checks the faults a history test injects: a paused
// server answers nothing until resumed, and a killed one keeps what it
// committed when restarted.
func TestPauseKill(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	defer srv.Stop()
	exec := func(timeout time.Duration, sql string) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		c, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		_, err = c.Exec(ctx, sql)
		return err
	}
	if err := exec(10*time.Second, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	// Bounded only so a server that answers fails the test quickly; a
	// paused one never answers, however long the wait.
	if err := exec(300*time.Millisecond, "SELECT 1"); err == nil {
		srv.Resume()
		t.Fatal("a paused server answered")
	}
	srv.Resume()
	if err := exec(10*time.Second, "SELECT 1"); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	srv.Kill()
	if err := exec(2*time.Second, "SELECT 1"); err == nil {
		t.Fatal("a killed server answered")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := exec(10*time.Second, "DO $$ BEGIN IF (SELECT count(*) FROM kept) <> 1 THEN RAISE 'lost'; END IF; END $$"); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
}
