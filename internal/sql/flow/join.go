package flow

import (
	"encoding/binary"
	"fmt"
	"time"

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
// (L+dL)(R+dR) - LR = dL·R + (L+dL)·dR. Each side's changes are
// consolidated and taken join key by join key, so a key's state is
// read once per side per epoch, and a padded row is emitted or
// retracted only for a net change of the key's match count.
//
// State (side is 0 left, 1 right):
//
//	'r' side key(join key) key(row) -> count, row
//	'k' key(join key)               -> counts of the left's and the right's rows with that key
//	'e' side ...                    -> the side's rows by expiry (with Expire[side]; see JoinExpiry)
//
// Rows with a NULL key are not stored: they never match. The two
// sides' counts of a key are one value, so a side's step reads the
// other's count and its own in one read (a new key, most of an
// append-only input's, was two misses through every level).
//
// With Expire, a side's rows are forgotten at the end of the epoch
// whose watermark passes their expiry: in an inner join whose ON
// bounds the sides' times (the bounds a Filter after it) they could
// only pair with rows the filter drops; in any join whose keys equate
// the sides' times (a window join's window starts) no row to come has
// their key. An outer join's expiry must come from its keys alone: a
// forgotten row matching by key would leave a padded row wrong (an
// outer interval join, bounds in its residual, is a ResidualJoin).
type Join struct {
	Kind                  JoinKind
	LeftKey, RightKey     []int
	LeftWidth, RightWidth int
	// Expire[side], when set, frees the side's rows by the watermark.
	Expire [2][]JoinExpiry
}

func (j *Join) Arity() int { return 2 }

func (j *Join) validate() error {
	if len(j.LeftKey) != len(j.RightKey) || len(j.LeftKey) == 0 {
		return fmt.Errorf("flow: join on %d left and %d right columns", len(j.LeftKey), len(j.RightKey))
	}
	return nil
}

// joinScratch is a Join's per-epoch memory, kept in its Context.
type joinScratch struct {
	keyIdx  map[string]int // join key -> index in keys
	keys    []joinKey
	next    []int // the changes of a key, chained: next[i] is the key's change after change i, or -1
	matches []types.Change
	rows    rowSlab
	kbuf    []byte
	vbuf    []byte
	ebuf    []byte
	low     [2]expiryLow // each side's least expiry indexed this epoch
	cons    consolidator
}

// joinKey is the changes of one side with one join key in an epoch.
type joinKey struct {
	jk          string
	first, last int // indexes of its first and last change
}

func (j *Join) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	s, ok := ctx.scratch.(*joinScratch)
	if !ok || cap(s.next) > maxKeptScratch || cap(s.matches) > maxKeptScratch {
		s = &joinScratch{keyIdx: map[string]int{}}
		ctx.scratch = s
	}
	var out []types.Change
	s.low = [2]expiryLow{}
	for side := 0; side < 2; side++ {
		var err error
		if out, err = j.side(ctx.State, s, side, s.cons.consolidate(ins[side]), out); err != nil {
			return nil, err
		}
	}
	clear(s.matches)
	for side := range 2 {
		if len(j.Expire[side]) == 0 {
			continue
		}
		n, err := j.expire(ctx.State, s, side, ctx.InputWatermark, ctx.Watermark)
		if err != nil {
			return nil, err
		}
		ctx.Freed += n
	}
	return out, nil
}

// expire forgets the side's rows whose expiry the watermark passed,
// and lowers their keys' counts, returning how many rows (with
// multiplicity) it freed.
func (j *Join) expire(st Store, s *joinScratch, side int, before, wm time.Time) (int64, error) {
	gone, err := takeExpired(st, side, before, s.low[side], wm)
	if err != nil || len(gone) == 0 {
		return 0, err
	}
	var freed int64
	byKey := map[string]int64{}
	var keys []string
	for _, e := range gone {
		s.kbuf = append(append(append(s.kbuf[:0], 'r', byte(side)), e.jk...), e.row...)
		if err := st.Delete(s.kbuf); err != nil {
			return 0, err
		}
		if _, ok := byKey[e.jk]; !ok {
			keys = append(keys, e.jk)
		}
		byKey[e.jk] += e.n
		freed += e.n
	}
	for _, jk := range keys {
		counts, err := getCounts(st, countsKey(&s.kbuf, jk))
		if err != nil {
			return 0, err
		}
		before := counts[side]
		counts[side] -= byKey[jk]
		if counts[side] < 0 {
			return 0, fmt.Errorf("flow: join expiry: %w", ErrNegative)
		}
		if counts[side] != before {
			if err := setCounts(st, &s.kbuf, &s.vbuf, jk, counts); err != nil {
				return 0, err
			}
		}
	}
	return freed, nil
}

// joined is the output row of a left and a right row (nil: NULLs).
func (j *Join) joined(rows *rowSlab, side int, row, other types.Row) types.Row {
	out := rows.row(j.LeftWidth + j.RightWidth)
	l, r := row, other
	if side == 1 {
		l, r = other, row
	}
	copy(out, l)
	copy(out[j.LeftWidth:], r)
	return out
}

// side joins one side's consolidated changes with the other side's
// state and adds them to the side's state. The changes are taken key
// by key, so each join key's state (the other side's count and rows,
// this side's count) is read once, and this side's count written once.
func (j *Join) side(st Store, s *joinScratch, side int, changes []types.Change, out []types.Change) ([]types.Change, error) {
	keyCols, width := j.LeftKey, j.LeftWidth
	if side == 1 {
		keyCols, width = j.RightKey, j.RightWidth
	}
	other := 1 - side
	clear(s.keyIdx)
	s.keys = s.keys[:0]
	s.next = s.next[:0]
	for i, c := range changes {
		s.next = append(s.next, -1)
		if len(c.Row) != width {
			return nil, fmt.Errorf("flow: join input %d row of %d columns, want %d", side, len(c.Row), width)
		}
		if hasNull(c.Row, keyCols) {
			// A NULL key matches nothing and is not stored.
			if j.Kind.keeps(side) {
				out = append(out, types.Change{Row: j.joined(&s.rows, side, c.Row, nil), Diff: c.Diff})
			}
			continue
		}
		s.kbuf = appendKeyCols(s.kbuf[:0], c.Row, keyCols)
		if k, ok := s.keyIdx[string(s.kbuf)]; ok {
			s.next[s.keys[k].last] = i
			s.keys[k].last = i
			continue
		}
		s.keys = append(s.keys, joinKey{jk: string(s.kbuf), first: i, last: i})
		s.keyIdx[s.keys[len(s.keys)-1].jk] = len(s.keys) - 1
	}
	for _, k := range s.keys {
		counts, err := getCounts(st, countsKey(&s.kbuf, k.jk))
		if err != nil {
			return nil, err
		}
		otherCount, before := counts[other], counts[side]
		// The other side's rows with this key, read once: they pair
		// with this key's changes, and may lose or gain their
		// NULL-padded row.
		s.matches = s.matches[:0]
		if otherCount > 0 {
			err := scanPrefix(st, rowsPrefix(&s.kbuf, other, k.jk), false, func(_, v []byte) (bool, error) {
				n, row, err := decodeCounted(v)
				if err != nil {
					return false, err
				}
				s.matches = append(s.matches, types.Change{Row: row, Diff: n})
				return true, nil
			})
			if err != nil {
				return nil, err
			}
		}
		after := before
		for i := k.first; i >= 0; i = s.next[i] {
			c := changes[i]
			for _, m := range s.matches {
				out = append(out, types.Change{Row: j.joined(&s.rows, side, c.Row, m.Row), Diff: c.Diff * m.Diff})
			}
			if otherCount == 0 && j.Kind.keeps(side) {
				out = append(out, types.Change{Row: j.joined(&s.rows, side, c.Row, nil), Diff: c.Diff})
			}
			after += c.Diff
			s.kbuf = appendRowKey(rowsPrefix(&s.kbuf, side, k.jk), c.Row)
			if before == 0 && c.Diff > 0 {
				// The side held no row with this join key (its count is
				// their sum) and the changes are consolidated, so the
				// row is new: written without the read addCounted makes,
				// which for an append-only input is nearly every row's
				// and misses every level of the store.
				s.vbuf = types.AppendRow(binary.AppendVarint(s.vbuf[:0], c.Diff), c.Row)
				if err := st.Set(s.kbuf, s.vbuf); err != nil {
					return nil, err
				}
				if len(j.Expire[side]) > 0 {
					if err := setExpiry(st, &s.ebuf, &s.low[side], side, j.Expire[side], k.jk, c.Row, c.Diff); err != nil {
						return nil, err
					}
				}
				continue
			}
			rb, ra, err := addCounted(st, s.kbuf, c.Row, c.Diff, &s.vbuf)
			if err != nil {
				return nil, fmt.Errorf("flow: join: %w", err)
			}
			if len(j.Expire[side]) > 0 {
				switch {
				case ra > 0:
					err = setExpiry(st, &s.ebuf, &s.low[side], side, j.Expire[side], k.jk, c.Row, ra)
				case rb > 0:
					err = dropExpiry(st, &s.ebuf, side, j.Expire[side], k.jk, c.Row)
				}
				if err != nil {
					return nil, err
				}
			}
		}
		if after < 0 {
			return nil, fmt.Errorf("flow: join: %w", ErrNegative)
		}
		if after != before {
			counts[side] = after
			if err := setCounts(st, &s.kbuf, &s.vbuf, k.jk, counts); err != nil {
				return nil, err
			}
		}
		if j.Kind.keeps(other) && (before == 0) != (after == 0) {
			// The other side's rows with this key lose their padded
			// row (first match) or get it back (last match gone).
			sign := int64(-1)
			if after == 0 {
				sign = 1
			}
			for _, m := range s.matches {
				out = append(out, types.Change{Row: j.joined(&s.rows, other, m.Row, nil), Diff: sign * m.Diff})
			}
		}
	}
	return out, nil
}

// countsKey builds join key jk's key of both sides' counts in *buf,
// rowsPrefix a side's prefix of its rows with jk.
func countsKey(buf *[]byte, jk string) []byte {
	*buf = append(append((*buf)[:0], 'k'), jk...)
	return *buf
}

func rowsPrefix(buf *[]byte, side int, jk string) []byte {
	*buf = append(append((*buf)[:0], 'r', byte(side)), jk...)
	return *buf
}

// getCounts reads the left's and the right's counts of a join key
// (missing: both 0).
func getCounts(st Reader, key []byte) ([2]int64, error) {
	v, ok, err := st.Get(key)
	if err != nil || !ok {
		return [2]int64{}, err
	}
	l, n := binary.Varint(v)
	if n <= 0 {
		return [2]int64{}, fmt.Errorf("flow: %w: join counts", types.ErrCorrupt)
	}
	r, m := binary.Varint(v[n:])
	if m <= 0 || n+m != len(v) || l < 0 || r < 0 {
		return [2]int64{}, fmt.Errorf("flow: %w: join counts", types.ErrCorrupt)
	}
	return [2]int64{l, r}, nil
}

// setCounts writes jk's counts; both 0 deletes the key.
func setCounts(st Store, kbuf, vbuf *[]byte, jk string, counts [2]int64) error {
	key := countsKey(kbuf, jk)
	if counts == [2]int64{} {
		return st.Delete(key)
	}
	*vbuf = binary.AppendVarint(binary.AppendVarint((*vbuf)[:0], counts[0]), counts[1])
	return st.Set(key, *vbuf)
}
