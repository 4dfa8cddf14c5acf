package flow

import (
	"fmt"

	"github.com/strandkafka/strand/internal/sql/types"
)

// JoinKind is which sides' unmatched rows a Join keeps.
type JoinKind uint8

const (
	InnerJoin JoinKind = iota
	LeftJoin
	RightJoin
	FullJoin
)

func (k JoinKind) keeps(side int) bool {
	if side == 0 {
		return k == LeftJoin || k == FullJoin
	}
	return k == RightJoin || k == FullJoin
}

// Join is an equi-join of input 0 (left, LeftWidth columns) and input 1
// (right, RightWidth columns) on LeftKey[i] = RightKey[i]; its row is
// the left row then the right row. A NULL key matches nothing. Outer
// joins emit an unmatched row of a kept side padded with NULLs, and
// retract it when its first match arrives (and re-emit it when its last
// match goes). The planner casts both sides' keys to one type first.
//
// Within an epoch the left changes are joined with the right state as
// it was, then the right changes with the left state as updated:
// (L+dL)(R+dR) - LR = dL·R + (L+dL)·dR.
//
// State (side is 0 left, 1 right):
//
//	'r' side key(join key) key(row) -> count, row
//	'c' side key(join key)          -> count of the side's rows with that key
//
// Rows with a NULL key are not stored: they never match.
type Join struct {
	Kind                  JoinKind
	LeftKey, RightKey     []int
	LeftWidth, RightWidth int
}

func (j *Join) Arity() int { return 2 }

func (j *Join) validate() error {
	if len(j.LeftKey) != len(j.RightKey) || len(j.LeftKey) == 0 {
		return fmt.Errorf("flow: join on %d left and %d right columns", len(j.LeftKey), len(j.RightKey))
	}
	return nil
}

func (j *Join) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	var out []types.Change
	for side := 0; side < 2; side++ {
		for _, c := range consolidate(ins[side]) {
			var err error
			if out, err = j.change(ctx.State, side, c, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// joined is the output row of a left and a right row (nil: NULLs).
func (j *Join) joined(side int, row, other types.Row) types.Row {
	out := make(types.Row, j.LeftWidth+j.RightWidth)
	l, r := row, other
	if side == 1 {
		l, r = other, row
	}
	copy(out, l)
	copy(out[j.LeftWidth:], r)
	return out
}

func (j *Join) change(st Store, side int, c types.Change, out []types.Change) ([]types.Change, error) {
	keyCols, width := j.LeftKey, j.LeftWidth
	if side == 1 {
		keyCols, width = j.RightKey, j.RightWidth
	}
	if len(c.Row) != width {
		return nil, fmt.Errorf("flow: join input %d row of %d columns, want %d", side, len(c.Row), width)
	}
	other := 1 - side
	if hasNull(c.Row, keyCols) {
		if j.Kind.keeps(side) {
			out = append(out, types.Change{Row: j.joined(side, c.Row, nil), Diff: c.Diff})
		}
		return out, nil
	}
	jk := appendKeyCols(nil, c.Row, keyCols)
	otherCount, err := getCount(st, countKey(other, jk))
	if err != nil {
		return nil, err
	}
	// The other side's rows with this key, read once: they pair with
	// this change, and may lose or gain their NULL-padded row.
	var matches []types.Change
	if otherCount > 0 {
		err := scanPrefix(st, rowsPrefix(other, jk), false, func(_, v []byte) (bool, error) {
			n, row, err := decodeCounted(v)
			if err != nil {
				return false, err
			}
			matches = append(matches, types.Change{Row: row, Diff: n})
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, m := range matches {
		out = append(out, types.Change{Row: j.joined(side, c.Row, m.Row), Diff: c.Diff * m.Diff})
	}
	if otherCount == 0 && j.Kind.keeps(side) {
		out = append(out, types.Change{Row: j.joined(side, c.Row, nil), Diff: c.Diff})
	}
	before, after, err := addCount(st, countKey(side, jk), c.Diff)
	if err != nil {
		return nil, fmt.Errorf("flow: join: %w", err)
	}
	if j.Kind.keeps(other) && (before == 0) != (after == 0) {
		// The other side's rows with this key lose their padded row
		// (first match) or get it back (last match gone).
		sign := int64(-1)
		if after == 0 {
			sign = 1
		}
		for _, m := range matches {
			out = append(out, types.Change{Row: j.joined(other, m.Row, nil), Diff: sign * m.Diff})
		}
	}
	if _, err := addCounted(st, appendRowKey(rowsPrefix(side, jk), c.Row), c.Row, c.Diff); err != nil {
		return nil, fmt.Errorf("flow: join: %w", err)
	}
	return out, nil
}

func countKey(side int, jk []byte) []byte { return append([]byte{'c', byte(side)}, jk...) }
func rowsPrefix(side int, jk []byte) []byte {
	return append(append(make([]byte, 0, 2+len(jk)+32), 'r', byte(side)), jk...)
}
