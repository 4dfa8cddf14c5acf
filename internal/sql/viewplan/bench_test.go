package viewplan

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqltest"
	"github.com/strandkafka/strand/internal/sql/types"
)

// benchEvents is how many Nexmark events each benchmark run feeds, in
// epochs of benchEpoch events.
const (
	benchEvents = 20_000
	benchEpoch  = 1000
)

// BenchmarkNexmark runs Nexmark q0-q8 (the batch forms, and the
// streaming forms of q5, q7 and q8), compiled from SQL, over generated
// events in memory, one goroutine: events/s is per core. Every event
// counts, including those of tables a query does not read (a source
// per table would not deliver them), as Nexmark counts its stream.
func BenchmarkNexmark(b *testing.B) {
	events, err := sqltest.GenerateNexmark(sqltest.NexmarkCorpusConfig(1, benchEvents))
	if err != nil {
		b.Fatal(err)
	}
	changes, _ := nexmarkHistory(b, events, 0)
	cat := catalogOf(b, sqltest.NexmarkTables(nil))
	for _, q := range corpusQueries(b) {
		if !q.nexmark() || len(q.name) < 8 || q.name[:8] != "nexmark/" {
			continue
		}
		v, err := Compile(q.sql, cat)
		if err != nil {
			continue // refused (q6): the corpus test lists why
		}
		b.Run(q.name[len("nexmark/"):], func(b *testing.B) {
			eps := epochs(v, changes, rand.New(rand.NewPCG(1, 1)), 1)
			// epochs of benchEpoch events each.
			eps = regroup(eps, benchEpoch)
			b.ReportAllocs()
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				d, err := flow.NewDriver(v.Graph(), flow.NewMemStore(), flow.Options{Index: &v.Index})
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range eps {
					if _, err := d.Step(e); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(len(events))*float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}

// regroup merges one-change epochs into epochs of n.
func regroup(eps []flow.Epoch, n int) []flow.Epoch {
	var out []flow.Epoch
	for i := 0; i < len(eps); i += n {
		e := flow.Epoch{Inputs: make([][]types.Change, len(eps[i].Inputs))}
		for _, x := range eps[i:min(i+n, len(eps))] {
			for j, in := range x.Inputs {
				e.Inputs[j] = append(e.Inputs[j], in...)
			}
		}
		out = append(out, e)
	}
	return out
}
