package agent_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestSQLViewEmitOnWindowClose: a view WITH (emit = 'on_window_close')
// over a JSON source with a watermark streams, through SUBSCRIBE, each
// window's rows once, when the watermark (the least over the topic's
// partitions of their greatest event time minus the delay) passes the
// window's end, and never retracts them; a record later than its
// partition's watermark is counted by the source, dropped and counted
// by the view, and changes nothing; the option is refused where it
// cannot hold.
func TestSQLViewEmitOnWindowClose(t *testing.T) {
	ctx := context.Background()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0"}, nil)
	createTopic(t, a.KafkaAddr(), "clicks", 2)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// want is the oracle: per (window start, page) the records the
	// source passes, for the windows closed so far.
	counts := map[string]int64{}
	maxEvent := map[int32]time.Time{}
	id := 0
	produce := func(part int32, page string, secs ...int) {
		t.Helper()
		var recs []*kgo.Record
		for _, s := range secs {
			ts := base.Add(time.Duration(s) * time.Second)
			id++
			recs = append(recs, &kgo.Record{Topic: "clicks", Partition: part,
				Value: fmt.Appendf(nil, `{"id": %d, "page": %q, "ts": %q}`, id, page, ts.Format("2006-01-02 15:04:05"))})
			if m := maxEvent[part]; !m.IsZero() && ts.Before(m.Add(-time.Second)) {
				continue // late at the source: dropped
			}
			if ts.After(maxEvent[part]) {
				maxEvent[part] = ts
			}
			counts[fmt.Sprintf("%s %s", ts.Truncate(10*time.Second).Format("15:04:05"), page)]++
		}
		if err := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	closed := func(before int) map[string]int64 {
		out := map[string]int64{}
		for k, n := range counts {
			var start time.Time
			start, _ = time.Parse("15:04:05", strings.Fields(k)[0])
			if start.Hour()*3600+start.Minute()*60+start.Second()+10 <= before {
				out[fmt.Sprintf("%s %d", k, n)] = 1
			}
		}
		return out
	}

	for _, ddl := range []string{
		`CREATE SOURCE clicks (id int8, page text, ts timestamp) WITH (topic = 'clicks', format = 'json',
			watermark.column = 'ts', watermark.delay = '1 second')`,
		`CREATE SOURCE plain (id int8, page text, ts timestamp) WITH (topic = 'clicks', format = 'json')`,
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	for _, bad := range []struct{ ddl, code string }{
		{`CREATE MATERIALIZED VIEW v WITH (emit = 'on_window_close') AS SELECT page, count(*) FROM clicks GROUP BY page`, "0A000"},
		{`CREATE MATERIALIZED VIEW v WITH (emit = 'on_window_close') AS
			SELECT window_start, count(*) FROM TUMBLE(plain, ts, INTERVAL '10' SECOND) GROUP BY window_start`, "42P17"},
		{`CREATE MATERIALIZED VIEW v WITH (emit = 'sometimes') AS SELECT page FROM clicks`, "22023"},
		{`CREATE MATERIALIZED VIEW v WITH (fillfactor = 10) AS SELECT page FROM clicks`, "22023"},
	} {
		_, err := conn.Exec(ctx, bad.ddl)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != bad.code {
			t.Fatalf("%s: got %v, want %s", bad.ddl, err, bad.code)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE MATERIALIZED VIEW per_window WITH (emit = 'on_window_close') AS
		SELECT window_start, page, count(*) AS n FROM TUMBLE(clicks, ts, INTERVAL '10' SECOND) GROUP BY window_start, page`); err != nil {
		t.Fatal(err)
	}

	sub, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close(ctx) })
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type update struct {
		diff int64
		row  string
	}
	ch, end := make(chan update, 1000), make(chan error, 1)
	// The subscription reads in its own goroutine: pgx's Query returns
	// at the first row, and the empty view has none until a window
	// closes.
	go func() {
		// The view's task starts after CREATE returns (55000 until then).
		var rows pgx.Rows
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			rows, err = sub.Query(sctx, "SUBSCRIBE TO per_window")
			var pe *pgconn.PgError
			if err == nil || !errors.As(err, &pe) || pe.Code != "55000" || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			end <- err
			return
		}
		defer rows.Close()
		for rows.Next() {
			var ts, diff, n int64
			var start time.Time
			var page string
			if err := rows.Scan(&ts, &diff, &start, &page, &n); err != nil {
				end <- err
				return
			}
			ch <- update{diff, fmt.Sprintf("%s %s %d", start.Format("15:04:05"), page, n)}
		}
		end <- rows.Err()
	}()
	seen := map[string]int64{}
	// readUntil reads the subscription until it holds want, every row
	// arriving once with +1.
	readUntil := func(want map[string]int64) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for !maps.Equal(seen, want) {
			select {
			case u := <-ch:
				if u.diff != 1 || seen[u.row] != 0 {
					t.Fatalf("%+d %s: a window's row changed after it closed (seen %v)", u.diff, u.row, seen)
				}
				seen[u.row] = 1
			case err := <-end:
				t.Fatalf("subscription ended: %v", err)
			case <-timeout:
				t.Fatalf("subscription holds %v, want %v after 30s", seen, want)
			}
		}
	}

	// Windows 00:00:00-00:00:30 on both partitions, out of order.
	produce(0, "home", 1, 4, 12, 3, 25)
	produce(1, "home", 2, 11, 19, 21)
	produce(1, "cart", 5, 15, 29)
	// Partition 0 at 35 s: its watermark 34 s; partition 1's still 28 s,
	// so the view's is 28 s and only the first two windows close.
	produce(0, "cart", 35)
	readUntil(closed(28))
	// A record for 00:00:02 on partition 0 is late there (watermark
	// 34 s) and dropped; partition 1 catches up to 46 s: the view's
	// watermark is 34 s, closing the third window.
	produce(0, "home", 2)
	produce(1, "home", 31, 46)
	readUntil(closed(34))
	produce(0, "home", 47)
	readUntil(closed(45))
	// Nothing else arrives: the late record changed no window.
	select {
	case u := <-ch:
		t.Fatalf("unexpected change %+v", u)
	case err := <-end:
		t.Fatalf("subscription ended: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	got := map[string]int64{}
	sel, err := conn.Query(ctx, "SELECT window_start, page, n FROM per_window")
	if err != nil {
		t.Fatal(err)
	}
	for sel.Next() {
		var start time.Time
		var page string
		var n int64
		if err := sel.Scan(&start, &page, &n); err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("%s %s %d", start.Format("15:04:05"), page, n)]++
	}
	if err := sel.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, seen) {
		t.Fatalf("SELECT %v, SUBSCRIBE %v", got, seen)
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_sql_source_late_records_total", labels: map[string]string{"source": "clicks"}},
		{name: "strand_sql_view_late_records_total", labels: map[string]string{"view": "per_window"}},
		{name: "strand_sql_view_late_dropped_total", labels: map[string]string{"view": "per_window"}},
		{name: "strand_sql_view_watermark_timestamp_seconds", labels: map[string]string{"view": "per_window"}},
	})
}
