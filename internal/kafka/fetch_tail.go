package kafka

import (
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// Produce yields to consumers at the tail while the agent is short of
// CPU. Kafka's tail consumers keep up with unlimited producers because
// the page cache makes their reads nearly free; here a tail read costs a
// copy in the agent and the client's decoding, and on a machine with no
// CPU to spare the producers, more connections with larger requests,
// take most of it. A tail consumer that falls behind then falls out of
// the read cache, its reads turn into GETs that cost more still, and it
// never gets back: with unlimited producers at the 512 MiB default
// budget on 2 cores, one tail consumer read 51-58 MB/s while producers
// wrote 149-176 MB/s.
//
// So while the adaptive pace says other requests wait for a CPU
// (fetch_yield.go: the pace is on) and an answer left a consumer of
// fresh records (newer than tailFreshWindow) more than tailLagBytes
// behind the ends of its partitions, Produce requests are throttled as a
// produce quota throttles them (quotas.go: ThrottleMillis in the
// response, the connection muted), for a time that grows by
// tailThrottleGrow each tailWindow the lag stays above the bound and
// shrinks by tailThrottleShrink once it is under half of it. The lag
// stays where the tail's reads hit the read cache, and produced and
// consumed rates meet: the agent moves each byte in and out rather than
// taking in twice what it serves.
//
// Nothing is throttled while the agent has CPU to spare (a consumer
// slow on its own then holds back no producer), nor for consumers
// re-reading old records, nor once no tail answer has been seen for
// tailIdle. The throttle is bounded by tailThrottleMax per request.
const (
	// tailLagBytes is how far behind the ends of its partitions a
	// tail consumer may fall before producers yield: a quarter of the
	// default budget's read cache, so its reads still hit it.
	tailLagBytes = 24 << 20
	// tailScanBytes bounds the index an answer's lag is measured on.
	tailScanBytes = 4 * tailLagBytes
	// tailFreshWindow tells a tail consumer from one re-reading a
	// backlog: the last batch it got is newer than this.
	tailFreshWindow = 30 * time.Second
	tailWindow      = 200 * time.Millisecond
	tailIdle        = time.Second
	// The throttle starts at tailThrottleMin, doubles each window the
	// lag stays above the bound (to the bound in under 2 s, before the
	// lag passes the read cache) and halves in about 0.4 s once it is
	// under half of it.
	tailThrottleMin    = 5 * time.Millisecond
	tailThrottleMax    = 2 * time.Second
	tailThrottleGrow   = 2
	tailThrottleShrink = 0.7
)

// tailGuard is the throttle. Safe for concurrent use.
type tailGuard struct {
	now func() time.Time

	mu struct {
		sync.Mutex
		// window began at window; behind is the largest lag an answer
		// left a tail consumer at in it, seen whether there was one,
		// contended whether the agent was short of CPU at one.
		window          time.Time
		behind          int64
		seen, contended bool
		// lastSeen is when a tail answer was last seen.
		lastSeen time.Time
		throttle time.Duration
	}
}

func newTailGuard(now func() time.Time) *tailGuard {
	g := &tailGuard{now: now}
	g.mu.window = now()
	return g
}

// observe notes that an answer left a tail consumer behind bytes behind
// the ends of its partitions; contended, that the agent was short of CPU
// (the adaptive pace was on).
func (g *tailGuard) observe(behind int64, contended bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.advanceLocked(now)
	g.mu.behind = max(g.mu.behind, behind)
	g.mu.contended = g.mu.contended || contended
	g.mu.seen, g.mu.lastSeen = true, now
}

// throttle is how long to throttle a Produce request now.
func (g *tailGuard) throttle() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advanceLocked(g.now())
	return g.mu.throttle
}

// advanceLocked ends the window if it is over and sets the throttle for
// the next one.
func (g *tailGuard) advanceLocked(now time.Time) {
	if now.Sub(g.mu.window) < tailWindow {
		return
	}
	switch {
	case now.Sub(g.mu.lastSeen) >= tailIdle:
		g.mu.throttle = 0
	case !g.mu.seen:
		// No tail answer in this window, but one lately: a consumer
		// between fetches. Hold.
	case g.mu.behind > tailLagBytes && g.mu.contended:
		g.mu.throttle = min(tailThrottleMax, max(tailThrottleMin, time.Duration(float64(g.mu.throttle)*tailThrottleGrow)))
	case g.mu.behind < tailLagBytes/2:
		if g.mu.throttle = time.Duration(float64(g.mu.throttle) * tailThrottleShrink); g.mu.throttle < tailThrottleMin {
			g.mu.throttle = 0
		}
	}
	g.mu.window, g.mu.behind, g.mu.seen, g.mu.contended = now, 0, false, false
}

// tailThrottle is how long to throttle a Produce request for tail
// consumers; 0 without shared state.
func (s *sharedState) tailThrottle() time.Duration {
	if s == nil || s.tail == nil {
		return 0
	}
	return s.tail.throttle()
}

// noteTail tells the tail guard how far behind the ends of its
// partitions the answer leaves its consumer, if it is a tail consumer:
// the records returned, or the index entries past them, are fresh, or
// there are none (the consumer is at the ends).
func (f *fetchAnswer) noteTail(view *meta.View) {
	sh := f.r.Deps.shared
	if sh == nil || sh.tail == nil {
		return
	}
	committed := f.req.IsolationLevel == isolationReadCommitted
	freshMs := f.r.Deps.now().Add(-tailFreshWindow).UnixMilli()
	var behind int64
	fresh := false
	for i := range f.parts {
		p := &f.parts[i]
		if p.failed || p.sp.ErrorCode != 0 {
			continue
		}
		rest := *p
		if len(p.sp.RecordBatches) > 0 {
			end, maxTs, err := lastBatch(p.sp.RecordBatches)
			if err != nil {
				return
			}
			fresh = fresh || maxTs >= freshMs
			rest.offset = end
		}
		n, lastTs, err := indexedSpan(view, &rest, bound(p.sp, committed), tailScanBytes-behind)
		if err != nil {
			return
		}
		fresh = fresh || (n > 0 && lastTs >= freshMs)
		if behind += n; behind >= tailScanBytes {
			break
		}
	}
	if fresh || behind == 0 {
		sh.tail.observe(behind, sh.fetchYield.tailBytes() > 0)
	}
}
