package produce

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/segment"
)

// Hedged uploads
//
// Commits are proposed in cut order, so the slowest upload in flight
// holds every flush cut after it, and a store's PUT tail (S3 Standard:
// p50 tens of ms, p99 a few hundred) becomes every producer's tail. With
// HedgePercentile set, an upload still running when it reaches that
// percentile of this pipeline's recent upload times (never sooner than
// HedgeMinDelay) gets one second attempt: the same bytes under a NEW key.
// The first to succeed is the flush's object and is committed; the other
// is cancelled and deleted once it returns. A loser whose request lands
// after that delete (a cancelled request may still complete) is an
// orphan like any other uploaded-but-uncommitted object: its key carries
// its time, so the gc reconciler deletes it after the grace.
//
// Why a new key rather than the same one: two PUTs of identical bytes to
// one key would be safe for S3's last-writer-wins semantics, but a slow
// loser could land after the committed object was deleted (retention,
// compaction) and bring it back under a key the metadata once knew. Under
// its own key the loser can only ever be an orphan, and which attempt won
// is visible in the log.
//
// Hedges are bounded: at most one per upload, and each upload earns
// HedgeMaxRatio of a hedge, so hedges never pass that fraction of uploads.

// Defaults for the hedging fields of Config, used by the agent; a zero
// HedgePercentile in a Config turns hedging off.
const (
	// DefaultHedgePercentile hedges the slowest tenth of uploads: past
	// p90, S3's latency curve turns steeply upward (p90 70 ms, p99 200
	// ms in objstore.S3Standard), so a second try that starts then
	// usually ends before the first. `strand bench --embedded
	// --objstore-latency s3-standard --rate 9766` (10 MB/s, 2-core
	// machine shared with other work): produce p99 975 ms without
	// hedging, 593 ms with it, for 3.5% more PUTs.
	DefaultHedgePercentile = 0.9
	// DefaultHedgeMaxRatio caps hedges at a tenth of uploads.
	DefaultHedgeMaxRatio = 0.1
	// DefaultHedgeMinDelay keeps a fast store (a local disk) from being
	// hedged over scheduling noise.
	DefaultHedgeMinDelay = 20 * time.Millisecond
)

const (
	// putWindow is how many recent upload times the hedge delay is
	// estimated from: at tens of uploads a second, the last few
	// seconds.
	putWindow = 128
	// minPutSamples: no hedging until this many uploads were timed.
	minPutSamples = 16
	// maxHedgeCredit bounds the hedges saved up in a calm spell.
	maxHedgeCredit = 2
)

// putTimes is a sliding window of upload times and the hedge credit.
// Under Pipeline.mu.
type putTimes struct {
	window [putWindow]time.Duration
	n      int // uploads timed, ever
	credit float64
	// sorted is scratch for quantile.
	sorted []time.Duration
}

func (s *putTimes) add(d time.Duration) {
	s.window[s.n%putWindow] = d
	s.n++
}

// quantile returns the q quantile of the window, false with too few
// samples.
func (s *putTimes) quantile(q float64) (time.Duration, bool) {
	n := min(s.n, putWindow)
	if n < minPutSamples {
		return 0, false
	}
	s.sorted = append(s.sorted[:0], s.window[:n]...)
	slices.Sort(s.sorted)
	i := min(int(q*float64(n)), n-1)
	return s.sorted[i], true
}

// HedgeObserver is an Observer's optional power: one that has it also
// learns of hedged uploads.
type HedgeObserver interface {
	// UploadHedged: an upload was hedged, and the hedge won (its object
	// is the one committed) or not. Called outside the pipeline's locks.
	UploadHedged(won bool)
}

// putResult is how one attempt (the primary with its retries, or the
// hedge) ended.
type putResult struct {
	key      string
	start    time.Time
	attempts int
	err      error
	hedge    bool
}

// race is the primary attempt of one upload and its hedge, if any.
type race struct {
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	// results has room for both attempts.
	results chan putResult
	// failed holds the keys of attempts that failed; runRace's.
	failed []string
	mu     struct {
		sync.Mutex
		running int
		// over: a winner was found or every attempt failed; no hedge
		// may start after.
		over   bool
		hedged bool
	}
}

// put writes obj under key, retrying with the same key and bytes.
func (p *Pipeline) put(ctx context.Context, key string, obj []byte, hedge bool) putResult {
	r := putResult{key: key, start: p.cfg.Clock.Now(), hedge: hedge}
	loop := retry.Policy{Attempts: p.cfg.UploadAttempts, Min: uploadBackoffMin, Max: uploadBackoffMax}.Start(ctx, p.cfg.Clock)
	for loop.Next() {
		actx, cancel := context.WithTimeout(ctx, p.cfg.UploadTimeout)
		r.err = p.cfg.Store.Put(actx, key, obj)
		cancel()
		if r.err == nil || ctx.Err() != nil {
			break
		}
		if loop.Attempt() < p.cfg.UploadAttempts {
			p.cfg.Logger.Warn("produce: upload failed; retrying", "key", key, "attempt", loop.Attempt(), "err", r.err)
		}
	}
	r.attempts = loop.Attempt()
	if r.attempts == 0 {
		// The context ended before the first try: nothing was written,
		// and committing would point the index at an object that does
		// not exist.
		r.err = context.Cause(ctx)
		if r.err == nil {
			r.err = context.Canceled
		}
	}
	return r
}

// runRace uploads obj under f.key, hedged if the policy says so, and
// returns the winning attempt (or, if every attempt failed, the
// primary's failure). Then finishRace must run.
func (p *Pipeline) runRace(f *flush, obj []byte) (putResult, *race) {
	ctx, cancel := context.WithCancel(p.ctx)
	r := &race{ctx: ctx, cancel: cancel, start: p.cfg.Clock.Now(), results: make(chan putResult, 2)}
	r.mu.running = 1
	go func() { r.results <- p.put(ctx, f.key, obj, false) }()
	var timer clock.Timer
	if delay, ok := p.hedgeDelay(); ok {
		timer = p.cfg.Clock.AfterFunc(delay, func() { p.hedge(r, obj) })
	}
	defer clock.Stop(timer)
	var primary *putResult
	for {
		res := <-r.results
		r.mu.Lock()
		r.mu.running--
		if res.err == nil || r.mu.running == 0 {
			r.mu.over = true
		}
		over, running := r.mu.over, r.mu.running
		r.mu.Unlock()
		switch {
		case res.err == nil:
			p.mu.Lock()
			p.mu.puts.add(clock.Since(p.cfg.Clock, res.start))
			if running > 0 && res.hedge {
				// The primary still runs: it took at least this long,
				// and the window must not forget how slow it was.
				p.mu.puts.add(clock.Since(p.cfg.Clock, r.start))
			}
			p.mu.Unlock()
			return res, r
		case !res.hedge:
			primary = &res
		}
		// A failed attempt's key may hold a write whose reply was lost.
		r.failed = append(r.failed, res.key)
		if over {
			if primary != nil {
				return *primary, r
			}
			return res, r
		}
	}
}

// hedgeDelay is how long an upload runs before it is hedged, and whether
// it may be; each upload also earns its share of a hedge.
func (p *Pipeline) hedgeDelay() (time.Duration, bool) {
	if p.cfg.HedgePercentile <= 0 {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.puts.credit = min(p.mu.puts.credit+p.cfg.HedgeMaxRatio, maxHedgeCredit)
	d, ok := p.mu.puts.quantile(p.cfg.HedgePercentile)
	return max(d, p.cfg.HedgeMinDelay), ok
}

// hedge starts r's second attempt under a new key, unless the race is
// over or the hedge credit is spent.
func (p *Pipeline) hedge(r *race, obj []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.over || r.ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	if p.mu.puts.credit < 1 {
		p.mu.Unlock()
		return
	}
	p.mu.puts.credit--
	p.mu.hedges++
	p.mu.seq++
	key := segment.ObjectKey(p.cfg.AgentID, p.mu.seq, p.cfg.KeyTime())
	p.mu.Unlock()
	r.mu.running++
	r.mu.hedged = true
	go func() { r.results <- p.put(r.ctx, key, obj, true) }()
}

// finishRace cancels what still runs of r once win is known and, if win
// succeeded, deletes every other key that may hold an object: attempts
// that failed (a lost reply may have written them) and the one still
// running, once it returns. (If every attempt failed, their objects are
// left to the gc reconciler, as an upload that failed without a hedge.)
// It reports whether an attempt still runs: that attempt may still be
// reading obj, so obj must not be reused or handed on.
func (p *Pipeline) finishRace(win putResult, r *race) (running bool) {
	r.mu.Lock()
	running, hedged := r.mu.running > 0, r.mu.hedged
	r.mu.Unlock()
	r.cancel()
	if hedged {
		won := win.err == nil && win.hedge
		if won {
			p.mu.Lock()
			p.mu.hedgeWins++
			p.mu.Unlock()
		}
		if h, ok := p.obs.(HedgeObserver); ok {
			h.UploadHedged(won)
		}
	}
	keys := r.failed
	if win.err != nil {
		keys = nil
	}
	if !running {
		p.deleteLosers(keys)
		return false
	}
	p.cleanups.Add(1)
	go func() {
		defer p.cleanups.Done()
		res := <-r.results
		if win.err == nil {
			keys = append(keys, res.key)
		}
		p.deleteLosers(keys)
	}()
	return true
}

// deleteLosers deletes the keys of attempts that lost, best effort: a
// key left behind is an orphan the gc reconciler deletes after the grace.
func (p *Pipeline) deleteLosers(keys []string) {
	for _, k := range keys {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.UploadTimeout)
		err := p.cfg.Store.Delete(ctx, k)
		cancel()
		if err != nil {
			p.cfg.Logger.Info("produce: deleting the object of a lost upload attempt failed; the gc reconciler will", "key", k, "err", err)
		}
	}
}

// uploadExpress writes obj to two zones of the tier (Config.Express),
// the third on a hedge or a failure, and returns the result to commit
// under the key naming the zones that acknowledged. shared reports
// whether a zone's write still runs (and reads obj). The hedge delay
// and budget are the same as runRace's, over the time two zones take.
func (p *Pipeline) uploadExpress(f *flush, obj []byte) (win putResult, shared bool) {
	win = putResult{start: p.cfg.Clock.Now(), attempts: 1}
	var opts express.PutOptions
	if delay, ok := p.hedgeDelay(); ok {
		opts.HedgeAfter = delay
		opts.MayHedge = p.spendHedge
	}
	res, err := p.cfg.Express.PutExpress(p.ctx, f.key, obj, opts)
	win.key, win.err = res.Key, err
	if err == nil {
		p.mu.Lock()
		p.mu.puts.add(clock.Since(p.cfg.Clock, win.start))
		p.mu.Unlock()
	}
	select {
	case <-res.Settled:
		return win, false
	default:
		return win, true
	}
}

// spendHedge takes one hedge from the credit, if there is one.
func (p *Pipeline) spendHedge() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.puts.credit < 1 {
		return false
	}
	p.mu.puts.credit--
	p.mu.hedges++
	return true
}
