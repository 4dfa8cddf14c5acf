package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// The corpus runs over 5000 Nexmark events (100 s of event time at 50
// events/s) and the small tables after 800 changes.
const (
	corpusSeed          = 1
	corpusNexmarkEvents = 5000
	corpusChanges       = 800
)

func corpusTables(t *testing.T) []Table {
	t.Helper()
	evs, err := GenerateNexmark(NexmarkCorpusConfig(corpusSeed, corpusNexmarkEvents))
	if err != nil {
		t.Fatal(err)
	}
	return append(NexmarkTables(evs), SmallTables(SmallChanges(corpusSeed, corpusChanges))...)
}

func allCorpus(t *testing.T) []CorpusQuery {
	t.Helper()
	nx, err := Corpus(SetNexmark)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := Corpus(SetGeneral)
	if err != nil {
		t.Fatal(err)
	}
	if len(nx) != 9 {
		t.Fatalf("%d Nexmark queries, want q0-q8", len(nx))
	}
	if len(gen) < 40 {
		t.Fatalf("%d general corpus queries, want at least 40", len(gen))
	}
	return append(nx, gen...)
}

// TestCorpusDuckDB runs every corpus query in DuckDB: each must run,
// and return rows unless its header says it is empty on purpose.
func TestCorpusDuckDB(t *testing.T) {
	o := NewOracle(t)
	qs := allCorpus(t)
	queries := make([]Query, len(qs))
	for i, q := range qs {
		queries[i] = q.Query()
	}
	start := time.Now()
	res := o.Query(t, corpusTables(t), queries...)
	t.Logf("%d queries in %v", len(qs), time.Since(start).Round(time.Millisecond))
	for i, q := range qs {
		r := res[i]
		switch {
		case r.Err != nil:
			t.Errorf("%s: %v", q.Name, r.Err)
		case q.ExpectEmpty && len(r.Rows) > 0:
			t.Errorf("%s: %d rows, its header expects none", q.Name, len(r.Rows))
		case !q.ExpectEmpty && len(r.Rows) == 0:
			t.Errorf("%s: no rows over the corpus tables (%s)", q.Name, q.Exercises)
		case !q.ExpectEmpty && allNull(r.Rows):
			t.Errorf("%s: every value is NULL", q.Name)
		default:
			t.Logf("%-40s %6d rows", q.Name, len(r.Rows))
		}
	}
}

func allNull(rows [][]any) bool {
	for _, r := range rows {
		for _, v := range r {
			if v != nil {
				return false
			}
		}
	}
	return true
}

// TestCorpusPostgres runs the corpus in a real PostgreSQL over the same
// tables and compares its answers with DuckDB's. It holds the corpus to
// its promise (PostgreSQL's syntax and semantics: a query on which the
// two engines differ, such as integer division, does not belong in it),
// and checks the comparison against a second real engine.
func TestCorpusPostgres(t *testing.T) {
	o := NewOracle(t)
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS sqltest_corpus; SET search_path = sqltest_corpus; SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	tables := corpusTables(t)
	if err := CreateTables(ctx, conn, tables); err != nil {
		t.Fatal(err)
	}
	qs := allCorpus(t)
	queries := make([]Query, len(qs))
	for i, q := range qs {
		queries[i] = q.Query()
	}
	duck := o.Query(t, tables, queries...)
	for i, q := range qs {
		t.Run(q.Name, func(t *testing.T) {
			if duck[i].Err != nil {
				t.Fatalf("DuckDB: %v", duck[i].Err)
			}
			rows, err := conn.Query(ctx, q.SQL)
			if err != nil {
				t.Fatalf("PostgreSQL: %v", err)
			}
			pg, err := Collect(rows)
			if err != nil {
				t.Fatalf("PostgreSQL: %v", err)
			}
			pg.Name = q.Name
			Equal(t, duck[i], pg, Options{Ordered: q.Ordered})
		})
	}
}
