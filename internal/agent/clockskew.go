package agent

// An agent whose clock disagrees with the log clock stands aside from
// decisions by time.
//
// The log clock is voted among the live agents (meta/logclock.go), so
// one agent's skewed clock cannot move it far; but that agent would
// still judge by its own clock what is due: retention, garbage
// collection, transaction timeouts, offset expiry, tombstone horizons.
// Apply re-checks most of them against the log clock, yet a skewed
// proposer wastes proposals at best, and the cleaner drops tombstones
// from what it writes. So after each of its lease renewals has applied,
// the agent compares its clock with its copy's log clock. Beyond
// --max-clock-skew it says so (a log line, strand_clock_skewed), answers
// /readyz with 503, and owns none of that work until the two agree
// again (retention, garbage collection, offset expiry and the cleaner
// wait, which only keeps data longer), but for transaction timeouts,
// which it judges by the log clock alone: the transactions it
// coordinates must not stay open, holding back every read_committed
// consumer of their partitions. Other work (serving clients,
// coordinating groups) goes on.
//
// Measuring right after its own renewal keeps the comparison honest: the
// copy has just applied an entry this agent stamped, so its log clock
// is as fresh as it gets. It can still lag by a renewal period of the
// other agents (the vote takes their newest reports), which the ahead
// side of the bound allows for.

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// DefaultMaxClockSkew is --max-clock-skew's default: well above what NTP
// keeps machines to (milliseconds), well below any retention or grace
// worth setting.
const DefaultMaxClockSkew = 30 * time.Second

type clockGuard struct {
	clk  clock.Clock
	view func() *meta.View
	// behind and ahead bound the agent's clock minus the log clock.
	behind, ahead time.Duration
	logger        *slog.Logger

	skewMs atomic.Int64
	skewed atomic.Bool
}

// newClockGuard bounds the skew by max each way, plus lag on the ahead
// side: how far an idle log clock may trail (a third of a lease).
func newClockGuard(clk clock.Clock, view func() *meta.View, max, lag time.Duration, logger *slog.Logger) *clockGuard {
	return &clockGuard{clk: clk, view: view, behind: max, ahead: max + lag, logger: logger}
}

// check compares the clocks; the membership calls it after each renewal.
func (g *clockGuard) check() {
	v := g.view()
	lc, err := v.LogClock()
	v.Close()
	if err != nil || lc == 0 {
		return
	}
	skew := g.clk.Now().UnixMilli() - lc
	g.skewMs.Store(skew)
	off := skew > g.ahead.Milliseconds() || -skew > g.behind.Milliseconds()
	if g.skewed.Swap(off) == off {
		return
	}
	if off {
		g.logger.Error("this agent's clock disagrees with the log clock: it stops proposing retention, garbage collection, "+
			"offset expiry and compaction of tombstones, judges transaction timeouts by the log clock alone, and /readyz "+
			"answers 503, until they agree; fix the machine's time (NTP)",
			"skew", time.Duration(skew)*time.Millisecond, "max_clock_skew", g.behind)
		return
	}
	g.logger.Info("this agent's clock agrees with the log clock again", "skew", time.Duration(skew)*time.Millisecond)
}

// hold reports whether the agent must stand aside from decisions by
// time.
func (g *clockGuard) hold() bool { return g.skewed.Load() }

// err says why the agent is not ready, or nil.
func (g *clockGuard) err() error {
	if !g.skewed.Load() {
		return nil
	}
	return fmt.Errorf("this agent's clock is %v off the log clock (--max-clock-skew %v)",
		time.Duration(g.skewMs.Load())*time.Millisecond, g.behind)
}

// skewSeconds is the newest measure, for the metric.
func (g *clockGuard) skewSeconds() float64 { return float64(g.skewMs.Load()) / 1000 }

func (g *clockGuard) skewedGauge() float64 {
	if g.skewed.Load() {
		return 1
	}
	return 0
}
