package exec

import (
	"fmt"
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

// BenchmarkQueries measures the executor over 100,000 in-memory rows;
// rows/s is input rows per second.
func BenchmarkQueries(b *testing.B) {
	const n = 100_000
	rel := &MemRelation{Cols: []Column{{Name: "k", Type: types.Int8}, {Name: "g", Type: types.Text}, {Name: "v", Type: types.Float8}}}
	for i := range n {
		rel.Rows = append(rel.Rows, types.Row{int64(i), fmt.Sprintf("g%d", i%100), float64(i) / 7})
	}
	cat := MemCatalog{"t": rel}
	for _, sql := range []string{
		"SELECT k, v * 2 FROM t WHERE k % 3 = 0",
		"SELECT g, count(*), sum(v), max(k) FROM t GROUP BY g",
		"SELECT k FROM t ORDER BY v DESC LIMIT 10",
		"SELECT count(*) FROM t a JOIN t b ON a.k = b.k",
	} {
		b.Run(sql, func(b *testing.B) {
			q, err := plan(b, cat, sql, Options{MemoryBudget: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := runAll(q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
