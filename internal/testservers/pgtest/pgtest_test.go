package pgtest_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
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
