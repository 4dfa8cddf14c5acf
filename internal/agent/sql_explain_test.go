package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestSQLExplain: EXPLAIN of a running view prints its dataflow with
// each operator's counters; of a source its definition; EXPLAIN SELECT
// the batch plan, without running it.
func TestSQLExplain(t *testing.T) {
	ctx := context.Background()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0"}, nil)
	createTopic(t, a.KafkaAddr(), "sales", 1)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The records before the view: its first epoch reads them all, so
	// the counters below are exact.
	produce(t, a.KafkaAddr(), []*kgo.Record{
		{Topic: "sales", Value: []byte(`{"shop": "a", "amount": 3}`)},
		{Topic: "sales", Value: []byte(`{"shop": "b", "amount": 0}`)},
		{Topic: "sales", Value: []byte(`{"shop": "a", "amount": 4}`)},
	})
	for _, ddl := range []string{
		"CREATE SOURCE sales (shop text, amount int8) WITH (topic = 'sales', format = 'json')",
		"CREATE MATERIALIZED VIEW by_shop AS SELECT shop, count(*) AS n, sum(amount) AS total FROM sales WHERE amount > 0 GROUP BY shop",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	plan := func(sql string) string {
		t.Helper()
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if f := rows.FieldDescriptions(); len(f) != 1 || f[0].Name != "QUERY PLAN" {
			t.Fatalf("%s: columns %v, want one QUERY PLAN", sql, f)
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		if rows.Err() != nil {
			t.Fatalf("%s: %v", sql, rows.Err())
		}
		if tag := rows.CommandTag().String(); tag != "EXPLAIN" {
			t.Errorf("%s: tag %q, want EXPLAIN", sql, tag)
		}
		return strings.Join(lines, "\n")
	}
	// The counters: 3 records in, the filter passes 2, one group out.
	want := `Materialized View by_shop
  Output: shop, n, total
  Index: shop (unique)
  ->  Project (#1, #2, #3)  (changes in=1 out=1)
        ->  Group Aggregate (group by #1; count(*), sum(#2))  (changes in=2 out=1)
              ->  Filter  (changes in=3 out=2)
                    ->  Source sales (shop, amount)  (changes in=3 out=3)`
	deadline := time.Now().Add(opTimeout)
	var got string
	for {
		got = plan("EXPLAIN by_shop")
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("EXPLAIN by_shop:\n%s\nwant:\n%s", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := plan("EXPLAIN MATERIALIZED VIEW by_shop"); got != want {
		t.Errorf("EXPLAIN MATERIALIZED VIEW by_shop:\n%s", got)
	}
	if got, want := plan("EXPLAIN sales"), "Source sales\n  Topic: sales\n  Format: json\n  Envelope: append"; got != want {
		t.Errorf("EXPLAIN sales:\n%s\nwant:\n%s", got, want)
	}
	if got, want := plan("EXPLAIN SELECT shop, total FROM by_shop WHERE n > 1 ORDER BY total DESC LIMIT 3"), `Limit
  ->  Sort (#2 DESC)
        ->  Project (#1, #3)
              ->  Filter
                    ->  Seq Scan on by_shop`; got != want {
		t.Errorf("EXPLAIN SELECT over the view:\n%s\nwant:\n%s", got, want)
	}
	if got, want := plan("EXPLAIN SELECT s.shop, count(*) FROM sales s JOIN by_shop b ON b.shop = s.shop GROUP BY s.shop"), `Project (#1, #2)
  ->  HashAggregate (group by #1; count(*))
        ->  Hash Join (Inner; on #1 = #3)
              ->  Seq Scan on sales
              ->  Seq Scan on by_shop`; got != want {
		t.Errorf("EXPLAIN SELECT with a join:\n%s\nwant:\n%s", got, want)
	}
	for sql, code := range map[string]string{
		"EXPLAIN ANALYZE SELECT * FROM sales": "0A000",
		"EXPLAIN nothing":                     "42P01",
	} {
		if _, err := conn.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), code) {
			t.Errorf("%s: %v, want %s", sql, err, code)
		}
	}
}
