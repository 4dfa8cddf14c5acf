package compact

import (
	"context"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore/express"
)

// Pacing. A pass used to compact everything due as fast as the store and
// a core allowed, then sleep for Interval. At 50 MB/s of ingest a pass
// found about 500 MB due and read, checked, copied and wrote it in a few
// seconds (8 runs of 16 MiB in half a second), every 10 s: on a 2-core
// machine that burst took the CPU and the disk from the produce path,
// whose p99 went from 72 ms (no compaction) to 656 ms. Paced at a fixed
// 20 MiB/s, produce was as fast as without compaction, but compaction
// fell behind ingest.
//
// So a pass spreads its work over the interval: at its start it sums the
// bytes due in the partitions it owns (due, plan's rule), and paces its
// reads at that sum over spreadFraction of the Interval, so it ends
// before the next pass starts, and passes start every Interval. A pass
// compacts only what it counted (what becomes due meanwhile is the next
// pass's, at the pace that one sets). What is
// due at a pass is what became due in one interval, so compaction goes
// at the pace of ingest (1/spreadFraction of it), evenly, never faster
// than it must to keep up. MaxBytesPerSec caps the pace (compaction then
// falls behind an ingest faster than it, as configured). The pace never
// falls below minPaceBytesPerSec, so a pass with little to do ends soon;
// and a backlog (after a restart, say) is worked off at most
// maxRunsPerPass runs per partition a pass, also spread.
//
// Measured with strand bench at 50 MB/s (--compaction-min-age 5s
// --compaction-max-lag 20s) on a 2-core machine shared with other work,
// in its quieter minutes: produce p99 44-65 ms spread (keeping up, pace
// about 60 MB/s), 57-240 ms unspread, 18-19 ms without compaction. What
// is left is mostly each 16 MiB object's write and fsync (80-200 ms),
// which slows the produce path's own fsyncs while it lasts.
const (
	// spreadFraction of the Interval is the time a pass's work is spread
	// over: the rest is slack for a pass that ends late.
	spreadFraction = 0.75
	// minPaceBytesPerSec is the pace's floor.
	minPaceBytesPerSec = 4 << 20
	// paceBurstBytes are the bytes a read may take at once after the
	// pacer was idle: runs of a few small entries (tests, quiet
	// partitions) never wait; large runs are paced.
	paceBurstBytes = 1 << 20
)

// setPace sets the pace of the pass about to compact targets from the
// bytes due in them, and returns those bytes, per target: the pass's
// budget, what it compacts at most (a run begun within it is finished).
// Unpaced: no budget, and MaxBytesPerSec as the pace. It sets st.Pace.
func (c *Compactor) setPace(targets []target, st *PassStats) ([]int64, error) {
	if c.cfg.Unpaced {
		st.Pace = c.cfg.MaxBytesPerSec
		return nil, nil
	}
	budget := make([]int64, len(targets))
	var due int64
	for i, t := range targets {
		n, err := c.due(t)
		if err != nil {
			return nil, err
		}
		budget[i] = n
		due += n
	}
	st.Pace = paceFor(due, c.cfg.Interval, c.cfg.MaxBytesPerSec)
	c.pace.setRate(st.Pace)
	c.cfg.Metrics.pace.Set(float64(st.Pace))
	return budget, nil
}

// paceFor returns the read rate that spreads due bytes over
// spreadFraction of interval: at least minPaceBytesPerSec, at most
// maxRate unless that is 0.
func paceFor(due int64, interval time.Duration, maxRate int64) int64 {
	rate := max(minPaceBytesPerSec, int64(float64(due)/(spreadFraction*interval.Seconds())))
	if maxRate > 0 {
		rate = min(rate, maxRate)
	}
	return rate
}

// due returns the bytes of the partition's level-0 entries a pass would
// compact, by plan's rule: the level-0 data old enough from the first
// one on, at most maxRunsPerPass runs of the target bytes; none if that
// is less than a run, its oldest entry younger than MaxLag and its
// oldest tier entry younger than ExpressMaxLag.
func (c *Compactor) due(t target) (int64, error) {
	v := c.cfg.Meta.View()
	defer v.Close()
	st, ok, err := v.Partition(t.topic.ID, t.partition)
	if err != nil || !ok {
		return 0, err
	}
	c.mu.Lock()
	from := max(st.LogStartOffset, c.mu.skip[partKey{t.topic.ID, t.partition}])
	c.mu.Unlock()
	it, err := v.Seek(t.topic.ID, t.partition, from)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	now := c.cfg.Clock.Now().UnixMilli()
	minAge, maxLag := c.cfg.MinAge.Milliseconds(), c.cfg.MaxLag.Milliseconds()
	xLag := c.cfg.ExpressMaxLag.Milliseconds()
	limit := maxRunsPerPass * c.cfg.TargetBytes
	var bytes int64
	var oldest, xOldest int64 = -1, -1
	for bytes < limit && it.Next() {
		e := it.Entry()
		if e.Control || e.BaseOffset < st.LogStartOffset || Compacted(e.ObjectKey) {
			continue
		}
		kt, timed := meta.ObjectKeyTime(e.ObjectKey)
		if !timed {
			kt = 0
		}
		tier := express.IsKey(e.ObjectKey)
		if now-kt < minAge && (!tier || now-kt < min(minAge, xLag)) {
			break
		}
		if oldest < 0 {
			oldest = kt
		}
		if tier && xOldest < 0 {
			xOldest = kt
		}
		bytes += e.Length
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	if bytes < c.cfg.TargetBytes && (oldest < 0 || now-oldest < maxLag) && (xOldest < 0 || now-xOldest < xLag) {
		return 0, nil
	}
	return min(bytes, limit), nil
}

// pacer spaces reads so they never run ahead of rate bytes per second
// (0: unpaced). Idle time is saved up for a burst of at most burst
// bytes.
type pacer struct {
	clk   clock.Clock
	burst int64
	mu    sync.Mutex
	rate  int64
	next  time.Time
}

func newPacer(rate, burst int64, clk clock.Clock) *pacer {
	return &pacer{rate: rate, burst: burst, clk: clk}
}

// setRate changes the rate for the reads to come.
func (p *pacer) setRate(rate int64) {
	p.mu.Lock()
	p.rate = rate
	p.mu.Unlock()
}

// wait returns when a read of n bytes may start: at once if the reads
// before it have had their share of the time (the first one's is paid
// after it), or the burst saved up covers it.
func (p *pacer) wait(ctx context.Context, n int64) error {
	p.mu.Lock()
	rate := p.rate
	if rate <= 0 {
		p.mu.Unlock()
		return ctx.Err()
	}
	now := p.clk.Now()
	per := func(b int64) time.Duration { return time.Duration(float64(b) / float64(rate) * float64(time.Second)) }
	start := p.next
	if earliest := now.Add(-per(p.burst)); start.Before(earliest) {
		start = earliest
	}
	p.next = start.Add(per(n))
	p.mu.Unlock()
	if d := start.Sub(now); d > 0 {
		return clock.Sleep(ctx, p.clk, d)
	}
	return ctx.Err()
}
