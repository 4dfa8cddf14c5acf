package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestSQLViewConsistencyCaughtUp: with strand.view_consistency =
// 'caught_up', a read of a view right after a record's produce was
// acknowledged (plain, or committed in a transaction, whose marker is
// the partition's last offset) already counts it: read-your-writes,
// every time. A bad value is 22023; 'prefix' (the default) reads
// whatever the copy has, never more than was produced.
func TestSQLViewConsistencyCaughtUp(t *testing.T) {
	ctx := context.Background()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0"}, nil)
	createTopic(t, a.KafkaAddr(), "events", 2)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{
		"CREATE SOURCE events (id int8) WITH (topic = 'events', format = 'json')",
		"CREATE MATERIALIZED VIEW n_events AS SELECT count(*) AS n FROM events",
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var pe *pgconn.PgError
	if _, err := conn.Exec(ctx, "SET strand.view_consistency = 'sometimes'"); !errors.As(err, &pe) || pe.Code != "22023" {
		t.Fatalf("a bad strand.view_consistency: %v, want 22023", err)
	}
	count := func() int64 {
		t.Helper()
		var n int64
		if err := conn.QueryRow(ctx, "SELECT coalesce(sum(n), 0) FROM n_events").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Both settings read a view once it runs (55000 while it starts).
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := conn.Exec(ctx, "SELECT n FROM n_events")
		if err == nil {
			break
		}
		if !errors.As(err, &pe) || pe.Code != "55000" || time.Now().After(deadline) {
			t.Fatalf("reading the new view: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	plain := client(t, a.KafkaAddr())
	txn := client(t, a.KafkaAddr(), kgo.TransactionalID("consistency-test"))
	produced := int64(0)
	// prefix: never ahead of what was produced.
	if _, err := conn.Exec(ctx, "SET strand.view_consistency = prefix"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"id": %d}`, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced++
		if n := count(); n > produced {
			t.Fatalf("prefix read counts %d, more than the %d produced", n, produced)
		}
	}
	if _, err := conn.Exec(ctx, "SET strand.view_consistency = caught_up"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		rec := &kgo.Record{Topic: "events", Value: fmt.Appendf(nil, `{"id": %d}`, 100+i)}
		if i%2 == 0 {
			if err := plain.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := txn.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
		produced++
		if n := count(); n != produced {
			t.Fatalf("caught_up read %d after produce: counts %d, want %d", i, n, produced)
		}
	}
}
