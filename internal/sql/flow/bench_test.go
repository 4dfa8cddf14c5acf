package flow

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/sql/types"
)

// benchEpoch is the changes per epoch in the benchmarks: an upsert
// source's poll returns a few thousand records.
const benchEpoch = 1000

// benchCacheBytes is Pebble's block cache in the benchmarks: an agent
// gives its views' state a cache of this order.
const benchCacheBytes = 64 << 20

// benchStores are the stores benchmarked; Pebble on an in-memory
// filesystem measures the engine's work, not the disk's.
func benchStores(b *testing.B) []struct {
	name string
	st   func() Store
} {
	return []struct {
		name string
		st   func() Store
	}{
		{"mem", func() Store { return NewMemStore() }},
		{"pebble", func() Store {
			cache := pebble.NewCache(benchCacheBytes)
			b.Cleanup(cache.Unref)
			db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Cache: cache, Logger: quietLogger{}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return NewPebbleStore(db, []byte("b"), false)
		}},
	}
}

// feed runs b.N epochs of benchEpoch changes made by next on input in
// of d, and reports changes per second.
func feed(b *testing.B, d *Driver, inputs int, next func(r *rand.Rand) (int, types.Change)) {
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e := Epoch{Inputs: make([][]types.Change, inputs)}
		for range benchEpoch {
			in, c := next(r)
			e.Inputs[in] = append(e.Inputs[in], c)
		}
		if _, err := d.Step(e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchEpoch)/b.Elapsed().Seconds(), "changes/s")
}

// BenchmarkAggregate: GROUP BY one of 1000 keys with count(*),
// sum(int8), min and max, a fifth of the changes deleting an earlier
// row.
func BenchmarkAggregate(b *testing.B) {
	for _, s := range benchStores(b) {
		b.Run(s.name, func(b *testing.B) {
			var g Graph
			in := g.Input("bids")
			g.SetOutput(g.Add("agg", &Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{CountStar, 0}, {Sum, 1}, {Min, 1}, {Max, 1}}}, in))
			d, err := NewDriver(&g, s.st(), Options{Index: &IndexSpec{KeyCols: []int{0}, Unique: true}})
			if err != nil {
				b.Fatal(err)
			}
			var live []types.Row
			feed(b, d, 1, func(r *rand.Rand) (int, types.Change) {
				if len(live) > 100 && r.IntN(5) == 0 {
					i := r.IntN(len(live))
					row := live[i]
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
					return 0, types.Change{Row: row, Diff: -1}
				}
				row := types.Row{int64(r.IntN(1000)), int64(r.IntN(1_000_000))}
				live = append(live, row)
				return 0, types.Change{Row: row, Diff: 1}
			})
		})
	}
}

// BenchmarkJoin: a stream of orders (inserts) joined with 1000
// customers, a twentieth of the changes updating a customer.
func BenchmarkJoin(b *testing.B) {
	for _, s := range benchStores(b) {
		b.Run(s.name, func(b *testing.B) {
			var g Graph
			o, c := g.Input("orders"), g.Input("customers")
			g.SetOutput(g.Add("join", &Join{Kind: InnerJoin, LeftKey: []int{1}, RightKey: []int{0}, LeftWidth: 3, RightWidth: 2}, o, c))
			d, err := NewDriver(&g, s.st(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			customers := make([]types.Row, 1000)
			var init []types.Change
			for i := range customers {
				customers[i] = types.Row{int64(i), fmt.Sprintf("customer %d", i)}
				init = append(init, types.Change{Row: customers[i], Diff: 1})
			}
			if _, err := d.Step(Epoch{Inputs: [][]types.Change{nil, init}}); err != nil {
				b.Fatal(err)
			}
			var id int64
			var pending []types.Change
			feed(b, d, 2, func(r *rand.Rand) (int, types.Change) {
				if len(pending) > 0 {
					c := pending[0]
					pending = pending[1:]
					return 1, c
				}
				if r.IntN(20) == 0 {
					i := r.IntN(len(customers))
					old := customers[i]
					customers[i] = types.Row{old[0], fmt.Sprintf("customer %d v%d", i, r.IntN(1000))}
					pending = append(pending, types.Change{Row: customers[i], Diff: 1})
					return 1, types.Change{Row: old, Diff: -1}
				}
				id++
				return 0, types.Change{Row: types.Row{id, int64(r.IntN(1000)), int64(r.IntN(10000))}, Diff: 1}
			})
		})
	}
}
