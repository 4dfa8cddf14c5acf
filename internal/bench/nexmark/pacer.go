package nexmark

import (
	"context"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// Pacer releases events at a fixed rate: event k (from 0) is due
// k/EventsPerSecond after the first Wait. A caller that falls behind
// (a slow produce) is let through at once until it is back on schedule,
// so the average rate over a run is the one asked for, as the
// reference generator's wall-clock schedule does; maxCatchUp bounds that
// burst so a long stall does not turn into an unbounded flood.
type Pacer struct {
	clock     clock.Clock
	perSecond float64
	start     time.Time
	released  int64
	// maxCatchUp is how far behind schedule the pacer lets a caller
	// fall before it moves the schedule instead of bursting.
	maxCatchUp time.Duration
}

// DefaultMaxCatchUp is how long a stall a Pacer makes up for by
// bursting.
const DefaultMaxCatchUp = time.Second

// NewPacer returns a pacer releasing eventsPerSecond events per second
// of c's time.
func NewPacer(c clock.Clock, eventsPerSecond float64) (*Pacer, error) {
	if !(eventsPerSecond > 0) {
		return nil, fmt.Errorf("nexmark: pacer rate %v events/s: must be positive", eventsPerSecond)
	}
	return &Pacer{clock: clock.OrReal(c), perSecond: eventsPerSecond, maxCatchUp: DefaultMaxCatchUp}, nil
}

// Wait blocks until the next n events are due, or ctx is done.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	now := p.clock.Now()
	if p.start.IsZero() {
		p.start = now
	}
	last := p.released + int64(n) - 1
	due := p.start.Add(p.offset(last))
	if behind := now.Sub(due); behind > p.maxCatchUp {
		// Forget the schedule's lost part: restart it so these events
		// are due maxCatchUp ago.
		p.start = p.start.Add(behind - p.maxCatchUp)
		due = p.start.Add(p.offset(last))
	}
	if err := clock.Sleep(ctx, p.clock, due.Sub(now)); err != nil {
		return err
	}
	p.released += int64(n)
	return nil
}

// Released is how many events Wait has let through.
func (p *Pacer) Released() int64 { return p.released }

func (p *Pacer) offset(k int64) time.Duration {
	return time.Duration(float64(k) / p.perSecond * float64(time.Second))
}
