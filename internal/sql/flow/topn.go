package flow

import (
	"fmt"

	"github.com/strandkafka/strand/internal/sql/types"
)

// Nulls says where NULLs sort.
type Nulls uint8

const (
	// NullsDefault is PostgreSQL's: last ascending, first descending.
	NullsDefault Nulls = iota
	NullsFirst
	NullsLast
)

// SortKey is one ORDER BY term.
type SortKey struct {
	Col   int
	Desc  bool
	Nulls Nulls
}

// appendSortKey appends an encoding of row's sort keys whose bytes
// order as ORDER BY does: the key encoding, complemented for DESC
// (the encodings are prefix-free, so the complement reverses their
// order), behind a byte placing NULLs first or last.
func appendSortKey(b []byte, row types.Row, keys []SortKey) []byte {
	for _, k := range keys {
		nullsFirst := k.Nulls == NullsFirst || (k.Nulls == NullsDefault && k.Desc)
		v := row[k.Col]
		switch {
		case v == nil && nullsFirst:
			b = append(b, 0)
			continue
		case v == nil:
			b = append(b, 2)
			continue
		}
		b = append(b, 1)
		n := len(b)
		b = types.AppendKey(b, v)
		if k.Desc {
			for i := n; i < len(b); i++ {
				b[i] = ^b[i]
			}
		}
	}
	return b
}

// maxTopN bounds Offset+Limit: a changed partition's top rows are read
// into memory.
const maxTopN = 100_000

// TopN keeps, per partition (PARTITION BY PartitionBy), the rows ranked
// Offset+1 to Offset+Limit by OrderBy (ROW_NUMBER() OVER (... ORDER BY
// ...) BETWEEN Offset+1 AND Offset+Limit; no PartitionBy is a global
// ORDER BY ... LIMIT ... OFFSET). Rows tying on OrderBy are ranked by
// the whole row's key encoding, so the ranking is deterministic. With
// RowNumber the output row gets its rank (int8) appended, and a rank
// change retracts and re-inserts the row.
//
// It is exact under deletes: the partition's rows are all kept in
// order, so when a row leaves the top the next one enters. Per epoch,
// each changed partition's top is read before and after the changes and
// the difference emitted.
//
// State:
//
//	key(partition) sortkey(row) key(row) -> count, row
type TopN struct {
	PartitionBy []int
	OrderBy     []SortKey
	Limit       int64
	Offset      int64
	RowNumber   bool
}

func (t *TopN) Arity() int { return 1 }

func (t *TopN) validate() error {
	if t.Limit < 1 || t.Offset < 0 || t.Offset+t.Limit > maxTopN {
		return fmt.Errorf("flow: top-n limit %d offset %d: want limit >= 1 and offset+limit <= %d", t.Limit, t.Offset, maxTopN)
	}
	return nil
}

func (t *TopN) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	if len(ins[0]) == 0 {
		return nil, nil
	}
	st := ctx.State
	type part struct {
		prefix []byte
		old    []types.Row
	}
	parts := map[string]*part{}
	var order []*part
	var key, vbuf []byte
	for _, c := range consolidate(ins[0]) {
		key = appendKeyCols(key[:0], c.Row, t.PartitionBy)
		p, ok := parts[string(key)]
		if !ok {
			p = &part{prefix: append([]byte(nil), key...)}
			var err error
			if p.old, err = t.top(st, p.prefix); err != nil {
				return nil, err
			}
			parts[string(key)] = p
			order = append(order, p)
		}
		key = appendRowKey(appendSortKey(key, c.Row, t.OrderBy), c.Row)
		if _, _, err := addCounted(st, key, c.Row, c.Diff, &vbuf); err != nil {
			return nil, fmt.Errorf("flow: top-n: %w", err)
		}
	}
	var out []types.Change
	for _, p := range order {
		nw, err := t.top(st, p.prefix)
		if err != nil {
			return nil, err
		}
		out = diffRows(out, p.old, nw)
	}
	return out, nil
}

// top reads a partition's output rows: ranks Offset+1..Offset+Limit,
// a row of count n taking n ranks.
func (t *TopN) top(st Reader, prefix []byte) ([]types.Row, error) {
	var rows []types.Row
	var rank int64
	err := scanPrefix(st, prefix, false, func(_, v []byte) (bool, error) {
		n, row, err := decodeCounted(v)
		if err != nil {
			return false, err
		}
		for ; n > 0; n-- {
			rank++
			if rank <= t.Offset {
				continue
			}
			if rank > t.Offset+t.Limit {
				return false, nil
			}
			if t.RowNumber {
				rows = append(rows, append(append(make(types.Row, 0, len(row)+1), row...), rank))
			} else {
				rows = append(rows, row)
			}
		}
		return true, nil
	})
	return rows, err
}

// diffRows appends -old +new for the rows of old and new (multisets)
// that differ, old's retractions first, each in its list's order.
func diffRows(out []types.Change, old, nw []types.Row) []types.Change {
	count := make(map[string]int, len(nw))
	var buf []byte
	for _, r := range nw {
		buf = appendRowKey(buf[:0], r)
		count[string(buf)]++
	}
	kept := make(map[string]int, len(old))
	for _, r := range old {
		buf = appendRowKey(buf[:0], r)
		if count[string(buf)] > kept[string(buf)] {
			kept[string(buf)]++
			continue
		}
		out = append(out, types.Change{Row: r, Diff: -1})
	}
	for _, r := range nw {
		buf = appendRowKey(buf[:0], r)
		if kept[string(buf)] > 0 {
			kept[string(buf)]--
			continue
		}
		out = append(out, types.Change{Row: r, Diff: 1})
	}
	return out
}
