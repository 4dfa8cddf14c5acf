package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/sql/flow"
)

// TestSQLViewSnapshots: the agent snapshots its views to the object
// store (the loop, on a short interval), and an agent whose views
// directory is wiped restores them from the snapshots: their contents
// are what they were, and it reads from the inputs only what came after
// the snapshot (strand_sql_source_records_total), not the topic from its
// start. DROP's view prefix is swept from the store.
func TestSQLViewSnapshots(t *testing.T) {
	ctx := context.Background()
	// The log and the object store outside the data directory, so a
	// second agent on an empty one shares them.
	dir, shared := t.TempDir(), t.TempDir()
	objects := filepath.Join(shared, "objects")
	cfg := agent.Config{DataDir: dir, SQLListen: "127.0.0.1:0", SQLViewSnapshotInterval: 100 * time.Millisecond,
		ObjStore: "file://" + filepath.ToSlash(objects), Log: "file://" + filepath.ToSlash(filepath.Join(shared, "log"))}
	a := startWith(t, cfg, nil)
	createTopic(t, a.KafkaAddr(), "nums", 3)

	// produce sends the records k in [from, to) with v = k*7 % 1000.
	produce := func(a *agent.Agent, from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for k := from; k < to; k++ {
			recs = append(recs, &kgo.Record{Topic: "nums", Partition: int32(k % 3), Value: fmt.Appendf(nil, `{"k": %d, "v": %d}`, k, k*7%1000)})
		}
		if err := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// want is each view's contents over the records [0, n), as text.
	views := []string{"groups", "kept"}
	want := func(n int) map[string][]string {
		type agg struct{ n, s int }
		groups := map[int]agg{}
		var kept []string
		for k := range n {
			v := k * 7 % 1000
			g := groups[k%10]
			groups[k%10] = agg{g.n + 1, g.s + v}
			if v%3 != 0 {
				kept = append(kept, fmt.Sprintf("%d|%d", k, v))
			}
		}
		var gs []string
		for g, a := range groups {
			gs = append(gs, fmt.Sprintf("%d|%d|%d", g, a.n, a.s))
		}
		slices.Sort(gs)
		slices.Sort(kept)
		return map[string][]string{"groups": gs, "kept": kept}
	}
	// read returns a view's rows in PostgreSQL's text format, sorted.
	read := func(conn *pgx.Conn, view string) ([]string, error) {
		rows, err := conn.Query(ctx, "SELECT * FROM "+view, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var cells []string
			for _, c := range rows.RawValues() {
				cells = append(cells, string(c))
			}
			out = append(out, strings.Join(cells, "|"))
		}
		slices.Sort(out)
		return out, rows.Err()
	}
	check := func(conn *pgx.Conn, n int, phase string) {
		t.Helper()
		w := want(n)
		for _, v := range views {
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err := read(conn, v)
				if err == nil && slices.Equal(got, w[v]) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s after 30s: %d rows (err %v), want %d; first %q, want %q", phase, v, len(got), err, len(w[v]), first(got), first(w[v]))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	connect := func(a *agent.Agent) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}

	const first, more = 3000, 300
	produce(a, 0, first)
	conn := connect(a)
	for _, ddl := range []string{
		"CREATE SOURCE nums (k int8, v int8) WITH (topic = 'nums', format = 'json')",
		"CREATE MATERIALIZED VIEW groups AS SELECT k % 10 AS g, count(*) AS n, sum(v) AS s FROM nums GROUP BY k % 10",
		"CREATE MATERIALIZED VIEW kept AS SELECT k, v FROM nums WHERE v % 3 <> 0",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	check(conn, first, "built")
	// The loop snapshots each view once it has committed an epoch.
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_sql_view_snapshots_total", labels: map[string]string{"view": "groups"}},
		{name: "strand_sql_view_snapshots_total", labels: map[string]string{"view": "kept"}},
		{name: "strand_sql_view_snapshot_bytes", labels: map[string]string{"view": "kept"}},
		{name: "strand_sql_view_snapshot_duration_seconds", labels: map[string]string{"view": "kept"}},
	})
	// And now, of the state that holds every record.
	res, err := a.SnapshotViews(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("snapshots of %d views, want 2", len(res))
	}
	for _, r := range res {
		if r.Offsets != first {
			t.Fatalf("snapshot %s at offsets %d, want %d (every record)", r.Key, r.Offsets, first)
		}
	}
	before := map[string][]string{}
	for _, v := range views {
		if before[v], err = read(conn, v); err != nil {
			t.Fatal(err)
		}
	}

	// Wipe the views' state: the agent restores it from the store.
	stop(t, a)
	if err := os.RemoveAll(filepath.Join(dir, "views")); err != nil {
		t.Fatal(err)
	}
	a = startWith(t, cfg, nil)
	conn = connect(a)
	check(conn, first, "restored")
	for _, v := range views {
		got, err := read(conn, v)
		if err != nil || !slices.Equal(got, before[v]) {
			t.Fatalf("%s restored: %d rows (%v), want the %d it held", v, len(got), err, len(before[v]))
		}
	}
	produce(a, first, first+more)
	check(conn, first+more, "after the restore")
	// Both views read the source: what they read after the restore is
	// the new records, twice, never the first ones again.
	fs := parseScrape(t, scrapeBody(t, a))
	if n, _ := sample(fs, "strand_sql_source_records_total", map[string]string{"source": "nums"}); n != 2*more {
		t.Fatalf("records read after the restore: %v, want %d (the %d new ones, by two views; a replay reads %d)", n, 2*more, more, 2*(first+more))
	}
	if n, _ := sample(fs, "strand_sql_view_restores_total", map[string]string{"view": "kept", "result": "restored"}); n != 1 {
		t.Fatalf("strand_sql_view_restores_total{kept,restored} = %v", n)
	}
	if _, ok := sample(fs, "strand_sql_view_restore_duration_seconds", map[string]string{"view": "kept"}); !ok {
		t.Fatal("no strand_sql_view_restore_duration_seconds for kept")
	}

	// A new agent, its data directory empty, on the same log and
	// object store: it restores the views from the snapshots taken
	// after the tail, and reads no input record.
	res, err = a.SnapshotViews(ctx)
	if err != nil || len(res) != 2 || res[0].Offsets != first+more {
		t.Fatalf("snapshots after the tail: %+v, %v", res, err)
	}
	stop(t, a)
	fresh := cfg
	fresh.DataDir = t.TempDir()
	a = startWith(t, fresh, nil)
	conn = connect(a)
	check(conn, first+more, "new agent")
	fs = parseScrape(t, scrapeBody(t, a))
	if n, _ := sample(fs, "strand_sql_source_records_total", map[string]string{"source": "nums"}); n != 0 {
		t.Fatalf("records the new agent read: %v, want 0 (it restored the newest snapshots)", n)
	}

	// State an older build began (no layout recorded, as before
	// flow.StateLayout): each view discards it and restores the newest
	// snapshot, which is in this build's layout.
	stop(t, a)
	states, err := filepath.Glob(filepath.Join(fresh.DataDir, "views", "*", "state"))
	if err != nil || len(states) != 2 {
		t.Fatalf("the views' state directories: %v %v", states, err)
	}
	for _, st := range states {
		db, _, err := flow.OpenPebble(st, &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Delete([]byte("ml"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	a = startWith(t, fresh, nil)
	conn = connect(a)
	check(conn, first+more, "older layout")
	fs = parseScrape(t, scrapeBody(t, a))
	if n, _ := sample(fs, "strand_sql_source_records_total", map[string]string{"source": "nums"}); n != 0 {
		t.Fatalf("records read over state in an older layout: %v, want 0 (both views restored the newest snapshots)", n)
	}
	if n, _ := sample(fs, "strand_sql_view_restores_total", map[string]string{"view": "kept", "result": "restored"}); n != 1 {
		t.Fatalf("strand_sql_view_restores_total{kept,restored} after an older layout = %v, want 1", n)
	}

	// DROP: the view's snapshots go with the next sweep.
	store, err := fileobj.Open(objects)
	if err != nil {
		t.Fatal(err)
	}
	prefixes := func() []string {
		objs, err := store.List(ctx, "views/")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, o := range objs {
			id, _, _ := strings.Cut(strings.TrimPrefix(o.Key, "views/"), "/")
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	if got := prefixes(); len(got) != 2 {
		t.Fatalf("view prefixes %v, want 2", got)
	}
	if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW kept"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := a.SweepViewSnapshots(ctx); err != nil {
			t.Fatal(err)
		}
		if len(prefixes()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("view prefixes %v after DROP, want 1", prefixes())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func first(rows []string) string {
	if len(rows) == 0 {
		return ""
	}
	return rows[0]
}
