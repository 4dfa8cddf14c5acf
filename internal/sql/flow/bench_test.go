package flow

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/sql/types"
)

// benchEpoch is the changes per epoch in the benchmarks: an upsert
// source's poll returns a few thousand records.
const benchEpoch = 1000

// benchCacheBytes is Pebble's block cache in the benchmarks: an agent
// gives its views' state a cache of this order.
const benchCacheBytes = 64 << 20

// benchWarmEpochs are run before the timer starts, so every benchmark
// measures its steady state (state at its bounded size, inserts and
// deletes balanced), not the filling of an empty store: the cost of an
// epoch does not depend on b.N.
const benchWarmEpochs = 30

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
			opts := &pebble.Options{FS: vfs.NewMem(), Cache: cache, Logger: quietLogger{}}
			// As the agent's database (internal/replica): a new row's
			// key is a miss, which filters answer without a block read.
			for i := range opts.Levels {
				opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
			}
			db, err := pebble.Open("", opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return NewPebbleStore(db, []byte("b"), false)
		}},
		// As a view's state (internal/sql/views): the index's additions
		// are merges of counted rows, written without reads.
		{"pebble-merge", func() Store {
			cache := pebble.NewCache(benchCacheBytes)
			b.Cleanup(cache.Unref)
			opts := &pebble.Options{FS: vfs.NewMem(), Cache: cache, Logger: quietLogger{}, Merger: CountedMerger}
			for i := range opts.Levels {
				opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
			}
			db, err := pebble.Open("", opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			s := NewPebbleStore(db, []byte("b"), false)
			s.SetCountedMerges(true)
			return s
		}},
	}
}

// epochGen fills one epoch's inputs (about benchEpoch changes) and sets
// its watermark.
type epochGen func(r *rand.Rand, e *Epoch)

// runBench builds the graph over each store, runs benchWarmEpochs
// epochs, then b.N timed ones, and reports input changes per second.
func runBench(b *testing.B, opts Options, build func(g *Graph), newGen func() epochGen) {
	for _, s := range benchStores(b) {
		b.Run(s.name, func(b *testing.B) {
			var g Graph
			build(&g)
			d, err := NewDriver(&g, s.st(), opts)
			if err != nil {
				b.Fatal(err)
			}
			gen := newGen()
			r := rand.New(rand.NewPCG(1, 2))
			step := func() int {
				e := Epoch{Inputs: make([][]types.Change, len(g.inputs))}
				gen(r, &e)
				if _, err := d.Step(e); err != nil {
					b.Fatal(err)
				}
				n := 0
				for _, in := range e.Inputs {
					n += len(in)
				}
				return n
			}
			for range benchWarmEpochs {
				step()
			}
			b.ReportAllocs()
			b.ResetTimer()
			var cpu0 time.Duration
			if processCPU != nil {
				cpu0 = processCPU(b)
			}
			changes := 0
			for range b.N {
				changes += step()
			}
			if processCPU != nil {
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(changes), "cpu-ns/change")
			}
			b.ReportMetric(float64(changes)/b.Elapsed().Seconds(), "changes/s")
			b.ReportMetric(float64(changes)/float64(b.N), "changes/op")
		})
	}
}

// ring is a bounded window of live rows: pushing past its size evicts
// the oldest, which the generator retracts, so inserts and deletes
// balance once it is full.
type ring struct {
	rows []types.Row
	next int
	full bool
}

func newRing(n int) *ring { return &ring{rows: make([]types.Row, n)} }

// push adds row and returns the row it evicts (nil while filling).
func (q *ring) push(row types.Row) types.Row {
	old := q.rows[q.next]
	q.rows[q.next] = row
	q.next++
	if q.next == len(q.rows) {
		q.next, q.full = 0, true
	}
	return old
}

// pushChanges appends +row and, once the ring is full, -evicted.
func (q *ring) pushChanges(cs []types.Change, row types.Row) []types.Change {
	if old := q.push(row); old != nil {
		cs = append(cs, types.Change{Row: old, Diff: -1})
	}
	return append(cs, types.Change{Row: row, Diff: 1})
}

// BenchmarkAggregate: GROUP BY one of 1000 keys with count(*),
// sum(int8), min and max over a window of 10,000 live rows: each new
// row retracts the oldest.
func BenchmarkAggregate(b *testing.B) {
	runBench(b, Options{Index: &IndexSpec{KeyCols: []int{0}, Unique: true}}, func(g *Graph) {
		in := g.Input("bids")
		g.SetOutput(g.Add("agg", &Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: CountStar}, {Kind: Sum, Col: 1}, {Kind: Min, Col: 1}, {Kind: Max, Col: 1}}}, in))
	}, func() epochGen {
		live := newRing(10_000)
		return func(r *rand.Rand, e *Epoch) {
			for len(e.Inputs[0]) < benchEpoch {
				e.Inputs[0] = live.pushChanges(e.Inputs[0], types.Row{int64(r.IntN(1000)), int64(r.IntN(1_000_000))})
			}
		}
	})
}

// BenchmarkJoin: a stream of orders (a window of 10,000 live orders,
// each new one retracting the oldest) joined with 1000 customers, a
// twentieth of the changes updating a customer (about 10 orders each).
func BenchmarkJoin(b *testing.B) {
	runBench(b, Options{}, func(g *Graph) {
		o, c := g.Input("orders"), g.Input("customers")
		g.SetOutput(g.Add("join", &Join{Kind: InnerJoin, LeftKey: []int{1}, RightKey: []int{0}, LeftWidth: 3, RightWidth: 2}, o, c))
	}, func() epochGen {
		customers := make([]types.Row, 1000)
		first := true
		live := newRing(10_000)
		var id int64
		return func(r *rand.Rand, e *Epoch) {
			if first {
				for i := range customers {
					customers[i] = types.Row{int64(i), fmt.Sprintf("customer %d", i)}
					e.Inputs[1] = append(e.Inputs[1], types.Change{Row: customers[i], Diff: 1})
				}
				first = false
			}
			for len(e.Inputs[0])+len(e.Inputs[1]) < benchEpoch {
				if r.IntN(20) == 0 {
					i := r.IntN(len(customers))
					old := customers[i]
					customers[i] = types.Row{old[0], fmt.Sprintf("customer %d v%d", i, r.IntN(1000))}
					e.Inputs[1] = append(e.Inputs[1], types.Change{Row: old, Diff: -1}, types.Change{Row: customers[i], Diff: 1})
					continue
				}
				id++
				e.Inputs[0] = live.pushChanges(e.Inputs[0], types.Row{id, int64(r.IntN(1000)), int64(r.IntN(10000))})
			}
		}
	})
}

// The Nexmark benchmarks run shapes of Nexmark's queries (its Person,
// Auction and Bid streams, github.com/nexmark/nexmark) over the
// operators as the planner compiles them, with the expressions as Go
// functions. Event time advances a second per epoch.

// Bid: auction, bidder, price, channel, url, date_time, extra.
const (
	bAuction = iota
	bBidder
	bPrice
	bChannel
	bURL
	bDateTime
	bExtra
	bidWidth
)

var benchEpochStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// bidGen makes bids over auctions auctions, epoch number n's at
// n seconds, a thousand per second; it retracts the oldest once more
// than live are live (live 0: bids are only inserted).
type bidGen struct {
	auctions int
	live     *ring
	n        int
}

func (g *bidGen) fill(r *rand.Rand, e *Epoch, in int, count int) {
	t := benchEpochStart.Add(time.Duration(g.n) * time.Second)
	g.n++
	for i := range count {
		row := types.Row{int64(r.IntN(g.auctions)), int64(r.IntN(10_000)), int64(r.IntN(10_000_000)),
			"channel-" + string(rune('A'+r.IntN(4))), "https://www.nexmark.com/item.htm?query=1", t.Add(time.Duration(i) * time.Millisecond), "extra"}
		if g.live != nil {
			e.Inputs[in] = g.live.pushChanges(e.Inputs[in], row)
		} else {
			e.Inputs[in] = append(e.Inputs[in], types.Change{Row: row, Diff: 1})
		}
	}
	e.Watermark = t
}

// BenchmarkNexmarkQ1: SELECT auction, bidder, 0.908 * price, date_time
// FROM bid: a Map over every bid into the view's index (a window of
// 10,000 live bids, so the index stays bounded).
func BenchmarkNexmarkQ1(b *testing.B) {
	runBench(b, Options{}, func(g *Graph) {
		in := g.Input("bid")
		g.SetOutput(g.Add("map", &Map{Exprs: []Expr{col(bAuction), col(bBidder),
			func(r types.Row) (any, error) { return 0.908 * float64(r[bPrice].(int64)), nil }, col(bDateTime)}}, in))
	}, func() epochGen {
		bids := &bidGen{auctions: 1000, live: newRing(10_000)}
		return func(r *rand.Rand, e *Epoch) { bids.fill(r, e, 0, benchEpoch/2) }
	})
}

// BenchmarkNexmarkQ2: SELECT auction, price FROM bid WHERE auction %
// 123 = 0: a Filter then a Project, most bids filtered out.
func BenchmarkNexmarkQ2(b *testing.B) {
	runBench(b, Options{}, func(g *Graph) {
		in := g.Input("bid")
		f := g.Add("where", &Filter{Pred: func(r types.Row) (any, error) { return r[bAuction].(int64)%123 == 0, nil }}, in)
		g.SetOutput(g.Add("project", &Project{Cols: []int{bAuction, bPrice}}, f))
	}, func() epochGen {
		bids := &bidGen{auctions: 100_000, live: newRing(10_000)}
		return func(r *rand.Rand, e *Epoch) { bids.fill(r, e, 0, benchEpoch/2) }
	})
}

// BenchmarkNexmarkQ3: persons in a few states joined with auctions of
// one category by seller (SELECT name, city, state, a.id FROM auction
// a JOIN person p ON a.seller = p.id WHERE a.category = 10 AND p.state
// IN ('OR', 'ID', 'CA')): 1000 persons, a fiftieth of the changes
// moving one; a window of 10,000 live auctions.
func BenchmarkNexmarkQ3(b *testing.B) {
	// Auction: id, seller, category, date_time. Person: id, name, city, state.
	states := []string{"OR", "ID", "CA", "WA", "NV", "AZ"}
	runBench(b, Options{}, func(g *Graph) {
		a, p := g.Input("auction"), g.Input("person")
		af := g.Add("category", &Filter{Pred: func(r types.Row) (any, error) { return r[2].(int64) == 10, nil }}, a)
		pf := g.Add("state", &Filter{Pred: func(r types.Row) (any, error) {
			s := r[3].(string)
			return s == "OR" || s == "ID" || s == "CA", nil
		}}, p)
		j := g.Add("join", &Join{Kind: InnerJoin, LeftKey: []int{1}, RightKey: []int{0}, LeftWidth: 4, RightWidth: 4}, af, pf)
		g.SetOutput(g.Add("project", &Project{Cols: []int{5, 6, 7, 0}}, j))
	}, func() epochGen {
		persons := make([]types.Row, 1000)
		first := true
		live := newRing(10_000)
		var id int64
		person := func(r *rand.Rand, i int) types.Row {
			return types.Row{int64(i), fmt.Sprintf("person %d", i), fmt.Sprintf("city %d", r.IntN(100)), states[r.IntN(len(states))]}
		}
		return func(r *rand.Rand, e *Epoch) {
			if first {
				for i := range persons {
					persons[i] = person(r, i)
					e.Inputs[1] = append(e.Inputs[1], types.Change{Row: persons[i], Diff: 1})
				}
				first = false
			}
			for len(e.Inputs[0])+len(e.Inputs[1]) < benchEpoch {
				if r.IntN(50) == 0 {
					i := r.IntN(len(persons))
					old := persons[i]
					persons[i] = person(r, i)
					e.Inputs[1] = append(e.Inputs[1], types.Change{Row: old, Diff: -1}, types.Change{Row: persons[i], Diff: 1})
					continue
				}
				id++
				e.Inputs[0] = live.pushChanges(e.Inputs[0], types.Row{id, int64(r.IntN(len(persons))), int64(10 + r.IntN(5)), benchEpochStart})
			}
		}
	})
}

// BenchmarkNexmarkQ4: the average winning bid per category: auctions
// (id, category) joined with bids, MAX(price) per auction, then
// AVG(max) per category, so the second aggregate takes the first's
// updates (-old +new). 1000 auctions in 10 categories, a window of
// 10,000 live bids.
func BenchmarkNexmarkQ4(b *testing.B) {
	runBench(b, Options{Index: &IndexSpec{KeyCols: []int{0}, Unique: true}}, func(g *Graph) {
		a, bid := g.Input("auction"), g.Input("bid")
		j := g.Add("join", &Join{Kind: InnerJoin, LeftKey: []int{0}, RightKey: []int{bAuction}, LeftWidth: 2, RightWidth: bidWidth}, a, bid)
		m := g.Add("max", &Aggregate{GroupBy: []int{0, 1}, Aggs: []AggCall{{Kind: Max, Col: 2 + bPrice}}}, j)
		g.SetOutput(g.Add("avg", &Aggregate{GroupBy: []int{1}, Aggs: []AggCall{{Kind: Avg, Col: 2}}}, m))
	}, func() epochGen {
		first := true
		bids := &bidGen{auctions: 1000, live: newRing(10_000)}
		return func(r *rand.Rand, e *Epoch) {
			if first {
				for i := range 1000 {
					e.Inputs[0] = append(e.Inputs[0], types.Change{Row: types.Row{int64(i), int64(i % 10)}, Diff: 1})
				}
				first = false
			}
			bids.fill(r, e, 1, benchEpoch/2)
		}
	})
}

// BenchmarkNexmarkQ7: the highest bid per 10-second tumbling window,
// emitted once when the watermark closes it (Tumble, then MAX(price)
// per window with EmitOnClose): insert-only bids, closed windows'
// state freed.
func BenchmarkNexmarkQ7(b *testing.B) {
	runBench(b, Options{Index: &IndexSpec{KeyCols: []int{0}, Unique: true}}, func(g *Graph) {
		in := g.Input("bid")
		w := g.Add("tumble", &Tumble{TimeCol: bDateTime, Size: 10 * time.Second}, in)
		p := g.Add("project", &Project{Cols: []int{bidWidth, bPrice}}, w)
		g.SetOutput(g.Add("max", &Aggregate{GroupBy: []int{0}, Aggs: []AggCall{{Kind: Max, Col: 1}, {Kind: CountStar, Col: 0}},
			Window: &WindowPolicy{Size: 10 * time.Second, EmitOnClose: true}}, p))
	}, func() epochGen {
		bids := &bidGen{auctions: 1000}
		return func(r *rand.Rand, e *Epoch) { bids.fill(r, e, 0, benchEpoch) }
	})
}

// BenchmarkNexmarkQ5: bids per auction per 10-second tumbling window
// (q5's inner count; q5 then takes the hottest), emitted as they
// change, the watermark freeing closed windows' state: an aggregate
// over many small groups, most new each epoch.
func BenchmarkNexmarkQ5(b *testing.B) {
	runBench(b, Options{}, func(g *Graph) {
		in := g.Input("bid")
		w := g.Add("tumble", &Tumble{TimeCol: bDateTime, Size: 10 * time.Second}, in)
		p := g.Add("project", &Project{Cols: []int{bidWidth, bAuction}}, w)
		g.SetOutput(g.Add("count", &Aggregate{GroupBy: []int{0, 1}, Aggs: []AggCall{{Kind: CountStar, Col: 0}},
			Window: &WindowPolicy{Size: 10 * time.Second, EmitOnClose: true}}, p))
	}, func() epochGen {
		bids := &bidGen{auctions: 1000}
		return func(r *rand.Rand, e *Epoch) { bids.fill(r, e, 0, benchEpoch) }
	})
}

// BenchmarkNexmarkQ3Append: q3's join as a view runs it over Nexmark's
// append-only streams, the filters below the join: every person is new
// (a join key no side has seen), and each auction's seller one of the
// last 100 persons; a person to three auctions, as the generator's
// proportions have them. Nearly every key a side's step reads is new to
// it, so this is the join's cost per new key (its counts' reads).
func BenchmarkNexmarkQ3Append(b *testing.B) {
	// Auction: id, seller. Person: id, name, city, state.
	runBench(b, Options{}, func(g *Graph) {
		a, p := g.Input("auction"), g.Input("person")
		j := g.Add("join", &Join{Kind: InnerJoin, LeftKey: []int{1}, RightKey: []int{0}, LeftWidth: 2, RightWidth: 4}, a, p)
		g.SetOutput(g.Add("project", &Project{Cols: []int{3, 4, 5, 0}}, j))
	}, func() epochGen {
		var persons, auctions int64
		return func(r *rand.Rand, e *Epoch) {
			for len(e.Inputs[0])+len(e.Inputs[1]) < benchEpoch {
				persons++
				e.Inputs[1] = append(e.Inputs[1], types.Change{Row: types.Row{persons, fmt.Sprintf("person %d", persons),
					fmt.Sprintf("city %d", r.IntN(100)), "OR"}, Diff: 1})
				for range 3 {
					auctions++
					seller := max(1, persons-int64(r.IntN(100)))
					e.Inputs[0] = append(e.Inputs[0], types.Change{Row: types.Row{auctions, seller}, Diff: 1})
				}
			}
		}
	})
}

// processCPU, where the platform has it (bench_scan_test.go), is the
// CPU time (user and system) this process used so far: cpu-ns/change,
// Pebble's background flushes and compactions included, holds up on a
// loaded machine where changes/s does not.
var processCPU func(b *testing.B) time.Duration
