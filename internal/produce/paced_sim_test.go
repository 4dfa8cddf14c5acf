package produce_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/produce"
)

// The PUT budget, simulated.
//
// TestPacedUploadsSimulated drives a pipeline on the bubble's fake clock
// (testing/synctest) against the s3-standard latency profile, fed by
// simulated Kafka producers that behave as an idempotent franz-go
// producer does where it matters here: records arrive at a steady rate,
// a producer sends what it holds once its oldest record has lingered,
// and it keeps at most five requests in flight. Fake time makes CPU
// free, so the latencies are those of the policy alone (the flush
// spacing, the store's latency, the in-flight limit): the floor under
// what `strand bench --objstore-latency s3-standard` measures on a real
// machine. Runs differ a little: which upload draws which delay, and
// which batches share a flush, follow the order goroutines run in
// (drawing each upload's delay from its object key instead did not make
// runs repeat: flushes still differ in what they hold, and with them the
// hedges and the spacing; the spread grew). The test checks that the budget
// holds and every record is answered; -v prints the latencies, and
// -sim runs the whole table (at 50 MB/s too) for a longer fake time.

var (
	simAll      = flag.Bool("sim", false, "TestPacedUploadsSimulated: the whole table, 60 s of fake time each")
	simLinger   = flag.Duration("sim.linger", 0, "TestPacedUploadsSimulated: producer linger (default: PacedLinger, or 10ms without a budget)")
	simBuffer   = flag.Int("sim.buffer", 45<<20, "TestPacedUploadsSimulated: MaxBufferedBytes")
	simUploads  = flag.Int("sim.uploads", 0, "TestPacedUploadsSimulated: MaxConcurrentUploads (default the package's)")
	simHedgeP   = flag.Float64("sim.hedge-percentile", produce.DefaultHedgePercentile, "TestPacedUploadsSimulated: HedgePercentile")
	simInFlight = flag.Int("sim.inflight", 5, "TestPacedUploadsSimulated: produce requests in flight per producer (Kafka's idempotent producers: 5)")
	simHedgeR   = flag.Float64("sim.hedge-ratio", produce.DefaultHedgeMaxRatio, "TestPacedUploadsSimulated: HedgeMaxRatio")
	simCutBytes = flag.Int("sim.cut-bytes", 0, "TestPacedUploadsSimulated: PacedCutBytes of the budgeted cases")
)

func TestPacedUploadsSimulated(t *testing.T) {
	cases := []simCase{
		{mbps: 10, puts: 10},
		{mbps: 10, puts: 4},
		// The agent's default on an S3 store: an object every 250 ms
		// or per 5 MiB, whichever comes first.
		{mbps: 10, puts: 4, cutBytes: 5 << 20},
		{mbps: 50, puts: 4, cutBytes: 5 << 20},
	}
	seconds := 20
	if *simAll {
		cases = append(cases, simCase{mbps: 10}, simCase{mbps: 50}, simCase{mbps: 50, puts: 10}, simCase{mbps: 50, puts: 4})
		seconds = 60
	}
	for _, c := range cases {
		c.seconds = seconds
		t.Run(c.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := c.run(t)
				putRate := float64(r.puts) / float64(c.seconds)
				t.Logf("%v: %.1f PUT/s (%d hedged), produce p50 %v p99 %v max %v, %d records; requests in the agent p50 %v p99 %v",
					c, putRate, r.hedges, r.p50, r.p99, r.max, r.records, r.reqP50, r.reqP99)
				// Hedges saved up in a calm spell (at most two) may
				// come on top within a window, and one cut at its edge.
				// Cuts by size come on top of the budget's turns, at
				// most one per cutBytes (and their hedges).
				limit := c.puts*float64(c.seconds) + 3
				if c.cutBytes > 0 {
					limit += 1.1 * c.mbps * 1e6 / float64(c.cutBytes) * float64(c.seconds)
				}
				if c.puts > 0 && float64(r.puts) > limit {
					t.Errorf("%d PUTs in %d s, budget %v a second", r.puts, c.seconds, c.puts)
				}
				if c.cutBytes > 0 {
					// Objects stay near cutBytes at high ingest, and no
					// record waits for a turn the size cuts pushed away.
					if perPut := c.mbps * 1e6 * float64(c.seconds) / float64(r.puts); c.mbps*1e6 > c.puts*float64(c.cutBytes) && perPut < float64(c.cutBytes)/2 {
						t.Errorf("%.1f MB per PUT, want about %d", perPut/1e6, c.cutBytes)
					}
					if limit := 3 * time.Second; r.max > limit {
						t.Errorf("a record waited %v (simulated), want under %v", r.max, limit)
					}
				}
				if want := int64(c.mbps * 1e6 / simRecordBytes * float64(c.seconds) * 0.95); r.records < want {
					t.Errorf("%d records answered in the measured window, want at least %d", r.records, want)
				}
			})
		})
	}
}

func TestPacedLinger(t *testing.T) {
	for puts, want := range map[float64]time.Duration{100: 4400 * time.Microsecond, 10: 44 * time.Millisecond, 4: 50 * time.Millisecond} {
		if got := produce.PacedLinger(puts); got.Round(100*time.Microsecond) != want {
			t.Errorf("PacedLinger(%v) = %v, want %v", puts, got, want)
		}
	}
}

const (
	simRecordBytes = 1000
	simProducers   = 2
	// simTick is how often records arrive and producers look at them.
	simTick   = time.Millisecond
	simWarmup = 5 * time.Second
)

type simCase struct {
	mbps     float64
	puts     float64 // 0: no budget
	cutBytes int     // PacedCutBytes; 0: sim.cut-bytes
	seconds  int
}

func (c simCase) String() string {
	switch {
	case c.puts == 0:
		return fmt.Sprintf("%vMBps/no-budget", c.mbps)
	case c.cutBytes > 0:
		return fmt.Sprintf("%vMBps/%vputs/%vMiB", c.mbps, c.puts, c.cutBytes>>20)
	}
	return fmt.Sprintf("%vMBps/%vputs", c.mbps, c.puts)
}

type simResult struct {
	puts, hedges  int64
	records       int64
	p50, p99, max time.Duration
	// reqP50 and reqP99 are of produce requests, from Submit to the
	// answer: the agent's part.
	reqP50, reqP99 time.Duration
}

// simChunk is the records one producer got in one tick.
type simChunk struct {
	at time.Time
	n  int
}

// latencies collects latencies from concurrent goroutines, each weighted
// (the simulation's by the records it covers, the benchmarks' by 1).
type latencies struct {
	mu      sync.Mutex
	lat     []time.Duration
	weights []int
	records int64
}

func (l *latencies) add(d time.Duration, n int) {
	l.mu.Lock()
	l.lat = append(l.lat, d)
	l.weights = append(l.weights, n)
	l.records += int64(n)
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	idx := make([]int, len(l.lat))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(l.lat[a] - l.lat[b]) })
	want, seen := min(int64(q*float64(l.records)), l.records-1), int64(0)
	for _, i := range idx {
		seen += int64(l.weights[i])
		if seen > want {
			return l.lat[i]
		}
	}
	return 0
}

// discardStore takes every Put and keeps nothing: the simulation writes
// gigabytes, and nothing reads them back.
type discardStore struct{}

func (discardStore) Put(context.Context, string, []byte) error         { return nil }
func (discardStore) PutIfAbsent(context.Context, string, []byte) error { return nil }
func (discardStore) Get(context.Context, string, int64, int64) ([]byte, error) {
	return nil, objstore.ErrNotFound
}
func (discardStore) Delete(context.Context, string) error { return nil }
func (discardStore) List(context.Context, string) ([]objstore.ObjectInfo, error) {
	return nil, nil
}

func (c simCase) run(t *testing.T) simResult {
	dist, err := objstore.NewLatency(objstore.S3Standard, 1)
	if err != nil {
		t.Fatal(err)
	}
	store := objstore.WithCounters(objstore.WithLatency(discardStore{}, dist))
	e := newMemEnv(t, store, 1)
	cfg := produce.Config{
		HedgePercentile:      *simHedgeP,
		HedgeMaxRatio:        *simHedgeR,
		HedgeMinDelay:        produce.DefaultHedgeMinDelay,
		MaxPutsPerSec:        c.puts,
		PacedCutBytes:        cmp.Or(c.cutBytes, *simCutBytes),
		MaxConcurrentUploads: *simUploads,
		// Default: the agent's share of the default 512 MiB memory
		// budget.
		MaxBufferedBytes: *simBuffer,
	}
	p := e.pipeline(t, cfg)

	// Every tick brings a producer perTick records, as one batch built
	// once; a request carries the batches of the ticks it waited for.
	perTick := int(c.mbps*1e6/simRecordBytes/simProducers/float64(time.Second/simTick) + 0.5)
	batch, _ := e.batch(t, 0, perTick, simRecordBytes, 1)
	linger := 10 * time.Millisecond // franz-go's default
	if c.puts > 0 {
		linger = produce.PacedLinger(c.puts)
	}
	if *simLinger > 0 {
		linger = *simLinger
	}

	start := time.Now()
	measureFrom, end := start.Add(simWarmup), start.Add(simWarmup+time.Duration(c.seconds)*time.Second)
	var lat, reqLat latencies
	var before, after objstore.Counts
	var beforeStats, afterStats produce.Stats
	var wg sync.WaitGroup
	ctx := context.Background()
	for range simProducers {
		wg.Go(func() {
			slots := make(chan struct{}, *simInFlight)
			var pending []simChunk
			var acks sync.WaitGroup
			for now := time.Now(); now.Before(end); now = time.Now() {
				pending = append(pending, simChunk{at: now, n: perTick})
				if now.Sub(pending[0].at) >= linger {
					select {
					case slots <- struct{}{}:
						req := pending
						pending = nil
						batches := make([]produce.Batch, len(req))
						for i := range batches {
							batches[i] = batch
						}
						sent := time.Now()
						a, err := p.Submit(ctx, batches)
						if err != nil {
							t.Errorf("Submit: %v", err)
							return
						}
						acks.Go(func() {
							if _, err := a.Wait(ctx); err != nil {
								t.Errorf("produce: %v", err)
							}
							done := time.Now()
							if !sent.Before(measureFrom) {
								reqLat.add(done.Sub(sent), 1)
							}
							for _, ch := range req {
								if !ch.at.Before(measureFrom) {
									lat.add(done.Sub(ch.at), ch.n)
								}
							}
							<-slots
						})
					default:
					}
				}
				time.Sleep(simTick)
			}
			acks.Wait()
		})
	}
	wg.Go(func() {
		time.Sleep(simWarmup)
		before, beforeStats = store.Snapshot(), p.Stats()
		time.Sleep(end.Sub(time.Now()))
		after, afterStats = store.Snapshot(), p.Stats()
	})
	wg.Wait()
	if lat.records == 0 {
		t.Fatal("no record answered")
	}
	r := simResult{
		puts:    after.Sub(before).Op(objstore.OpPut).Requests,
		hedges:  int64(afterStats.Hedges - beforeStats.Hedges),
		records: lat.records,
		p50:     lat.quantile(0.5),
		p99:     lat.quantile(0.99),
		max:     lat.quantile(1),
		reqP50:  reqLat.quantile(0.5),
		reqP99:  reqLat.quantile(0.99),
	}
	return r
}
