package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/bench/nexmark"
	"github.com/strandkafka/strand/internal/clock"
)

// The Nexmark mode's defaults and bounds.
const (
	// DefaultNexmarkRate is the events/s when --rate is not given.
	DefaultNexmarkRate = 1000
	// DefaultSQLAddr is the agent's SQL endpoint unless --sql says.
	DefaultSQLAddr = "127.0.0.1:6875"
	// nexmarkViewPrefix names the views: nexmark_q0, ...
	nexmarkViewPrefix = "nexmark_"
	// markerEvery spaces the freshness markers; one is in flight at a
	// time, so a slow view lowers the marker rate, never piles them up.
	markerEvery = 250 * time.Millisecond
	// markerPollEvery is how often a marker's pull query is repeated: the
	// freshness numbers' resolution.
	markerPollEvery = 5 * time.Millisecond
	// markerTimeout gives up on one marker (counted, not measured).
	markerTimeout = 30 * time.Second
	// markerAuctionBase puts markers' auctions far past any generated
	// auction and, times 123, into q2's mod(auction, 123) = 0.
	markerAuctionBase = 1_000_000_000
	// nexmarkDrainTimeout bounds the wait, after the load, for every
	// view to consume what was produced.
	nexmarkDrainTimeout = 2 * time.Minute
	// nexmarkPaceBatches is how many pacer releases a second the
	// producer makes: events go out in bursts of rate/this.
	nexmarkPaceBatches = 100
	// lookupEvery spaces the point lookups measured during the load (one
	// at a time, on their own connection).
	lookupEvery = 10 * time.Millisecond
	// idleLookups are the lookups measured after the load.
	idleLookups = 1000
	// replayPollEvery is how often a replay's progress is scraped. A
	// scrape costs the agent CPU (the whole /metrics page, gzipped),
	// which with --embedded is counted in the replay's CPU: every 20 ms
	// that was a fifth of a q7 replay's.
	replayPollEvery = 100 * time.Millisecond
)

// NexmarkResult is the --nexmark run's report.
type NexmarkResult struct {
	Rate     float64 `json:"rate"`
	Duration string  `json:"duration"`
	// Proportions is --nexmark-proportions (people, auctions, bids).
	Proportions string `json:"proportions"`
	// Produced is the events produced by topic during the measured
	// window and the drain (markers included in bid).
	Produced map[string]int64 `json:"produced"`
	// ProducedPerSec is what the producer achieved over the window.
	ProducedPerSec float64 `json:"produced_per_sec"`
	// Cores is the agent's CPU seconds per second over the window.
	Cores    float64       `json:"cores"`
	CPUScope string        `json:"cpu_scope"`
	Views    []NexmarkView `json:"views"`
	// Freshness is produce → visible in a pull query on FreshnessView.
	FreshnessView     string  `json:"freshness_view,omitempty"`
	FreshnessSamples  uint64  `json:"freshness_samples"`
	FreshnessP50Ms    float64 `json:"freshness_p50_ms"`
	FreshnessP99Ms    float64 `json:"freshness_p99_ms"`
	FreshnessMaxMs    float64 `json:"freshness_max_ms"`
	FreshnessTimeouts int     `json:"freshness_timeouts"`
	// Lookup is the pull query `SELECT * FROM LookupView WHERE auction
	// = $1` during the load, for random auction ids (hits and misses):
	// a point lookup on the view's key.
	LookupView    string  `json:"lookup_view,omitempty"`
	LookupSamples uint64  `json:"lookup_samples"`
	LookupHits    int     `json:"lookup_hits"`
	LookupP50Ms   float64 `json:"lookup_p50_ms"`
	LookupP99Ms   float64 `json:"lookup_p99_ms"`
	LookupMaxMs   float64 `json:"lookup_max_ms"`
	LookupErr     string  `json:"lookup_error,omitempty"`
	// IdleLookup is the same lookups after the load, once every view
	// has caught up: back to back, nothing else running in the agent.
	IdleLookupSamples uint64  `json:"idle_lookup_samples"`
	IdleLookupP50Ms   float64 `json:"idle_lookup_p50_ms"`
	IdleLookupP99Ms   float64 `json:"idle_lookup_p99_ms"`
	IdleLookupMaxMs   float64 `json:"idle_lookup_max_ms"`
	// SchedLatency (--embedded only) is how long this process's
	// goroutines waited runnable for a processor during the load: the
	// Go runtime's /sched/latencies:seconds, quantiles as bucket bounds.
	SchedLatencySamples uint64  `json:"sched_latency_samples,omitempty"`
	SchedLatencyP50Ms   float64 `json:"sched_latency_p50_ms,omitempty"`
	SchedLatencyP99Ms   float64 `json:"sched_latency_p99_ms,omitempty"`
	// Replay is each query alone, with --nexmark-replay.
	Replay []NexmarkReplay `json:"replay,omitempty"`
	// DrainSeconds is how long after the load every view took to consume
	// every produced event (-1: not within the timeout).
	DrainSeconds float64 `json:"drain_seconds"`
}

// NexmarkView is one query's view.
type NexmarkView struct {
	Query string `json:"query"`
	View  string `json:"view"`
	// Refused is the view compiler's refusal; nothing else is set.
	Refused string `json:"refused,omitempty"`
	// EventsPerSec is input records consumed per second over the window
	// (strand_sql_view_input_offsets' increase).
	EventsPerSec float64 `json:"events_per_sec"`
	// EventsPerCore is EventsPerSec over the agent's cores used: every
	// view shares the agent, so this is the view's share of throughput
	// per core of the whole agent, not the view's own cost.
	EventsPerCore float64 `json:"events_per_core"`
	EpochsPerSec  float64 `json:"epochs_per_sec"`
	// LagEnd is strand_sql_view_input_lag_records when the load stopped.
	LagEnd float64 `json:"lag_end"`
	// Consumed is its input records consumed by the end; Expected what
	// was produced to its inputs.
	Consumed float64 `json:"consumed"`
	Expected int64   `json:"expected"`
}

// NexmarkReplay is one query's view created after the load over the
// topics' whole contents: the agent's throughput and cost for that query
// alone, catching up as fast as it can.
type NexmarkReplay struct {
	Query   string  `json:"query"`
	Events  float64 `json:"events"`
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the agent's over the replay (with --embedded the
	// bench process's, idle but for its scrapes).
	CPUSeconds    float64 `json:"cpu_seconds"`
	EventsPerSec  float64 `json:"events_per_sec"`
	EventsPerCore float64 `json:"events_per_cpu_second"`
	// Error is why the replay did not finish.
	Error string `json:"error,omitempty"`
}

// nexmarkReplayTimeout bounds one query's replay.
const nexmarkReplayTimeout = 5 * time.Minute

// replayQueries creates each query (not refused) as a fresh view after
// the load, alone, and times it to consume every event its inputs hold.
func replayQueries(ctx context.Context, conn *pgx.Conn, metricsAddr string, queries []nexmark.Query, r *NexmarkResult, profileDir string, pw *progressWriter) error {
	refused := map[string]bool{}
	expected := map[string]int64{}
	for _, v := range r.Views {
		refused[v.Query] = v.Refused != ""
		expected[v.Query] = v.Expected
	}
	for _, q := range queries {
		if refused[q.Name] {
			continue
		}
		view := nexmarkViewPrefix + q.Name + "_replay"
		rp := NexmarkReplay{Query: q.Name}
		if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW IF EXISTS "+view); err != nil {
			return err
		}
		start, err := Scrape(ctx, metricsAddr)
		if err != nil {
			return err
		}
		stopProfile, err := startCPUProfile(profileDir, "replay-"+q.Name+".pprof")
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE MATERIALIZED VIEW %s AS %s", view, q.SQL)); err != nil {
			stopProfile()
			return fmt.Errorf("bench: create view %s: %w", view, err)
		}
		rp.Error = "timed out"
		for time.Since(t0) < nexmarkReplayTimeout {
			m, err := Scrape(ctx, metricsAddr)
			if err != nil {
				return err
			}
			if vm := m.Views[view]; vm.InputOffsets >= float64(expected[q.Name]) {
				rp.Error = ""
				rp.Events = vm.InputOffsets
				rp.Seconds = time.Since(t0).Seconds()
				rp.CPUSeconds = m.CPUSeconds - start.CPUSeconds
				rp.EventsPerSec = rp.Events / rp.Seconds
				if rp.CPUSeconds > 0 {
					rp.EventsPerCore = rp.Events / rp.CPUSeconds
				}
				break
			}
			if err := clock.Sleep(ctx, clock.Real, replayPollEvery); err != nil {
				return err
			}
		}
		stopProfile()
		pw.note("nexmark replay %s: %.0f events in %.2f s", q.Name, rp.Events, rp.Seconds)
		r.Replay = append(r.Replay, rp)
		if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW IF EXISTS "+view); err != nil {
			return err
		}
	}
	return nil
}

// startCPUProfile writes this process's CPU profile to dir/name until
// the returned stop is called; with dir "" it does nothing.
func startCPUProfile(dir, name string) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: --nexmark-profile: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("bench: --nexmark-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: --nexmark-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// nexmarkConfig is the generator's Config for --nexmark-proportions
// ("" or "p,a,b", each at least 1).
func nexmarkConfig(proportions string) (nexmark.Config, error) {
	cfg := nexmark.Config{Seed: 1}
	if proportions = strings.TrimSpace(proportions); proportions == "" {
		return cfg, nil
	}
	parts := strings.Split(proportions, ",")
	if len(parts) != 3 {
		return cfg, fmt.Errorf("%w: --nexmark-proportions %q: want people,auctions,bids", ErrUsage, proportions)
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 1000 {
			return cfg, fmt.Errorf("%w: --nexmark-proportions %q: each a whole number from 1 to 1000", ErrUsage, proportions)
		}
		v[i] = n
	}
	cfg.PersonProportion, cfg.AuctionProportion, cfg.BidProportion = v[0], v[1], v[2]
	return cfg, nil
}

// nexmarkQueries parses --nexmark-queries ("" or "all": every query).
func nexmarkQueries(s string) ([]nexmark.Query, error) {
	names := nexmark.QueryNames
	if s = strings.TrimSpace(s); s != "" && s != "all" {
		names = nil
		for n := range strings.SplitSeq(s, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	var qs []nexmark.Query
	for _, n := range names {
		q, err := nexmark.LoadQuery(n)
		if err != nil {
			return nil, fmt.Errorf("%w: --nexmark-queries: %v", ErrUsage, err)
		}
		qs = append(qs, q)
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%w: --nexmark-queries names no query", ErrUsage)
	}
	return qs, nil
}

// sqlURL makes --sql a connection string: a URL as is, else an address.
func sqlURL(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	return fmt.Sprintf("postgres://strand-bench@%s/strand?sslmode=disable", addr)
}

// runNexmark creates the topics, sources and views, produces the
// generated events at o.Rate for o.Duration with freshness markers, waits
// for the views to consume everything, and measures.
func runNexmark(ctx context.Context, o *Options, tgt target, sqlAddr string, pw *progressWriter) (*NexmarkResult, error) {
	queries, err := nexmarkQueries(o.NexmarkQueries)
	if err != nil {
		return nil, err
	}
	rate := o.Rate
	if rate == 0 {
		rate = DefaultNexmarkRate
	}
	cl, err := kgo.NewClient(tgt.clientOpts(kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(max(1000, int(rate))))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	tables := []string{"person", "auction", "bid"}
	adm := kadm.NewClient(cl)
	for _, t := range tables {
		resp, err := adm.CreateTopic(ctx, o.Partitions, 1, nil, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("bench: create topic %s: %w", t, err)
		}
	}
	// Topics may hold a previous run's events: the expected counts start
	// from their ends now.
	base := map[string]int64{}
	ends, err := adm.ListEndOffsets(ctx, tables...)
	if err != nil {
		return nil, fmt.Errorf("bench: list end offsets: %w", err)
	}
	ends.Each(func(l kadm.ListedOffset) { base[l.Topic] += l.Offset })

	conn, err := pgx.Connect(ctx, sqlURL(sqlAddr))
	if err != nil {
		return nil, fmt.Errorf("bench: connect to the SQL endpoint %s: %w", sqlAddr, err)
	}
	defer conn.Close(context.Background())
	for _, t := range tables {
		cols, _ := nexmark.SourceColumns(t)
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE SOURCE IF NOT EXISTS %s (%s) WITH (topic = '%s', format = 'json')", t, cols, t)); err != nil {
			return nil, fmt.Errorf("bench: create source %s: %w", t, err)
		}
	}
	res := &NexmarkResult{Rate: rate, Duration: o.Duration.String(), Produced: map[string]int64{}, CPUScope: tgt.cpuScope}
	for _, q := range queries {
		v := NexmarkView{Query: q.Name, View: nexmarkViewPrefix + q.Name}
		if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW IF EXISTS "+v.View); err != nil {
			return nil, fmt.Errorf("bench: drop view %s: %w", v.View, err)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE MATERIALIZED VIEW %s AS %s", v.View, q.SQL)); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "0A000" {
				// Refused by the view compiler: reported, not fatal, so
				// the default "every query" runs those that compile.
				v.Refused = pe.Message
				pw.note("nexmark %s: refused: %s", q.Name, pe.Message)
				res.Views = append(res.Views, v)
				continue
			}
			return nil, fmt.Errorf("bench: create view %s: %w", v.View, err)
		}
		res.Views = append(res.Views, v)
	}
	if err := refuseFailedViews(ctx, conn, res.Views, pw); err != nil {
		return nil, err
	}
	freshView := ""
	for _, pick := range []string{"q2", "q0", "q1"} {
		for _, v := range res.Views {
			if v.Query == pick && v.Refused == "" && freshView == "" {
				freshView = v.View
			}
		}
	}
	res.FreshnessView = freshView
	inputs := map[string][]string{}
	for _, q := range queries {
		inputs[nexmarkViewPrefix+q.Name] = q.Tables
	}

	genCfg, err := nexmarkConfig(o.NexmarkProportions)
	if err != nil {
		return nil, err
	}
	res.Proportions = fmt.Sprintf("%d,%d,%d", genCfg.PersonProportion, genCfg.AuctionProportion, genCfg.BidProportion)
	if genCfg.PersonProportion == 0 {
		res.Proportions = "1,3,46"
	}
	gen, err := nexmark.NewGenerator(genCfg)
	if err != nil {
		return nil, err
	}
	pacer, err := nexmark.NewPacer(clock.Real, rate)
	if err != nil {
		return nil, err
	}
	var (
		prodMu   sync.Mutex
		produced = map[string]int64{}
		lastTime atomic.Int64 // the newest generated event time, unix µs
		lastAuc  atomic.Int64 // the newest generated auction's id
		prodErr  error
		inflight sync.WaitGroup
	)
	promise := func(r *kgo.Record, err error) {
		prodMu.Lock()
		defer prodMu.Unlock()
		if err != nil && prodErr == nil {
			prodErr = err
		}
		if err == nil {
			produced[r.Topic]++
		}
		inflight.Done()
	}

	start, err := Scrape(ctx, tgt.metricsAddr)
	if err != nil {
		return nil, err
	}
	sched0 := schedLatencies()
	t0 := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, o.Duration)
	defer stopLoad()

	// Freshness markers, beside the load.
	fresh := NewHistogram()
	var timeouts int
	var freshWG sync.WaitGroup
	if freshView != "" {
		fconn, err := pgx.Connect(ctx, sqlURL(sqlAddr))
		if err != nil {
			return nil, fmt.Errorf("bench: connect to the SQL endpoint %s: %w", sqlAddr, err)
		}
		defer fconn.Close(context.Background())
		freshWG.Add(1)
		go func() {
			defer freshWG.Done()
			timeouts = runMarkers(loadCtx, cl, fconn, freshView, &lastTime, fresh, &inflight, promise)
		}()
	}

	// Point lookups, beside the load, on the same view as the markers.
	lookups := NewHistogram()
	var lookupHits int
	var lookupErr error
	if freshView != "" {
		lconn, err := pgx.Connect(ctx, sqlURL(sqlAddr))
		if err != nil {
			return nil, fmt.Errorf("bench: connect to the SQL endpoint %s: %w", sqlAddr, err)
		}
		defer lconn.Close(context.Background())
		res.LookupView = freshView
		freshWG.Add(1)
		go func() {
			defer freshWG.Done()
			lookupHits, lookupErr = runLookups(loadCtx, lconn, freshView, lastAuc.Load, lookupEvery, 0, lookups)
		}()
	}

	batch := max(1, int(rate/nexmarkPaceBatches))
	pw.note("nexmark: %d queries, %.0f events/s for %s", len(queries), rate, o.Duration)
	progressAt := time.Now().Add(time.Second)
	for loadCtx.Err() == nil {
		if err := pacer.Wait(loadCtx, batch); err != nil {
			break
		}
		for range batch {
			e, ok := gen.Next()
			if !ok {
				break
			}
			v, err := e.JSON()
			if err != nil {
				return nil, err
			}
			lastTime.Store(e.Time.UnixMicro())
			if e.Kind == nexmark.KindAuction {
				lastAuc.Store(e.Auction.ID)
			}
			inflight.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: e.Kind.Table(), Key: e.Key(), Value: v}, promise)
		}
		if now := time.Now(); now.After(progressAt) {
			progressAt = now.Add(time.Second)
			pw.note("nexmark: %.0f s, %d events generated, %d freshness samples", now.Sub(t0).Seconds(), gen.Count(), fresh.Count())
		}
	}
	freshWG.Wait()
	inflight.Wait()
	window := time.Since(t0)
	if o.Embedded {
		if q, n := schedQuantiles(sched0, schedLatencies(), 0.50, 0.99); n > 0 {
			res.SchedLatencySamples, res.SchedLatencyP50Ms, res.SchedLatencyP99Ms = n, q[0], q[1]
		}
	}
	end, err := Scrape(ctx, tgt.metricsAddr)
	if err != nil {
		return nil, err
	}
	prodMu.Lock()
	err = prodErr
	var total int64
	for t, n := range produced {
		res.Produced[t] = n
		total += n
	}
	prodMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("bench: produce: %w", err)
	}
	res.ProducedPerSec = float64(total) / window.Seconds()
	res.Cores = (end.CPUSeconds - start.CPUSeconds) / window.Seconds()
	for i := range res.Views {
		v := &res.Views[i]
		if v.Refused != "" {
			continue
		}
		s, e := start.Views[v.View], end.Views[v.View]
		v.EventsPerSec = (e.InputOffsets - s.InputOffsets) / window.Seconds()
		if res.Cores > 0 {
			v.EventsPerCore = v.EventsPerSec / res.Cores
		}
		v.EpochsPerSec = (e.Epochs - s.Epochs) / window.Seconds()
		v.LagEnd = e.LagRecords
		for _, t := range inputs[v.View] {
			v.Expected += base[t] + res.Produced[t]
		}
	}
	if fresh.Count() > 0 {
		res.FreshnessSamples = fresh.Count()
		res.FreshnessP50Ms = float64(fresh.Quantile(0.50)) / 1e3
		res.FreshnessP99Ms = float64(fresh.Quantile(0.99)) / 1e3
		res.FreshnessMaxMs = float64(fresh.Max()) / 1e3
	}
	res.FreshnessTimeouts = timeouts
	if lookups.Count() > 0 {
		res.LookupSamples = lookups.Count()
		res.LookupHits = lookupHits
		res.LookupP50Ms = float64(lookups.Quantile(0.50)) / 1e3
		res.LookupP99Ms = float64(lookups.Quantile(0.99)) / 1e3
		res.LookupMaxMs = float64(lookups.Max()) / 1e3
	}
	if lookupErr != nil {
		res.LookupErr = lookupErr.Error()
	}

	// Drain: every view consumes what was produced to its inputs.
	drainStart := time.Now()
	res.DrainSeconds = -1
	for time.Since(drainStart) < nexmarkDrainTimeout {
		m, err := Scrape(ctx, tgt.metricsAddr)
		if err != nil {
			return nil, err
		}
		done := true
		for i := range res.Views {
			v := &res.Views[i]
			if v.Refused != "" {
				continue
			}
			v.Consumed = m.Views[v.View].InputOffsets
			if v.Consumed < float64(v.Expected) {
				done = false
			}
		}
		if done {
			res.DrainSeconds = time.Since(drainStart).Seconds()
			break
		}
		if err := clock.Sleep(ctx, clock.Real, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if res.LookupView != "" && res.DrainSeconds >= 0 {
		idle := NewHistogram()
		if _, err := runLookups(ctx, conn, res.LookupView, lastAuc.Load, 0, idleLookups, idle); err != nil {
			res.LookupErr = err.Error()
		}
		if idle.Count() > 0 {
			res.IdleLookupSamples = idle.Count()
			res.IdleLookupP50Ms = float64(idle.Quantile(0.50)) / 1e3
			res.IdleLookupP99Ms = float64(idle.Quantile(0.99)) / 1e3
			res.IdleLookupMaxMs = float64(idle.Max()) / 1e3
		}
	}
	if o.afterNexmark != nil {
		if err := o.afterNexmark(ctx, sqlAddr, tgt.brokers, res); err != nil {
			return nil, err
		}
	}
	if o.NexmarkReplay {
		// The load's views go first: the replays measure one query at
		// a time.
		for _, v := range res.Views {
			if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW IF EXISTS "+v.View); err != nil {
				return nil, err
			}
		}
		if err := replayQueries(ctx, conn, tgt.metricsAddr, queries, res, o.NexmarkProfile, pw); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// viewStartTimeout bounds the wait for new views to leave "starting".
const viewStartTimeout = 30 * time.Second

// refuseFailedViews waits for the views to start: the view compiler
// runs in each agent's view task, not in CREATE, so a query it refuses
// shows in SHOW MATERIALIZED VIEWS as "failed: ... (SQLSTATE 0A000)". Such
// a view is dropped and marked refused (its retries would only cost the
// agent); another failure ends the run.
func refuseFailedViews(ctx context.Context, conn *pgx.Conn, views []NexmarkView, pw *progressWriter) error {
	deadline := time.Now().Add(viewStartTimeout)
	for {
		rows, err := conn.Query(ctx, "SHOW MATERIALIZED VIEWS")
		if err != nil {
			return fmt.Errorf("bench: show materialized views: %w", err)
		}
		status := map[string]string{}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			if len(vals) >= 4 {
				status[fmt.Sprint(vals[0])] = fmt.Sprint(vals[3])
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("bench: show materialized views: %w", err)
		}
		starting := false
		for i := range views {
			v := &views[i]
			if v.Refused != "" {
				continue
			}
			switch st := status[v.View]; {
			case st == "running":
			case strings.HasPrefix(st, "failed: ") && strings.Contains(st, "SQLSTATE 0A000"):
				v.Refused = strings.TrimPrefix(st, "failed: ")
				pw.note("nexmark %s: refused: %s", v.Query, v.Refused)
				if _, err := conn.Exec(ctx, "DROP MATERIALIZED VIEW IF EXISTS "+v.View); err != nil {
					return fmt.Errorf("bench: drop view %s: %w", v.View, err)
				}
			case strings.HasPrefix(st, "failed: "):
				return fmt.Errorf("bench: view %s: %s", v.View, st)
			default:
				starting = true
			}
		}
		if !starting {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: views still starting after %s", viewStartTimeout)
		}
		if err := clock.Sleep(ctx, clock.Real, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// runLookups runs `SELECT * FROM view WHERE auction = $1` every
// `every` (0: back to back) until ctx ends or n are recorded (0: no
// bound), for auction ids drawn among those generated so far, and
// records each one's latency. It returns the lookups that found rows,
// and the first error (which ends it).
func runLookups(ctx context.Context, conn *pgx.Conn, view string, lastAuction func() int64, every time.Duration, n uint64, h *Histogram) (int, error) {
	hits := 0
	q := "SELECT * FROM " + view + " WHERE auction = $1"
	rnd := rand.New(rand.NewPCG(29, 1))
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for n == 0 || h.Count() < n {
		if tick != nil {
			select {
			case <-ctx.Done():
				return hits, nil
			case <-tick:
			}
		} else if ctx.Err() != nil {
			return hits, nil
		}
		last := lastAuction()
		if last < nexmarkFirstID {
			continue
		}
		// A multiple of 123 among the auctions so far: q2 keeps those
		// auctions' bids, so most lookups find rows. Before there is
		// one, any auction (a lookup that finds nothing).
		auction := nexmarkFirstID + rnd.Int64N(last-nexmarkFirstID+1)
		if hi, lo := last/123, (nexmarkFirstID+122)/123; hi >= lo {
			auction = 123 * (lo + rnd.Int64N(hi-lo+1))
		}
		start := time.Now()
		rows, err := conn.Query(ctx, q, auction)
		if err != nil {
			if ctx.Err() != nil {
				return hits, nil
			}
			return hits, err
		}
		found := 0
		for rows.Next() {
			found++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			if ctx.Err() != nil {
				return hits, nil
			}
			return hits, err
		}
		h.Record(time.Since(start).Microseconds())
		if found > 0 {
			hits++
		}
	}
	return hits, nil
}

// nexmarkFirstID is the generator's first person and auction id.
const nexmarkFirstID int64 = 1000

// runMarkers produces a marker bid every markerEvery until ctx ends and
// times each from its produce call to the pull query on view seeing it.
// It returns the markers given up on.
func runMarkers(ctx context.Context, cl *kgo.Client, conn *pgx.Conn, view string, lastTime *atomic.Int64, h *Histogram, inflight *sync.WaitGroup, promise func(*kgo.Record, error)) int {
	timeouts := 0
	tick := time.NewTicker(markerEvery)
	defer tick.Stop()
	for i := int64(1); ; i++ {
		select {
		case <-ctx.Done():
			return timeouts
		case <-tick.C:
		}
		auction := 123 * (markerAuctionBase + i)
		// The marker takes the newest event's time, so windowed views
		// (q5, q7) see it as one more bid, not a late or far-off one.
		at := nexmark.DefaultBaseTime
		if us := lastTime.Load(); us != 0 {
			at = time.UnixMicro(us).UTC()
		}
		b := nexmark.Bid{Auction: auction, Bidder: 0, Price: i, Channel: "marker", URL: "marker",
			DateTime: nexmark.Time{Time: at}}
		v, err := nexmark.Event{Kind: nexmark.KindBid, Bid: &b}.JSON()
		if err != nil {
			return timeouts
		}
		sent := time.Now()
		inflight.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: "bid", Value: v}, promise)
		deadline := sent.Add(markerTimeout)
		for {
			// The load's end does not cut a marker short: it is timed to
			// the end (bounded by markerTimeout).
			var n int64
			qctx, cancel := context.WithTimeout(context.Background(), markerTimeout)
			err := conn.QueryRow(qctx, "SELECT count(*) FROM "+view+" WHERE auction = $1", auction).Scan(&n)
			cancel()
			if err == nil && n > 0 {
				h.Record(time.Since(sent).Microseconds())
				break
			}
			if time.Now().After(deadline) {
				timeouts++
				break
			}
			if clock.Sleep(context.Background(), clock.Real, markerPollEvery) != nil {
				return timeouts
			}
		}
	}
}

func writeNexmark(b *strings.Builder, r *NexmarkResult) {
	fmt.Fprintf(b, "\nnexmark: %.0f events/s target, %.0f events/s produced over %s; agent %.2f cores (%s)\n",
		r.Rate, r.ProducedPerSec, r.Duration, r.Cores, r.CPUScope)
	fmt.Fprintf(b, "  produced: person %d, auction %d, bid %d (markers included)\n", r.Produced["person"], r.Produced["auction"], r.Produced["bid"])
	fmt.Fprintf(b, "  %-4s %-12s %12s %14s %10s %10s %s\n", "query", "view", "events/s", "events/s/core", "epochs/s", "lag end", "consumed/expected")
	for _, v := range r.Views {
		if v.Refused != "" {
			fmt.Fprintf(b, "  %-4s refused: %s\n", v.Query, v.Refused)
			continue
		}
		fmt.Fprintf(b, "  %-4s %-12s %12.0f %14.0f %10.1f %10.0f %.0f/%d\n", v.Query, v.View, v.EventsPerSec, v.EventsPerCore, v.EpochsPerSec, v.LagEnd, v.Consumed, v.Expected)
	}
	var sum float64
	for _, v := range r.Views {
		sum += v.EventsPerSec
	}
	if r.Cores > 0 {
		fmt.Fprintf(b, "  all views: %.0f events/s, %.0f per core\n", sum, sum/r.Cores)
	}
	if r.DrainSeconds >= 0 {
		fmt.Fprintf(b, "  every view consumed every event %.1f s after the load\n", r.DrainSeconds)
	} else {
		fmt.Fprintf(b, "  not every view consumed every event within %s after the load\n", nexmarkDrainTimeout)
	}
	if len(r.Replay) > 0 {
		b.WriteString("  replay, each query alone after the load over every event its topics hold;\n")
		b.WriteString("  events/cpu s is what one core does for that query (" + r.CPUScope + "):\n")
		fmt.Fprintf(b, "  %-4s %10s %8s %8s %12s %16s\n", "query", "events", "s", "cpu s", "events/s", "events/cpu s")
		for _, p := range r.Replay {
			if p.Error != "" {
				fmt.Fprintf(b, "  %-4s %s\n", p.Query, p.Error)
				continue
			}
			fmt.Fprintf(b, "  %-4s %10.0f %8.2f %8.2f %12.0f %16.0f\n", p.Query, p.Events, p.Seconds, p.CPUSeconds, p.EventsPerSec, p.EventsPerCore)
		}
	}
	if r.FreshnessView == "" {
		b.WriteString("  freshness: no q0, q1 or q2 view to read markers from\n")
		return
	}
	fmt.Fprintf(b, "  freshness (marker bid produced -> visible in SELECT on %s): p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d markers, %d timed out\n",
		r.FreshnessView, r.FreshnessP50Ms, r.FreshnessP99Ms, r.FreshnessMaxMs, r.FreshnessSamples, r.FreshnessTimeouts)
	if r.LookupErr != "" {
		fmt.Fprintf(b, "  point lookups on %s failed: %s\n", r.LookupView, r.LookupErr)
	}
	if r.LookupSamples > 0 {
		fmt.Fprintf(b, "  point lookup (SELECT * FROM %s WHERE auction = $1, during the load): p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d lookups, %d found rows\n",
			r.LookupView, r.LookupP50Ms, r.LookupP99Ms, r.LookupMaxMs, r.LookupSamples, r.LookupHits)
	}
	if r.SchedLatencySamples > 0 {
		fmt.Fprintf(b, "  goroutines' wait for a processor during the load (this process): p50 %.3f ms, p99 %.3f ms over %d waits\n",
			r.SchedLatencyP50Ms, r.SchedLatencyP99Ms, r.SchedLatencySamples)
	}
	if r.IdleLookupSamples > 0 {
		fmt.Fprintf(b, "  point lookup after the load, views caught up, back to back: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d lookups\n",
			r.IdleLookupP50Ms, r.IdleLookupP99Ms, r.IdleLookupMaxMs, r.IdleLookupSamples)
	}
}
