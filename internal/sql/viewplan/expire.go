package viewplan

import (
	"time"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
)

// joinExpiry is what lets a join free its rows by the watermark (an
// interval join's, flow.JoinExpiry): for each side, the terms giving a
// row's expiry, the latest event time of the other side it may still
// match.
//
// The ON clause's conjuncts bounding one side's time by the other's
// (exec.JoinBound) are read as E <= X + off, where E is a column of one
// side whose lineage is a source's watermark column (timeEvent) and X a
// timestamp of the other: a row of X's side matches only rows of E's
// side with E at most X + off. E may also be the start of a TUMBLE or
// HOP window of size s over such a column (a window join, `ON
// a.window_start = b.window_start`): a record to come has a window
// start after the watermark minus s, so the row's expiry is X + off +
// s. Every record after an epoch has an event
// time at or after the epoch's watermark once the view drops late
// records (which a view with an expiring join does: View.Windowed), so
// a row whose X + off is before the watermark can match nothing to
// come. Freeing it changes nothing the view holds: an inner join's
// pairs with it are done, and an outer join's padded row for it (or its
// absence) is what a batch query over the same records gives, since its
// match count is final.
//
// Both sides must only insert (built.appendOnly): a retraction of a
// forgotten row could not be joined. Otherwise the join keeps every
// row, as before; so does a side no conjunct bounds the other's event
// time by: `b.t >= a.t` alone frees b's rows (once the watermark
// passes b.t, every a to come is later) and keeps a's.
func (c *compiler) joinExpiry(l *exec.Logical, lb, rb built) [2][]flow.JoinExpiry {
	var out [2][]flow.JoinExpiry
	if !lb.appendOnly || !rb.appendOnly || len(l.Bounds) == 0 {
		return out
	}
	lw := l.LeftWidth
	// slack is how far before the watermark a value of col may be in a
	// record to come: none for an event time, a window's size for the
	// start of a TUMBLE or HOP window over one (a window join's key).
	slack := func(col int) (time.Duration, bool) {
		times := lb.times
		if col >= lw {
			times, col = rb.times, col-lw
		}
		if col >= len(times) {
			return 0, false
		}
		switch t := times[col]; t.kind {
		case timeEvent:
			return 0, true
		case timeWindowStart:
			return t.size, true
		}
		return 0, false
	}
	for _, b := range l.Bounds {
		// Col <= Other + Offset, or Other <= Col - Offset.
		e, x, off := b.Col, b.Other, b.Offset
		if !b.Upper {
			e, x, off = b.Other, b.Col, -b.Offset
		}
		d, ok := slack(e)
		if !ok {
			continue
		}
		side := 0
		if x >= lw {
			side, x = 1, x-lw
		}
		out[side] = append(out[side], flow.JoinExpiry{Col: x, Offset: off + d})
	}
	if len(out[0])+len(out[1]) > 0 {
		c.expiring++
	}
	return out
}
