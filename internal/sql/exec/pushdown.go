package exec

import (
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// filterWhere is WHERE (cond, compiled from where over sc) over in,
// its conjuncts moved below inner joins where they read one side (see
// where). A WHERE holding a subquery stays whole: moving the other
// conjuncts would compile it a second time.
func (p *planner) filterWhere(in node, sc *scope, where *pg.Node, cond *expr.Expr) (node, error) {
	jn, ok := in.(*joinNode)
	if !ok || jn.kind != joinInner || hasSubLink(where) {
		return &filterNode{in: in, cond: cond}, nil
	}
	conds := conjuncts(where)
	for _, c := range conds {
		if _, ok := p.sideOf(c, sc, jn.lw); ok {
			return p.where(in, sc, conds)
		}
	}
	return &filterNode{in: in, cond: cond}, nil
}

func hasSubLink(n *pg.Node) bool {
	found := false
	walk(n, func(n *pg.Node) bool {
		if n.GetSubLink() != nil {
			found = true
		}
		return !found
	})
	return found
}

// where puts WHERE's conjuncts conds (already compiled together over sc,
// so their errors are reported as PostgreSQL would) over in. A conjunct
// reading the columns of one side of an inner join only filters that
// side instead, and so on down nested inner joins: for an inner join
// the two are the same rows, and a view's join keeps in its state only
// the rows that reach it (Nexmark q3 filters auctions by category and
// people by state: the join kept every auction and every person).
//
// Only conjuncts safe to move are moved: no subquery (it would be
// compiled twice), no function whose value is not a function of the row
// (moving random() would change how often it is drawn), every column
// found in sc (not an outer query's). Each filter keeps its conjuncts in
// the order written.
func (p *planner) where(in node, sc *scope, conds []*pg.Node) (node, error) {
	jn, ok := in.(*joinNode)
	if !ok || jn.kind != joinInner {
		return p.filterHere(in, sc, conds)
	}
	var here []*pg.Node
	var sides [2][]*pg.Node
	for _, c := range conds {
		if s, ok := p.sideOf(c, sc, jn.lw); ok {
			sides[s] = append(sides[s], c)
			continue
		}
		here = append(here, c)
	}
	if len(sides[0]) == 0 && len(sides[1]) == 0 {
		return p.filterHere(in, sc, conds)
	}
	moved := *jn
	var err error
	if len(sides[0]) > 0 {
		if moved.left, err = p.where(jn.left, subScope(sc, 0, jn.lw), sides[0]); err != nil {
			return nil, err
		}
	}
	if len(sides[1]) > 0 {
		if moved.right, err = p.where(jn.right, subScope(sc, jn.lw, jn.lw+jn.rw), sides[1]); err != nil {
			return nil, err
		}
	}
	if len(here) == 0 {
		return &moved, nil
	}
	return p.filterHere(&moved, sc, here)
}

// filterHere is a filter over in keeping the rows all of conds hold on.
func (p *planner) filterHere(in node, sc *scope, conds []*pg.Node) (node, error) {
	var es []*expr.Expr
	save := p.noAggIn
	p.noAggIn = "WHERE"
	defer func() { p.noAggIn = save }()
	for _, c := range conds {
		e, err := p.compile(c, sc)
		if err != nil {
			return nil, err
		}
		b, err := p.comp.Coerce(e, types.Bool, false)
		if err != nil {
			return nil, boolArgError("WHERE", e, err)
		}
		es = append(es, b)
	}
	if len(es) == 1 {
		return &filterNode{in: in, cond: es[0]}, nil
	}
	cond := expr.New(types.Bool, func(env *expr.Env, row types.Row) (any, error) {
		for _, e := range es {
			v, err := e.Eval(env, row)
			if err != nil || !expr.Truthy(v) {
				return false, err
			}
		}
		return true, nil
	})
	return &filterNode{in: in, cond: cond}, nil
}

// subScope is sc's columns from lo up to hi, renumbered from 0: a join
// side's scope (combine keeps each side's columns in its range).
func subScope(sc *scope, lo, hi int) *scope {
	s := &scope{width: hi - lo}
	for _, c := range sc.cols {
		if c.idx >= lo && c.idx < hi {
			c.idx -= lo
			s.cols = append(s.cols, c)
		}
	}
	return s
}

// sideOf says which side of a join whose left side is lw columns wide
// every column conjunct c reads is on (0 left, 1 right), and whether c
// may move there: it reads a column, all on one side, all found in sc,
// and holds no subquery and no function with a value of its own.
func (p *planner) sideOf(c *pg.Node, sc *scope, lw int) (int, bool) {
	side, ok := -1, true
	walk(c, func(n *pg.Node) bool {
		if !ok {
			return false
		}
		switch x := n.Node.(type) {
		case *pg.Node_SubLink, *pg.Node_GroupingFunc:
			ok = false
		case *pg.Node_FuncCall:
			if x.FuncCall.Over != nil || volatileFunc(x.FuncCall) {
				ok = false
			}
		case *pg.Node_ColumnRef:
			var names []string
			for _, f := range x.ColumnRef.Fields {
				s := f.GetString_()
				if s == nil {
					ok = false // t.* or worse
					return false
				}
				names = append(names, s.GetSval())
			}
			col, err := sc.find(names, -1)
			if err != nil {
				ok = false
				return false
			}
			s := 0
			if col.idx >= lw {
				s = 1
			}
			if side >= 0 && side != s {
				ok = false
			}
			side = s
			return false
		}
		return ok
	})
	return side, ok && side >= 0
}

// volatileFunc reports whether f's value may differ between calls with
// the same arguments.
func volatileFunc(f *pg.FuncCall) bool {
	if len(f.Funcname) == 0 {
		return true
	}
	name := strings.ToLower(f.Funcname[len(f.Funcname)-1].GetString_().GetSval())
	switch name {
	case "now", "random", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "timeofday",
		"pg_sleep", "gen_random_uuid", "setseed", "current_setting", "nextval", "currval", "lastval", "setval":
		return true
	}
	return false
}
