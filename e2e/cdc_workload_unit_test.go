package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCDCWorkload checks the workload's own account of what it did
// against PostgreSQL's: the changes logical decoding (test_decoding)
// reports per transaction equal the events the workload recorded, its
// live keys equal the tables' keys, through a kill -9 of the server in
// the middle (a commit whose answer is lost is looked up, not guessed)
// and the schema change.
func TestCDCWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	srv, dbURL := startCDCPostgres(t, "cdcwl", true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, dbURL) }
	c, err := connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := newCDCWorkload(connect, 1)
	w.largeTxnRows = 500
	if err := w.createSchema(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := w.seed(ctx, c, 20); err != nil {
		t.Fatal(err)
	}
	// The slot starts after the seed: the seed is what a snapshot reads.
	if _, err := c.Exec(ctx, "SELECT pg_create_logical_replication_slot('wl', 'test_decoding')"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- w.run(runCtx, cdcRun{rate: 100, maxOps: 6, largeEvery: 50, changeAt: 1500 * time.Millisecond}, t.Logf)
	}()
	time.Sleep(2500 * time.Millisecond)
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Log(w.stats())
	if !w.changed {
		t.Fatal("the schema change did not run")
	}

	c, err = connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	got, err := decodedTransactions(ctx, c, "wl")
	if err != nil {
		t.Fatal(err)
	}
	want := w.transactions()
	if len(want) < 100 {
		t.Fatalf("only %d transactions recorded", len(want))
	}
	for _, xid := range slices.Sorted(mapKeys(got)) {
		if d := diffEvents(want[xid], got[xid]); d != "" {
			t.Errorf("txid %d: PostgreSQL decoded %s", xid, d)
		}
	}
	for _, xid := range slices.Sorted(mapKeys(want)) {
		if _, ok := got[xid]; !ok {
			t.Errorf("txid %d recorded, not decoded: %v", xid, want[xid])
		}
	}
	for _, tb := range cdcTables {
		rows, err := readPGRows(ctx, c, tb.name, tb.columnsAt(true))
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range rows {
			keys = append(keys, r[0])
		}
		live := slices.Clone(w.live[tb.name])
		live2 := cdcRows{}
		for _, k := range live {
			live2 = append(live2, []string{k})
		}
		live2.sortByKey(tb.columns[0].kind)
		var liveSorted []string
		for _, r := range live2 {
			liveSorted = append(liveSorted, r[0])
		}
		if !slices.Equal(keys, liveSorted) {
			t.Errorf("%s: %d keys in the table, %d by the workload's account", tb.name, len(keys), len(liveSorted))
		}
	}
}

// decodeLine is one row change as test_decoding prints it:
// "table public.accounts: INSERT: id[integer]:1 owner[text]:'x' ...".
var decodeLine = regexp.MustCompile(`^table public\.(\w+): (INSERT|UPDATE|DELETE): \w+\[[^\]]+\]:('(?:[^']|'')*'|\S+)`)

// decodedTransactions reads every change the slot holds (test_decoding)
// as events per transaction id.
func decodedTransactions(ctx context.Context, c *pgx.Conn, slot string) (map[int64][]rowEvent, error) {
	rows, err := c.Query(ctx, "SELECT xid::text::int8, data FROM pg_logical_slot_get_changes($1, NULL, NULL)", slot)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]rowEvent{}
	ops := map[string]string{"INSERT": "c", "UPDATE": "u", "DELETE": "d"}
	for rows.Next() {
		var xid int64
		var data string
		if err := rows.Scan(&xid, &data); err != nil {
			return nil, err
		}
		if strings.HasPrefix(data, "BEGIN") || strings.HasPrefix(data, "COMMIT") {
			continue
		}
		m := decodeLine.FindStringSubmatch(data)
		if m == nil {
			return nil, fmt.Errorf("test_decoding line %q", data)
		}
		key := m[3]
		if strings.HasPrefix(key, "'") {
			key = strings.ReplaceAll(key[1:len(key)-1], "''", "'")
		}
		out[xid] = append(out[xid], rowEvent{m[1], ops[m[2]], key})
	}
	return out, rows.Err()
}
