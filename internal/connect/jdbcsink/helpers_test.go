package jdbcsink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/testservers/mariadbtest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// mariadbRunner chains the two shared servers' TestMain wrappers.
type mariadbRunner struct{ m *testing.M }

func (r mariadbRunner) Run() int { return mariadbtest.Run(r.m) }

func TestMain(m *testing.M) { os.Exit(pgtest.Run(mariadbRunner{m})) }

// db is a target database for a test: the connector's URL and account,
// and a connection to check what the sink wrote.
type db struct {
	name string // "postgresql" or "mariadb"
	url  string // JDBC URL
	user string
	sql  *sql.DB
	// typeQuery returns a column's declared type.
	typeQuery string
	q         func(string) string
}

func postgresDB(t testing.TB, pgURL string) *db {
	t.Helper()
	// pgtest's URL is postgres://strand@127.0.0.1:PORT/postgres.
	rest := strings.TrimPrefix(pgURL, "postgres://")
	user, rest, _ := strings.Cut(rest, "@")
	hostDB, _, _ := strings.Cut(rest, "?")
	conn, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &db{
		name: "postgresql", url: "jdbc:postgresql://" + hostDB, user: user, sql: conn,
		typeQuery: "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2",
		q:         postgres{}.quote,
	}
}

func mariaDB(t testing.TB, dsn, jdbcURL string) *db {
	t.Helper()
	conn, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &db{
		name: "mariadb", url: jdbcURL, user: "strand", sql: conn,
		typeQuery: "SELECT data_type FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?",
		q:         mariadb{}.quote,
	}
}

// targets runs f against each database, as subtests.
func targets(t *testing.T, f func(t *testing.T, d *db)) {
	t.Run("postgresql", func(t *testing.T) { f(t, postgresDB(t, pgtest.URL(t))) })
	t.Run("mariadb", func(t *testing.T) { f(t, mariaDB(t, mariadbtest.DSN(t), mariadbtest.URL(t))) })
}

// config is a sink configuration for d, with extra keys.
func (d *db) config(topics string, extra ...string) map[string]string {
	c := map[string]string{
		"connector.class":     ClassName,
		"connection.url":      d.url,
		"connection.username": d.user,
		"topics":              topics,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i]] = extra[i+1]
	}
	return c
}

// cluster is an in-process Kafka cluster (kfake) with topics.
func cluster(t testing.TB, partitions int32, topics ...string) func() []kgo.Opt {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	return func() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(addrs...)} }
}

// producer produces records, synchronously, and remembers each
// partition's end offset.
type producer struct {
	t  testing.TB
	cl *kgo.Client
	mu sync.Mutex
	// ends are the partitions' next offsets after what was produced.
	ends map[tp]int64
}

func newProducer(t testing.TB, kafka func() []kgo.Opt, opts ...kgo.Opt) *producer {
	t.Helper()
	cl, err := kgo.NewClient(append(kafka(), append([]kgo.Opt{kgo.DefaultProduceTopic("unused")}, opts...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &producer{t: t, cl: cl, ends: map[tp]int64{}}
}

// send produces value (nil: a tombstone) with key to topic.
func (p *producer) send(topic, key string, value any) {
	p.t.Helper()
	r := &kgo.Record{Topic: topic, Key: []byte(key)}
	switch v := value.(type) {
	case nil:
	case string:
		r.Value = []byte(v)
	case []byte:
		r.Value = v
	default:
		panic(fmt.Sprintf("value %T", value))
	}
	if err := p.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ends[tp{r.Topic, r.Partition}] = max(p.ends[tp{r.Topic, r.Partition}], r.Offset+1)
	p.mu.Unlock()
}

// running is a task started in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// start runs a task of config as connector name.
func start(t testing.TB, name string, config map[string]string, kafka func() []kgo.Opt, m *Metrics) *running {
	t.Helper()
	if err := Validate(config); err != nil {
		t.Fatal(err)
	}
	task, err := Class(m).New(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	env := connect.Env{Name: name, Kafka: kafka, Dir: t.TempDir(), Clock: clock.Real,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), Running: func() {}}
	go func() { r.done <- task.Run(ctx, env) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels the task and returns what Run returned (nil for a
// cancellation).
func (r *running) stop() error {
	r.cancel()
	err := <-r.done
	r.done <- err // stop may be called again
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// waitCaughtUp waits until the offsets table holds the producer's
// ends for connector, or the task r ends (a failure), or a timeout.
func waitCaughtUp(t testing.TB, d *db, connector string, p *producer, r *running) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := offsetsOf(d, connector)
		if err == nil {
			done := true
			p.mu.Lock()
			for k, end := range p.ends {
				if got[k] != end {
					done = false
				}
			}
			p.mu.Unlock()
			if done {
				return
			}
		}
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("the task ended before catching up: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up in 60s: offsets %v, want %v (last error %v)", got, p.ends, err)
		}
	}
}

func offsetsOf(d *db, connector string) (map[tp]int64, error) {
	ph := "?"
	if d.name == "postgresql" {
		ph = "$1"
	}
	rows, err := d.sql.Query("SELECT topic, kafka_partition, next_offset FROM "+d.q(OffsetsTable)+" WHERE connector = "+ph, connector)
	if err != nil {
		return nil, err
	}
	return scanOffsets(rows)
}

// rows reads a table as strings, ordered by the first expression:
// each row its expressions' values joined by "|", NULL as "∅".
func (d *db) rows(t testing.TB, table string, exprs ...string) []string {
	t.Helper()
	cols := exprs
	rs, err := d.sql.Query("SELECT " + strings.Join(exprs, ", ") + " FROM " + d.q(table) + " ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, v := range vals {
			if v.Valid {
				s = append(s, v.String)
			} else {
				s = append(s, "∅")
			}
		}
		out = append(out, strings.Join(s, "|"))
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (d *db) exec(t testing.TB, q string) {
	t.Helper()
	if _, err := d.sql.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (d *db) columnType(t testing.TB, table, col string) string {
	t.Helper()
	var typ string
	if err := d.sql.QueryRow(d.typeQuery, table, col).Scan(&typ); err != nil {
		t.Fatalf("type of %s.%s: %v", table, col, err)
	}
	return typ
}

var uniqSeq atomic.Int64

// uniq makes a name unique in the test binary, since the servers are
// shared by the package's tests.
func uniq(base string) string { return fmt.Sprintf("%s%d", base, uniqSeq.Add(1)) }

// text is an SQL expression reading col as text, the same way in both
// databases where they agree.
func (d *db) text(col string) string {
	if d.name == "postgresql" {
		return d.q(col) + "::text"
	}
	return "CAST(" + d.q(col) + " AS CHAR)"
}
