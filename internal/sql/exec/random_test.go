package exec

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

var (
	randomSeed    = flag.Uint64("seed", 1, "seed of TestRandomQueries; a failure names the seed that replays it")
	randomQueries = flag.Int("random-queries", 400, "how many queries TestRandomQueries generates")
)

// gen makes random, mostly well-typed SQL over the test tables from a
// small grammar: expressions of four kinds, composed into SELECTs with
// WHERE, GROUP BY and ORDER BY. Division goes through NULLIF so that
// whether an error happens does not depend on evaluation order, which
// PostgreSQL leaves open.
type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g gen) expr(kind string, depth int) string {
	if depth <= 0 || g.r.IntN(3) == 0 {
		return g.leaf(kind)
	}
	d := depth - 1
	switch kind {
	case "int":
		switch g.r.IntN(6) {
		case 0:
			return fmt.Sprintf("(%s %s %s)", g.expr("int", d), g.pick("+", "-", "*"), g.expr("int", d))
		case 1:
			return fmt.Sprintf("(%s %s NULLIF(%s, 0))", g.expr("int", d), g.pick("/", "%"), g.expr("int", d))
		case 2:
			return fmt.Sprintf("abs(%s)", g.expr("int", d))
		case 3:
			return fmt.Sprintf("length(%s)", g.expr("text", d))
		case 4:
			return fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", g.expr("bool", d), g.expr("int", d), g.expr("int", d))
		default:
			return fmt.Sprintf("COALESCE(%s, %s)", g.expr("int", d), g.expr("int", d))
		}
	case "num":
		switch g.r.IntN(4) {
		case 0:
			return fmt.Sprintf("(%s %s %s)", g.expr("num", d), g.pick("+", "-", "*"), g.expr(g.pick("num", "int"), d))
		case 1:
			return fmt.Sprintf("(%s / NULLIF(%s, 0))", g.expr("num", d), g.expr("num", d))
		case 2:
			return fmt.Sprintf("round(%s, %d)", g.expr("num", d), g.r.IntN(4))
		default:
			return fmt.Sprintf("%s(%s)", g.pick("floor", "ceil", "abs", "trunc"), g.expr("num", d))
		}
	case "text":
		switch g.r.IntN(5) {
		case 0:
			return fmt.Sprintf("(%s || %s)", g.expr("text", d), g.expr(g.pick("text", "int"), d))
		case 1:
			return fmt.Sprintf("%s(%s)", g.pick("upper", "lower", "reverse", "btrim"), g.expr("text", d))
		case 2:
			return fmt.Sprintf("substr(%s, %d, %d)", g.expr("text", d), g.r.IntN(5)-1, g.r.IntN(4))
		case 3:
			return fmt.Sprintf("replace(%s, %s, %s)", g.expr("text", d), g.leaf("text"), g.leaf("text"))
		default:
			return fmt.Sprintf("COALESCE(%s, %s)", g.expr("text", d), g.expr("text", d))
		}
	}
	switch g.r.IntN(8) {
	case 0:
		return fmt.Sprintf("(%s %s %s)", g.expr("int", d), g.pick("=", "<>", "<", "<=", ">", ">="), g.expr(g.pick("int", "num"), d))
	case 1:
		return fmt.Sprintf("(%s %s %s)", g.expr("text", d), g.pick("=", "<", ">="), g.expr("text", d))
	case 2:
		return fmt.Sprintf("(%s %s %s)", g.expr("bool", d), g.pick("AND", "OR"), g.expr("bool", d))
	case 3:
		return fmt.Sprintf("(NOT %s)", g.expr("bool", d))
	case 4:
		return fmt.Sprintf("(%s IS %sNULL)", g.expr(g.pick("int", "text", "num"), d), g.pick("", "NOT "))
	case 5:
		return fmt.Sprintf("(%s %sIN (%s, %s, %s))", g.expr("int", d), g.pick("", "NOT "), g.leaf("int"), g.leaf("int"), g.leaf("int"))
	case 6:
		return fmt.Sprintf("(%s %s '%s')", g.expr("text", d), g.pick("LIKE", "NOT LIKE", "ILIKE"), g.pick("%a%", "a%", "_a%", "%", "D%"))
	default:
		return fmt.Sprintf("(%s BETWEEN %s AND %s)", g.expr("int", d), g.leaf("int"), g.leaf("int"))
	}
}

func (g gen) leaf(kind string) string {
	switch kind {
	case "int":
		// Small values: products stay in range, since whether an
		// overflow is reached depends on evaluation order.
		return g.pick("t1.id", "t2.amount", "t2.t1_id", "0", "1", "-1", "7", "NULL::int")
	case "num":
		return g.pick("t1.price", "1.5", "0.001", "-2.25", "100", "NULL::numeric")
	case "text":
		return g.pick("t1.name", "t1.grp", "t2.tag", "'a'", "''", "'Abc'", "NULL::text")
	}
	return g.pick("t1.active", "true", "false", "NULL::bool")
}

func (g gen) query() string {
	from := "t1 LEFT JOIN t2 ON t1.id = t2.t1_id"
	where := ""
	if g.r.IntN(2) == 0 {
		where = " WHERE " + g.expr("bool", 2)
	}
	if g.r.IntN(3) == 0 {
		key := g.expr(g.pick("int", "text"), 1)
		return fmt.Sprintf("SELECT %s AS k, count(*), sum(%s), max(%s), min(%s), count(DISTINCT %s) FROM %s%s GROUP BY 1",
			key, g.expr("int", 2), g.expr("text", 2), g.expr("num", 2), g.expr("int", 1), from, where)
	}
	var cols []string
	for range 1 + g.r.IntN(3) {
		cols = append(cols, g.expr(g.pick("int", "num", "text", "bool"), 3))
	}
	return fmt.Sprintf("SELECT %s FROM %s%s", strings.Join(cols, ", "), from, where)
}

// TestRandomQueries compares generated queries' answers with
// PostgreSQL's; -seed replays a failure, -random-queries sets the count.
func TestRandomQueries(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET extra_float_digits = 1"); err != nil {
		t.Fatal(err)
	}
	cat := loadTables(t, ctx, conn)
	g := gen{r: rand.New(rand.NewPCG(*randomSeed, 0))}
	failed := 0
	for i := range *randomQueries {
		q := g.query()
		want, got := pgAnswer(ctx, conn, q), ourAnswer(ctx, cat, q)
		if msg := compareAnswers(q, want, got); msg != "" {
			failed++
			t.Errorf("seed %d, query %d: %s\n%s", *randomSeed, i, q, msg)
			if failed >= 10 {
				t.FailNow()
			}
		}
	}
}
