package viewplan

import (
	"slices"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
)

// prunedJoin compiles a join that a select list of plain columns (cols,
// over the joined row) reads, keeping of each side only the columns
// read above it and its join keys: a join stores each side's rows whole
// in its state, key and value, so a column nobody reads costs its bytes
// written, encoded and compared at every change (Nexmark q3 joins
// auctions of ten columns, their long description and extra among
// them, to read two). It returns the join and cols over its row, or ok
// false when the join is not one it prunes: keys that are not plain
// columns (c.join computes those), ON terms besides the equalities
// (bounds an interval join expires its sides by, residuals over
// either side), or nothing to leave out.
//
// Rows of a side that differ only in pruned columns become one row
// counted twice: the join's output, projected by cols, is the same
// multiset.
func (c *compiler) prunedJoin(l *exec.Logical, cols []int) (built, []int, bool, error) {
	if l.Op != exec.OpJoin || l.Pred != nil || len(l.Bounds) > 0 || len(l.EqLeft) == 0 {
		return built{}, nil, false, nil
	}
	if _, done := c.memo[l]; done {
		// Compiled whole already (a WITH query read twice): share it.
		return built{}, nil, false, nil
	}
	lw, rw := l.LeftWidth, l.RightWidth
	need := make([]bool, lw+rw)
	for _, col := range cols {
		need[col] = true
	}
	var lk, rk []int
	for i := range l.EqLeft {
		li, lok := l.EqLeft[i].ColumnIndex()
		ri, rok := l.EqRight[i].ColumnIndex()
		if !lok || !rok || li >= lw || ri < lw {
			return built{}, nil, false, nil
		}
		need[li], need[ri] = true, true
		lk, rk = append(lk, li), append(rk, ri-lw)
	}
	if !slices.Contains(need, false) {
		return built{}, nil, false, nil
	}
	lb, err := c.translate(l.In[0])
	if err != nil {
		return built{}, nil, false, err
	}
	rb, err := c.translate(l.In[1])
	if err != nil {
		return built{}, nil, false, err
	}
	lb, rb = c.materialize(lb), c.materialize(rb)
	var keepL, keepR []int
	for i, n := range need {
		switch {
		case !n:
		case i < lw:
			keepL = append(keepL, i)
		default:
			keepR = append(keepR, i-lw)
		}
	}
	// at[i] is where joined column i is in the pruned join's row.
	at := make([]int, lw+rw)
	for i, k := range keepL {
		at[k] = i
	}
	for i, k := range keepR {
		at[lw+k] = len(keepL) + i
	}
	plb, prb := c.keepCols(lb, keepL), c.keepCols(rb, keepR)
	for i := range lk {
		lk[i], rk[i] = at[lk[i]], at[lw+rk[i]]-len(keepL)
	}
	kind := map[exec.JoinKind]flow.JoinKind{exec.JoinInner: flow.InnerJoin, exec.JoinLeft: flow.LeftJoin,
		exec.JoinRight: flow.RightJoin, exec.JoinFull: flow.FullJoin}[l.Join]
	node := c.add("join", &flow.Join{Kind: kind, LeftKey: lk, RightKey: rk, LeftWidth: len(keepL), RightWidth: len(keepR)}, plb.node, prb.node)
	out := built{node: node, width: len(keepL) + len(keepR), times: concatTimes(plb.times, plb.width, prb.times, prb.width),
		appendOnly: kind == flow.InnerJoin && lb.appendOnly && rb.appendOnly}
	if plb.key != nil && prb.key != nil {
		out.key = append(slices.Clone(plb.key), prb.key...)
		for i := len(plb.key); i < len(out.key); i++ {
			out.key[i] += plb.width
		}
		out.unique = plb.unique && prb.unique
	}
	pcols := make([]int, len(cols))
	for i, col := range cols {
		pcols[i] = at[col]
	}
	return out, pcols, true, nil
}

// keepCols is b with only its columns keep (all of them: b itself).
func (c *compiler) keepCols(b built, keep []int) built {
	if len(keep) == b.width {
		return b
	}
	out := built{node: c.add("project", &flow.Project{Cols: keep}, b.node), width: len(keep),
		times: timesOf(b.times, keep), final: b.final, appendOnly: b.appendOnly}
	if b.key != nil {
		var key []int
		for _, k := range b.key {
			if i := slices.Index(keep, k); i >= 0 {
				key = append(key, i)
			}
		}
		if len(key) == len(b.key) {
			out.key, out.unique = key, b.unique
		}
	}
	return out
}
