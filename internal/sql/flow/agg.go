package flow

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/sql/types"
)

// AggKind is an aggregate function.
type AggKind uint8

const (
	CountStar     AggKind = iota // COUNT(*): int8
	Count                        // COUNT(x): int8, non-NULL x
	Sum                          // SUM(x): int8 of int2/int4, numeric of int8/numeric, float4/8 of float4/8
	Avg                          // AVG(x): numeric of integers and numeric, float8 of floats
	Min                          // MIN(x)
	Max                          // MAX(x)
	CountDistinct                // COUNT(DISTINCT x): int8
	BoolAnd                      // bool_and(x)
	BoolOr                       // bool_or(x)
	StringAgg                    // string_agg(x, Delim ORDER BY Order): text
	VarSamp                      // var_samp(x): numeric of integers and numeric, float8 of floats
	VarPop                       // var_pop(x): as VarSamp
	StddevSamp                   // stddev_samp(x): as VarSamp
	StddevPop                    // stddev_pop(x): as VarSamp
)

// AggCall is one aggregate over input column Col (ignored for
// CountStar).
type AggCall struct {
	Kind AggKind
	Col  int
	// Delim is StringAgg's delimiter column; Order its ORDER BY inside
	// the call (values tying on it are ordered by value, then
	// delimiter, so the result is deterministic).
	Delim int
	Order []SortKey
}

// variance reports whether k is of the variance family.
func (k AggKind) variance() bool { return k >= VarSamp && k <= StddevPop }

// maxAggs bounds an aggregate's calls: the call's number is a byte of
// its set keys.
const maxAggs = 255

// WindowPolicy makes an Aggregate windowed on event time: its first
// group column (GroupBy[0]) is a window start (from Tumble or Hop) and
// windows last Size, or, with Size 0, a window's end (a Session's,
// whose windows have no one size). A window closes when the watermark reaches its end
// plus Lateness; a record for a closed window is late: dropped and
// counted (Context.Late, NodeStats.Late), as is a record without a
// window (a NULL time). An epoch's records are judged against the
// watermark before the epoch (Context.InputWatermark). A closed window's state is freed. With
// EmitOnClose the window's rows are held until it closes and emitted
// once, final; otherwise they are emitted as they change (and stay in
// the view after it closes).
type WindowPolicy struct {
	Size        time.Duration
	Lateness    time.Duration
	EmitOnClose bool
}

// Aggregate is a hash aggregate (GROUP BY GroupBy) with retractable
// aggregates. Its output row is the group's values then each call's
// result. Per epoch it emits, for each group whose result changed, the
// old row retracted and the new one inserted; a group whose rows all
// went away is retracted. Without GroupBy it is a global aggregate: one
// row always, over no input COUNT 0 and the others NULL, as SQL's.
// HAVING is a Filter on its output.
//
// Retractions are exact: COUNT, SUM and AVG keep sums and counts (the
// infinities and NaNs of floats and numerics counted apart, so that
// retracting an infinity restores a finite sum); MIN and MAX keep the
// multiset of the group's values in order, so retracting the minimum
// finds the next one; COUNT(DISTINCT) keeps each value's count;
// string_agg keeps the multiset of (order keys, value, delimiter) in
// its order and rebuilds a changed group's string from it (a cost of
// the group's size per changed group and epoch); the variance family
// keeps the count, the sum and the sum of squares as exact numerics
// (a float's shortest decimal), so a retraction leaves no rounding
// behind, and computes the result from them (over floats, rounded to
// float8 once, at the end).
// Float sums are float64 sums: retraction is exact up to float
// rounding, and a group whose non-NULL count returns to zero restarts
// from an exact zero.
//
// State:
//
//	'g' key(group)                         -> uvarint calls, varint rows,
//	                                          group values (types.AppendRow),
//	                                          each call's accumulator (see accumulator.append)
//	'x' call(1 byte) key(group) key(value) -> count, [value]
//	                                          (MIN/MAX multisets, COUNT(DISTINCT) sets;
//	                                          MIN and MAX of one column share the
//	                                          first one's)
//	'x' call(1 byte) key(group) sortkey(order) key(value) key(delim)
//	                                       -> count, [value, delim] (string_agg)
type Aggregate struct {
	GroupBy []int
	Aggs    []AggCall
	Window  *WindowPolicy
}

func (a *Aggregate) Arity() int { return 1 }

// setOf is the call whose multiset call i uses: MIN and MAX of one
// column share one (the first such call's), so it is kept once.
func (a *Aggregate) setOf(i int) int {
	call := a.Aggs[i]
	if call.Kind != Min && call.Kind != Max {
		return i
	}
	for j, c := range a.Aggs[:i] {
		if (c.Kind == Min || c.Kind == Max) && c.Col == call.Col {
			return j
		}
	}
	return i
}

func (a *Aggregate) validate() error {
	if len(a.Aggs) > maxAggs {
		return fmt.Errorf("flow: %d aggregates, at most %d", len(a.Aggs), maxAggs)
	}
	if a.Window != nil {
		if len(a.GroupBy) == 0 {
			return fmt.Errorf("flow: a windowed aggregate groups by its window start first")
		}
		if a.Window.Size < 0 || a.Window.Lateness < 0 {
			return fmt.Errorf("flow: window size %v and lateness %v", a.Window.Size, a.Window.Lateness)
		}
	}
	return nil
}

// usesSet reports whether a call keeps values under 'x'.
func (k AggKind) usesSet() bool { return k == Min || k == Max || k == CountDistinct || k == StringAgg }

// group is a group's state while an epoch changes it.
type group struct {
	key    string // key(group), without the 'g'
	vals   types.Row
	rows   int64
	accs   []accumulator
	old    types.Row // the result before the epoch; nil if none
	exists bool      // had state before the epoch
	// rescan marks MIN/MAX calls whose extreme was retracted: the next
	// one is read from the multiset.
	rescan []bool
}

// setDelta is an epoch's net change to one value's count in a call's
// multiset ('x' key), applied to the state once, after the epoch's
// changes are summed: a value inserted and deleted in one epoch never
// touches the state.
type setDelta struct {
	key  string // the whole 'x' key
	grp  int    // index of the group in aggScratch.groups
	call int
	v    any
	row  types.Row // string_agg's [value, delim]; else the row is [v]
	d    int64
}

// aggScratch is an Aggregate's per-epoch memory, kept in its Context
// so that an epoch allocates no maps, slabs or buffers anew.
type aggScratch struct {
	index  map[string]int // group key -> index in groups
	groups []group
	accs   []accumulator  // slab of the groups' accumulators
	rescan []bool         // slab of the groups' rescan flags
	setIdx map[string]int // 'x' key -> index in sets
	sets   []setDelta
	rows   rowSlab
	kbuf   []byte
	vbuf   []byte
	row1   [1]any // a multiset's value as a row
}

func (a *Aggregate) scratch(ctx *Context) *aggScratch {
	s, ok := ctx.scratch.(*aggScratch)
	if !ok || cap(s.groups) > maxKeptScratch || cap(s.sets) > maxKeptScratch || cap(s.accs) > maxKeptScratch {
		s = &aggScratch{index: map[string]int{}, setIdx: map[string]int{}}
		ctx.scratch = s
	}
	clear(s.index)
	clear(s.setIdx)
	clear(s.groups) // drop the last epoch's rows for the collector
	clear(s.sets)
	s.groups, s.accs, s.rescan, s.sets = s.groups[:0], s.accs[:0], s.rescan[:0], s.sets[:0]
	return s
}

func (a *Aggregate) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	global := len(a.GroupBy) == 0
	if len(ins[0]) == 0 && !(global && ctx.First) && a.Window == nil {
		return nil, nil
	}
	st := ctx.State
	s := a.scratch(ctx)
	// load returns the index of the group of key (its state read once
	// per epoch, the first time the epoch touches it).
	load := func(key []byte, row types.Row) (int, error) {
		if i, ok := s.index[string(key)]; ok {
			return i, nil
		}
		n := len(a.Aggs)
		s.accs = append(s.accs, make([]accumulator, n)...)
		s.rescan = append(s.rescan, make([]bool, n)...)
		s.groups = append(s.groups, group{key: string(key), accs: s.accs[len(s.accs)-n:], rescan: s.rescan[len(s.rescan)-n:]})
		i := len(s.groups) - 1
		g := &s.groups[i]
		s.kbuf = append(append(s.kbuf[:0], 'g'), key...)
		v, ok, err := st.Get(s.kbuf)
		if err != nil {
			return 0, err
		}
		if ok {
			if err := a.decodeGroup(g, v); err != nil {
				return 0, err
			}
			g.exists = true
		} else {
			g.vals = s.rows.row(len(a.GroupBy))
			for j, c := range a.GroupBy {
				g.vals[j] = row[c]
			}
		}
		if g.exists || (global && !ctx.First) {
			if g.old, err = a.result(st, g, &s.rows); err != nil {
				return 0, err
			}
		}
		s.index[g.key] = i
		return i, nil
	}
	if global && ctx.First {
		if _, err := load(nil, nil); err != nil {
			return nil, err
		}
	}
	var key []byte
	for _, c := range ins[0] {
		if a.Window != nil && a.late(ctx, c.Row) {
			ctx.Late += abs64(c.Diff)
			continue
		}
		key = appendKeyCols(key[:0], c.Row, a.GroupBy)
		gi, err := load(key, c.Row)
		if err != nil {
			return nil, err
		}
		g := &s.groups[gi]
		g.rows += c.Diff
		for i, call := range a.Aggs {
			if call.Kind == CountStar {
				continue
			}
			v := c.Row[call.Col]
			if v == nil {
				continue
			}
			acc := &g.accs[i]
			if call.Kind == Min || call.Kind == Max {
				if acc.extreme(call.Kind, v, c.Diff) {
					g.rescan[i] = true
				}
				if a.setOf(i) != i {
					continue // the shared multiset was updated for an earlier call
				}
			}
			if call.Kind.usesSet() {
				s.kbuf = append(append(s.kbuf[:0], 'x', byte(i)), g.key...)
				var row types.Row
				if call.Kind == StringAgg {
					row = types.Row{v, c.Row[call.Delim]}
					s.kbuf = appendSortKey(s.kbuf, c.Row, call.Order)
					s.kbuf = types.AppendKey(s.kbuf, row[1])
				}
				s.kbuf = types.AppendKey(s.kbuf, v)
				if j, ok := s.setIdx[string(s.kbuf)]; ok {
					s.sets[j].d += c.Diff
				} else {
					s.sets = append(s.sets, setDelta{key: string(s.kbuf), grp: gi, call: i, v: v, row: row, d: c.Diff})
					s.setIdx[s.sets[len(s.sets)-1].key] = len(s.sets) - 1
				}
				if call.Kind == CountDistinct {
					continue // counted as the multiset changes, below
				}
				if call.Kind == StringAgg {
					// The string is rebuilt from the multiset once it
					// has the epoch's changes.
					g.rescan[i] = true
				}
			}
			if err := acc.add(call.Kind, v, c.Diff); err != nil {
				return nil, err
			}
		}
	}
	// The multisets' net changes, before any result: a retracted
	// extreme's successor is read from them.
	for i := range s.sets {
		x := &s.sets[i]
		if x.d == 0 {
			continue
		}
		s.kbuf = append(s.kbuf[:0], x.key...)
		s.row1[0] = x.v
		row := s.row1[:]
		if x.row != nil {
			row = x.row
		}
		before, after, err := addCounted(st, s.kbuf, row, x.d, &s.vbuf)
		if err != nil {
			return nil, err
		}
		if a.Aggs[x.call].Kind == CountDistinct {
			acc := &s.groups[x.grp].accs[x.call]
			if before == 0 && after > 0 {
				acc.n++
			} else if before > 0 && after == 0 {
				acc.n--
			}
		}
	}
	var out []types.Change
	for gi := range s.groups {
		g := &s.groups[gi]
		if g.rows < 0 {
			return nil, fmt.Errorf("flow: aggregate: %w", ErrNegative)
		}
		s.kbuf = append(append(s.kbuf[:0], 'g'), g.key...)
		var nw types.Row
		if g.rows == 0 && !global {
			if err := st.Delete(s.kbuf); err != nil {
				return nil, err
			}
		} else {
			// The result first: it settles rescanned extremes, which
			// the state keeps.
			var err error
			if nw, err = a.result(st, g, &s.rows); err != nil {
				return nil, err
			}
			s.vbuf = a.appendGroup(s.vbuf[:0], g)
			if err := st.Set(s.kbuf, s.vbuf); err != nil {
				return nil, err
			}
		}
		if a.Window != nil && a.Window.EmitOnClose {
			continue
		}
		if g.old != nil && nw != nil && types.CompareRows(g.old, nw) == 0 {
			continue
		}
		if g.old != nil {
			out = append(out, types.Change{Row: g.old, Diff: -1})
		}
		if nw != nil {
			out = append(out, types.Change{Row: nw, Diff: 1})
		}
	}
	if a.Window != nil {
		closed, err := a.closeWindows(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, closed...)
	}
	return out, nil
}

// late reports whether row belongs to no window or to a closed one.
func (a *Aggregate) late(ctx *Context, row types.Row) bool {
	start, ok := row[a.GroupBy[0]].(time.Time)
	if !ok {
		return true
	}
	return !start.Add(a.Window.Size + a.Window.Lateness).After(ctx.InputWatermark)
}

// closeWindows frees the state of every window the watermark closed,
// emitting their rows first in EmitOnClose mode. Group keys begin with
// the window start, so the closed windows are a prefix of the 'g' keys.
func (a *Aggregate) closeWindows(ctx *Context) ([]types.Change, error) {
	if ctx.Watermark.IsZero() {
		return nil, nil
	}
	st := ctx.State
	bound := ctx.Watermark.Add(-a.Window.Size - a.Window.Lateness)
	upper := prefixEnd(types.AppendKey([]byte{'g'}, bound))
	var closed []*group
	err := st.Scan([]byte{'g'}, upper, false, func(k, v []byte) (bool, error) {
		if start, _, err := types.DecodeKey(k[1:], types.Timestamp); err != nil {
			return false, err
		} else if t, ok := start.(time.Time); !ok || t.After(bound) {
			return true, nil
		}
		g := &group{key: string(k[1:]), accs: make([]accumulator, len(a.Aggs))}
		if err := a.decodeGroup(g, v); err != nil {
			return false, err
		}
		closed = append(closed, g)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	var out []types.Change
	for _, g := range closed {
		if a.Window.EmitOnClose && g.rows > 0 {
			row, err := a.result(st, g, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, types.Change{Row: row, Diff: 1})
		}
		if err := st.Delete(append([]byte{'g'}, g.key...)); err != nil {
			return nil, err
		}
		for i, call := range a.Aggs {
			if !call.Kind.usesSet() || a.setOf(i) != i {
				continue
			}
			var keys [][]byte
			err := scanPrefix(st, append([]byte{'x', byte(i)}, g.key...), false, func(k, _ []byte) (bool, error) {
				keys = append(keys, append([]byte(nil), k...))
				return true, nil
			})
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				if err := st.Delete(k); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

func (a *Aggregate) appendGroup(b []byte, g *group) []byte {
	b = binary.AppendUvarint(b, uint64(len(a.Aggs)))
	b = binary.AppendVarint(b, g.rows)
	b = types.AppendRow(b, g.vals)
	for i := range g.accs {
		b = g.accs[i].append(b, a.Aggs[i].Kind)
	}
	return b
}

func (a *Aggregate) decodeGroup(g *group, b []byte) error {
	n, k := binary.Uvarint(b)
	if k <= 0 || n != uint64(len(a.Aggs)) {
		return fmt.Errorf("flow: %w: aggregate group of %d calls, want %d", types.ErrCorrupt, n, len(a.Aggs))
	}
	b = b[k:]
	rows, k := binary.Varint(b)
	if k <= 0 {
		return fmt.Errorf("flow: %w: group rows", types.ErrCorrupt)
	}
	g.rows = rows
	var err error
	if g.vals, b, err = types.DecodeRow(b[k:]); err != nil {
		return err
	}
	for i := range g.accs {
		if b, err = g.accs[i].decode(b, a.Aggs[i].Kind); err != nil {
			return err
		}
	}
	return nil
}

// result is the group's output row: its values, then each call's.
func (a *Aggregate) result(st Reader, g *group, rows *rowSlab) (types.Row, error) {
	row := rows.row(len(g.vals) + len(a.Aggs))[:0]
	row = append(row, g.vals...)
	for i, call := range a.Aggs {
		acc := &g.accs[i]
		var v any
		var err error
		switch call.Kind {
		case CountStar:
			v = g.rows
		case Count, CountDistinct:
			v = acc.n
		case Sum:
			v, err = acc.sumResult()
		case Avg:
			v, err = acc.avgResult()
		case Min, Max:
			if g.rescan != nil && g.rescan[i] {
				acc.sum, err = extreme(st, byte(a.setOf(i)), g.key, call.Kind == Max)
				g.rescan[i] = false
			}
			v = acc.sum
		case BoolAnd:
			if acc.t+acc.f > 0 {
				v = acc.f == 0
			}
		case BoolOr:
			if acc.t+acc.f > 0 {
				v = acc.t > 0
			}
		case StringAgg:
			if g.rescan != nil && g.rescan[i] {
				acc.sum, err = stringAgg(st, byte(i), g.key)
				g.rescan[i] = false
			}
			v = acc.sum
		case VarSamp, VarPop, StddevSamp, StddevPop:
			v, err = acc.varianceResult(call.Kind)
		}
		if err != nil {
			return nil, err
		}
		row = append(row, v)
	}
	return row, nil
}

// extreme is the first (MIN) or last (MAX) value of a call's multiset.
func extreme(st Reader, call byte, gkey string, last bool) (any, error) {
	var v any
	err := scanPrefix(st, append([]byte{'x', call}, gkey...), last, func(_, val []byte) (bool, error) {
		_, row, err := decodeCounted(val)
		if err != nil {
			return false, err
		}
		if len(row) != 1 {
			return false, fmt.Errorf("flow: %w: aggregate value", types.ErrCorrupt)
		}
		v = row[0]
		return false, nil
	})
	return v, err
}
