package exec

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// FROM: relations, subqueries and CTEs by name, and joins (hash joins
// on the equalities of their conditions, nested loops otherwise).

// planFrom plans one FROM item.
func (p *planner) planFrom(item *pg.Node) (node, *scope, error) {
	switch x := item.Node.(type) {
	case *pg.Node_RangeVar:
		rv := x.RangeVar
		alias, colAliases := rv.Relname, []*pg.Node(nil)
		if rv.Alias != nil {
			alias, colAliases = rv.Alias.Aliasname, rv.Alias.Colnames
		}
		if rv.Schemaname == "" {
			for i := len(p.ctes) - 1; i >= 0; i-- {
				if c, ok := p.ctes[i][rv.Relname]; ok {
					s, err := newScope(alias, c.cols, colAliases)
					return c.node, s, err
				}
			}
		}
		rel, ok, err := p.cat.Relation(rv.Schemaname, rv.Relname)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			name := rv.Relname
			if rv.Schemaname != "" {
				name = rv.Schemaname + "." + name
			}
			return nil, nil, sqlerr.Errorf(sqlerr.UndefinedTable, "relation %q does not exist", name).At(rv.Location)
		}
		s, err := newScope(alias, rel.Columns(), colAliases)
		name := rv.Relname
		if rv.Schemaname != "" {
			name = rv.Schemaname + "." + name
		}
		return &scanNode{rel: rel, name: name}, s, err
	case *pg.Node_RangeSubselect:
		rs := x.RangeSubselect
		if rs.Lateral {
			return nil, nil, sqlerr.NotSupported("LATERAL is not supported yet")
		}
		q := rs.Subquery.GetSelectStmt()
		saveAgg := p.agg
		p.agg = nil
		n, cols, err := p.planSelect(q)
		p.agg = saveAgg
		if err != nil {
			return nil, nil, err
		}
		alias, colAliases := "", []*pg.Node(nil)
		if rs.Alias != nil {
			alias, colAliases = rs.Alias.Aliasname, rs.Alias.Colnames
		}
		s, err := newScope(alias, cols, colAliases)
		return n, s, err
	case *pg.Node_JoinExpr:
		return p.planJoin(x.JoinExpr)
	case *pg.Node_RangeFunction:
		return p.planFunction(x.RangeFunction)
	}
	return nil, nil, sqlerr.NotSupported("this FROM item is not supported yet")
}

func newScope(alias string, cols []Column, colAliases []*pg.Node) (*scope, error) {
	if len(colAliases) > len(cols) {
		return nil, sqlerr.Errorf(sqlerr.InvalidColumnReference, "table %q has %d columns available but %d columns specified", alias, len(cols), len(colAliases))
	}
	s := &scope{width: len(cols)}
	for i, c := range cols {
		name := c.Name
		if i < len(colAliases) {
			name = colAliases[i].GetString_().GetSval()
		}
		s.cols = append(s.cols, scopeCol{table: alias, name: name, typ: c.Type, idx: i})
	}
	return s, nil
}

// combine is the scope of left's row followed by right's.
func combine(l, r *scope) *scope {
	s := &scope{width: l.width + r.width}
	s.cols = append(s.cols, l.cols...)
	for _, c := range r.cols {
		c.idx += l.width
		s.cols = append(s.cols, c)
	}
	return s
}

func (p *planner) cross(l node, ls *scope, r node, rs *scope) (node, *scope) {
	return &joinNode{left: l, right: r, lw: ls.width, rw: rs.width, kind: joinInner}, combine(ls, rs)
}

func (p *planner) planJoin(j *pg.JoinExpr) (node, *scope, error) {
	ln, ls, err := p.planFrom(j.Larg)
	if err != nil {
		return nil, nil, err
	}
	rn, rs, err := p.planFrom(j.Rarg)
	if err != nil {
		return nil, nil, err
	}
	var kind joinKind
	switch j.Jointype {
	case pg.JoinType_JOIN_INNER:
		kind = joinInner
	case pg.JoinType_JOIN_LEFT:
		kind = joinLeft
	case pg.JoinType_JOIN_RIGHT:
		kind = joinRight
	case pg.JoinType_JOIN_FULL:
		kind = joinFull
	default:
		return nil, nil, sqlerr.NotSupported("join type %s is not supported", j.Jointype)
	}
	sc := combine(ls, rs)
	jn := &joinNode{left: ln, right: rn, lw: ls.width, rw: rs.width, kind: kind}
	var using []string
	if j.IsNatural {
		for _, lc := range ls.cols {
			for _, rc := range rs.cols {
				if !lc.qualOnly && !rc.qualOnly && lc.name == rc.name {
					using = append(using, lc.name)
				}
			}
		}
	}
	for _, u := range j.UsingClause {
		using = append(using, u.GetString_().GetSval())
	}
	var conds []*pg.Node
	if j.Quals != nil {
		conds = conjuncts(j.Quals)
	}
	var residual []*expr.Expr
	// USING columns: equal on both sides.
	type pair struct{ l, r *scopeCol }
	var pairs []pair
	for _, name := range using {
		lc, err := ls.find([]string{name}, -1)
		if err != nil {
			return nil, nil, err
		}
		rc, err := rs.find([]string{name}, -1)
		if err != nil {
			return nil, nil, err
		}
		l := expr.Column(lc.idx, lc.typ)
		r := expr.Column(rc.idx+ls.width, rc.typ)
		// USING needs an = between the columns' types (42883 when
		// there is none, as PostgreSQL answers); the join compares the
		// operands equalOperands casts to one type.
		if _, err := p.comp.Binary("=", l, r, -1); err != nil {
			return nil, nil, err
		}
		le, re, err := p.equalOperands(l, r, -1)
		if err != nil {
			return nil, nil, err
		}
		jn.eqL, jn.eqR = append(jn.eqL, le), append(jn.eqR, re)
		pairs = append(pairs, pair{lc, rc})
	}
	for _, c := range conds {
		if le, re, ok, err := p.equiJoin(c, sc, ls.width); err != nil {
			return nil, nil, err
		} else if ok {
			jn.eqL, jn.eqR = append(jn.eqL, le), append(jn.eqR, re)
			jn.bounds = append(jn.bounds, equalBounds(le, re)...)
			continue
		}
		e, err := p.compile(c, sc)
		if err != nil {
			return nil, nil, err
		}
		b, err := p.comp.Coerce(e, types.Bool, false)
		if err != nil {
			return nil, nil, boolArgError("JOIN/ON", e, err)
		}
		residual = append(residual, b)
		jn.bounds = append(jn.bounds, p.timeBounds(c, sc, ls.width)...)
	}
	if len(residual) > 0 {
		all := residual
		jn.residual = expr.New(types.Bool, func(env *expr.Env, row types.Row) (any, error) {
			for _, e := range all {
				v, err := e.Eval(env, row)
				if err != nil || !expr.Truthy(v) {
					return false, err
				}
			}
			return true, nil
		})
	}
	var out node = jn
	if len(pairs) > 0 {
		// The merged USING columns come first, then the rest of each
		// side; the sides' own columns stay reachable qualified.
		var exprs []*expr.Expr
		ns := &scope{}
		for _, pr := range pairs {
			l := expr.Column(pr.l.idx, pr.l.typ)
			r := expr.Column(pr.r.idx+ls.width, pr.r.typ)
			t, err := expr.CommonType([]types.Type{pr.l.typ, pr.r.typ}, "JOIN/USING")
			if err != nil {
				return nil, nil, err
			}
			if l, err = p.comp.Coerce(l, t, false); err != nil {
				return nil, nil, err
			}
			if r, err = p.comp.Coerce(r, t, false); err != nil {
				return nil, nil, err
			}
			var m *expr.Expr
			switch kind {
			case joinRight:
				m = r
			case joinFull:
				lv, rv := l, r
				m = expr.New(t, func(env *expr.Env, row types.Row) (any, error) {
					v, err := lv.Eval(env, row)
					if err != nil || v != nil {
						return v, err
					}
					return rv.Eval(env, row)
				})
			default:
				m = l
			}
			ns.cols = append(ns.cols, scopeCol{name: pr.l.name, typ: t, idx: len(exprs)})
			exprs = append(exprs, m)
		}
		isUsing := func(c scopeCol, side []pair, left bool) bool {
			for _, pr := range side {
				if left && pr.l.idx == c.idx || !left && pr.r.idx+ls.width == c.idx {
					return true
				}
			}
			return false
		}
		for _, c := range sc.cols {
			u := isUsing(c, pairs, c.idx < ls.width)
			nc := c
			nc.idx = len(exprs)
			nc.qualOnly, nc.hidden = c.qualOnly || u, c.hidden || u
			ns.cols = append(ns.cols, nc)
			exprs = append(exprs, expr.Column(c.idx, c.typ))
		}
		ns.width = len(exprs)
		out, sc = &projectNode{in: jn, exprs: exprs}, ns
	}
	if j.Alias != nil {
		for i := range sc.cols {
			sc.cols[i].table = j.Alias.Aliasname
		}
	}
	return out, sc, nil
}

// equalOperands casts l and r to the type = compares them in.
func (p *planner) equalOperands(l, r *expr.Expr, loc int32) (*expr.Expr, *expr.Expr, error) {
	t, err := expr.CommonType([]types.Type{l.Type, r.Type}, "JOIN")
	if err != nil {
		// Numeric mixes (int vs numeric) are one category: CommonType
		// handles them; anything else has no = operator.
		return nil, nil, err
	}
	if l, err = p.comp.Coerce(l, t, false); err != nil {
		return nil, nil, err
	}
	if r, err = p.comp.Coerce(r, t, false); err != nil {
		return nil, nil, err
	}
	return l, r, nil
}

func conjuncts(n *pg.Node) []*pg.Node {
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_AND_EXPR {
		var out []*pg.Node
		for _, a := range b.Args {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []*pg.Node{n}
}

// equiJoin recognizes left_expr = right_expr in ON for a hash join.
func (p *planner) equiJoin(c *pg.Node, sc *scope, lw int) (*expr.Expr, *expr.Expr, bool, error) {
	a := c.GetAExpr()
	if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Name[0].GetString_().GetSval() != "=" || a.Lexpr == nil {
		return nil, nil, false, nil
	}
	side := func(n *pg.Node) int { // 1 left, 2 right, 3 both, 0 none, -1 unknown
		s := 0
		walk(n, func(x *pg.Node) bool {
			if x.GetSubLink() != nil {
				s = -1
				return false
			}
			if cr := x.GetColumnRef(); cr != nil {
				var names []string
				for _, f := range cr.Fields {
					names = append(names, f.GetString_().GetSval())
				}
				col, err := sc.find(names, cr.Location)
				if err != nil {
					s = -1
					return false
				}
				if s >= 0 {
					if col.idx < lw {
						s |= 1
					} else {
						s |= 2
					}
				}
			}
			return true
		})
		return s
	}
	ls, rs := side(a.Lexpr), side(a.Rexpr)
	ln, rn := a.Lexpr, a.Rexpr
	switch {
	case ls == 1 && rs == 2:
	case ls == 2 && rs == 1:
		ln, rn = rn, ln
	default:
		return nil, nil, false, nil
	}
	l, err := p.compile(ln, sc)
	if err != nil {
		return nil, nil, false, err
	}
	r, err := p.compile(rn, sc)
	if err != nil {
		return nil, nil, false, err
	}
	// Type-check as the = operator would, then cast both to one type so
	// equal values hash alike.
	if _, err := p.comp.Binary("=", l, r, a.Location); err != nil {
		return nil, nil, false, err
	}
	if l.Type.Category() != r.Type.Category() && l.Type.OID != types.OIDUnknown && r.Type.OID != types.OIDUnknown {
		return nil, nil, false, nil
	}
	le, re, err := p.equalOperands(l, r, a.Location)
	if err != nil {
		return nil, nil, false, nil
	}
	return le, re, true, nil
}
