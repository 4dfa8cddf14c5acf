package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCDCBench measures what issue 30 asks to quote, on one `strand
// serve` agent (file log) running a PostgreSQL source and a JDBC sink
// into a second PostgreSQL:
//
//   - snapshot: rows/s from the connector's creation until the target
//     table holds every row (STRAND_CDC_BENCH_ROWS, default 1,000,000),
//     and until the topic's last stable offset covers them;
//   - streaming, steady: 5,000 rows/s offered (transactions of 50 rows,
//     100 a second) for STRAND_CDC_BENCH_DURATION (default 60 s), with
//     the lag from a probe row's commit in the source (the moment
//     COMMIT returned) to the moment it is visible in the target
//     (polled every 5 ms), p50/p99;
//   - streaming, flat out: rows/s of a backlog of STRAND_CDC_BENCH_BURST
//     rows (default 300,000, committed in 1,000-row transactions before
//     the sink may catch up) until the target holds them;
//   - the agent's CPU seconds (utime+stime from /proc/<pid>/stat) per
//     1,000 rows in each phase.
//
// Not part of CI:
//
//	STRAND_CDC_BENCH=1 go test -count=1 -timeout 30m -v -run TestCDCBench ./e2e/
func TestCDCBench(t *testing.T) {
	if os.Getenv("STRAND_CDC_BENCH") == "" {
		t.Skip("a measurement: STRAND_CDC_BENCH=1 runs it")
	}
	rows := envInt(t, "STRAND_CDC_BENCH_ROWS", 1_000_000)
	burst := envInt(t, "STRAND_CDC_BENCH_BURST", 300_000)
	steady := 60 * time.Second
	if s := os.Getenv("STRAND_CDC_BENCH_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		steady = d
	}
	ctx := context.Background()
	_, srcURL := startCDCPostgres(t, "benchsrc", true)
	_, dstURL := startCDCPostgres(t, "benchdst", false)
	src, err := pgx.Connect(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(ctx)
	for _, s := range []string{
		"CREATE TABLE snap (id int8 PRIMARY KEY, name text NOT NULL, amount numeric(12,2) NOT NULL, at timestamptz NOT NULL, flag boolean NOT NULL, note text)",
		"CREATE TABLE stream (id int8 PRIMARY KEY, name text NOT NULL, amount numeric(12,2) NOT NULL, at timestamptz NOT NULL, flag boolean NOT NULL, note text)",
		"CREATE TABLE probe (id int8 PRIMARY KEY, at timestamptz NOT NULL)",
		fmt.Sprintf(`INSERT INTO snap SELECT i, 'name-' || i, (i %% 100000) / 100.0, timestamptz '2026-01-01' + i * interval '1 ms', i %% 2 = 0,
			CASE WHEN i %% 4 = 0 THEN NULL ELSE 'note ' || i END FROM generate_series(1, %d) i`, rows),
	} {
		if _, err := src.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}

	a := &cdcAgent{nodeID: 1, kafka: freeAddr(t), httpAddr: freeAddr(t), connect: freeAddr(t), data: t.TempDir()}
	a.args = []string{"--data-dir", a.data, "--kafka-listen", a.kafka, "--http-listen", a.httpAddr, "--connect-listen", a.connect}
	a.proc = startProcess(t, a.httpAddr, a.args...)
	pid := a.proc.cmd.Process.Pid

	dst, err := pgx.Connect(ctx, dstURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(ctx)
	// count is the target table's row count, 0 while it does not exist.
	count := func(table string) int {
		var n int
		if err := dst.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			return 0
		}
		return n
	}
	waitCount := func(table string, n int, bound time.Duration) time.Time {
		deadline := time.Now().Add(bound)
		for {
			if count(table) >= n {
				return time.Now()
			}
			if time.Now().After(deadline) {
				// Where the rows stopped: in the source's topics or
				// in the sink.
				var where []string
				for _, topic := range []string{"b.public.snap", "b.public.stream", "b.public.probe"} {
					where = append(where, fmt.Sprintf("%s last stable offset %d", topic, committedEnd(a.kafka, topic)))
				}
				for _, name := range []string{"bench-source", "bench-sink"} {
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					code, body, err := connectCall(cctx, "GET", "http://"+a.connect+"/connectors/"+name+"/status", nil)
					cancel()
					where = append(where, fmt.Sprintf("%s: %d %s %v", name, code, body, err))
				}
				t.Fatalf("%s: %d of %d rows after %v; %s", table, count(table), n, bound, strings.Join(where, "; "))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	su, _ := url.Parse(srcURL)
	du, _ := url.Parse(dstURL)
	cpu0 := procCPU(t, pid)
	start := time.Now()
	createConnector(t, a.connect, "bench-source", map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": su.Hostname(), "database.port": su.Port(), "database.user": "strand", "database.password": "x",
		"database.dbname": "benchsrc", "topic.prefix": "b", "table.include.list": "public.snap,public.stream,public.probe",
		"plugin.name": "pgoutput", "slot.name": "bench", "publication.name": "bench",
	})
	// The snapshot into the topic: its last stable offset covers every
	// row (the snapshot's transaction markers take a few offsets more,
	// so this is early by one offset per snapshot transaction).
	deadline := time.Now().Add(30 * time.Minute)
	for committedEnd(a.kafka, "b.public.snap") < int64(rows) {
		if time.Now().After(deadline) {
			t.Fatalf("snapshot: the topic's last stable offset is %d of %d rows after 30 min", committedEnd(a.kafka, "b.public.snap"), rows)
		}
		time.Sleep(50 * time.Millisecond)
	}
	topicDone := time.Since(start)
	cpu1 := procCPU(t, pid)
	t.Logf("snapshot into the topic: %d rows in %v (%.0f rows/s); agent CPU %.2f s per 1,000 rows",
		rows, topicDone.Round(time.Millisecond), float64(rows)/topicDone.Seconds(), (cpu1-cpu0)/float64(rows)*1000)

	// The sink, created once the snapshot is in the topic: how fast it
	// writes a backlog into the target.
	sinkStart := time.Now()
	createConnector(t, a.connect, "bench-sink", map[string]string{
		"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
		"connection.url":  fmt.Sprintf("jdbc:postgresql://%s/benchdst", du.Host), "connection.username": "strand", "connection.password": "x",
		"topics": "b.public.snap,b.public.stream,b.public.probe", "insert.mode": "upsert", "primary.key.mode": "record_key",
		"delete.enabled": "true", "schema.evolution": "basic",
	})
	snapEnd := waitCount("b_public_snap", rows, 30*time.Minute)
	cpu1b := procCPU(t, pid)
	snapDur := snapEnd.Sub(sinkStart)
	t.Logf("snapshot from the topic into the target (the sink's backlog): %d rows in %v (%.0f rows/s); agent CPU %.2f s per 1,000 rows",
		rows, snapDur.Round(time.Millisecond), float64(rows)/snapDur.Seconds(), (cpu1b-cpu1)/float64(rows)*1000)

	// Steady streaming at 5,000 rows/s, with lag probes.
	const txnRows, txnsPerSec = 50, 100
	var (
		mu        sync.Mutex
		committed = map[int64]time.Time{} // probe id -> when COMMIT returned
		lags      []time.Duration
	)
	loadStart := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, steady)
	defer stopLoad()
	var next int64 = 1
	var streamed int
	cpu2 := procCPU(t, pid)
	loadDone := make(chan error, 1)
	go func() {
		c, err := pgx.Connect(ctx, srcURL)
		if err != nil {
			loadDone <- err
			return
		}
		defer c.Close(ctx)
		tick := time.NewTicker(time.Second / txnsPerSec)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-loadCtx.Done():
				loadDone <- nil
				return
			case <-tick.C:
			}
			b := &pgx.Batch{}
			b.Queue("BEGIN")
			b.Queue(`INSERT INTO stream SELECT i, 'name-' || i, (i % 100000) / 100.0, now(), i % 2 = 0, NULL
				FROM generate_series($1::int8, $1::int8 + $2 - 1) i`, next, txnRows)
			b.Queue("COMMIT")
			if err := c.SendBatch(ctx, b).Close(); err != nil {
				loadDone <- err
				return
			}
			next += txnRows
			streamed += txnRows
			if i%5 == 0 {
				// A probe in a transaction of its own, 20 a second.
				id := int64(i/5 + 1)
				if _, err := c.Exec(ctx, "INSERT INTO probe VALUES ($1, now())", id); err != nil {
					loadDone <- err
					return
				}
				mu.Lock()
				committed[id] = time.Now()
				mu.Unlock()
			}
		}
	}()
	// The poller has a connection of its own: a pgx.Conn serves one
	// query at a time, and waitCount uses dst meanwhile.
	poll, err := pgx.Connect(ctx, dstURL)
	if err != nil {
		t.Fatal(err)
	}
	defer poll.Close(ctx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		seen := int64(0)
		for {
			var max *int64
			err := poll.QueryRow(ctx, "SELECT max(id) FROM b_public_probe").Scan(&max)
			now := time.Now()
			if err == nil && max != nil && *max > seen {
				mu.Lock()
				for id := seen + 1; id <= *max; id++ {
					if at, ok := committed[id]; ok {
						lags = append(lags, now.Sub(at))
					}
				}
				mu.Unlock()
				seen = *max
			}
			if loadCtx.Err() != nil && (max != nil && int(*max) >= len(committed)) {
				return
			}
			if time.Since(start) > steady+snapDur+5*time.Minute {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	offered := float64(streamed) / time.Since(loadStart).Seconds()
	waitCount("b_public_stream", streamed, 2*time.Minute)
	<-pollDone
	cpu3 := procCPU(t, pid)
	t.Logf("streaming at %d rows/s asked (%.0f rows/s committed) for %v: %d rows; commit-to-target lag %s; agent CPU %.2f s per 1,000 rows",
		txnRows*txnsPerSec, offered, steady, streamed, quantiles(lags), (cpu3-cpu2)/float64(streamed)*1000)

	// Flat out: a backlog committed first, then drained.
	sink := count("b_public_stream")
	if _, err := connectCallT(t, "PUT", "http://"+a.connect+"/connectors/bench-sink/pause"); err != nil {
		t.Fatal(err)
	}
	cpu4 := procCPU(t, pid)
	topicBase := committedEnd(a.kafka, "b.public.stream")
	bstart := time.Now()
	for off := 0; off < burst; off += 1000 {
		if _, err := src.Exec(ctx, `INSERT INTO stream SELECT i, 'name-' || i, (i % 100000) / 100.0, now(), i % 2 = 0, 'burst'
			FROM generate_series($1::int8, $1::int8 + 999) i`, next); err != nil {
			t.Fatal(err)
		}
		next += 1000
	}
	committedAt := time.Since(bstart)
	// The source's part: the topic's last stable offset covers the
	// backlog (early by one offset per transaction marker).
	for committedEnd(a.kafka, "b.public.stream") < topicBase+int64(burst) {
		if time.Since(bstart) > 10*time.Minute {
			t.Fatal("the burst is not in the topic after 10 min")
		}
		time.Sleep(20 * time.Millisecond)
	}
	inTopic := time.Since(bstart)
	resumedAt := time.Now()
	if _, err := connectCallT(t, "PUT", "http://"+a.connect+"/connectors/bench-sink/resume"); err != nil {
		t.Fatal(err)
	}
	bend := waitCount("b_public_stream", sink+burst, 10*time.Minute)
	cpu5 := procCPU(t, pid)
	t.Logf("streaming flat out: %d rows committed in the source in %v, in the topic after %v (%.0f rows/s), in the target %v after the paused sink resumed (%.0f rows/s); agent CPU %.2f s per 1,000 rows (both connectors)",
		burst, committedAt.Round(time.Millisecond), inTopic.Round(time.Millisecond), float64(burst)/inTopic.Seconds(),
		bend.Sub(resumedAt).Round(time.Millisecond), float64(burst)/bend.Sub(resumedAt).Seconds(), (cpu5-cpu4)/float64(burst)*1000)
}

func connectCallT(t *testing.T, method, u string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	code, body, err := connectCall(ctx, method, u, nil)
	if err == nil && code/100 != 2 {
		err = fmt.Errorf("%s %s: %d %s", method, u, code, body)
	}
	return code, err
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

// procCPU is the process's user and system CPU seconds so far, from
// /proc/<pid>/stat (utime and stime, fields 14 and 15, in USER_HZ:
// 100 a second on Linux).
func procCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	// The command name, field 2, may hold spaces: count from after it.
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, err1 := strconv.ParseFloat(fields[11], 64)
	st, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return (ut + st) / 100
}

// committedEnd is the sum of topic's partitions' last stable offsets
// (0 while the topic does not exist).
func committedEnd(addr, topic string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lo, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	var sum int64
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			sum += o.Offset
		}
	})
	return sum
}
