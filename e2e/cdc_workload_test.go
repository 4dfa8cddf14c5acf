package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// The CDC acceptance test's workload: a pgbench-like mix of small
// transactions over three tables with primary keys of two kinds, every
// column kind the envelope and the sinks must carry (int, text,
// numeric, timestamptz, boolean, a nullable column), a schema change
// half-way, and now and then a transaction large enough to span many
// of the source's batches. It remembers, per source transaction id,
// which row events that transaction made, so the consumer's check can
// say a transaction arrived whole, once.

// cdcKind is how a column's values are compared across databases: the
// source's type, whatever type a sink chose for it.
type cdcKind int

const (
	kindInt cdcKind = iota
	kindText
	kindNumeric
	kindTime
	kindBool
)

type cdcColumn struct {
	name string
	kind cdcKind
}

// cdcTable is one captured table. Its primary key is its first column.
type cdcTable struct {
	name    string
	columns []cdcColumn
	// added is the column the schema change adds half-way, and its
	// DDL type.
	added    cdcColumn
	addedSQL string
	ddl      string
}

// columnsAt is the table's columns before (false) or after (true) the
// schema change.
func (tb *cdcTable) columnsAt(changed bool) []cdcColumn {
	if !changed {
		return tb.columns
	}
	return append(slices.Clip(tb.columns), tb.added)
}

var cdcTables = []*cdcTable{
	{
		name: "accounts",
		columns: []cdcColumn{{"id", kindInt}, {"owner", kindText}, {"balance", kindNumeric},
			{"opened", kindTime}, {"active", kindBool}, {"note", kindText}},
		added: cdcColumn{"tier", kindText}, addedSQL: "text",
		ddl: `CREATE TABLE accounts (id int4 PRIMARY KEY, owner text NOT NULL, balance numeric(14,2) NOT NULL,
			opened timestamptz NOT NULL, active boolean NOT NULL, note text)`,
	},
	{
		name: "orders",
		columns: []cdcColumn{{"id", kindInt}, {"account_id", kindInt}, {"amount", kindNumeric},
			{"placed", kindTime}, {"paid", kindBool}, {"memo", kindText}},
		added: cdcColumn{"qty", kindInt}, addedSQL: "int4",
		ddl: `CREATE TABLE orders (id int8 PRIMARY KEY, account_id int4 NOT NULL, amount numeric(12,2) NOT NULL,
			placed timestamptz NOT NULL, paid boolean NOT NULL, memo text)`,
	},
	{
		// A text primary key: the record key is a string, and a sink
		// must make a key column of a type its database can index.
		name: "tags",
		columns: []cdcColumn{{"name", kindText}, {"weight", kindInt}, {"score", kindNumeric},
			{"touched", kindTime}, {"pinned", kindBool}, {"label", kindText}},
		added: cdcColumn{"color", kindText}, addedSQL: "text",
		ddl: `CREATE TABLE tags (name text PRIMARY KEY, weight int4 NOT NULL, score numeric(10,3) NOT NULL,
			touched timestamptz NOT NULL, pinned boolean NOT NULL, label text)`,
	},
}

func cdcTableNamed(name string) *cdcTable {
	for _, tb := range cdcTables {
		if tb.name == name {
			return tb
		}
	}
	panic("no CDC table " + name)
}

// rowEvent is one change a source transaction made, as the captured
// topic must show it: the table, Debezium's op (c, u, d; r for the
// snapshot) and the primary key, canonical.
type rowEvent struct {
	table, op, key string
}

func (e rowEvent) String() string { return e.table + " " + e.op + " " + e.key }

// cdcWorkload runs transactions on the source and records them.
type cdcWorkload struct {
	connect func(ctx context.Context) (*pgx.Conn, error)
	rng     *rand.Rand
	// live are the primary keys present in each table, by the
	// workload's own account: what updates and deletes pick from.
	live   map[string][]string
	nextID map[string]int64
	// changed reports whether the schema change ran.
	changed bool
	// largeTxnRows is the row count of the occasional large
	// transaction.
	largeTxnRows int

	mu struct {
		sync.Mutex
		// txns are the committed transactions' events, by txId.
		txns map[int64][]rowEvent
		// uncertain counts commits whose outcome was lost with the
		// connection and then looked up with txid_status.
		uncertain int
		committed int
		rows      int
		aborted   int
	}
}

func newCDCWorkload(connect func(ctx context.Context) (*pgx.Conn, error), seed uint64) *cdcWorkload {
	w := &cdcWorkload{connect: connect, rng: rand.New(rand.NewPCG(seed, 30)),
		live: map[string][]string{}, nextID: map[string]int64{}, largeTxnRows: 3000}
	w.mu.txns = map[int64][]rowEvent{}
	return w
}

// cdcBase is the workload's epoch for timestamps: values are whole
// microseconds, which every target keeps exactly (DATETIME(6), timestamptz).
var cdcBase = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// createSchema creates the tables in the source database.
func (w *cdcWorkload) createSchema(ctx context.Context, c *pgx.Conn) error {
	for _, tb := range cdcTables {
		if _, err := c.Exec(ctx, tb.ddl); err != nil {
			return fmt.Errorf("%s: %w", tb.ddl, err)
		}
	}
	return nil
}

// seed inserts rows per table in one transaction of its own, before
// the connector exists: what the snapshot reads (op r).
func (w *cdcWorkload) seed(ctx context.Context, c *pgx.Conn, rows int) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, tb := range cdcTables {
		for range rows {
			if _, err := w.insert(ctx, tx, tb); err != nil {
				return err
			}
		}
	}
	return tx.Commit(ctx)
}

// newKey names a new row of tb: an integer, or text for tags.
func (w *cdcWorkload) newKey(tb *cdcTable) string {
	w.nextID[tb.name]++
	if tb.columns[0].kind == kindText {
		// Not in insertion order, so the target's ordering by key is
		// exercised.
		return fmt.Sprintf("tag-%06d-%c", (w.nextID[tb.name]*7919)%1000003, 'a'+rune(w.nextID[tb.name]%26))
	}
	return fmt.Sprint(w.nextID[tb.name])
}

// values are a row's column values after the key, random, the
// nullable last column NULL one time in four.
func (w *cdcWorkload) values(tb *cdcTable) []any {
	r := w.rng
	ts := cdcBase.Add(time.Duration(r.Int64N(400*24*3600*1e6)) * time.Microsecond)
	var last any
	if r.IntN(4) != 0 {
		last = fmt.Sprintf("%s \"quoted\" 'single' ünïcødé %d", tb.name, r.IntN(1000))
	}
	var vs []any
	switch tb.name {
	case "accounts":
		vs = []any{fmt.Sprintf("owner-%d", r.IntN(500)), fmt.Sprintf("%d.%02d", r.IntN(2_000_000)-1_000_000, r.IntN(100)), ts, r.IntN(2) == 0, last}
	case "orders":
		vs = []any{int32(1 + r.IntN(1000)), fmt.Sprintf("%d.%02d", r.IntN(100_000), r.IntN(100)), ts, r.IntN(3) == 0, last}
	case "tags":
		vs = []any{int32(r.IntN(1 << 30)), fmt.Sprintf("%d.%03d", r.IntN(1_000_000), r.IntN(1000)), ts, r.IntN(2) == 0, last}
	}
	if w.changed {
		if tb.added.kind == kindInt {
			vs = append(vs, int32(r.IntN(50)))
		} else if r.IntN(3) != 0 {
			vs = append(vs, fmt.Sprintf("%s-%d", tb.added.name, r.IntN(9)))
		} else {
			vs = append(vs, nil)
		}
	}
	return vs
}

func (w *cdcWorkload) names(tb *cdcTable) []string {
	var out []string
	for _, c := range tb.columnsAt(w.changed) {
		out = append(out, c.name)
	}
	return out
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (w *cdcWorkload) insert(ctx context.Context, tx execer, tb *cdcTable) (rowEvent, error) {
	key := w.newKey(tb)
	cols := w.names(tb)
	args := append([]any{keyArg(tb, key)}, w.values(tb)...)
	ph := make([]string, len(args))
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", tb.name, strings.Join(cols, ", "), strings.Join(ph, ", "))
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		return rowEvent{}, err
	}
	w.live[tb.name] = append(w.live[tb.name], key)
	return rowEvent{tb.name, "c", key}, nil
}

func keyArg(tb *cdcTable, key string) any {
	if tb.columns[0].kind == kindText {
		return key
	}
	var n int64
	fmt.Sscan(key, &n)
	return n
}

// pick returns a live key of tb and its index, or false if none.
func (w *cdcWorkload) pick(tb *cdcTable) (string, int, bool) {
	keys := w.live[tb.name]
	if len(keys) == 0 {
		return "", 0, false
	}
	i := w.rng.IntN(len(keys))
	return keys[i], i, true
}

func (w *cdcWorkload) update(ctx context.Context, tx execer, tb *cdcTable) ([]rowEvent, error) {
	key, _, ok := w.pick(tb)
	if !ok {
		return nil, nil
	}
	cols := w.names(tb)[1:]
	vals := w.values(tb)
	// Half the updates change one column, half all of them.
	if w.rng.IntN(2) == 0 {
		j := w.rng.IntN(len(cols))
		cols, vals = cols[j:j+1], vals[j:j+1]
	}
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = fmt.Sprintf("%s = $%d", c, i+2)
	}
	q := fmt.Sprintf("UPDATE %s SET %s WHERE %s = $1", tb.name, strings.Join(set, ", "), tb.columns[0].name)
	tag, err := tx.Exec(ctx, q, append([]any{keyArg(tb, key)}, vals...)...)
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() != 1 {
		return nil, fmt.Errorf("update %s %s: %d rows, the workload's account of live keys is wrong", tb.name, key, tag.RowsAffected())
	}
	return []rowEvent{{tb.name, "u", key}}, nil
}

func (w *cdcWorkload) delete(ctx context.Context, tx execer, tb *cdcTable) ([]rowEvent, error) {
	key, i, ok := w.pick(tb)
	if !ok {
		return nil, nil
	}
	tag, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s = $1", tb.name, tb.columns[0].name), keyArg(tb, key))
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() != 1 {
		return nil, fmt.Errorf("delete %s %s: %d rows", tb.name, key, tag.RowsAffected())
	}
	keys := w.live[tb.name]
	keys[i] = keys[len(keys)-1]
	w.live[tb.name] = keys[:len(keys)-1]
	return []rowEvent{{tb.name, "d", key}}, nil
}

// txn runs one transaction of n random operations: half inserts, 30%
// updates, 20% deletes.
func (w *cdcWorkload) txn(ctx context.Context, c *pgx.Conn, n int) error {
	snapshot := w.snapshotLive()
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	var xid int64
	if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
		tx.Rollback(ctx)
		return err
	}
	// A row may change twice in one transaction (inserted, then
	// updated): each change is an event of its own, in order.
	var events []rowEvent
	for range n {
		tb := cdcTables[w.rng.IntN(len(cdcTables))]
		var evs []rowEvent
		switch p := w.rng.IntN(10); {
		case p < 5:
			var e rowEvent
			e, err = w.insert(ctx, tx, tb)
			evs = []rowEvent{e}
		case p < 8:
			evs, err = w.update(ctx, tx, tb)
		default:
			evs, err = w.delete(ctx, tx, tb)
		}
		if err != nil {
			break
		}
		events = append(events, evs...)
	}
	if err != nil {
		tx.Rollback(ctx)
		w.restoreLive(snapshot)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		// The commit may or may not have happened: ask PostgreSQL once
		// it answers again.
		w.restoreLive(snapshot)
		return &uncertainCommit{xid: xid, events: events, err: err}
	}
	w.record(xid, events)
	return nil
}

// uncertainCommit is a commit whose answer was lost; resolve tells
// whether it happened.
type uncertainCommit struct {
	xid    int64
	events []rowEvent
	err    error
}

func (u *uncertainCommit) Error() string {
	return fmt.Sprintf("commit of txid %d: outcome unknown: %v", u.xid, u.err)
}

// resolve looks the transaction up with txid_status and records it if
// it committed, replaying its effect on the live keys.
func (w *cdcWorkload) resolve(ctx context.Context, c *pgx.Conn, u *uncertainCommit) error {
	var status *string
	if err := c.QueryRow(ctx, "SELECT txid_status($1)", u.xid).Scan(&status); err != nil {
		return err
	}
	w.mu.Lock()
	w.mu.uncertain++
	w.mu.Unlock()
	if status == nil || *status != "committed" {
		return nil
	}
	// Replay the events on the live keys.
	for _, e := range u.events {
		switch e.op {
		case "c":
			w.live[e.table] = append(w.live[e.table], e.key)
		case "d":
			keys := w.live[e.table]
			if i := slices.Index(keys, e.key); i >= 0 {
				keys[i] = keys[len(keys)-1]
				w.live[e.table] = keys[:len(keys)-1]
			}
		}
	}
	w.record(u.xid, u.events)
	return nil
}

func (w *cdcWorkload) snapshotLive() map[string][]string {
	out := map[string][]string{}
	for k, v := range w.live {
		out[k] = slices.Clone(v)
	}
	return out
}

func (w *cdcWorkload) restoreLive(s map[string][]string) { w.live = s }

func (w *cdcWorkload) record(xid int64, events []rowEvent) {
	if len(events) == 0 {
		// A transaction that changed nothing sends nothing.
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.txns[xid] = events
	w.mu.committed++
	w.mu.rows += len(events)
}

// schemaChange adds each table's extra column, in a transaction of its
// own, between two workload transactions.
func (w *cdcWorkload) schemaChange(ctx context.Context, c *pgx.Conn) error {
	for _, tb := range cdcTables {
		// IF NOT EXISTS: a change cut short by a lost connection is
		// run again from the first table.
		if _, err := c.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s", tb.name, tb.added.name, tb.addedSQL)); err != nil {
			return err
		}
	}
	w.changed = true
	return nil
}

// cdcRun is the workload's main loop's settings.
type cdcRun struct {
	// rate is transactions per second.
	rate float64
	// maxOps bounds a normal transaction's operations.
	maxOps int
	// largeEvery is how many transactions apart the large ones are
	// (0: none).
	largeEvery int
	// changeAt is when the schema change runs, from the start.
	changeAt time.Duration
}

// run runs transactions at r.rate until ctx ends, reconnecting (and
// resolving an uncertain commit) when the source goes away, e.g. for
// its restart. It returns the first error that is not the source
// being unreachable, or nil when ctx ends.
func (w *cdcWorkload) run(ctx context.Context, r cdcRun, logf func(string, ...any)) error {
	start := time.Now()
	var c *pgx.Conn
	defer func() {
		if c != nil {
			c.Close(context.Background())
		}
	}()
	var pending *uncertainCommit
	interval := time.Duration(float64(time.Second) / r.rate)
	next := time.Now()
	for i := 0; ; {
		if ctx.Err() != nil {
			return nil
		}
		if c == nil || c.IsClosed() {
			var err error
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err = w.connect(cctx)
			cancel()
			if err != nil {
				c = nil
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
		}
		if pending != nil {
			if err := w.resolve(ctx, c, pending); err != nil {
				c.Close(context.Background())
				c = nil
				continue
			}
			logf("workload: txid %d's commit was uncertain, resolved", pending.xid)
			pending = nil
		}
		if !w.changed && r.changeAt > 0 && time.Since(start) >= r.changeAt {
			if err := w.schemaChange(ctx, c); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if isConnErr(c, err) {
					c.Close(context.Background())
					c = nil
					continue
				}
				return fmt.Errorf("schema change: %w", err)
			}
			logf("workload: schema change after %v", time.Since(start).Round(time.Second))
		}
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		if lag := time.Since(next); lag > time.Second {
			// The source was away: no catch-up burst.
			next = time.Now()
		}
		n := 1 + w.rng.IntN(r.maxOps)
		if r.largeEvery > 0 && i > 0 && i%r.largeEvery == 0 {
			n = w.largeTxnRows
		}
		i++
		err := w.txn(ctx, c, n)
		var u *uncertainCommit
		switch {
		case err == nil:
		case errors.As(err, &u):
			pending = u
			c.Close(context.Background())
			c = nil
		case ctx.Err() != nil:
			return nil
		case isConnErr(c, err):
			w.mu.Lock()
			w.mu.aborted++
			w.mu.Unlock()
			c.Close(context.Background())
			c = nil
		default:
			return err
		}
	}
}

// isConnErr tells a lost connection (the source restarting) from an
// error in the workload.
func isConnErr(c *pgx.Conn, err error) bool {
	if c.IsClosed() || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
		// cannot_connect_now, 08xxx connection exceptions.
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	// Anything else at the network level: EOF, reset, refused.
	var netErr interface{ Timeout() bool }
	return errors.As(err, &netErr) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection")
}

// transactions returns a copy of the committed transactions' events.
func (w *cdcWorkload) transactions() map[int64][]rowEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int64][]rowEvent, len(w.mu.txns))
	for k, v := range w.mu.txns {
		out[k] = v
	}
	return out
}

func (w *cdcWorkload) stats() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d transactions committed (%d rows changed), %d lost with the connection, %d uncertain commits resolved",
		w.mu.committed, w.mu.rows, w.mu.aborted, w.mu.uncertain)
}

// startCDCPostgres starts a PostgreSQL of the test's own (not the
// shared one: this one is restarted, and logical decoding needs
// wal_level=logical) and creates database db in it. It returns the
// server and the database's URL.
func startCDCPostgres(t testing.TB, db string, logical bool) (*pgtest.Server, string) {
	t.Helper()
	opts := pgtest.Options{}
	if logical {
		opts.Settings = map[string]string{"wal_level": "logical", "max_replication_slots": "8", "max_wal_senders": "8"}
	}
	s, err := pgtest.Start(opts)
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return s, u.String()
}
