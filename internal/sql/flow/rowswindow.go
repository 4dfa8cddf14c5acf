package flow

import (
	"bytes"
	"fmt"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// maxWindowSpanRows bounds the rows an epoch reads for one partition
// (its changed span and the frames around it): held in memory to
// recompute. Past it the epoch fails (54000) rather than exhaust
// memory.
const maxWindowSpanRows = 1_000_000

// maxRowsPreceding bounds a ROWS frame's N PRECEDING: a change reads
// and recomputes the N rows on each side of it.
const maxRowsPreceding = 10_000

// RowsWindow is an aggregate window function over a ROWS frame:
// Kind(Col) OVER (PARTITION BY PartitionBy ORDER BY OrderBy ROWS
// BETWEEN Preceding PRECEDING AND CURRENT ROW), appended to each row.
// Kind is CountStar, Count, Sum, Avg, Min or Max, with their aggregate
// results' types. Rows tying on OrderBy are ordered by the whole row's
// key encoding, so the frame, which SQL leaves to the engine among
// peers, is deterministic.
//
// A change moves the frames of the Preceding rows after it: per epoch
// and changed partition, the rows from the first to the last changed
// position, with Preceding rows on each side, are read before and
// after the changes, and the rows whose value changed emitted as -old
// +new (a cost of the changed span plus 2·Preceding rows, each frame
// recomputed: Preceding+1 values).
//
// State:
//
//	key(partition) sortkey(row) key(row) -> count, row
type RowsWindow struct {
	PartitionBy []int
	OrderBy     []SortKey
	Preceding   int64
	Kind        AggKind
	Col         int
}

func (w *RowsWindow) Arity() int { return 1 }

func (w *RowsWindow) validate() error {
	if w.Preceding < 0 || w.Preceding > maxRowsPreceding {
		return fmt.Errorf("flow: ROWS frame of %d preceding rows, at most %d", w.Preceding, maxRowsPreceding)
	}
	switch w.Kind {
	case CountStar, Count, Sum, Avg, Min, Max:
		return nil
	}
	return fmt.Errorf("flow: window aggregate kind %d", w.Kind)
}

func (w *RowsWindow) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	if len(ins[0]) == 0 {
		return nil, nil
	}
	st := ctx.State
	type part struct {
		prefix   []byte
		min, max []byte // the first and last changed keys
		changes  []types.Change
		keys     [][]byte
	}
	parts := map[string]*part{}
	var order []*part
	for _, c := range consolidate(ins[0]) {
		pk := appendKeyCols(nil, c.Row, w.PartitionBy)
		p, ok := parts[string(pk)]
		if !ok {
			p = &part{prefix: pk}
			parts[string(pk)] = p
			order = append(order, p)
		}
		key := appendRowKey(appendSortKey(append([]byte(nil), pk...), c.Row, w.OrderBy), c.Row)
		if p.min == nil || bytes.Compare(key, p.min) < 0 {
			p.min = key
		}
		if p.max == nil || bytes.Compare(key, p.max) > 0 {
			p.max = key
		}
		p.changes = append(p.changes, c)
		p.keys = append(p.keys, key)
	}
	var out []types.Change
	var vbuf []byte
	for _, p := range order {
		old, err := w.values(st, p.prefix, p.min, p.max)
		if err != nil {
			return nil, err
		}
		for i, c := range p.changes {
			if _, _, err := addCounted(st, p.keys[i], c.Row, c.Diff, &vbuf); err != nil {
				return nil, fmt.Errorf("flow: window: %w", err)
			}
		}
		nw, err := w.values(st, p.prefix, p.min, p.max)
		if err != nil {
			return nil, err
		}
		out = diffRows(out, old, nw)
	}
	return out, nil
}

// values reads the partition's rows from Preceding rows before lo to
// Preceding rows after hi and returns those from lo on with their
// frame's value appended.
func (w *RowsWindow) values(st Reader, prefix, lo, hi []byte) ([]types.Row, error) {
	n := w.Preceding
	var before []types.Row // in reverse order
	err := st.Scan(prefix, lo, true, func(_, v []byte) (bool, error) {
		c, row, err := decodeCounted(v)
		if err != nil {
			return false, err
		}
		for ; c > 0 && int64(len(before)) < n; c-- {
			before = append(before, row)
		}
		return int64(len(before)) < n, nil
	})
	if err != nil {
		return nil, err
	}
	rows := make([]types.Row, 0, len(before))
	for i := len(before) - 1; i >= 0; i-- {
		rows = append(rows, before[i])
	}
	first := len(rows)
	var after int64
	err = st.Scan(lo, prefixEnd(prefix), false, func(k, v []byte) (bool, error) {
		c, row, err := decodeCounted(v)
		if err != nil {
			return false, err
		}
		past := bytes.Compare(k, hi) > 0
		for ; c > 0; c-- {
			if past {
				if after >= n {
					return false, nil
				}
				after++
			}
			rows = append(rows, row)
		}
		if len(rows) > maxWindowSpanRows {
			return false, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "window function: more than %d rows in the span one epoch changes", maxWindowSpanRows)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]types.Row, 0, len(rows)-first)
	for i := first; i < len(rows); i++ {
		v, err := w.frame(rows[max(0, i-int(n)) : i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, append(append(make(types.Row, 0, len(rows[i])+1), rows[i]...), v))
	}
	return out, nil
}

// frame is the aggregate over one frame's rows.
func (w *RowsWindow) frame(rows []types.Row) (any, error) {
	switch w.Kind {
	case CountStar:
		return int64(len(rows)), nil
	case Min, Max:
		var best any
		for _, r := range rows {
			v := r[w.Col]
			if v == nil {
				continue
			}
			if c := types.Compare(v, best); best == nil || (w.Kind == Min && c < 0) || (w.Kind == Max && c > 0) {
				best = v
			}
		}
		return best, nil
	}
	var acc accumulator
	for _, r := range rows {
		if v := r[w.Col]; v != nil {
			if err := acc.add(w.Kind, v, 1); err != nil {
				return nil, err
			}
		}
	}
	switch w.Kind {
	case Count:
		return acc.n, nil
	case Sum:
		return acc.sumResult()
	}
	return acc.avgResult()
}
