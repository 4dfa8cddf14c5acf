package viewplan

import (
	"slices"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// Emit is when a view's windowed aggregates emit their rows.
type Emit uint8

const (
	// EmitOnUpdate (the default) emits a window's row as it changes;
	// once the watermark closes the window its row stays as it is.
	EmitOnUpdate Emit = iota
	// EmitOnWindowClose holds a window's row until the watermark
	// closes it and emits it once, final: never changed or retracted.
	EmitOnWindowClose
)

// EmitOption is the view option (CREATE MATERIALIZED VIEW v WITH (emit
// = '...')) that chooses Emit.
const EmitOption = "emit"

// ParseEmit reads the emit option's value (case-insensitive); "" is
// the default.
func ParseEmit(v string) (Emit, error) {
	switch strings.ToLower(v) {
	case "", "on_update":
		return EmitOnUpdate, nil
	case "on_window_close":
		return EmitOnWindowClose, nil
	}
	return 0, sqlerr.Errorf(sqlerr.InvalidParameterValue, "emit %q: a materialized view emits 'on_update' (default) or 'on_window_close'", v)
}

func (e Emit) String() string {
	if e == EmitOnWindowClose {
		return "on_window_close"
	}
	return "on_update"
}

// Options are a view's compile options (its WITH options).
type Options struct {
	Emit Emit
}

// timeKind is what the compiler knows of a column's event time: the
// lineage that lets a GROUP BY of a window start close its windows by
// the watermark.
type timeKind uint8

const (
	timeUnknown timeKind = iota
	// timeEvent: the value of a source's watermark column, so no record
	// the source passes is earlier than the watermark before its epoch.
	timeEvent
	// timeWindowStart: the start of a TUMBLE or HOP window of size over
	// an event time, so the window ends after every time it holds.
	timeWindowStart
	// timeWindowEnd: the end of a SESSION window over an event time, of
	// rows only inserted: a session ending at or before the watermark
	// never changes again.
	timeWindowEnd
)

type colTime struct {
	kind timeKind
	size time.Duration // timeWindowStart's window size
}

// timesOf picks cols of a built's lineage (-1: a computed column,
// unknown); nil when nothing is known.
func timesOf(in []colTime, cols []int) []colTime {
	if in == nil {
		return nil
	}
	out := make([]colTime, len(cols))
	for i, c := range cols {
		if c >= 0 && c < len(in) {
			out[i] = in[c]
		}
	}
	return out
}

// timesByCol places the group keys' lineage at their input columns
// (groupBy), for windowPolicy.
func timesByCol(keys []colTime, groupBy []int) []colTime {
	if keys == nil {
		return nil
	}
	out := make([]colTime, slices.Max(append([]int{0}, groupBy...))+1)
	for i, col := range groupBy {
		out[col] = keys[i]
	}
	return out
}

// concatTimes is a join's lineage: the left side's columns then the
// right's.
func concatTimes(l []colTime, lw int, r []colTime, rw int) []colTime {
	if l == nil && r == nil {
		return nil
	}
	out := make([]colTime, lw+rw)
	copy(out, l)
	copy(out[lw:], r)
	return out
}

// windowPolicy gives an aggregate grouping by a window start (whose
// lineage is a TUMBLE or HOP over a watermark column) flow's
// WindowPolicy, so the watermark closes its windows: their state is
// freed, a record for a closed one is late (dropped and counted), and
// with EmitOnWindowClose each window's rows are emitted once, when it
// closes. flow's policy wants the window start first in the group key:
// groupBy is reordered so, and perm (nil if unchanged) puts the
// aggregate's output back in the plan's column order.
//
// Lateness is zero: the allowed lateness is the source's
// watermark.delay, already in the watermark. A record the source passed
// has an event time no earlier than its partition's watermark, which
// is no earlier than the view's (the least over partitions and
// inputs) before the epoch; its window ends after that time, so the
// aggregate never drops a record the source passed as on time.
//
// A GROUP BY holding a SESSION's window_end (timeWindowEnd) is windowed
// by it the same way, with size 0: its windows close when their end is
// at or before the watermark. A session's change retracts its rows'
// old window, which ends after the record that changed it, so after
// the watermark before the epoch: the aggregate drops none of them. A
// GROUP BY of window_start alone is not windowed (the start does not
// say when the session ends).
func (c *compiler) windowPolicy(groupBy []int, in []colTime, ncalls int) (*flow.WindowPolicy, []int, []int) {
	first := -1
	for i, col := range groupBy {
		if col < len(in) && (in[col].kind == timeWindowStart || in[col].kind == timeWindowEnd) {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, groupBy, nil
	}
	// A session's end is the window's end: size 0 (flow closes a
	// window when its first group value plus size is at or before the
	// watermark).
	size := in[groupBy[first]].size
	pol := &flow.WindowPolicy{Size: size, EmitOnClose: c.opts.Emit == EmitOnWindowClose}
	if first == 0 {
		return pol, groupBy, nil
	}
	reordered := append([]int{groupBy[first]}, slices.Delete(slices.Clone(groupBy), first, first+1)...)
	// The aggregate's row is reordered's values then the calls';
	// perm[i] is where the plan's column i is in it.
	perm := make([]int, len(groupBy)+ncalls)
	for i := range perm {
		switch {
		case i == first:
			perm[i] = 0
		case i < first:
			perm[i] = i + 1
		default:
			perm[i] = i
		}
	}
	return pol, reordered, perm
}

// checkEmit refuses emit = 'on_window_close' for a view it cannot
// keep: one whose rows do not all come from windowed aggregates
// (filters and projections above them), or one reading a source
// without a watermark (the view's watermark is the least of its
// inputs', so it would never close a window).
func (c *compiler) checkEmit(b built) error {
	if c.opts.Emit != EmitOnWindowClose {
		return nil
	}
	for _, name := range c.inputNames {
		if r := c.rels[name]; r != nil && !r.Watermark {
			return sqlerr.Errorf(sqlerr.InvalidObjectDefinition, "emit = 'on_window_close' needs a watermark on every source the view reads: source %q has no watermark.column (or is an upsert source, whose rows change after their windows)", name)
		}
	}
	if !b.final {
		return sqlerr.NotSupported("emit = 'on_window_close' needs a view whose rows are a GROUP BY window_start of TUMBLE or HOP windows, or window_end of SESSION windows, over a source's watermark column (with filters and projections above it): %s", c.whyNotFinal())
	}
	return nil
}

func (c *compiler) whyNotFinal() string {
	if c.windowed == 0 {
		return "this query has no such window"
	}
	return "the windowed aggregate's rows go through an operator (a join, DISTINCT, UNION, another aggregate) that may change them after the window closes"
}
