package flow

import (
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/sql/types"
)

// Expr is a compiled scalar expression over an input row: the
// planner's expressions plug in here. It returns a SQL value (nil for
// NULL) or an error (a division by zero, a failed cast), which fails the
// epoch.
type Expr func(types.Row) (any, error)

// validator is implemented by operators with settings to check once,
// when the driver is made.
type validator interface{ validate() error }

// Filter passes the changes whose row satisfies Pred (WHERE, HAVING):
// true passes, false and NULL do not. Stateless.
type Filter struct {
	Pred Expr
}

func (f *Filter) Arity() int { return 1 }

func (f *Filter) Step(_ *Context, ins [][]types.Change) ([]types.Change, error) {
	out := ins[0][:0:0]
	for _, c := range ins[0] {
		ok, err := f.Pred(c.Row)
		if err != nil {
			return nil, err
		}
		switch ok {
		case true:
			out = append(out, c)
		case false, nil:
		default:
			return nil, fmt.Errorf("flow: filter predicate returned %T, not a boolean", ok)
		}
	}
	return out, nil
}

// Map replaces each row by the values of Exprs over it (a projection,
// computed columns), keeping its diff. Stateless.
type Map struct {
	Exprs []Expr
	// rows: the output rows are carved from slabs, not made one by one
	// (a q1 view's allocation per bid).
	rows rowSlab
}

func (m *Map) Arity() int { return 1 }

func (m *Map) Step(_ *Context, ins [][]types.Change) ([]types.Change, error) {
	out := make([]types.Change, len(ins[0]))
	for i, c := range ins[0] {
		row := m.rows.row(len(m.Exprs))
		for j, e := range m.Exprs {
			v, err := e(c.Row)
			if err != nil {
				return nil, err
			}
			row[j] = v
		}
		out[i] = types.Change{Row: row, Diff: c.Diff}
	}
	return out, nil
}

// Project keeps columns Cols of each row, in that order. Stateless.
type Project struct {
	Cols []int
	rows rowSlab // as Map's
}

func (p *Project) Arity() int { return 1 }

func (p *Project) Step(_ *Context, ins [][]types.Change) ([]types.Change, error) {
	out := make([]types.Change, len(ins[0]))
	for i, c := range ins[0] {
		row := p.rows.row(len(p.Cols))
		for j, col := range p.Cols {
			row[j] = c.Row[col]
		}
		out[i] = types.Change{Row: row, Diff: c.Diff}
	}
	return out, nil
}

// Union is UNION ALL of Inputs inputs with the same columns: their
// changes together. Stateless.
type Union struct {
	Inputs int
}

func (u *Union) Arity() int { return u.Inputs }

func (u *Union) Step(_ *Context, ins [][]types.Change) ([]types.Change, error) {
	var out []types.Change
	for _, in := range ins {
		out = append(out, in...)
	}
	return out, nil
}

// Windows are assigned on event time, a timestamp column: a window is
// [start, start+Size), starts at Offset plus whole multiples of its
// step from the Unix epoch (as RisingWave's TUMBLE and HOP). Sizes are
// fixed durations: a month is no fixed span, so none is accepted.

// maxHopWindows bounds how many windows HOP may put one row in.
const maxHopWindows = 1024

// Tumble appends window_start and window_end of the tumbling window of
// Size holding the row's TimeCol (NULL for a NULL time). Stateless.
type Tumble struct {
	TimeCol int
	Size    time.Duration
	Offset  time.Duration
}

func (w *Tumble) Arity() int { return 1 }

func (w *Tumble) validate() error {
	if w.Size < time.Microsecond {
		return fmt.Errorf("flow: tumble window size %v, at least 1µs", w.Size)
	}
	return nil
}

func (w *Tumble) Step(_ *Context, ins [][]types.Change) ([]types.Change, error) {
	out := make([]types.Change, len(ins[0]))
	for i, c := range ins[0] {
		start, end, err := windowOf(c.Row[w.TimeCol], w.Size, w.Size, w.Offset)
		if err != nil {
			return nil, err
		}
		out[i] = types.Change{Row: append(append(types.Row(nil), c.Row...), start, end), Diff: c.Diff}
	}
	return out, nil
}

// Hop appends window_start and window_end for each window of Size,
// sliding by Slide, that holds the row's TimeCol: a row lands in up to
// ceil(Size/Slide) windows (none for a NULL time). Stateless.
type Hop struct {
	TimeCol     int
	Slide, Size time.Duration
	Offset      time.Duration
}

func (w *Hop) Arity() int { return 1 }

func (w *Hop) validate() error {
	if w.Slide < time.Microsecond || w.Size < w.Slide {
		return fmt.Errorf("flow: hop window slide %v and size %v: want 1µs <= slide <= size", w.Slide, w.Size)
	}
	if (w.Size+w.Slide-1)/w.Slide > maxHopWindows {
		return fmt.Errorf("flow: hop window of %v sliding by %v puts a row in more than %d windows", w.Size, w.Slide, maxHopWindows)
	}
	return nil
}

func (w *Hop) Step(_ *Context, ins [][]types.Change) ([]types.Change, error) {
	var out []types.Change
	for _, c := range ins[0] {
		if c.Row[w.TimeCol] == nil {
			continue
		}
		last, _, err := windowOf(c.Row[w.TimeCol], w.Slide, w.Size, w.Offset)
		if err != nil {
			return nil, err
		}
		t := c.Row[w.TimeCol].(time.Time)
		// The windows holding t start at the last slide start at or
		// before t and at each earlier slide while still ending after t.
		for s := last.(time.Time); s.Add(w.Size).After(t); s = s.Add(-w.Slide) {
			row := append(append(make(types.Row, 0, len(c.Row)+2), c.Row...), s, s.Add(w.Size))
			out = append(out, types.Change{Row: row, Diff: c.Diff})
		}
	}
	return out, nil
}

// windowOf returns the window start for t with starts every step, and
// its end start+size.
func windowOf(v any, step, size, offset time.Duration) (any, any, error) {
	if v == nil {
		return nil, nil, nil
	}
	t, ok := v.(time.Time)
	if !ok {
		return nil, nil, fmt.Errorf("flow: window over a %T, not a timestamp", v)
	}
	us, st, off := t.UnixMicro(), step.Microseconds(), offset.Microseconds()
	rel := us - off
	m := rel % st
	if m < 0 {
		m += st
	}
	start := time.UnixMicro(us - m).UTC()
	return start, start.Add(size), nil
}

// Distinct passes each distinct row once (SELECT DISTINCT): +row when
// its count becomes positive, -row when it returns to zero.
//
// State: key(row) -> count, row.
type Distinct struct{}

func (*Distinct) Arity() int { return 1 }

func (*Distinct) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	var out []types.Change
	var key, vbuf []byte
	for _, c := range consolidate(ins[0]) {
		key = appendRowKey(key[:0], c.Row)
		before, after, err := addCounted(ctx.State, key, c.Row, c.Diff, &vbuf)
		if err != nil {
			return nil, err
		}
		switch {
		case before == 0 && after > 0:
			out = append(out, types.Change{Row: c.Row, Diff: 1})
		case before > 0 && after == 0:
			out = append(out, types.Change{Row: c.Row, Diff: -1})
		}
	}
	return out, nil
}
