package engine

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/types"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type trust struct{}

func (trust) Method() (pgwire.AuthMethod, string) { return pgwire.AuthTrust, "test" }
func (trust) Credential(string) (pgwire.Credential, bool, error) {
	return pgwire.Credential{}, false, nil
}

// ordersDDL and ordersRows are loaded into PostgreSQL as they are and
// into the engine's in-memory catalog through types.Parse.
var (
	ordersCols = []exec.Column{{Name: "id", Type: types.Int4}, {Name: "customer", Type: types.Text}, {Name: "amount", Type: types.NumericPS(10, 2)},
		{Name: "placed", Type: types.TimestampTZ}, {Name: "day", Type: types.Date}, {Name: "wait", Type: types.Interval}, {Name: "doc", Type: types.JSONB},
		{Name: "ratio", Type: types.Float8}, {Name: "blob", Type: types.Bytea}, {Name: "big", Type: types.Int8}}
	ordersRows = [][]string{
		{"1", "ann", "12.50", "2024-03-01 10:00:00+00", "2024-03-01", "1 day 02:00:00", `{"sku": "a1", "qty": 2}`, "0.25", `\x0102`, "9000000000"},
		{"2", "bob", "7.00", "2024-03-02 11:30:00.5+00", "2024-03-02", "00:30:00", `{"sku": "b2", "qty": 1, "tags": ["x"]}`, "-1.5", `\x`, "-1"},
		{"3", "ann", "100.99", "2024-03-03 00:00:00+00", "2024-03-03", "2 mons", `{"sku": "a1", "qty": 7}`, "1e-7", `\xff`, "0"},
		{"4", "cy", "", "", "", "", "", "", "", ""},
	}
)

// TestSelectOverPgwire serves an in-memory catalog through the wire
// server and checks that pgx reads the same values from it as from a
// real PostgreSQL holding the same table, in the extended protocol
// (binary formats where pgx asks for them, parameters) and the simple.
func TestSelectOverPgwire(t *testing.T) {
	ctx := context.Background()
	pgConn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pgConn.Close(ctx)
	var defs []string
	for _, c := range ordersCols {
		defs = append(defs, c.Name+" "+c.Type.Name())
	}
	if _, err := pgConn.Exec(ctx, "SET TimeZone = 'UTC'; DROP TABLE IF EXISTS orders; CREATE TABLE orders ("+strings.Join(defs, ", ")+")"); err != nil {
		t.Fatal(err)
	}
	rel := &exec.MemRelation{Cols: ordersCols}
	for _, r := range ordersRows {
		row := make(types.Row, len(r))
		var lits []string
		for i, v := range r {
			if v == "" && i > 1 {
				lits = append(lits, "NULL")
				continue
			}
			lits = append(lits, "'"+v+"'")
			if row[i], err = types.Parse(ordersCols[i].Type, v); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pgConn.Exec(ctx, "INSERT INTO orders VALUES ("+strings.Join(lits, ", ")+")"); err != nil {
			t.Fatal(err)
		}
		rel.Rows = append(rel.Rows, row)
	}

	eng := New(nil, "test")
	eng.SetCatalog(exec.MemCatalog{"orders": rel})
	srv, err := pgwire.NewServer(pgwire.Config{Engine: eng, Auth: trust{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	ours, err := pgx.Connect(ctx, fmt.Sprintf("postgres://u@%s/strand?sslmode=disable", ln.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close(ctx)

	queries := []struct {
		sql  string
		args []any
	}{
		{"SELECT * FROM orders ORDER BY id", nil},
		{"SELECT id, amount * 2, amount / 3, placed + wait, day - 1, doc -> 'qty', doc ->> 'sku', ratio * 2, big + 1 FROM orders ORDER BY id", nil},
		{"SELECT customer, count(*), sum(amount), avg(amount), min(placed), max(wait), string_agg(doc ->> 'sku', ',' ORDER BY id) FROM orders GROUP BY customer ORDER BY customer", nil},
		{"SELECT id FROM orders WHERE amount > $1 AND customer = $2 ORDER BY id", []any{"10", "ann"}},
		{"SELECT id, customer FROM orders WHERE id = ANY (SELECT id FROM orders WHERE doc ->> 'sku' = $1) ORDER BY 1", []any{"a1"}},
		{"SELECT $1::int8 + big, $2::numeric * amount, $3::timestamptz - placed FROM orders WHERE id < 3 ORDER BY id", []any{int64(5), "1.5", "2024-03-05 00:00:00+00"}},
		{"SELECT extract(epoch FROM placed), date_trunc('day', placed), day + wait FROM orders ORDER BY id", nil},
		{"SELECT blob, length(customer), upper(customer) FROM orders ORDER BY id", nil},
	}
	for _, q := range queries {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
			want, err := collect(ctx, pgConn, mode, q.sql, q.args)
			if err != nil {
				t.Fatalf("PostgreSQL: %s: %v", q.sql, err)
			}
			got, err := collect(ctx, ours, mode, q.sql, q.args)
			if err != nil {
				t.Errorf("%s (mode %v): %v", q.sql, mode, err)
				continue
			}
			if testing.Verbose() {
				t.Logf("%s: %s", q.sql, got)
			}
			if got != want {
				t.Errorf("%s (mode %v):\nPostgreSQL %s\nStrand     %s", q.sql, mode, want, got)
			}
		}
	}
	// An unknown relation is PostgreSQL's 42P01.
	if _, err := ours.Exec(ctx, "SELECT * FROM nope"); err == nil || !strings.Contains(err.Error(), "42P01") {
		t.Fatalf("got %v, want 42P01", err)
	}
}

// collect reads a query's column names, type OIDs and values as pgx
// decodes them, as text for comparison.
func collect(ctx context.Context, conn *pgx.Conn, mode pgx.QueryExecMode, sql string, args []any) (string, error) {
	rows, err := conn.Query(ctx, sql, append([]any{mode}, args...)...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for _, f := range rows.FieldDescriptions() {
		fmt.Fprintf(&b, "%s:%d ", f.Name, f.DataTypeOID)
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n%#v", vals)
	}
	return b.String(), rows.Err()
}
