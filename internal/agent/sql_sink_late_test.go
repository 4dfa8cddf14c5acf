package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/sql/sinks/sinktest"
)

// TestSQLSinkDropsLateAsView: a sink over a TUMBLE window on a source
// with a watermark drops the records their own partition's watermark
// makes late, as a view of the same query does, even while the window
// is still open by the source's watermark (another partition lags):
// lateness is the partition's judgement, the same on every owner.
func TestSQLSinkDropsLateAsView(t *testing.T) {
	ctx := context.Background()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0"}, nil)
	createTopic(t, a.KafkaAddr(), "clicks", 2)
	createTopic(t, a.KafkaAddr(), "per_window_out", 1)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const query = `SELECT window_start, count(*) AS n FROM TUMBLE(clicks, ts, INTERVAL '10' SECOND) GROUP BY window_start`
	for _, ddl := range []string{
		`CREATE SOURCE clicks (id int8, ts timestamp) WITH (topic = 'clicks', format = 'json',
			watermark.column = 'ts', watermark.delay = '1 second')`,
		`CREATE MATERIALIZED VIEW per_window AS ` + query,
		`CREATE SINK per_window_sink WITH (topic = 'per_window_out', format = 'json', envelope = 'upsert') AS ` + query,
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	// Partition 1 stays at second 1, so the source's watermark stays
	// at second 0 and the window [0, 10) open; partition 0 reaches
	// second 9 (its watermark 8), then sends seconds 2 and 3: late by
	// its own watermark.
	pcl := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	id := 0
	for _, r := range []struct {
		part int32
		sec  int
	}{{1, 1}, {0, 9}, {0, 2}, {0, 3}} {
		id++
		ts := time.Date(2026, 1, 1, 0, 0, r.sec, 0, time.UTC).Format("2006-01-02 15:04:05")
		if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Partition: r.part,
			Value: fmt.Appendf(nil, `{"id": %d, "ts": %q}`, id, ts)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	const window = "2026-01-01 00:00:00"
	wantRow, err := sinktest.Canonical([]byte(`{"window_start": "2026-01-01T00:00:00", "n": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var viewN int64
		viewErr := conn.QueryRow(ctx, "SELECT n FROM per_window WHERE window_start = $1::timestamp", window).Scan(&viewN)
		recs, err := sinktest.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(a.KafkaAddr())}, "per_window_out")
		var sink map[string]int64
		if err == nil {
			sink, err = sinktest.Upserted(recs, []string{"window_start"})
		}
		if viewErr == nil && err == nil && viewN == 2 && len(sink) == 1 && sink[wantRow] == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("view n %d (%v), sink %v (%v); want n = 2 in both (the two late records dropped)", viewN, viewErr, sink, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
