package pgsource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/connect/pgsource"
	"github.com/strandkafka/strand/internal/sql/sinks/sinktest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

const opTimeout = 120 * time.Second

// The PostgreSQL server with logical decoding on, and the agent, are
// shared by the package's tests (each test has its own database, slot
// and topic prefix).
var shared struct {
	pgOnce sync.Once
	pg     *pgtest.Server
	pgErr  error

	agentOnce sync.Once
	addr      string
	agent     *agent.Agent
	agentErr  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.agent != nil {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_ = shared.agent.Stop(ctx)
		cancel()
	}
	if shared.pg != nil {
		shared.pg.Stop()
	}
	os.Exit(code)
}

func pgServer(t testing.TB) *pgtest.Server {
	t.Helper()
	shared.pgOnce.Do(func() {
		shared.pg, shared.pgErr = pgtest.Start(pgtest.Options{Settings: map[string]string{
			"wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20",
			"wal_sender_timeout": "60s",
		}})
	})
	if shared.pgErr != nil {
		testproc.SkipOrFail(t, shared.pgErr)
	}
	return shared.pg
}

func kafkaAddr(t testing.TB) string {
	t.Helper()
	shared.agentOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		dir, err := os.MkdirTemp("", "pgsource-agent-")
		if err != nil {
			shared.agentErr = err
			return
		}
		shared.agent, shared.agentErr = agent.Start(ctx, agent.Config{DataDir: dir, KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
			SchemaRegistryListen: "127.0.0.1:0"},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if shared.agentErr == nil {
			shared.addr = shared.agent.KafkaAddr()
		}
	})
	if shared.agentErr != nil {
		t.Fatalf("agent: %v", shared.agentErr)
	}
	return shared.addr
}

// fixture is one test's database, connector configuration and Kafka.
type fixture struct {
	t      testing.TB
	name   string
	db     string
	prefix string
	dbURL  string
	conn   *pgx.Conn
	addr   string
	config map[string]string
	m      *pgsource.Metrics
	// authorize is the tasks' Env.Authorize (nil: everything allowed).
	authorize func(acl.Operation, string) error
}

func newFixture(t testing.TB, name string) *fixture {
	t.Helper()
	srv := pgServer(t)
	addr := kafkaAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	admin, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := "db_" + name
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL())
	u.Path = "/" + db
	f := &fixture{t: t, name: name, db: db, prefix: "pg_" + name, dbURL: u.String(), addr: addr, m: pgsource.NewMetrics()}
	f.conn = f.connect()
	t.Cleanup(func() { f.conn.Close(context.Background()) })
	f.exec("CREATE TABLE strand_marker (id serial PRIMARY KEY)")
	f.config = map[string]string{
		"connector.class":   pgsource.ClassName,
		"database.hostname": u.Hostname(),
		"database.port":     u.Port(),
		"database.user":     u.User.Username(),
		"database.password": "",
		"database.dbname":   db,
		"database.sslmode":  "disable",
		"topic.prefix":      f.prefix,
		"slot.name":         "slot_" + name,
		"poll.interval.ms":  "50",
	}
	return f
}

func (f *fixture) connect() *pgx.Conn {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	c, err := pgx.Connect(ctx, f.dbURL)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) exec(sqls ...string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, s := range sqls {
		if _, err := f.conn.Exec(ctx, s); err != nil {
			f.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (f *fixture) kafka() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(f.addr)} }

// running is a task started by start.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned err
	err    error
}

// start runs the connector's task until stop.
func (f *fixture) start() *running {
	f.t.Helper()
	cls := pgsource.Class(f.m)
	if err := cls.Validate(f.config); err != nil {
		f.t.Fatal(err)
	}
	task, err := cls.New(f.config)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	env := connect.Env{Name: f.name, Kafka: f.kafka, Dir: f.t.TempDir(), Clock: clock.OrReal(nil),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Running: func() {}, Authorize: f.authorize}
	if testing.Verbose() {
		env.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	go func() {
		r.err = task.Run(ctx, env)
		close(r.done)
	}()
	return r
}

// stop cancels the task and returns what Run returned other than the
// cancellation.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	if errors.Is(r.err, context.Canceled) {
		return nil
	}
	return r.err
}

// currentLSN is the server's WAL insert position: once the slot's
// confirmed LSN reaches it, every transaction committed before it is
// committed in Kafka (the task confirms nothing earlier).
func (f *fixture) currentLSN() pglogrepl.LSN {
	f.t.Helper()
	var lsn pglogrepl.LSN
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := f.conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()").Scan(&lsn); err != nil {
		f.t.Fatal(err)
	}
	return lsn
}

// waitConfirmed waits until the slot's confirmed LSN reaches lsn, or
// the task fails.
func (f *fixture) waitConfirmed(r *running, lsn pglogrepl.LSN) {
	f.t.Helper()
	deadline := time.Now().Add(opTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for {
		var got *pglogrepl.LSN
		err := f.conn.QueryRow(ctx, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", f.config["slot.name"]).Scan(&got)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			f.t.Fatal(err)
		}
		if got != nil && *got >= lsn {
			return
		}
		select {
		case <-r.done:
			f.t.Fatalf("task ended: %v", r.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("slot not confirmed up to %s in %v (at %v)", lsn, opTimeout, got)
		}
	}
}

// sync waits until the task has snapshotted and streamed everything
// committed so far: the slot exists, then a marker row written after
// that is confirmed (so past the snapshot's consistent point).
func (f *fixture) sync(r *running) {
	f.t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		var n int
		if err := f.conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.config["slot.name"]).Scan(&n); err != nil {
			f.t.Fatal(err)
		}
		if n == 1 {
			break
		}
		select {
		case <-r.done:
			f.t.Fatalf("task ended: %v", r.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.t.Fatal("no slot")
		}
	}
	f.exec("INSERT INTO strand_marker DEFAULT VALUES")
	f.waitConfirmed(r, f.currentLSN())
}

// ev is a decoded change event.
type ev struct {
	topic  string
	key    map[string]any
	value  map[string]any // the payload; nil for a tombstone
	schema map[string]any
	offset int64
}

func (e ev) op() string { return e.value["op"].(string) }
func (e ev) source() map[string]any {
	return e.value["source"].(map[string]any)
}
func (e ev) after() map[string]any {
	a, _ := e.value["after"].(map[string]any)
	return a
}
func (e ev) before() map[string]any {
	b, _ := e.value["before"].(map[string]any)
	return b
}

// read reads a table's topic, read_committed, to its last stable
// offset.
func (f *fixture) read(table string) []ev {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	topic := f.prefix + "." + table
	recs, err := sinktest.ReadCommitted(ctx, f.kafka(), topic)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []ev
	for _, r := range recs {
		e := ev{topic: topic, offset: r.Offset}
		if r.Key != nil {
			var k map[string]any
			dec(f.t, r.Key, &k)
			if p, ok := k["payload"]; ok {
				e.key = p.(map[string]any)
			} else {
				e.key = k
			}
		}
		if r.Value != nil {
			var v map[string]any
			dec(f.t, r.Value, &v)
			if p, ok := v["payload"]; ok {
				e.value = p.(map[string]any)
				e.schema = v["schema"].(map[string]any)
			} else {
				e.value = v
			}
		}
		out = append(out, e)
	}
	return out
}

func dec(t testing.TB, b []byte, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// endOffsets are a topic's partition ends: read_uncommitted (the
// high watermark, open transactions included) or read_committed
// (the last stable offset).
func (f *fixture) endOffsets(topic string, committed bool) int64 {
	f.t.Helper()
	opts := f.kafka()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	list := kadm.NewClient(cl).ListEndOffsets
	if committed {
		list = kadm.NewClient(cl).ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

func num(t testing.TB, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func fmtKey(k map[string]any) string { return fmt.Sprint(k) }

// metric sums the series of the metric name (all labels) of f's task.
func (f *fixture) metric(name string) float64 {
	f.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(f.m.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
