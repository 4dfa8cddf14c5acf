package viewplan

import (
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/sql/flow"
)

// TestExplain: a view's dataflow printed as a plan tree, operator by
// operator, with the running driver's counters when given.
func TestExplain(t *testing.T) {
	cat := smallCatalog(t)
	colsOf := func(name string) []string {
		var cs []string
		for _, c := range cat[name].Columns {
			cs = append(cs, c.Name)
		}
		return cs
	}
	for _, c := range []struct {
		sql   string
		stats bool
		want  string
	}{
		{"SELECT customer_id, count(*) AS n, sum(qty) AS qty FROM orders WHERE qty > 1 GROUP BY customer_id HAVING count(*) > 2", false, `
Materialized View v
  Output: customer_id, n, qty
  Index: customer_id (unique)
  ->  Project (#1, #2, #3)
        ->  Filter
              ->  Group Aggregate (group by #2; count(*), sum(#4), count(*))
                    ->  Filter
                          ->  Source orders (id, customer_id, product_id, qty, price, discount, status, ts)`},
		{"SELECT c.city, o.id FROM orders o LEFT JOIN customers c ON c.id = o.customer_id", true, `
Materialized View v
  Output: city, id
  Index: the whole row
  ->  Project (#4, #1)  (changes in=5 out=6 late=1)
        ->  Left Join (on #2 = right.#1; widths 2, 2)  (changes in=4 out=5)
              ->  Project (#1, #2)  (changes in=2 out=3 late=1)
                    ->  Source orders (id, customer_id, product_id, qty, price, discount, status, ts)  (changes in=0 out=1)
              ->  Project (#1, #3)  (changes in=3 out=4)
                    ->  Source customers (id, name, city, tier, signup)  (changes in=1 out=2)`},
		// WHERE's one-sided terms filter the join's sides (exec), which
		// keep only the columns read above and the keys (prune.go).
		{"SELECT c.city, o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.qty > 1 AND c.tier = 2 AND o.qty < c.id", false, `
Materialized View v
  Output: city, id
  Index: the whole row
  ->  Project (#11, #1)
        ->  Filter
              ->  Inner Join (on #2 = right.#1; widths 8, 5)
                    ->  Filter
                          ->  Source orders (id, customer_id, product_id, qty, price, discount, status, ts)
                    ->  Filter
                          ->  Source customers (id, name, city, tier, signup)`},
		{"SELECT c.city, o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.qty > 1 AND c.tier = 2", false, `
Materialized View v
  Output: city, id
  Index: the whole row
  ->  Project (#4, #1)
        ->  Inner Join (on #2 = right.#1; widths 2, 2)
              ->  Project (#1, #2)
                    ->  Filter
                          ->  Source orders (id, customer_id, product_id, qty, price, discount, status, ts)
              ->  Project (#1, #3)
                    ->  Filter
                          ->  Source customers (id, name, city, tier, signup)`},
		{"SELECT customer_id, id, rn FROM (SELECT customer_id, id, row_number() OVER (PARTITION BY customer_id ORDER BY id DESC) AS rn FROM orders) x WHERE rn <= 2", false, `
Materialized View v
  Output: customer_id, id, rn
  Index: the whole row
  ->  Project (#1, #2, #3)
        ->  Filter
              ->  Project (#1, #2, #5)
                    ->  Top-N (partition by #3; order by #4 DESC; limit 2; row_number)
                          ->  Project (#2, #1, #2, #1)
                                ->  Source orders (id, customer_id, product_id, qty, price, discount, status, ts)`},
		{"SELECT DISTINCT city FROM customers UNION ALL SELECT 'x'", false, `
Materialized View v
  Output: city
  Index: the whole row
  ->  Union All (2 inputs)
        ->  Project (#1)
              ->  Distinct
                    ->  Project (#3)
                          ->  Source customers (id, name, city, tier, signup)
        ->  Map (computes 1 column)
              ->  Map (computes 1 column)
                    ->  Constant (1 rows)`},
	} {
		v, err := Compile(c.sql, cat)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		var stats []flow.NodeStats
		if c.stats {
			for i := range v.nodes {
				stats = append(stats, flow.NodeStats{In: int64(i), Out: int64(i + 1), Late: int64(i % 3 / 2)})
			}
		}
		got := strings.Join(v.Explain("v", stats, colsOf), "\n")
		if want := strings.TrimPrefix(c.want, "\n"); got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.sql, got, want)
		}
	}
}
