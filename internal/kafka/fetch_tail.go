package kafka

import (
	"math"
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
// behind the ends of its partitions, Produce requests are paced to
// tailPaceFactor of the rate the tail consumers read at (smoothed over
// tailWindow windows): each is throttled as a produce quota throttles
// (quotas.go: ThrottleMillis in the response, the connection muted) for
// the time its bytes take at that rate, past a burst of tailBurst. The
// lag then shrinks, and once it is under half the bound the pace is off
// until it passes the bound again: the tail's reads stay in the read
// cache, and produced and consumed rates meet.
//
// A first version throttled each request by a time that doubled while
// the lag stayed above the bound; the throttle reached seconds, and
// producers buffering for seconds timed their records out (10 MB/s
// produced on a quiet machine). A rate measured from the consumer holds
// producers to what the tail drains, no less.
//
// Nothing is paced while the agent has CPU to spare (a consumer slow on
// its own then holds back no producer), nor for consumers re-reading old
// records or held to a consumer quota or Deps.MaxFetchBytesPerSec, nor once no tail answer has been seen for tailIdle. A request
// is throttled at most tailThrottleMax.
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
	// tailSmoothing weighs the rate of the windows before in the
	// consumers' smoothed rate, per window.
	tailSmoothing = 0.7
	// tailPaceFactor: producers get this share of the tail's rate, so
	// the lag drains.
	tailPaceFactor = 0.9
	// tailMinRate floors the pace, so producers keep moving however
	// slow the tail reads.
	tailMinRate     = 4 << 20
	tailBurst       = 100 * time.Millisecond
	tailThrottleMax = time.Second
)

// tailGuard is the pace. Safe for concurrent use.
type tailGuard struct {
	now func() time.Time

	mu struct {
		sync.Mutex
		// window began at window; behind is the largest lag an answer
		// left a tail consumer at in it, read the record bytes tail
		// answers carried, seen whether there was one, contended
		// whether the agent was short of CPU at one.
		window          time.Time
		behind, read    int64
		seen, contended bool
		// readRate is the smoothed rate of tail answers' bytes.
		readRate float64
		// lastSeen is when a tail answer was last seen.
		lastSeen time.Time
		// rate is the pace in bytes per second, 0 when off; tokens
		// and at are its bucket.
		rate   float64
		tokens float64
		at     time.Time
	}
}

func newTailGuard(now func() time.Time) *tailGuard {
	g := &tailGuard{now: now}
	g.mu.window = now()
	return g
}

// observe notes that an answer of read record bytes left a tail consumer
// behind bytes behind the ends of its partitions; contended, that the
// agent was short of CPU (the adaptive pace was on).
func (g *tailGuard) observe(behind, read int64, contended bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.advanceLocked(now)
	g.mu.behind = max(g.mu.behind, behind)
	g.mu.read += read
	g.mu.contended = g.mu.contended || contended
	g.mu.seen, g.mu.lastSeen = true, now
}

// throttle counts a Produce request of n bytes and returns how long to
// throttle it.
func (g *tailGuard) throttle(n int64) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.advanceLocked(now)
	if g.mu.rate == 0 {
		return 0
	}
	g.mu.tokens = min(g.mu.rate*tailBurst.Seconds(), g.mu.tokens+now.Sub(g.mu.at).Seconds()*g.mu.rate)
	g.mu.at = now
	g.mu.tokens -= float64(n)
	if g.mu.tokens >= 0 {
		return 0
	}
	return min(tailThrottleMax, time.Duration(-g.mu.tokens/g.mu.rate*float64(time.Second)))
}

// advanceLocked ends the window if it is over and sets the pace for the
// next one. Windows last tailWindow or longer (they end at the first
// call after it).
func (g *tailGuard) advanceLocked(now time.Time) {
	elapsed := now.Sub(g.mu.window)
	if elapsed < tailWindow {
		return
	}
	keep := math.Pow(tailSmoothing, elapsed.Seconds()/tailWindow.Seconds())
	g.mu.readRate = keep*g.mu.readRate + (1-keep)*float64(g.mu.read)/elapsed.Seconds()
	switch {
	case now.Sub(g.mu.lastSeen) >= tailIdle:
		g.mu.rate, g.mu.readRate = 0, 0
	case !g.mu.seen:
		// No tail answer in this window, but one lately: a consumer
		// between fetches. On or off, the pace stays so.
	case g.mu.behind > tailLagBytes && (g.mu.contended || g.mu.rate > 0):
		if g.mu.rate == 0 {
			g.mu.rate, g.mu.tokens, g.mu.at = 1, 0, now
		}
	case g.mu.behind < tailLagBytes/2:
		g.mu.rate = 0
	}
	if g.mu.rate > 0 {
		// Every window, with answers or not: windows with answers
		// read more than the average.
		g.mu.rate = max(tailMinRate, tailPaceFactor*g.mu.readRate)
	}
	g.mu.window, g.mu.behind, g.mu.read, g.mu.seen, g.mu.contended = now, 0, 0, false, false
}

// tailThrottle counts a Produce request of n bytes and returns how long
// to throttle it for tail consumers; 0 without shared state.
func (s *sharedState) tailThrottle(n int64) time.Duration {
	if s == nil || s.tail == nil {
		return 0
	}
	return s.tail.throttle(n)
}

// noteTail tells the tail guard how far behind the ends of its
// partitions the answer leaves its consumer, if it is a tail consumer:
// the records returned, or the index entries past them, are fresh, or
// there are none (the consumer is at the ends).
func (f *fetchAnswer) noteTail(view *meta.View, total int64) {
	sh := f.r.Deps.shared
	if sh == nil || sh.tail == nil || sh.fetchRate != nil {
		// With the agent's fetch rate capped, consumers are slow by
		// configuration, not for want of CPU.
		return
	}
	if _, ok := f.r.fetchQuotaCap(); ok {
		// A consumer held to its consumer_byte_rate is slow by
		// its quota: producers do not yield to it.
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
		sh.tail.observe(behind, total, sh.fetchYield.tailBytes() > 0)
	}
}
