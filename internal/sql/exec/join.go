package exec

import (
	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/types"
)

type joinKind int

const (
	joinInner joinKind = iota
	joinLeft
	joinRight
	joinFull
)

// joinNode joins left and right: by hash on equality keys when there
// are any (eqL over the left part and eqR over the right part of the
// combined row), by nested loop otherwise; residual is the rest of ON.
// The right side is held in memory, charged to the budget.
type joinNode struct {
	left, right node
	lw, rw      int
	kind        joinKind
	eqL, eqR    []*expr.Expr
	residual    *expr.Expr
	// bounds are what residual's conjuncts say of the sides' times
	// (Logical.Bounds); the executor does not use them.
	bounds []JoinBound
}

func (j *joinNode) open(r *run) (iter, error) {
	ri, err := j.right.open(r)
	if err != nil {
		return nil, err
	}
	right, err := drain(r, ri)
	if err != nil {
		return nil, err
	}
	combined := func(l, rr types.Row) types.Row {
		out := make(types.Row, j.lw+j.rw)
		copy(out, l)
		copy(out[j.lw:], rr)
		return out
	}
	var table map[string][]int
	if len(j.eqL) > 0 {
		table = map[string][]int{}
		for i, rr := range right {
			row := combined(nil, rr)
			k, ok, err := keyOf(r, j.eqR, row)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if _, ok := table[k]; !ok {
				if err := r.budget.charge(int64(len(k)) + 64); err != nil {
					return nil, err
				}
			}
			table[k] = append(table[k], i)
		}
	}
	matched := make([]bool, len(right))
	li, err := j.left.open(r)
	if err != nil {
		return nil, err
	}
	var cur types.Row
	var cands []int
	pos, found := 0, false
	all := make([]int, len(right))
	for i := range all {
		all[i] = i
	}
	leftDone := false
	tail := 0
	return func() (types.Row, error) {
		for !leftDone {
			if cur == nil {
				l, err := li()
				if err != nil {
					return nil, err
				}
				if l == nil {
					leftDone = true
					break
				}
				cur, pos, found = l, 0, false
				if table != nil {
					k, ok, err := keyOf(r, j.eqL, combined(cur, nil))
					if err != nil {
						return nil, err
					}
					cands = nil
					if ok {
						cands = table[k]
					}
				} else {
					cands = all
				}
			}
			for pos < len(cands) {
				i := cands[pos]
				pos++
				row := combined(cur, right[i])
				if j.residual != nil {
					v, err := j.residual.Eval(r.env, row)
					if err != nil {
						return nil, err
					}
					if !expr.Truthy(v) {
						continue
					}
				}
				found, matched[i] = true, true
				return row, nil
			}
			l := cur
			cur = nil
			if !found && (j.kind == joinLeft || j.kind == joinFull) {
				return combined(l, nil), nil
			}
		}
		if j.kind == joinRight || j.kind == joinFull {
			for tail < len(right) {
				i := tail
				tail++
				if !matched[i] {
					return combined(nil, right[i]), nil
				}
			}
		}
		return nil, nil
	}, nil
}

// keyOf is the hash key of es over row; ok false if any is NULL, which
// equals nothing.
func keyOf(r *run, es []*expr.Expr, row types.Row) (string, bool, error) {
	var b []byte
	for _, e := range es {
		v, err := e.Eval(r.env, row)
		if err != nil {
			return "", false, err
		}
		if v == nil {
			return "", false, nil
		}
		b = types.AppendKey(b, v)
	}
	return string(b), true, nil
}
