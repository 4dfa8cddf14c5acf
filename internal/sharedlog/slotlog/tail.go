package slotlog

// Finding the tail: CheckTail, the frontier search over slot infos, and
// the trim point as of a time (the trim-grace protocol's read side).

import (
	"context"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// CheckTail implements sharedlog.Loglet. It reads the service unless the
// handle already knows the loglet is sealed.
func (l *Loglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if err := l.check(ctx); err != nil {
		return 0, false, err
	}
	l.mu.Lock()
	if l.mu.sealed {
		p := l.mu.sealPos
		l.mu.Unlock()
		return p, true, nil
	}
	l.mu.Unlock()
	return l.refresh(ctx)
}

// refresh searches for the frontier and folds it into the handle's view.
// It returns the tail and whether the loglet is sealed.
func (l *Loglet) refresh(ctx context.Context) (sharedlog.Pos, bool, error) {
	l.mu.Lock()
	lo := max(l.mu.base, l.mu.tp)
	l.mu.Unlock()
	fr, err := l.findFrontier(ctx, lo)
	if err != nil {
		return 0, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observeTPLocked(fr.tp, fr.tpReadAt)
	if fr.sealed {
		l.markSealedLocked(fr.pos)
	}
	if fr.pos > l.mu.base {
		l.mu.base = fr.pos
		for p := range l.mu.slots {
			if p < l.mu.base {
				delete(l.mu.slots, p)
			}
		}
	}
	l.mu.next = max(l.mu.next, l.mu.base)
	l.mu.fresh = true
	l.advanceLocked()
	l.wakeLocked()
	if l.mu.sealed {
		return l.mu.sealPos, true, nil
	}
	return l.mu.base, false, nil
}

func (l *Loglet) observeTPLocked(tp sharedlog.Pos, readAt time.Time) {
	l.mu.tp = max(l.mu.tp, tp)
	if readAt.After(l.mu.tpReadAt) {
		l.mu.tpReadAt = readAt
	}
}

// frontier is the result of a search: the tail, whether a seal ends the
// log there, and the trim point read (and when) while searching.
type frontier struct {
	pos      sharedlog.Pos
	sealed   bool
	tp       sharedlog.Pos
	tpReadAt time.Time
}

// findFrontier finds the first slot at or above lo and the trim point
// that holds no entry. Every slot below lo holds an entry or is trimmed.
//
// The trim point is read after the scan: a slot the scan saw missing
// below it may have been deleted, but one at or above it cannot have
// been (deletion follows the raise), so the scan is trusted from the
// trim point up.
//
// Writers stay within Window of the frontier, so the highest slot H
// bounds it: every slot below H-Window+1 holds an entry or is trimmed,
// and a seal, if any, lies at or above it. A TopOnly store reads the top
// Window+1 slots and searches from there; the others scan up from lo and
// use the top only to jump when lo is far behind.
func (l *Loglet) findFrontier(ctx context.Context, lo sharedlog.Pos) (frontier, error) {
	w := sharedlog.Pos(l.cfg.Window)
	limit := l.cfg.Window + 1
	if l.cfg.TopOnly {
		top, err := l.st.ScanTop(ctx, limit)
		if err != nil {
			return frontier{}, err
		}
		readAt := l.clk.Now()
		tp, err := l.st.TrimPoint(ctx)
		if err != nil {
			return frontier{}, err
		}
		asc, err := l.ascending(top, limit, true)
		if err != nil {
			return frontier{}, err
		}
		start := max(lo, tp)
		if len(asc) == limit {
			if h := asc[len(asc)-1].Pos; h+1 >= w {
				start = max(start, h-w+1)
			}
		}
		p, sealed, _ := walk(asc, start, true)
		return frontier{pos: p, sealed: sealed, tp: tp, tpReadAt: readAt}, nil
	}
	from := lo
	for range maxScanRounds {
		infos, err := l.st.ScanUp(ctx, from, limit)
		if err != nil {
			return frontier{}, err
		}
		readAt := l.clk.Now()
		tp, err := l.st.TrimPoint(ctx)
		if err != nil {
			return frontier{}, err
		}
		if infos, err = l.ascending(infos, limit, false); err != nil {
			return frontier{}, err
		}
		if len(infos) > 0 && infos[0].Pos < from {
			return frontier{}, l.errorf("%w: scan from %d returned slot %d", ErrCorrupt, from, infos[0].Pos)
		}
		complete := len(infos) < limit
		start := max(from, tp)
		if !complete && start > infos[len(infos)-1].Pos+1 {
			from = start // the trim point lies past what was scanned
			continue
		}
		if p, sealed, found := walk(infos, start, complete); found {
			return frontier{pos: p, sealed: sealed, tp: tp, tpReadAt: readAt}, nil
		}
		from = infos[len(infos)-1].Pos + 1
		// Jump to the highest slot's window at every round that
		// found no frontier, not only the first: writers appending
		// as fast as the scan reads (two handles in a loop) keep
		// moving it, and a single jump let them outrun the search
		// (about 3 in 100 runs of TestTwoHandles).
		top, err := l.st.ScanTop(ctx, 1)
		if err != nil {
			return frontier{}, err
		}
		if len(top) == 1 && top[0].Pos+1 >= w {
			from = max(from, top[0].Pos-w+1)
		}
	}
	return frontier{}, l.errorf("frontier search gave up after %d rounds: writers outrun it", maxScanRounds)
}

// ascending checks a scan result (limit at most, strictly ordered, known
// kinds) and returns it in ascending order.
func (l *Loglet) ascending(infos []SlotInfo, limit int, descending bool) ([]SlotInfo, error) {
	if len(infos) > limit {
		return nil, l.errorf("%w: scan returned %d slots, asked for %d", ErrCorrupt, len(infos), limit)
	}
	out := infos
	if descending {
		out = make([]SlotInfo, len(infos))
		for i, in := range infos {
			out[len(infos)-1-i] = in
		}
	}
	for i, in := range out {
		if !in.Kind.Valid() {
			return nil, l.errorf("%w: slot %d has kind %v", ErrCorrupt, in.Pos, in.Kind)
		}
		if i > 0 && in.Pos <= out[i-1].Pos {
			return nil, l.errorf("%w: scan out of order at slot %d", ErrCorrupt, in.Pos)
		}
	}
	return out, nil
}

// walk returns the first position at or above start, among the occupied
// slots infos (ascending), that holds no entry. found is false when every
// slot from start through the last of infos is an entry and complete is
// false: the scan stopped before the frontier.
func walk(infos []SlotInfo, start sharedlog.Pos, complete bool) (p sharedlog.Pos, sealed, found bool) {
	p = start
	for _, in := range infos {
		switch {
		case in.Pos < p:
			continue
		case in.Pos > p:
			return p, false, true
		case in.Kind == KindSeal:
			return p, true, true
		}
		p++
	}
	return p, false, complete
}

// trusted reports whether a trim point read sent at readAt may stand in
// for one sent at t: it was sent at most trust before t, on both the
// monotonic clock and the wall clock (which, unlike the monotonic one,
// runs on while a machine is suspended).
func trusted(readAt, t time.Time, trust time.Duration) bool {
	if readAt.IsZero() {
		return false
	}
	if trust == 0 {
		return !readAt.Before(t)
	}
	return t.Sub(readAt) <= trust && t.Round(0).Sub(readAt.Round(0)) <= trust
}

// trimPointAsOf returns a trim point that was read no earlier than t
// minus the trust period: one that reflects every trim whose deletions
// could have reached a slot by time t. Concurrent callers share reads.
func (l *Loglet) trimPointAsOf(ctx context.Context, t time.Time) (sharedlog.Pos, error) {
	for {
		l.mu.Lock()
		if trusted(l.mu.tpReadAt, t, l.trust) {
			tp := l.mu.tp
			l.mu.Unlock()
			return tp, nil
		}
		if f := l.mu.tpFlight; f != nil {
			// It may have been sent too early for t; then the next round
			// sends another.
			l.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			continue
		}
		f := &flight{done: make(chan struct{})}
		l.mu.tpFlight = f
		l.mu.Unlock()
		readAt := l.clk.Now()
		tp, err := l.st.TrimPoint(ctx)
		l.mu.Lock()
		l.mu.tpFlight = nil
		if err == nil {
			l.observeTPLocked(tp, readAt)
			tp = l.mu.tp
		}
		f.err = err
		close(f.done)
		l.mu.Unlock()
		// Sent after t, this read answers for t whatever the trust period.
		return tp, err
	}
}

// TailMoved implements sharedlog.TailProber with one Probe of slot tail:
// an empty frontier slot means nothing was appended there, nor a seal.
// Unless the slot was written, trimmed and deleted meanwhile: the trim
// point, read after the probe or trusted as of its end, rules that out,
// as it does for an append (see Trim and the grace period). So the read
// costs a second request once per trust period, not on every probe.
func (l *Loglet) TailMoved(ctx context.Context, tail sharedlog.Pos) (bool, error) {
	if err := l.check(ctx); err != nil {
		return false, err
	}
	l.mu.Lock()
	known := l.mu.sealed || l.mu.base > tail
	l.mu.Unlock()
	if known {
		return true, nil
	}
	_, occupied, err := l.st.Probe(ctx, tail)
	if err != nil || occupied {
		return occupied, err
	}
	tp, err := l.trimPointAsOf(ctx, l.clk.Now())
	if err != nil {
		return false, err
	}
	return tp > tail, nil
}
