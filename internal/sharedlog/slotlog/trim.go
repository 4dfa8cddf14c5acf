package slotlog

// Trimming: PrefixTrim raises the stored trim point, and reap deletes
// slots below trim points that have waited out the grace period.

import (
	"context"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// PrefixTrim implements sharedlog.Loglet. It raises the stored trim point
// (clamped to the tail) and deletes the slots below trim points that have
// waited out the grace period; with the default grace that is a trim
// point an earlier PrefixTrim of this handle set.
func (l *Loglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if before == 0 {
		return nil
	}
	tail, _, err := l.refresh(ctx)
	if err != nil {
		return err
	}
	before = min(before, tail)
	l.mu.Lock()
	cur := l.mu.tp
	l.mu.Unlock()
	if before > cur {
		if err := l.st.RaiseTrimPoint(ctx, before); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.mu.tp = max(l.mu.tp, before)
	l.noteReapLocked(reapMark{tp: l.mu.tp, seen: l.clk.Now()})
	l.mu.Unlock()
	return l.reap(ctx)
}

func (l *Loglet) noteReapLocked(m reapMark) {
	if n := len(l.mu.reap); n > 0 && l.mu.reap[n-1].tp >= m.tp {
		return
	}
	if len(l.mu.reap) == maxReapMarks {
		// Keep the oldest marks, which are due first; the newest is
		// replaced by the newer one.
		l.mu.reap = l.mu.reap[:maxReapMarks-1]
	}
	l.mu.reap = append(l.mu.reap, m)
}

// reap deletes the slots below the newest trim point that has waited out
// the grace period.
func (l *Loglet) reap(ctx context.Context) error {
	now := l.clk.Now()
	l.mu.Lock()
	var due sharedlog.Pos
	keep := l.mu.reap[:0]
	for _, m := range l.mu.reap {
		// Both clocks must agree the grace has passed: a suspended
		// machine's monotonic clock stops, a stepped wall clock jumps.
		if now.Sub(m.seen) >= l.grace && now.Round(0).Sub(m.seen.Round(0)) >= l.grace {
			due = max(due, m.tp)
		} else {
			keep = append(keep, m)
		}
	}
	l.mu.reap = keep
	done := l.mu.deleted
	l.mu.Unlock()
	if due <= done {
		return nil
	}
	if err := l.st.DeleteBelow(ctx, due); err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.deleted = max(l.mu.deleted, due)
	l.mu.Unlock()
	return nil
}
