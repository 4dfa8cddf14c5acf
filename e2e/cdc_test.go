package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/testservers/mariadbtest"
)

// Issue 30's acceptance (change data capture), with the whole system
// as its users run it: a PostgreSQL source captured by three `strand
// serve` agents on a PostgreSQL log, sunk into a second PostgreSQL and
// into MariaDB, every connector created by a POST of Debezium's own
// configuration to Kafka Connect's REST API.
//
//	go test ./e2e -run 'TestCDC' -v               # the pieces and the 60 s acceptance run
//	STRAND_CDC_SOAK=10m go test -count=1 -timeout 40m -v -run TestCDCAcceptance ./e2e/
//	STRAND_CDC_BENCH=1 go test -count=1 -timeout 30m -v -run TestCDCBench ./e2e/

// cdcSoakEnv sets how long TestCDCAcceptance's workload runs (a Go
// duration); 60 s when unset, which CI runs.
const cdcSoakEnv = "STRAND_CDC_SOAK"

// cdcKillEvery is how often the agent running the source is killed.
const cdcKillEvery = 30 * time.Second

// cdcPrefix is the source's topic.prefix: topics are
// cdc.public.<table>, target tables cdc_public_<table> (the JDBC
// sink's default naming, ${topic} with dots made underscores).
const cdcPrefix = "cdc"

func cdcTopic(tb *cdcTable) string       { return cdcPrefix + ".public." + tb.name }
func cdcTargetTable(tb *cdcTable) string { return cdcPrefix + "_public_" + tb.name }

func cdcTableOfTopic(topic string) *cdcTable {
	for _, tb := range cdcTables {
		if cdcTopic(tb) == topic {
			return tb
		}
	}
	return nil
}

// cdcAgent is one `strand serve` of the test's cluster.
type cdcAgent struct {
	nodeID                         int32
	kafka, httpAddr, connect, data string
	args                           []string
	proc                           *agentProcess
}

// startCDCAgents starts n agents on a fresh PostgreSQL log, each
// serving Connect's REST API on a port of its own.
func startCDCAgents(t *testing.T, n int) []*cdcAgent {
	t.Helper()
	logURL := pgLogletURL(t, "e2e-cdc")
	objURL := "file://" + t.TempDir()
	agents := make([]*cdcAgent, n)
	for i := range agents {
		a := &cdcAgent{nodeID: int32(i + 1), kafka: freeAddr(t), httpAddr: freeAddr(t), connect: freeAddr(t), data: t.TempDir()}
		a.args = []string{"--data-dir", a.data, "--node-id", strconv.Itoa(int(a.nodeID)),
			"--kafka-listen", a.kafka, "--http-listen", a.httpAddr, "--connect-listen", a.connect,
			"--objstore", objURL, "--log", logURL, "--lease", clusterLease.String(), "--snapshot-interval", "0"}
		a.proc = startProcess(t, a.httpAddr, a.args...)
		agents[i] = a
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	for _, a := range agents {
		waitBrokers(t, a.kafka, ids)
	}
	return agents
}

func (a *cdcAgent) restart(t *testing.T) {
	t.Helper()
	a.proc = startProcess(t, a.httpAddr, a.args...)
}

// connectStatus is GET /connectors/{name}/status, as Connect answers it.
type connectStatus struct {
	Name      string `json:"name"`
	Connector struct {
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
		Trace    string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		ID       int    `json:"id"`
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
		Trace    string `json:"trace"`
	} `json:"tasks"`
	Type string `json:"type"`
}

// connectCall sends one request of Connect's REST API (a curl, as its
// users script it) and returns the status code and body.
func connectCall(ctx context.Context, method, u string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// createConnector POSTs {"name", "config"} to /connectors, as
// `curl -X POST -H 'Content-Type: application/json' --data @conn.json`
// does, and wants Connect's 201 Created with the connector echoed.
func createConnector(t *testing.T, connectAddr, name string, config map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	code, body, err := connectCall(ctx, http.MethodPost, "http://"+connectAddr+"/connectors", map[string]any{"name": name, "config": config})
	if err != nil {
		t.Fatalf("POST /connectors %s: %v", name, err)
	}
	if code != http.StatusCreated {
		t.Fatalf("POST /connectors %s: %d %s", name, code, body)
	}
	var got struct {
		Name   string            `json:"name"`
		Config map[string]string `json:"config"`
		Type   string            `json:"type"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Name != name || got.Config["connector.class"] != config["connector.class"] {
		t.Fatalf("POST /connectors %s answered %s (%v)", name, body, err)
	}
}

// runningOn returns the agent whose Connect worker runs name's task,
// asking every live agent until one names an owner that confirms it,
// or nil with the last status seen.
func runningOn(agents []*cdcAgent, name string) (*cdcAgent, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last := ""
	status := func(a *cdcAgent) (connectStatus, error) {
		var st connectStatus
		code, body, err := connectCall(ctx, http.MethodGet, "http://"+a.connect+"/connectors/"+name+"/status", nil)
		if err != nil {
			return st, err
		}
		last = fmt.Sprintf("%d %s", code, body)
		if code != http.StatusOK {
			return st, fmt.Errorf("status %d", code)
		}
		return st, json.Unmarshal(body, &st)
	}
	for _, a := range agents {
		st, err := status(a)
		if err != nil || len(st.Tasks) != 1 || st.Tasks[0].State != "RUNNING" {
			continue
		}
		for _, owner := range agents {
			if owner.connect != st.Tasks[0].WorkerID {
				continue
			}
			if own, err := status(owner); err == nil && len(own.Tasks) == 1 && own.Tasks[0].State == "RUNNING" && own.Tasks[0].WorkerID == owner.connect {
				return owner, last
			}
		}
	}
	return nil, last
}

// waitRunning waits until some agent runs name's task, and returns it.
func waitRunning(t *testing.T, agents []*cdcAgent, name string, bound time.Duration) *cdcAgent {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		a, last := runningOn(agents, name)
		if a != nil {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("connector %s not RUNNING on any agent after %v; last status: %s", name, bound, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// capture is a read_committed consumer of the captured topics, running
// through the whole test, keeping every record it reads.
type capture struct {
	mu struct {
		sync.Mutex
		recs     []capturedRecord
		perTopic map[string]int
		err      error
	}
	done chan struct{}
}

func startCapture(t *testing.T, ctx context.Context, seeds []string) *capture {
	t.Helper()
	topics := make([]string, len(cdcTables))
	for i, tb := range cdcTables {
		topics[i] = cdcTopic(tb)
	}
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	c := &capture{done: make(chan struct{})}
	c.mu.perTopic = map[string]int{}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				c.mu.recs = append(c.mu.recs, capturedRecord{topic: r.Topic, partition: r.Partition, offset: r.Offset, key: r.Key, value: r.Value})
				c.mu.perTopic[r.Topic]++
			})
			c.mu.Unlock()
			// Errors while agents die are retried by the client; an
			// unknown topic is a topic the source has not created yet.
		}
	}()
	return c
}

func (c *capture) snapshot() ([]capturedRecord, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mu.recs), cloneCounts(c.mu.perTopic)
}

func cloneCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestCDCAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary, starts three PostgreSQL servers, MariaDB and three agents")
	}
	dur := 60 * time.Second
	if s := os.Getenv(cdcSoakEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", cdcSoakEnv, s, err)
		}
		dur = d
	}
	kafkajsScript(t) // the Debezium-shaped consumer must be runnable before anything starts
	ctx := context.Background()

	// The source (logical decoding, restarted once), the two targets.
	srcSrv, srcURL := startCDCPostgres(t, "cdcsrc", true)
	_, dstURL := startCDCPostgres(t, "cdcdst", false)
	maria, err := mariadbtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(maria.Stop)
	connectSrc := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, srcURL) }
	w := newCDCWorkload(connectSrc, uint64(time.Now().UnixNano()))
	const seedRows = 300
	{
		c, err := connectSrc(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.createSchema(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := w.seed(ctx, c, seedRows); err != nil {
			t.Fatal(err)
		}
		c.Close(ctx)
	}

	agents := startCDCAgents(t, 3)
	seeds := []string{agents[0].kafka, agents[1].kafka, agents[2].kafka}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	capt := startCapture(t, runCtx, seeds)

	src, _ := url.Parse(srcURL)
	const secret = "cdc-e2e-secret-7d1f" // trust auth ignores it; it must not show where secrets must not
	var topics []string
	var include []string
	for _, tb := range cdcTables {
		topics = append(topics, cdcTopic(tb))
		include = append(include, "public."+tb.name)
	}
	createConnector(t, agents[0].connect, "pg-source", map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":         "1",
		"database.hostname": src.Hostname(), "database.port": src.Port(),
		"database.user": "strand", "database.password": secret, "database.dbname": "cdcsrc",
		"topic.prefix": cdcPrefix, "table.include.list": strings.Join(include, ","),
		"plugin.name": "pgoutput", "slot.name": "strand_cdc", "publication.name": "strand_cdc",
		"publication.autocreate.mode": "filtered",
	})
	// The snapshot first, whole, before any streaming change: what the
	// per-transaction check takes for op r.
	waitCaptured(t, capt, func(perTopic map[string]int) bool {
		for _, tb := range cdcTables {
			if perTopic[cdcTopic(tb)] < seedRows {
				return false
			}
		}
		return true
	}, 2*time.Minute, "the snapshot's records")

	dst, _ := url.Parse(dstURL)
	sink := func(connURL, password string) map[string]string {
		c := map[string]string{
			"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
			"tasks.max":       "1",
			"connection.url":  connURL, "connection.username": "strand",
			"topics": strings.Join(topics, ","), "insert.mode": "upsert", "primary.key.mode": "record_key",
			"delete.enabled": "true", "schema.evolution": "basic",
		}
		if password != "" {
			c["connection.password"] = password
		}
		return c
	}
	createConnector(t, agents[1].connect, "pg-sink", sink(fmt.Sprintf("jdbc:postgresql://%s/cdcdst", dst.Host), secret))
	// MariaDB's test user has no password, and MariaDB refuses one
	// given where none is set (PostgreSQL's trust ignores it).
	createConnector(t, agents[2].connect, "mariadb-sink", sink(maria.URL(), ""))

	// The workload, and the faults meanwhile.
	wlCtx, stopWorkload := context.WithCancel(ctx)
	wlDone := make(chan error, 1)
	start := time.Now()
	go func() {
		wlDone <- w.run(wlCtx, cdcRun{rate: 40, maxOps: 8, largeEvery: 600, changeAt: dur / 2}, t.Logf)
	}()
	type fault struct {
		at   time.Duration
		name string
		do   func()
	}
	var faults []fault
	// The source's agent: killed every 30 s from 15 s on, so a CI run
	// has two kills. It stays down until another agent runs the source
	// (its lease runs out, placement moves the task), then comes back,
	// and the task may move back to it: two handovers a kill.
	for at := cdcKillEvery / 2; at < dur; at += cdcKillEvery {
		faults = append(faults, fault{at, "kill -9 the source's agent", func() {
			a := waitRunning(t, agents, "pg-source", time.Minute)
			t.Logf("%v: kill -9 agent %d, running pg-source (%s)", time.Since(start).Round(time.Second), a.nodeID, w.stats())
			killedAt := time.Now()
			a.proc.kill()
			for {
				b, _ := runningOn(agents, "pg-source")
				if b != nil && b != a {
					t.Logf("  pg-source running on agent %d %v after the kill", b.nodeID, time.Since(killedAt).Round(10*time.Millisecond))
					break
				}
				if time.Since(killedAt) > time.Minute {
					t.Fatalf("pg-source not running on another agent a minute after agent %d was killed", a.nodeID)
				}
				time.Sleep(100 * time.Millisecond)
			}
			a.restart(t)
		}})
	}
	faults = append(faults,
		fault{dur * 2 / 5, "restart the source PostgreSQL", func() {
			t.Logf("%v: kill -9 the source PostgreSQL and start it again", time.Since(start).Round(time.Second))
			srcSrv.Kill()
			if err := srcSrv.Restart(); err != nil {
				t.Fatal(err)
			}
		}},
		fault{dur * 3 / 5, "kill -9 the sink's agent", func() {
			a := waitRunning(t, agents, "pg-sink", time.Minute)
			t.Logf("%v: kill -9 agent %d, running pg-sink", time.Since(start).Round(time.Second), a.nodeID)
			a.proc.kill()
			a.restart(t)
		}},
	)
	slices.SortFunc(faults, func(a, b fault) int { return int(a.at - b.at) })
	for _, f := range faults {
		time.Sleep(time.Until(start.Add(f.at)))
		f.do()
	}
	time.Sleep(time.Until(start.Add(dur)))
	stopWorkload()
	if err := <-wlDone; err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload done after %v: %s", time.Since(start).Round(time.Second), w.stats())
	if !w.changed {
		t.Fatal("the schema change never ran")
	}

	// Every committed transaction reaches the topics, whole and once.
	want := w.transactions()
	check := txCheck{tableOf: cdcTableOfTopic, want: want, snapshotRows: map[string]int{}}
	for _, tb := range cdcTables {
		check.snapshotRows[tb.name] = seedRows
	}
	waitCaptured(t, capt, func(map[string]int) bool {
		recs, _ := capt.snapshot()
		seen := map[int64]int{}
		for _, r := range recs {
			if r.value == nil {
				continue
			}
			if ev, err := decodeEvent(r.value); err == nil && ev.Source.TxID != nil && ev.Op != "r" {
				seen[*ev.Source.TxID]++
			}
		}
		for tx, evs := range want {
			if seen[tx] < len(evs) {
				return false
			}
		}
		return true
	}, 3*time.Minute, "every committed transaction's records")
	// A moment more, so a duplicate written after the last expected
	// record is read too.
	time.Sleep(2 * time.Second)
	recs, perTopic := capt.snapshot()
	if problems := check.check(recs, 30); len(problems) > 0 {
		t.Errorf("the read_committed consumer's records against the source's transactions:\n  %s", strings.Join(problems, "\n  "))
	} else {
		t.Logf("read_committed consumer: %d records (%v), %d transactions each whole, once, in order", len(recs), perTopic, len(want))
	}

	// Each target equals the source, row count and ordered checksum.
	srcConn, err := connectSrc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srcConn.Close(ctx)
	wantRows := map[string]cdcRows{}
	for _, tb := range cdcTables {
		if wantRows[tb.name], err = readPGRows(ctx, srcConn, tb.name, tb.columnsAt(true)); err != nil {
			t.Fatal(err)
		}
	}
	dstConn, err := pgx.Connect(ctx, dstURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dstConn.Close(ctx)
	mdb, err := sql.Open("mysql", maria.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer mdb.Close()
	targets := []struct {
		name string
		read func(ctx context.Context, tb *cdcTable) (cdcRows, error)
	}{
		{"PostgreSQL", func(ctx context.Context, tb *cdcTable) (cdcRows, error) {
			return readPGRows(ctx, dstConn, cdcTargetTable(tb), tb.columnsAt(true))
		}},
		{"MariaDB", func(ctx context.Context, tb *cdcTable) (cdcRows, error) {
			return readSQLRows(ctx, mdb, cdcTargetTable(tb), tb.columnsAt(true))
		}},
	}
	for _, target := range targets {
		// The sinks had the whole consumer check to catch up in; 3
		// minutes more per target is a deadlock guard.
		deadline := time.Now().Add(3 * time.Minute)
		for _, tb := range cdcTables {
			want := wantRows[tb.name]
			for {
				rctx, cancel := context.WithTimeout(ctx, time.Minute)
				got, err := target.read(rctx, tb)
				cancel()
				diff := ""
				if err != nil {
					diff = err.Error()
				} else {
					diff = diffRows(want, got, 20)
				}
				if diff == "" {
					t.Logf("%s %s: %d rows, checksum %s, equal to the source's", target.name, cdcTargetTable(tb), len(got), got.digest())
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s %s differs from the source (source %d rows, checksum %s):\n%s",
						target.name, cdcTargetTable(tb), len(want), want.digest(), diff)
					break
				}
				time.Sleep(time.Second)
			}
		}
	}

	// A consumer written for Debezium rebuilds the tables from the
	// topics as they are.
	res := runDebeziumConsumer(t, seeds[0], perTopic, 3*time.Minute)
	if len(res.Errors) > 0 {
		t.Errorf("the Debezium-shaped consumer found %d faults (first %d):\n  %s", len(res.Errors), min(len(res.Errors), 50), strings.Join(res.Errors, "\n  "))
	}
	for _, tb := range cdcTables {
		cols := tb.columnsAt(true)
		got, err := debeziumRows(tb, cols, res.Tables[tb.name])
		if err != nil {
			t.Errorf("the Debezium-shaped consumer's %s: %v", tb.name, err)
			continue
		}
		if d := diffRows(wantRows[tb.name], got, 20); d != "" {
			t.Errorf("%s as the Debezium-shaped consumer rebuilt it differs from the source:\n%s", tb.name, d)
		}
	}
	t.Logf("Debezium-shaped consumer (kafkajs): counts %v", res.Counts)

	// Nothing failed for good, and the password stayed out of what the
	// API shows.
	for _, name := range []string{"pg-source", "pg-sink", "mariadb-sink"} {
		waitRunning(t, agents, name, time.Minute)
		code, body, err := connectCall(ctx, http.MethodGet, "http://"+agents[0].connect+"/connectors/"+name+"/config", nil)
		if err != nil || code != http.StatusOK {
			t.Errorf("GET /connectors/%s/config: %d %s %v", name, code, body, err)
		} else if strings.Contains(string(body), secret) {
			t.Errorf("GET /connectors/%s/config shows the password: %s", name, body)
		}
	}
	stopRun()
	<-capt.done
}

// waitCaptured waits until ok holds of the capture's records per topic.
func waitCaptured(t *testing.T, c *capture, ok func(perTopic map[string]int) bool, bound time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		_, per := c.snapshot()
		if ok(per) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not read after %v: records per topic %v", what, bound, per)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
