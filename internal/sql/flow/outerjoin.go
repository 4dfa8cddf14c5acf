package flow

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/sql/types"
)

// ResidualJoin is an outer equi-join whose ON has terms beside the
// equalities: rows of input 0 (left) and input 1 (right) with equal
// keys match when Residual, over the joined row (left then right), is
// true; a row of a kept side (Kind) with no match is emitted padded
// with NULLs. An inner join needs none of this (its residual is a
// filter after Join); an outer join does, since whether a row is
// padded depends on the residual.
//
// Each kept side's rows carry their match count (the other side's rows,
// with multiplicity, the residual passes), so a change on one side
// updates the counts of the other side's rows with its key, and a
// count going to or from zero retracts or emits their padded rows.
// Within an epoch, as Join: the left changes meet the right state as
// it was, then the right changes the left state as updated. A change
// costs a residual evaluation per row of the other side with its key.
//
// State (side is 0 left, 1 right):
//
//	'r' side key(join key) key(row) -> count, row
//	'm' side key(join key) key(row) -> match count (kept sides only)
//	'e' side ...                    -> the side's rows by expiry (with Expire[side]; see JoinExpiry)
//
// Rows with a NULL key are not stored: they never match.
//
// With Expire (the residual bounds the sides' times), a side's rows are
// forgotten at the end of the epoch whose watermark passes their
// expiry, with their match counts: no row to come can match them, so a
// kept row's padded row, emitted or not, is final, as a batch query
// over the same records would have it.
type ResidualJoin struct {
	Kind                  JoinKind
	LeftKey, RightKey     []int
	LeftWidth, RightWidth int
	Residual              Expr
	// Expire[side], when set, frees the side's rows by the watermark.
	Expire [2][]JoinExpiry
}

func (j *ResidualJoin) Arity() int { return 2 }

func (j *ResidualJoin) validate() error {
	if len(j.LeftKey) != len(j.RightKey) || len(j.LeftKey) == 0 || j.Residual == nil {
		return fmt.Errorf("flow: residual join on %d left and %d right columns", len(j.LeftKey), len(j.RightKey))
	}
	return nil
}

func (j *ResidualJoin) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	var out []types.Change
	var low [2]expiryLow // each side's least expiry indexed this epoch
	for side := range 2 {
		var err error
		if out, err = j.side(ctx.State, side, consolidate(ins[side]), &low[side], out); err != nil {
			return nil, err
		}
	}
	for side := range 2 {
		if len(j.Expire[side]) == 0 {
			continue
		}
		n, err := j.expire(ctx.State, side, ctx.InputWatermark, low[side], ctx.Watermark)
		if err != nil {
			return nil, err
		}
		ctx.Freed += n
	}
	return out, nil
}

// expire forgets the side's rows (and match counts) whose expiry the
// watermark passed, returning how many rows (with multiplicity).
func (j *ResidualJoin) expire(st Store, side int, before time.Time, low expiryLow, wm time.Time) (int64, error) {
	gone, err := takeExpired(st, side, before, low, wm)
	if err != nil {
		return 0, err
	}
	var freed int64
	var kbuf []byte
	for _, e := range gone {
		kbuf = append(append(append(kbuf[:0], 'r', byte(side)), e.jk...), e.row...)
		if err := st.Delete(kbuf); err != nil {
			return 0, err
		}
		if j.Kind.keeps(side) {
			kbuf[0] = 'm'
			if err := st.Delete(kbuf); err != nil {
				return 0, err
			}
		}
		freed += e.n
	}
	return freed, nil
}

func (j *ResidualJoin) joined(side int, row, other types.Row) types.Row {
	out := make(types.Row, j.LeftWidth+j.RightWidth)
	l, r := row, other
	if side == 1 {
		l, r = other, row
	}
	copy(out, l)
	copy(out[j.LeftWidth:], r)
	return out
}

// matched is one row of the other side with its key: its count, and
// how its match count changes in this step.
type matched struct {
	row   types.Row
	n     int64
	delta int64
}

func (j *ResidualJoin) side(st Store, side int, changes []types.Change, low *expiryLow, out []types.Change) ([]types.Change, error) {
	keyCols, width := j.LeftKey, j.LeftWidth
	if side == 1 {
		keyCols, width = j.RightKey, j.RightWidth
	}
	other := 1 - side
	byKey := map[string][]types.Change{}
	var keys []string
	for _, c := range changes {
		if len(c.Row) != width {
			return nil, fmt.Errorf("flow: join input %d row of %d columns, want %d", side, len(c.Row), width)
		}
		if hasNull(c.Row, keyCols) {
			if j.Kind.keeps(side) {
				out = append(out, types.Change{Row: j.joined(side, c.Row, nil), Diff: c.Diff})
			}
			continue
		}
		k := string(appendKeyCols(nil, c.Row, keyCols))
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	var kbuf, vbuf, ebuf []byte
	for _, jk := range keys {
		var others []matched
		err := scanPrefix(st, append([]byte{'r', byte(other)}, jk...), false, func(_, v []byte) (bool, error) {
			n, row, err := decodeCounted(v)
			if err != nil {
				return false, err
			}
			others = append(others, matched{row: row, n: n})
			return true, nil
		})
		if err != nil {
			return nil, err
		}
		for _, c := range byKey[jk] {
			var mc int64 // the row's match count
			for i := range others {
				y := &others[i]
				row := j.joined(side, c.Row, y.row)
				ok, err := j.Residual(row)
				if err != nil {
					return nil, err
				}
				if b, _ := ok.(bool); !b {
					continue
				}
				out = append(out, types.Change{Row: row, Diff: c.Diff * y.n})
				mc += y.n
				y.delta += c.Diff
			}
			if mc == 0 && j.Kind.keeps(side) {
				out = append(out, types.Change{Row: j.joined(side, c.Row, nil), Diff: c.Diff})
			}
			kbuf = appendRowKey(append(append(kbuf[:0], 'r', byte(side)), jk...), c.Row)
			before, after, err := addCounted(st, kbuf, c.Row, c.Diff, &vbuf)
			if err != nil {
				return nil, fmt.Errorf("flow: join: %w", err)
			}
			if len(j.Expire[side]) > 0 {
				switch {
				case after > 0:
					err = setExpiry(st, &ebuf, low, side, j.Expire[side], jk, c.Row, after)
				case before > 0:
					err = dropExpiry(st, &ebuf, side, j.Expire[side], jk, c.Row)
				}
				if err != nil {
					return nil, err
				}
			}
			if j.Kind.keeps(side) {
				kbuf[0] = 'm'
				if after == 0 {
					err = st.Delete(kbuf)
				} else {
					err = st.Set(kbuf, binary.AppendVarint(vbuf[:0], mc))
				}
				if err != nil {
					return nil, err
				}
			}
		}
		if !j.Kind.keeps(other) {
			continue
		}
		for _, y := range others {
			if y.delta == 0 {
				continue
			}
			kbuf = appendRowKey(append(append(kbuf[:0], 'm', byte(other)), jk...), y.row)
			before, after, err := addCount(st, kbuf, y.delta)
			if err != nil {
				return nil, fmt.Errorf("flow: join match count: %w", err)
			}
			switch {
			case before == 0 && after > 0:
				out = append(out, types.Change{Row: j.joined(other, y.row, nil), Diff: -y.n})
			case before > 0 && after == 0:
				out = append(out, types.Change{Row: j.joined(other, y.row, nil), Diff: y.n})
			}
		}
	}
	return out, nil
}
