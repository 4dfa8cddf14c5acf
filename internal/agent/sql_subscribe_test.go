package agent_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestSQLSubscribe: SUBSCRIBE to an aggregate view streams its snapshot
// (equal to the view's SELECT and to an oracle computed here from the
// records produced), then changes (-old +new) that, applied to the
// snapshot, give the view's contents after more records; a
// CancelRequest ends it with 57014, DROP with 42P01; a subscriber that
// reads nothing is cut off at its bound (53400) while the view keeps
// advancing.
func TestSQLSubscribe(t *testing.T) {
	ctx := context.Background()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0"}, nil)
	createTopic(t, a.KafkaAddr(), "orders", 2)

	// oracle is the view's contents computed from the records produced:
	// per customer, count(*) and sum(qty), as "customer n q" -> copies.
	counts, sums := map[string]int64{}, map[string]int64{}
	produce := func(ids ...int) {
		t.Helper()
		var recs []*kgo.Record
		for _, id := range ids {
			cust, qty := fmt.Sprintf("c%d", 1+id%5), id%4
			counts[cust]++
			sums[cust] += int64(qty)
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(id % 2),
				Value: fmt.Appendf(nil, `{"id": %d, "customer": %q, "qty": %d}`, id, cust, qty)})
		}
		if err := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	oracle := func() map[string]int64 {
		out := map[string]int64{}
		for c, n := range counts {
			out[fmt.Sprintf("%s %d %d", c, n, sums[c])] = 1
		}
		return out
	}
	connect := func() *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	conn := connect()
	// selectView is the view's rows as SELECT returns them.
	selectView := func(name string) map[string]int64 {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT customer, n, q FROM "+name)
		if err != nil {
			return nil
		}
		out := map[string]int64{}
		for rows.Next() {
			var c string
			var n, q int64
			if err := rows.Scan(&c, &n, &q); err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%s %d %d", c, n, q)]++
		}
		if rows.Err() != nil {
			return nil
		}
		return out
	}
	// waitView polls the view's SELECT until it equals want.
	waitView := func(name string, want map[string]int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := selectView(name)
			if maps.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: SELECT gives %v, want %v", name, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, ddl := range []string{
		"CREATE SOURCE orders (id int8, customer text, qty int4) WITH (topic = 'orders', format = 'json')",
		"CREATE MATERIALIZED VIEW totals AS SELECT customer, count(*) AS n, sum(qty) AS q FROM orders GROUP BY customer",
		"CREATE MATERIALIZED VIEW other AS SELECT customer, count(*) AS n, sum(qty) AS q FROM orders GROUP BY customer",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	produce(1, 2, 3, 4, 5, 6, 7, 8)
	waitView("totals", oracle())
	waitView("other", oracle())

	// subscribe streams a SUBSCRIBE's rows into a channel, its end as
	// an error (nil: ended without one, which a subscription must not).
	type update struct {
		ts, diff int64
		row      string
	}
	var subConn *pgx.Conn // the last subscribe's connection
	subscribe := func(sctx context.Context, name string) (<-chan update, <-chan error, []string) {
		t.Helper()
		subConn = connect()
		rows, err := subConn.Query(sctx, "SUBSCRIBE TO "+name)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, f := range rows.FieldDescriptions() {
			cols = append(cols, f.Name)
		}
		ch, end := make(chan update), make(chan error, 1)
		go func() {
			defer rows.Close()
			for rows.Next() {
				var u update
				var c string
				var n, q int64
				if err := rows.Scan(&u.ts, &u.diff, &c, &n, &q); err != nil {
					end <- err
					return
				}
				u.row = fmt.Sprintf("%s %d %d", c, n, q)
				select {
				case ch <- u:
				case <-time.After(time.Minute):
					end <- errors.New("test stopped reading")
					return
				}
			}
			end <- rows.Err()
		}()
		return ch, end, cols
	}
	// readUntil applies updates to state until it equals want.
	readUntil := func(ch <-chan update, end <-chan error, state map[string]int64, want map[string]int64, check func(update)) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for !maps.Equal(state, want) {
			select {
			case u := <-ch:
				check(u)
				state[u.row] += u.diff
				if state[u.row] == 0 {
					delete(state, u.row)
				}
			case err := <-end:
				t.Fatalf("subscription ended: %v (state %v, want %v)", err, state, want)
			case <-timeout:
				t.Fatalf("subscription state %v, want %v after 30s", state, want)
			}
		}
	}

	ch, end, cols := subscribe(ctx, "totals")
	if want := []string{"mz_timestamp", "mz_diff", "customer", "n", "q"}; !slices.Equal(cols, want) {
		t.Fatalf("SUBSCRIBE's columns %v, want %v", cols, want)
	}
	// The snapshot: the view's contents, all at one timestamp, as
	// positive counts.
	state := map[string]int64{}
	var snapTS int64 = -1
	readUntil(ch, end, state, oracle(), func(u update) {
		if snapTS == -1 {
			snapTS = u.ts
		}
		if u.ts != snapTS || u.diff <= 0 {
			t.Fatalf("snapshot row %+v: want timestamp %d and a positive diff", u, snapTS)
		}
	})
	if sel := selectView("totals"); !maps.Equal(state, sel) {
		t.Fatalf("snapshot %v, SELECT %v", state, sel)
	}
	// Then the changes: later timestamps, in order, retracting the old
	// aggregates.
	lastTS, retractions := snapTS, 0
	for round, ids := range [][]int{{9, 10, 11}, {12, 13, 14, 15, 16, 17, 18, 19, 20}} {
		produce(ids...)
		readUntil(ch, end, state, oracle(), func(u update) {
			if u.ts <= snapTS || u.ts < lastTS {
				t.Fatalf("round %d: change %+v after timestamp %d (snapshot at %d)", round, u, lastTS, snapTS)
			}
			lastTS = u.ts
			if u.diff < 0 {
				retractions++
			}
		})
		waitView("totals", state)
	}
	if retractions == 0 {
		t.Fatal("no change retracted an old aggregate: a weak check")
	}
	// Nothing more arrives: no change was sent twice (a duplicate would
	// have left the state unequal or shows up now).
	select {
	case u := <-ch:
		t.Fatalf("unexpected change %+v", u)
	case err := <-end:
		t.Fatalf("subscription ended: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// A CancelRequest ends it with 57014 (sent by hand: pgx answers a
	// canceled context with the context's error, not the server's).
	if err := subConn.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError
	select {
	case err := <-end:
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("canceled SUBSCRIBE ended with %v, want 57014", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("canceled SUBSCRIBE did not end")
	}

	// DROP ends a subscription with an error saying so.
	ch, end, _ = subscribe(ctx, "other")
	readUntil(ch, end, map[string]int64{}, oracle(), func(update) {})
	if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW other"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-end:
		if !errors.As(err, &pe) || pe.Code != "42P01" {
			t.Fatalf("SUBSCRIBE to a dropped view ended with %v, want 42P01", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SUBSCRIBE to a dropped view did not end")
	}

	// A subscriber that reads nothing: its portal is suspended after one
	// row (the wire layer pulls no more), so its queue fills.
	slow := connect()
	if _, err := slow.Exec(ctx, "SET strand.subscribe_max_changes = 3"); err != nil {
		t.Fatal(err)
	}
	hj, err := slow.PgConn().Hijack()
	if err != nil {
		t.Fatal(err)
	}
	defer hj.Conn.Close()
	fe := hj.Frontend
	fe.Send(&pgproto3.Parse{Query: "SUBSCRIBE totals"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{MaxRows: 1})
	fe.Send(&pgproto3.Flush{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = hj.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	receive := func() pgproto3.BackendMessage {
		t.Helper()
		m, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, want := range []string{"*pgproto3.ParseComplete", "*pgproto3.BindComplete", "*pgproto3.DataRow", "*pgproto3.PortalSuspended"} {
		if m := receive(); fmt.Sprintf("%T", m) != want {
			t.Fatalf("slow subscriber got %T (%+v), want %s", m, m, want)
		}
	}
	// The view keeps advancing past the stalled subscriber's bound.
	produce(21, 22, 23, 24, 25, 26, 27)
	waitView("totals", oracle())
	produce(28, 29, 30)
	waitView("totals", oracle())
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for {
		switch m := receive().(type) {
		case *pgproto3.DataRow:
			// The rest of the snapshot (queued before the bound).
			if rows++; rows > len(oracle()) {
				t.Fatalf("slow subscriber got %d rows after its bound", rows)
			}
		case *pgproto3.ErrorResponse:
			if m.Code != "53400" {
				t.Fatalf("slow subscriber ended with %s %s, want 53400", m.Code, m.Message)
			}
			t.Logf("slow subscriber: %s", m.Message)
			return
		default:
			t.Fatalf("slow subscriber got %T", m)
		}
	}
}
