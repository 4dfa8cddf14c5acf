package flow

import (
	"encoding/binary"
	"fmt"

	"github.com/strandkafka/strand/internal/sql/types"
)

// SetOp is INTERSECT or EXCEPT [ALL] of input 0 (left) and input 1
// (right), rows of the same columns. A row's copies in the output
// follow from its counts l and r on the two sides, as SQL's:
//
//	INTERSECT ALL  min(l, r)        INTERSECT  1 if l > 0 and r > 0
//	EXCEPT ALL     max(l - r, 0)    EXCEPT     1 if l > 0 and r = 0
//
// Per epoch each changed row's counts are read once, and the change of
// its output count emitted, so a row deleted on the right of an EXCEPT
// comes back exactly. NULLs are equal here, as in SQL's set
// operations.
//
// State: key(row) -> count l, count r (varints), row.
type SetOp struct {
	Intersect, All bool
}

func (*SetOp) Arity() int { return 2 }

// copies is the output count of a row counted l and r times.
func (o *SetOp) copies(l, r int64) int64 {
	switch {
	case o.Intersect && o.All:
		return min(l, r)
	case o.Intersect:
		if l > 0 && r > 0 {
			return 1
		}
	case o.All:
		return max(l-r, 0)
	case l > 0 && r == 0:
		return 1
	}
	return 0
}

func (o *SetOp) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	type delta struct {
		row  types.Row
		l, r int64
	}
	idx := map[string]int{}
	var ds []delta
	var key []byte
	for side := range 2 {
		for _, c := range consolidate(ins[side]) {
			key = appendRowKey(key[:0], c.Row)
			i, ok := idx[string(key)]
			if !ok {
				i = len(ds)
				idx[string(key)] = i
				ds = append(ds, delta{row: c.Row})
			}
			if side == 0 {
				ds[i].l += c.Diff
			} else {
				ds[i].r += c.Diff
			}
		}
	}
	st := ctx.State
	var out []types.Change
	var vbuf []byte
	for _, d := range ds {
		if d.l == 0 && d.r == 0 {
			continue
		}
		key = appendRowKey(key[:0], d.row)
		var l, r int64
		row := d.row
		v, ok, err := st.Get(key)
		if err != nil {
			return nil, err
		}
		if ok {
			if l, r, row, err = decodeSetCounts(v); err != nil {
				return nil, err
			}
		}
		nl, nr := l+d.l, r+d.r
		if nl < 0 || nr < 0 {
			return nil, fmt.Errorf("flow: set operation: %w", ErrNegative)
		}
		if nl == 0 && nr == 0 {
			err = st.Delete(key)
		} else {
			vbuf = binary.AppendVarint(binary.AppendVarint(vbuf[:0], nl), nr)
			err = st.Set(key, types.AppendRow(vbuf, row))
		}
		if err != nil {
			return nil, err
		}
		if diff := o.copies(nl, nr) - o.copies(l, r); diff != 0 {
			out = append(out, types.Change{Row: row, Diff: diff})
		}
	}
	return out, nil
}

func decodeSetCounts(b []byte) (l, r int64, row types.Row, err error) {
	l, k := binary.Varint(b)
	if k <= 0 {
		return 0, 0, nil, fmt.Errorf("flow: %w: set counts", types.ErrCorrupt)
	}
	r, k2 := binary.Varint(b[k:])
	if k2 <= 0 {
		return 0, 0, nil, fmt.Errorf("flow: %w: set counts", types.ErrCorrupt)
	}
	row, _, err = types.DecodeRow(b[k+k2:])
	return l, r, row, err
}
