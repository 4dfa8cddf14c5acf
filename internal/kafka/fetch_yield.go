package kafka

import (
	"context"
	"math"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Fetch yields the CPU when other requests wait for it. Consumers
// catching up ask for records as fast as they are answered, so however
// cheap an answer is, they take all the CPU there is. The fetch reader's
// copy slots keep the agent's own run queue short, but not the machine's:
// on a 2-core machine, twenty consumers catching up (the consumers, the
// kernel's socket copies, the agent) still took another client's produce
// p99 5-12 times higher, its requests' hand-offs (handler, flush, log
// append, apply, writer) waiting for a CPU.
//
// So Fetch answers are paced by a rate that adapts to contention, as a
// scavenger congestion control (LEDBAT, RFC 6817) keeps background
// transfers out of the way of other traffic: it watches a delay, here
// the goroutines' waits for a CPU (runtime/metrics /sched/latencies), and
// aims to keep the share of waits of yieldSlowWait or more at
// yieldTargetSlow. Each yieldWindow, while requests other than Fetch
// arrive, the rate is multiplied by 1 + yieldGain*(target-share)/target,
// between yieldMaxDecrease and yieldMaxIncrease, and turns off once it is
// twice what fetches carry. With no other request for yieldIdle the pace
// is off: nothing else needs the CPU.
//
// Measured on that 2-core machine (catch-up stress, share of waits of 1 ms or
// more): unloaded 0.1%, fetches paced to 100 MiB/s 0.24% (produce p99
// 1.6 times the unloaded one), to 200 MiB/s 0.8% (2 times), unpaced 10%.
//
// The rate never falls below yieldFloorBytesPerSec, nor below twice what
// producers bring in, so catching-up consumers keep moving and consumers
// keep up with producers however busy the machine is. The pace only
// delays answers (as a Kafka quota delays responses), never fails them.
// Answers smaller than yieldPacedBytes, and answers of consumers at the
// tail (fetchAnswer.nearTail: less than yieldTailWindow of what
// producers bring in behind the ends of their partitions, and the
// records fresh, so consumers re-reading an old backlog to the ends of
// partitions no one writes to are not taken for them), are counted but
// never wait; what they carry is bounded by what producers write, and
// the debt they leave the others by yieldTailDebt. The size alone did
// not do it: the pace is one queue for the whole agent, so a tail
// consumer that fell a megabyte behind waited behind the catching-up
// answers' debt, seconds of it, and never got back (catch-up stress,
// 20 MB/s produced: 4,000 of 19,500 records/s consumed, end-to-end p50
// 11.6 s). Fetches that are paced wait before their read, for what the
// index says they will read (fetchAnswer.prepay), so they hold none of
// the response budget while they wait: the tail consumer's fetches
// would wait for it behind them.
const (
	yieldWindow = 200 * time.Millisecond
	// yieldIdle: with no other request for this long, the pace is off.
	yieldIdle = time.Second
	// yieldSlowWait and yieldTargetSlow: the target share of slow waits.
	yieldSlowWait   = time.Millisecond
	yieldTargetSlow = 0.003
	// The runtime samples one wait in eight, a few hundred a second, so
	// the share is of waits smoothed over about a second (each window
	// weighs yieldSmoothing of the one before), judged once there are
	// yieldMinWaits of them.
	yieldSmoothing = 0.8
	yieldMinWaits  = 100
	// A window changes the rate by 1+yieldGain*(target-share)/target,
	// kept between the bounds: from the floor to 600 MB/s in about 6 s,
	// from 600 MB/s to 100 MB/s in 0.6 s.
	yieldGain             = 0.25
	yieldMaxDecrease      = 0.5
	yieldMaxIncrease      = 1.1
	yieldFloorBytesPerSec = 32 << 20
	// yieldProducedFactor: nor below this many times the rate at which
	// Produce requests bring bytes in, so that consumers paced down
	// still read faster than producers write, and lagging ones catch
	// up.
	yieldProducedFactor = 2
	yieldPacedBytes     = 1 << 20
	// yieldBurst is the time at the rate an answer may take at once.
	yieldBurst = 50 * time.Millisecond
	// yieldTailWindow: a consumer less than this much of what producers
	// bring in behind is at the tail (tailBytes).
	yieldTailWindow = 3 * time.Second
	// yieldTailDebt bounds the debt answers at the tail leave the
	// others, in time at the rate.
	yieldTailDebt = time.Second
)

// schedWaits reports, since its last call, how many times goroutines
// waited for a CPU and how many of those waits took at least
// yieldSlowWait.
type schedWaits func() (waits, slow uint64)

// fetchYield is the adaptive pace. Safe for concurrent use.
type fetchYield struct {
	now   func() time.Time
	waits schedWaits
	// others counts the requests other than Fetch the server has read,
	// produced the bytes of the Produce requests among them.
	others, produced atomic.Int64

	mu struct {
		sync.Mutex
		// window is when the current window began, carried the
		// record bytes counted in it, carriedRate the smoothed rate
		// of the windows before; others is the count of other
		// requests when it last changed, at othersAt.
		window      time.Time
		carried     int64
		carriedRate float64
		others      int64
		othersAt    time.Time
		// produced is the count at the window's start, producedRate
		// the smoothed rate of the windows before.
		produced     int64
		producedRate float64
		// waits and slow are the smoothed counts of waits for a CPU
		// and of the slow ones.
		waits, slow float64
		// rate is the pace in bytes per second, 0 when off; tokens
		// and at are its bucket.
		rate   float64
		tokens float64
		at     time.Time
	}
}

func newFetchYield(now func() time.Time, waits schedWaits) *fetchYield {
	y := &fetchYield{now: now, waits: waits}
	y.mu.window = now()
	return y
}

// take counts n record bytes about to be sent and waits as reserve
// says, or until ctx ends or abort is closed.
func (y *fetchYield) take(ctx context.Context, n int64, tail bool, abort <-chan struct{}) error {
	return waitPaced(ctx, y.reserve(n, tail), abort)
}

// reserve counts n record bytes about to be sent and returns how long
// they wait: while the pace is on, until it has paid for them and those
// before them, unless n is less than yieldPacedBytes or the answer is at
// the tail of its partitions (tail).
func (y *fetchYield) reserve(n int64, tail bool) time.Duration {
	y.mu.Lock()
	defer y.mu.Unlock()
	now := y.now()
	if now.Sub(y.mu.window) >= yieldWindow {
		y.adjustLocked(now)
	}
	y.mu.carried += n
	if y.mu.rate == 0 {
		return 0
	}
	y.mu.tokens = min(y.mu.rate*yieldBurst.Seconds(), y.mu.tokens+now.Sub(y.mu.at).Seconds()*y.mu.rate)
	y.mu.at = now
	if tail {
		// Paid for by the answers after it, but at most
		// yieldTailDebt of them: answers that do not wait must not
		// dig a debt that holds the others for minutes (answers at
		// the tail carry what producers write, which is bounded;
		// catching-up consumers the pace took for tail ones for a
		// moment are not).
		y.mu.tokens = max(y.mu.tokens-float64(n), min(y.mu.tokens, -y.mu.rate*yieldTailDebt.Seconds()))
		return 0
	}
	y.mu.tokens -= float64(n)
	if y.mu.tokens >= 0 || n < yieldPacedBytes {
		return 0
	}
	return time.Duration(-y.mu.tokens / y.mu.rate * float64(time.Second))
}

// refund gives back n record bytes counted too many: a prepaid answer
// (fetchAnswer.prepay) that read less than the index promised.
func (y *fetchYield) refund(n int64) {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.mu.carried -= n
	if y.mu.rate != 0 {
		y.mu.tokens = min(y.mu.rate*yieldBurst.Seconds(), y.mu.tokens+float64(n))
	}
}

// tailBytes is how far behind the ends of its partitions an answer may
// leave its consumer and still pass the pace as one at the tail:
// yieldTailWindow of what producers bring in, at least yieldPacedBytes;
// 0 while the pace is off.
func (y *fetchYield) tailBytes() int64 {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.mu.rate == 0 {
		return 0
	}
	return max(yieldPacedBytes, int64(y.mu.producedRate*yieldTailWindow.Seconds()))
}

// adjustLocked ends the window that began at y.mu.window and sets the
// rate for the next. Windows last yieldWindow or longer (they end at the
// first answer after it), so what they smooth weighs by their length.
func (y *fetchYield) adjustLocked(now time.Time) {
	elapsed := now.Sub(y.mu.window).Seconds()
	keep := math.Pow(yieldSmoothing, elapsed/yieldWindow.Seconds())
	carried := float64(y.mu.carried) / elapsed
	y.mu.carriedRate = keep*y.mu.carriedRate + (1-keep)*carried
	produced := y.produced.Load()
	y.mu.producedRate = keep*y.mu.producedRate + (1-keep)*float64(produced-y.mu.produced)/elapsed
	y.mu.produced = produced
	if others := y.others.Load(); others != y.mu.others {
		y.mu.others, y.mu.othersAt = others, now
	}
	waits, slow := y.waits()
	y.mu.waits = keep*y.mu.waits + float64(waits)
	y.mu.slow = keep*y.mu.slow + float64(slow)
	y.mu.window, y.mu.carried = now, 0
	if now.Sub(y.mu.othersAt) > yieldIdle {
		y.mu.rate = 0
		return
	}
	if y.mu.waits < yieldMinWaits {
		return
	}
	share := y.mu.slow / y.mu.waits
	if y.mu.rate == 0 {
		if share <= yieldTargetSlow {
			return
		}
		y.mu.rate, y.mu.tokens, y.mu.at = max(carried, y.mu.carriedRate), 0, now
	}
	f := min(yieldMaxIncrease, max(yieldMaxDecrease, 1+yieldGain*(yieldTargetSlow-share)/yieldTargetSlow))
	y.mu.rate = max(yieldFloorBytesPerSec, yieldProducedFactor*y.mu.producedRate, y.mu.rate*f)
	if f > 1 && y.mu.rate > 2*y.mu.carriedRate {
		y.mu.rate = 0
	}
}

// runtimeSchedWaits reads the Go runtime's scheduling latencies. Not
// safe for concurrent use: fetchYield calls it under its lock.
func runtimeSchedWaits() schedWaits {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	var last []uint64
	return func() (waits, slow uint64) {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindFloat64Histogram {
			return 0, 0
		}
		h := s[0].Value.Float64Histogram()
		for i, c := range h.Counts {
			if i < len(last) {
				c -= last[i]
			}
			waits += c
			// Buckets[i] is the lower bound of Counts[i].
			if h.Buckets[i] >= yieldSlowWait.Seconds() {
				slow += c
			}
		}
		last = append(last[:0], h.Counts...)
		return waits, slow
	}
}
