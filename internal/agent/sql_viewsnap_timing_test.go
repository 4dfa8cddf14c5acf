package agent_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
)

// TestViewSnapshotRestoreTiming measures issue 29's "1 GB restore": a
// view holding STRAND_VIEWSNAP_BENCH_MB MiB of rows is built, snapshot,
// its state wiped and restored, then wiped again without snapshots and
// rebuilt from its input's beginning. It logs each step's time and
// checks that the restore read no input record and the rebuild all of
// them. Skipped unless the variable is set:
//
//	STRAND_VIEWSNAP_BENCH_MB=1024 go test -run TestViewSnapshotRestoreTiming -v -timeout 60m ./internal/agent/
//
// STRAND_VIEWSNAP_BENCH_DIR names the data directory (default a
// temporary one; it needs about 4x the size free).
func TestViewSnapshotRestoreTiming(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("STRAND_VIEWSNAP_BENCH_MB"))
	if mb <= 0 {
		t.Skip("set STRAND_VIEWSNAP_BENCH_MB to the view state to build, in MiB")
	}
	const padBytes = 768 // 1024 characters of base64
	n := mb << 20 / (padBytes * 4 / 3)
	dir := os.Getenv("STRAND_VIEWSNAP_BENCH_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	ctx := context.Background()
	cfg := agent.Config{DataDir: dir, SQLListen: "127.0.0.1:0", SQLViewSnapshotInterval: -1}
	a := startWith(t, cfg, nil)
	createTopic(t, a.KafkaAddr(), "big", 8)

	start := time.Now()
	cl := client(t, a.KafkaAddr(), kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(20_000))
	rng := rand.New(rand.NewPCG(29, 5))
	var failed atomic.Value
	pad := make([]byte, padBytes)
	for k := range n {
		for i := 0; i < len(pad); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8 && i+j < len(pad); j++ {
				pad[i+j] = byte(v >> (8 * j))
			}
		}
		val := fmt.Appendf(nil, `{"k": %d, "pad": %q}`, k, base64.StdEncoding.EncodeToString(pad))
		cl.Produce(ctx, &kgo.Record{Topic: "big", Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced %d records of %d B pads in %v", n, padBytes*4/3, time.Since(start).Round(time.Millisecond))

	connect := func(a *agent.Agent) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	conn := connect(a)
	for _, ddl := range []string{
		"CREATE SOURCE big (k int8, pad text) WITH (topic = 'big', format = 'json')",
		"CREATE MATERIALIZED VIEW wide AS SELECT k, pad FROM big",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	// caughtUp waits until the view has consumed all n records.
	caughtUp := func(a *agent.Agent) {
		t.Helper()
		for {
			fs := parseScrape(t, scrapeBody(t, a))
			if v, ok := sample(fs, "strand_sql_view_input_offsets", map[string]string{"view": "wide"}); ok && int(v) >= n {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// count waits until the view answers, and returns its rows.
	count := func(conn *pgx.Conn) int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Minute)
		for {
			var c int
			err := conn.QueryRow(ctx, "SELECT count(*) FROM wide").Scan(&c)
			if err == nil && c >= n {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("view: %d rows, %v", c, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	readAfter := func(a *agent.Agent) float64 {
		v, _ := sample(parseScrape(t, scrapeBody(t, a)), "strand_sql_source_records_total", map[string]string{"source": "big"})
		return v
	}

	start = time.Now()
	caughtUp(a)
	build := time.Since(start)
	t.Logf("built the view from the topic's beginning in %v (%.0f records/s)", build.Round(time.Millisecond), float64(n)/build.Seconds())
	state := dirBytes(t, filepath.Join(dir, "views")) // compactions go on: roughly

	start = time.Now()
	res, err := a.SnapshotViews(ctx)
	if err != nil || len(res) != 1 {
		t.Fatalf("snapshot: %v, %v", res, err)
	}
	t.Logf("snapshot: %d files, %.1f MiB (view state directory %.1f MiB), uploaded in %v",
		res[0].Files, float64(res[0].Bytes)/(1<<20), float64(state)/(1<<20), time.Since(start).Round(time.Millisecond))

	// Wiped: restored from the snapshot.
	stop(t, a)
	if err := os.RemoveAll(filepath.Join(dir, "views")); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	a = startWith(t, cfg, nil)
	started := time.Since(start)
	conn = connect(a)
	// Ready: the view's state is open (SHOW's status "running"), which
	// a restored view is at every record; a cheap poll, unlike count(*).
	for {
		var status string
		rows, err := conn.Query(ctx, "SHOW MATERIALIZED VIEWS", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			raw := rows.RawValues()
			if string(raw[0]) == "wide" {
				status = string(raw[len(raw)-1])
			}
		}
		rows.Close()
		if status == "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	restore := time.Since(start)
	cstart := time.Now()
	if c := count(conn); c != n {
		t.Fatalf("restored view holds %d rows, want %d", c, n)
	}
	t.Logf("SELECT count(*) over the restored view: %d rows in %v (not in the timings)", n, time.Since(cstart).Round(time.Millisecond))
	if r := readAfter(a); r != 0 {
		t.Fatalf("the restore read %v input records, want 0", r)
	}
	rd, _ := sample(parseScrape(t, scrapeBody(t, a)), "strand_sql_view_restore_duration_seconds", map[string]string{"view": "wide"})
	t.Logf("wiped, restored from the snapshot: view open at all %d records %v after the agent's start (agent start %v, download and checks %.2fs), 0 input records read",
		n, restore.Round(time.Millisecond), started.Round(time.Millisecond), rd)

	// Wiped, without snapshots: rebuilt from the input's beginning.
	stop(t, a)
	if err := os.RemoveAll(filepath.Join(dir, "views")); err != nil {
		t.Fatal(err)
	}
	store, err := fileobj.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(ctx, "views/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := store.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	a = startWith(t, cfg, nil)
	// Not polling count(*) while it catches up: each would scan what
	// the view holds so far, taking the rebuild's CPU.
	caughtUp(a)
	replay := time.Since(start)
	if c := count(connect(a)); c != n {
		t.Fatalf("rebuilt view holds %d rows, want %d", c, n)
	}
	if r := readAfter(a); int(r) != n {
		t.Fatalf("the rebuild read %v input records, want %d", r, n)
	}
	t.Logf("wiped, no snapshot: view rebuilt from the input's beginning, at all %d records %v after the agent's start (%.1fx the restore)",
		n, replay.Round(time.Millisecond), replay.Seconds()/restore.Seconds())
}

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil // compacted away meanwhile
			}
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
