package clock

import (
	"context"
	"time"
)

// Loop is a background pass run on a clock until Stop: compaction, the
// cleaner, retention and garbage collection each run one.
type Loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Every starts a Loop that waits interval on clk, then calls pass, and
// again, until Stop. pass gets a context Stop cancels.
func Every(clk Clock, interval time.Duration, pass func(ctx context.Context)) *Loop {
	return start(clk, fixed(interval), false, false, pass)
}

// EveryVar is Every with the wait before each pass read from interval
// then, for a setting that may change while the loop runs (a dynamic
// broker config such as log.cleaner.backoff.ms).
func EveryVar(clk Clock, interval func() time.Duration, pass func(ctx context.Context)) *Loop {
	return start(clk, interval, false, false, pass)
}

func fixed(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

// EveryFromNow is Every with a first pass at once.
func EveryFromNow(clk Clock, interval time.Duration, pass func(ctx context.Context)) *Loop {
	return start(clk, fixed(interval), true, false, pass)
}

// AtRate is Every with passes starting interval apart: the wait after a
// pass is the interval less the time the pass took (none if it took
// longer), for a pass that spreads its work over the interval.
func AtRate(clk Clock, interval time.Duration, pass func(ctx context.Context)) *Loop {
	return start(clk, fixed(interval), false, true, pass)
}

func start(clk Clock, interval func() time.Duration, now, atRate bool, pass func(ctx context.Context)) *Loop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Loop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if now {
			pass(ctx)
		}
		var took time.Duration
		for Sleep(ctx, clk, interval()-took) == nil {
			began := clk.Now()
			pass(ctx)
			if atRate {
				took = Since(clk, began)
			}
		}
	}()
	return l
}

// Stop ends the loop and waits for a pass under way. Stop of a nil Loop
// (never started) does nothing.
func (l *Loop) Stop() {
	if l != nil {
		l.cancel()
		<-l.done
	}
}
