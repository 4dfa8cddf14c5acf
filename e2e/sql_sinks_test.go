package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/sql/sinks/sinktest"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// sinkSoakEnv sets TestSQLSinksExactlyOnce's length (a Go duration);
// 60 s when unset, which CI runs. The acceptance run is 5 minutes:
//
//	STRAND_SINK_SOAK=5m go test -count=1 -timeout 30m -v -run TestSQLSinksExactlyOnce ./e2e/
const sinkSoakEnv = "STRAND_SINK_SOAK"

// sinkKillEvery is how often the agent running a sink is killed.
const sinkKillEvery = 20 * time.Second

// sqlAgent is one `strand serve` of the sinks' cluster.
type sqlAgent struct {
	nodeID                     int32
	kafka, httpAddr, sql, data string
	args                       []string
	proc                       *agentProcess
}

// TestSQLSinksExactlyOnce is issue 29's exactly-once acceptance: three
// agents on a PostgreSQL log, materialized views with an aggregate, a
// TUMBLE window and a join (with an upsert source), an upsert sink on
// each of the first two and a changelog sink on the third, a steady
// producer of orders and customer changes; every 20 s the agent
// running one of the sinks (each in turn) is killed with SIGKILL and
// started again. At the end each sink's topic, read read_committed,
// equals PostgreSQL's answer over what the input topics hold (the
// upsert topics' last value per key; the changelog's changes summed,
// where a change written twice or lost would show), and each view on
// every agent equals it too.
func TestSQLSinksExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts PostgreSQL")
	}
	dur := 60 * time.Second
	if s := os.Getenv(sinkSoakEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", sinkSoakEnv, s, err)
		}
		dur = d
	}
	ctx := context.Background()
	logURL := pgLogletURL(t, "e2e-sinks")
	objURL := "file://" + t.TempDir()
	agents := make([]*sqlAgent, 3)
	for i := range agents {
		a := &sqlAgent{nodeID: int32(i + 1), kafka: freeAddr(t), httpAddr: freeAddr(t), sql: freeAddr(t), data: t.TempDir()}
		a.args = []string{"--data-dir", a.data, "--node-id", strconv.Itoa(int(a.nodeID)),
			"--kafka-listen", a.kafka, "--http-listen", a.httpAddr, "--sql-listen", a.sql,
			"--objstore", objURL, "--log", logURL, "--lease", clusterLease.String(), "--snapshot-interval", "0"}
		a.proc = startProcess(t, a.httpAddr, a.args...)
		agents[i] = a
	}
	for _, a := range agents {
		waitBrokers(t, a.kafka, []int32{1, 2, 3})
	}
	seeds := []string{agents[0].kafka, agents[1].kafka, agents[2].kafka}
	seedOpts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	compact := "compact"
	createTopic(t, seeds[0], "orders", 3)
	createTopic(t, seeds[0], "customers", 2)
	createTopicConfigs(t, seeds[0], "totals_out", 3, map[string]*string{"cleanup.policy": &compact})
	createTopicConfigs(t, seeds[0], "windows_out", 2, map[string]*string{"cleanup.policy": &compact})
	createTopic(t, seeds[0], "cities_log", 2)

	sqlConn := func(a *sqlAgent) (*pgx.Conn, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return pgx.Connect(cctx, fmt.Sprintf("postgres://e2e@%s/strand?sslmode=disable", a.sql))
	}
	conn, err := sqlConn(agents[0])
	if err != nil {
		t.Fatal(err)
	}
	views := []struct{ name, query, oracle string }{
		{"totals", "SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer", ""},
		{"per_second", "SELECT window_start, window_end, count(*) AS n, sum(qty) AS q FROM TUMBLE(orders, ts, INTERVAL '1' SECOND) GROUP BY window_start, window_end",
			"SELECT date_trunc('second', ts) AS window_start, date_trunc('second', ts) + interval '1 second' AS window_end, count(*) AS n, sum(qty) AS q FROM orders GROUP BY 1, 2"},
		{"cities", "SELECT c.city, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN customers c ON c._key = o.customer GROUP BY c.city", ""},
	}
	sinks := []struct {
		name, view, topic, envelope string
		keyCols                     []string
	}{
		{"totals_sink", "totals", "totals_out", "upsert", []string{"customer"}},
		{"windows_sink", "per_second", "windows_out", "upsert", []string{"window_start", "window_end"}},
		{"cities_sink", "cities", "cities_log", "changelog", nil},
	}
	ddl := []string{
		"CREATE SOURCE orders (id int8, customer text, amount numeric(10,2), qty int4, ts timestamp) WITH (topic = 'orders', format = 'json')",
		"CREATE SOURCE customers (_key text, name text, city text) WITH (topic = 'customers', format = 'json', envelope = 'upsert')",
	}
	for _, v := range views {
		ddl = append(ddl, "CREATE MATERIALIZED VIEW "+v.name+" AS "+v.query)
	}
	for _, s := range sinks {
		ddl = append(ddl, fmt.Sprintf("CREATE SINK %s WITH (topic = '%s', format = 'json', envelope = '%s') AS SELECT * FROM %s", s.name, s.topic, s.envelope, s.view))
	}
	for _, d := range ddl {
		if _, err := conn.Exec(ctx, d); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	conn.Close(ctx)

	// The producer: about 200 orders a second, a customer change (one
	// in five a tombstone) every 25 orders. Failed sends are counted,
	// not retried: the oracle reads back what the topics hold.
	producer := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(10_000))
	var stopped atomic.Bool
	var sent, failed atomic.Int64
	prodDone := make(chan struct{})
	base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	cities := []string{"oslo", "rome", "lima", "nuuk", "kyiv", "faro"}
	go func() {
		defer close(prodDone)
		rng := rand.New(rand.NewPCG(1, 2))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		promise := func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			} else {
				sent.Add(1)
			}
		}
		for i := 0; !stopped.Load(); {
			<-tick.C
			for range 2 {
				i++
				v := fmt.Sprintf(`{"id": %d, "customer": "c%d", "amount": %d.%02d, "qty": %d, "ts": %q}`, i, 1+i%20, i*7%100, i*13%100, i%4,
					base.Add(time.Duration(i)*5*time.Millisecond).Format("2006-01-02 15:04:05.000"))
				producer.Produce(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}, promise)
				if i%25 == 0 {
					key := fmt.Sprintf("c%d", 1+rng.IntN(22))
					r := &kgo.Record{Topic: "customers", Key: []byte(key)}
					if rng.IntN(5) != 0 {
						r.Value = fmt.Appendf(nil, `{"name": "n%d", "city": %q}`, i, cities[rng.IntN(len(cities))])
					}
					producer.Produce(ctx, r, promise)
				}
			}
		}
	}()
	t.Cleanup(func() { stopped.Store(true); <-prodDone })

	// statusOn is sink's status in a's SHOW SINKS.
	statusOn := func(a *sqlAgent, sink string) (string, error) {
		c, err := sqlConn(a)
		if err != nil {
			return "", err
		}
		defer c.Close(ctx)
		rows, err := c.Query(ctx, "SHOW SINKS")
		if err != nil {
			return "", err
		}
		res, err := sqltest.Collect(rows)
		if err != nil {
			return "", err
		}
		for _, r := range res.Rows {
			if r[0] == sink {
				return r[len(r)-1].(string), nil
			}
		}
		return "", fmt.Errorf("no sink %s in SHOW SINKS", sink)
	}
	onAgent := regexp.MustCompile(`on agent (\d+)`)
	// runningOwner is the agent that says it runs sink, 0 if none does
	// (yet): one agent names the owner, the owner confirms.
	runningOwner := func(sink string) (int32, string) {
		var last string
		for _, a := range agents {
			st, err := statusOn(a, sink)
			if err != nil {
				continue
			}
			last = st
			m := onAgent.FindStringSubmatch(st)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			if n < 1 || n > len(agents) {
				continue
			}
			if own, err := statusOn(agents[n-1], sink); err == nil && own == "running on agent "+m[1] {
				return int32(n), own
			} else if err == nil {
				last = own
			}
		}
		return 0, last
	}

	start := time.Now()
	kills := 0
	var gaps []time.Duration
	procs := []*agentProcess{agents[0].proc, agents[1].proc, agents[2].proc}
	for round := 0; time.Duration(round+1)*sinkKillEvery < dur; round++ {
		time.Sleep(time.Until(start.Add(time.Duration(round+1) * sinkKillEvery)))
		sink := sinks[round%len(sinks)].name
		// The sink must be running on its owner when it is killed.
		var owner int32
		deadline := time.Now().Add(60 * time.Second)
		for {
			var status string
			if owner, status = runningOwner(sink); owner != 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no agent runs %s after 60 s (last status %q)", round, sink, status)
			}
			time.Sleep(200 * time.Millisecond)
		}
		v := agents[owner-1]
		t.Logf("%v: killing agent %d, running %s (%d records sent so far)", time.Since(start).Round(time.Second), owner, sink, sent.Load())
		killedAt := time.Now()
		v.proc.kill()
		kills++
		// The killed agent stays down until another one runs the sink
		// (once its lease ends): the sink moves, and how long it went
		// unwritten is measured. Then it comes back, and the sink may
		// move back to it, catching up from its older state.
		for {
			if n, _ := runningOwner(sink); n != 0 && n != owner {
				d := time.Since(killedAt)
				gaps = append(gaps, d)
				t.Logf("  %s running on agent %d %v after the kill", sink, n, d.Round(10*time.Millisecond))
				break
			}
			if time.Since(killedAt) > 60*time.Second {
				t.Fatalf("%s not running on another agent 60 s after the kill", sink)
			}
			time.Sleep(100 * time.Millisecond)
		}
		v.proc = startProcess(t, v.httpAddr, v.args...)
		procs = append(procs, v.proc)
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		t.Logf("kill to the sink running on another agent (lease %v): median %v, max %v",
			clusterLease, gaps[len(gaps)/2].Round(10*time.Millisecond), gaps[len(gaps)-1].Round(10*time.Millisecond))
	}
	// The load goes on to the run's end, after the last kill too.
	time.Sleep(time.Until(start.Add(dur)))
	stopped.Store(true)
	<-prodDone
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced %d records (%d failed) in %v with %d kills", sent.Load(), failed.Load(), time.Since(start).Round(time.Second), kills)

	// The oracle: PostgreSQL over what the input topics hold.
	pgc, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pgc.Close(ctx)
	for _, s := range []string{"DROP SCHEMA IF EXISTS e2esinks CASCADE", "CREATE SCHEMA e2esinks", "SET search_path = e2esinks",
		"CREATE TABLE orders (id int8, customer text, amount numeric(10,2), qty int4, ts timestamp)",
		"CREATE TABLE customers (_key text, name text, city text)"} {
		if _, err := pgc.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	orders, err := sinktest.ReadCommitted(rctx, seedOpts, "orders")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var orderRows []json.RawMessage
	for _, r := range orders {
		orderRows = append(orderRows, r.Value)
	}
	rctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	custs, err := sinktest.ReadCommitted(rctx, seedOpts, "customers")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	lastCust := map[string][]byte{}
	for _, r := range custs {
		if r.Value == nil {
			delete(lastCust, string(r.Key))
		} else {
			lastCust[string(r.Key)] = r.Value
		}
	}
	var custRows []map[string]any
	for k, v := range lastCust {
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatal(err)
		}
		m["_key"] = k
		custRows = append(custRows, m)
	}
	ob, _ := json.Marshal(orderRows)
	cb, _ := json.Marshal(custRows)
	for _, q := range []struct {
		sql string
		arg []byte
	}{{"INSERT INTO orders SELECT * FROM json_populate_recordset(null::orders, $1::json)", ob},
		{"INSERT INTO customers SELECT * FROM json_populate_recordset(null::customers, $1::json)", cb}} {
		if _, err := pgc.Exec(ctx, q.sql, string(q.arg)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("oracle input: %d orders, %d customer changes (%d customers at the end)", len(orders), len(custs), len(lastCust))

	oracleOf := func(view string) string {
		for _, v := range views {
			if v.name == view {
				if v.oracle != "" {
					return v.oracle
				}
				return v.query
			}
		}
		t.Fatalf("no view %s", view)
		return ""
	}
	// Each sink's topic equals the oracle once the sinks caught up.
	var wg sync.WaitGroup
	for _, s := range sinks {
		want := map[string]int64{}
		rows, err := pgc.Query(ctx, "SELECT to_json(x)::text FROM ("+oracleOf(s.view)+") x")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var text string
			if err := rows.Scan(&text); err != nil {
				t.Fatal(err)
			}
			c, err := sinktest.Canonical([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			want[c]++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(3 * time.Minute)
			for {
				rctx, cancel := context.WithTimeout(ctx, time.Minute)
				recs, err := sinktest.ReadCommitted(rctx, seedOpts, s.topic)
				cancel()
				var got map[string]int64
				if err == nil {
					if s.envelope == "upsert" {
						got, err = sinktest.Upserted(recs, s.keyCols)
					} else {
						got, err = sinktest.ChangelogSum(recs)
					}
				}
				diff := ""
				if err != nil {
					diff = err.Error()
				} else {
					diff = sinktest.Diff(want, got)
				}
				if diff == "" {
					t.Logf("sink %s: %d committed records, %d rows, equal to PostgreSQL's", s.name, len(recs), len(want))
					return
				}
				if time.Now().After(deadline) {
					if len(diff) > 4000 {
						diff = diff[:4000] + "..."
					}
					t.Errorf("sink %s's topic differs from PostgreSQL after 3 min:\n%s", s.name, diff)
					return
				}
				time.Sleep(time.Second)
			}
		}()
	}
	wg.Wait()
	// How the sinks' tasks started, from every agent process's log.
	starts := map[string]int{}
	startLine := regexp.MustCompile(`msg="sink running".* from="([^"]+)"`)
	for _, p := range procs {
		for _, m := range startLine.FindAllStringSubmatch(p.stderr.String(), -1) {
			starts[m[1]]++
		}
	}
	t.Logf("sink task starts, by the local state against the committed progress: %v", starts)
	// The argument of the exactly-once design: no agent's state is
	// ever ahead of the committed progress (the task logs it, and
	// rebuilds, if one is).
	for _, p := range procs {
		if out := p.stderr.String(); strings.Contains(out, "sink state ahead of its committed progress") {
			t.Errorf("an agent found its sink state ahead of the committed progress:\n%s", out)
		}
	}
	// Each view, on every agent, equals the oracle too.
	for _, a := range agents {
		c, err := sqlConn(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			want, err := sqltest.Collect(must(pgc.Query(ctx, oracleOf(v.name))))
			if err != nil {
				t.Fatal(err)
			}
			want.Name = fmt.Sprintf("agent %d: %s", a.nodeID, v.name)
			deadline := time.Now().Add(2 * time.Minute)
			for {
				var got sqltest.Result
				rows, err := c.Query(ctx, "SELECT * FROM "+v.name)
				if err == nil {
					got, err = sqltest.Collect(rows)
				}
				diff := ""
				if err == nil {
					diff, err = sqltest.Compare(want, got, sqltest.Options{})
				}
				if err == nil && diff == "" {
					break
				}
				if err != nil {
					diff = err.Error()
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s differs from PostgreSQL:\n%s", want.Name, diff)
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
		c.Close(ctx)
	}
}

func must(rows pgx.Rows, err error) pgx.Rows {
	if err != nil {
		panic(err)
	}
	return rows
}
