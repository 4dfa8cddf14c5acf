package viewplan

import (
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/exec"
)

// Semi- and anti-joins. A WHERE term x IN (SELECT y ...) or EXISTS
// (SELECT ... WHERE inner = outer AND ...) keeps a row when the
// subquery has a match: a join with the subquery's distinct keys
// (SELECT DISTINCT y ...), which a view keeps incrementally, where the
// subquery in an expression it could not. NOT EXISTS keeps a row
// without one: a left join with the distinct keys, keeping the rows it
// pads (key IS NULL; a matched key is never NULL, as = matches no
// NULL). A NULL on either side matches nothing in both forms, as IN's
// and the correlated equality's NULL is not true. Terms of other
// shapes are left in WHERE, where check refuses them.

// antiJoin is a NOT EXISTS to apply once the FROM list is one join.
type antiJoin struct {
	sub   *pg.Node   // the RangeSubselect of distinct keys
	on    []*pg.Node // outer = alias.k
	alias string
}

// decorrelate rewrites st's WHERE terms that are semi-joins into joins
// with FROM items it appends, and returns its anti-joins.
func (c *compiler) decorrelate(st *pg.SelectStmt) ([]antiJoin, error) {
	var rest []*pg.Node
	var anti []antiJoin
	for _, term := range conjuncts(st.WhereClause) {
		not := false
		sl := term.GetSubLink()
		if b := term.GetBoolExpr(); b != nil && b.Boolop == pg.BoolExprType_NOT_EXPR && len(b.Args) == 1 {
			if s := b.Args[0].GetSubLink(); s != nil && s.SubLinkType == pg.SubLinkType_EXISTS_SUBLINK {
				sl, not = s, true
			}
		}
		sub, outer, ok := c.semiKeys(sl)
		if !ok {
			rest = append(rest, term)
			continue
		}
		if err := c.rewrite(sub); err != nil {
			return nil, err
		}
		c.semis++
		alias := fmt.Sprintf("strand semi %d", c.semis)
		item := &pg.Node{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
			Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sub}}, Alias: &pg.Alias{Aliasname: alias}}}}
		var on []*pg.Node
		for i, o := range outer {
			k := pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(fmt.Sprintf("k%d", i))}, -1)
			on = append(on, pg.MakeAExprNode(pg.A_Expr_Kind_AEXPR_OP, []*pg.Node{pg.MakeStrNode("=")}, o, k, -1))
		}
		if not {
			anti = append(anti, antiJoin{sub: item, on: on, alias: alias})
			continue
		}
		st.FromClause = append(st.FromClause, item)
		rest = append(rest, on...)
	}
	st.WhereClause = and(rest)
	return anti, nil
}

// applyAnti joins st's one FROM item with each NOT EXISTS's keys,
// keeping the rows without a match.
func applyAnti(st *pg.SelectStmt, anti []antiJoin) {
	terms := []*pg.Node{}
	if st.WhereClause != nil {
		terms = conjuncts(st.WhereClause)
	}
	for _, a := range anti {
		st.FromClause[0] = &pg.Node{Node: &pg.Node_JoinExpr{JoinExpr: &pg.JoinExpr{
			Jointype: pg.JoinType_JOIN_LEFT, Larg: st.FromClause[0], Rarg: a.sub, Quals: and(a.on)}}}
		k := pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(a.alias), pg.MakeStrNode("k0")}, -1)
		terms = append(terms, &pg.Node{Node: &pg.Node_NullTest{NullTest: &pg.NullTest{Arg: k, Nulltesttype: pg.NullTestType_IS_NULL, Location: -1}}})
	}
	st.WhereClause = and(terms)
}

// semiKeys reads a semi-join's subquery: the SELECT DISTINCT of its
// keys (k0, k1, ...) and the outer expressions they must equal; ok
// false if sl is not one (correlated other than by equalities, a set
// operation, aggregates, LIMIT).
func (c *compiler) semiKeys(sl *pg.SubLink) (*pg.SelectStmt, []*pg.Node, bool) {
	if sl == nil {
		return nil, nil, false
	}
	q := sl.Subselect.GetSelectStmt()
	if q == nil || q.Larg != nil || q.WithClause != nil || len(q.GroupClause) > 0 || q.HavingClause != nil ||
		q.LimitCount != nil || q.LimitOffset != nil || len(q.DistinctClause) > 0 || len(q.FromClause) == 0 {
		return nil, nil, false
	}
	inner := map[string]bool{}
	for _, it := range q.FromClause {
		aliases(it, inner)
	}
	// outerRef reports whether n names a column of the outer query
	// (qualified by a name the subquery's FROM does not have), and
	// whether it names any.
	refs := func(n *pg.Node) (outer, innerOnly bool) {
		innerOnly = true
		exec.Walk(n, func(x *pg.Node) bool {
			if x.GetSubLink() != nil {
				innerOnly = false
				return false
			}
			if cr := x.GetColumnRef(); cr != nil && len(cr.Fields) == 2 && !inner[cr.Fields[0].GetString_().GetSval()] {
				outer, innerOnly = true, false
			}
			return true
		})
		return outer, innerOnly
	}
	sub := &pg.SelectStmt{FromClause: q.FromClause, DistinctClause: []*pg.Node{{}}}
	var outer []*pg.Node
	var where []*pg.Node
	if q.WhereClause != nil {
		for _, t := range conjuncts(q.WhereClause) {
			if _, innerOnly := refs(t); innerOnly {
				where = append(where, t)
				continue
			}
			a := t.GetAExpr()
			if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Name[0].GetString_().GetSval() != "=" {
				return nil, nil, false
			}
			lo, li := refs(a.Lexpr)
			ro, ri := refs(a.Rexpr)
			switch {
			case lo && !isOuterColumn(a.Lexpr) || ro && !isOuterColumn(a.Rexpr):
				return nil, nil, false
			case lo && ri:
				outer, sub.TargetList = append(outer, a.Lexpr), append(sub.TargetList, a.Rexpr)
			case ro && li:
				outer, sub.TargetList = append(outer, a.Rexpr), append(sub.TargetList, a.Lexpr)
			default:
				return nil, nil, false
			}
		}
	}
	switch sl.SubLinkType {
	case pg.SubLinkType_EXISTS_SUBLINK:
		if len(outer) == 0 {
			return nil, nil, false // uncorrelated: a constant, not a join
		}
	case pg.SubLinkType_ANY_SUBLINK:
		if len(sl.OperName) > 1 || len(sl.OperName) == 1 && sl.OperName[0].GetString_().GetSval() != "=" ||
			sl.Testexpr == nil || len(q.TargetList) != 1 {
			return nil, nil, false
		}
		if o, _ := refs(q.TargetList[0]); o {
			return nil, nil, false
		}
		outer = append(outer, sl.Testexpr)
		sub.TargetList = append(sub.TargetList, q.TargetList[0].GetResTarget().Val)
	default:
		return nil, nil, false
	}
	for i, t := range sub.TargetList {
		sub.TargetList[i] = pg.MakeResTargetNodeWithNameAndVal(fmt.Sprintf("k%d", i), t, -1)
	}
	sub.WhereClause = and(where)
	return sub, outer, true
}

// isOuterColumn: the outer side of a correlation is a plain column.
func isOuterColumn(n *pg.Node) bool { return n.GetColumnRef() != nil }

// aliases adds the names a FROM item answers to.
func aliases(item *pg.Node, out map[string]bool) {
	switch x := item.Node.(type) {
	case *pg.Node_RangeVar:
		if x.RangeVar.Alias != nil {
			out[x.RangeVar.Alias.Aliasname] = true
		} else {
			out[x.RangeVar.Relname] = true
		}
	case *pg.Node_RangeSubselect:
		if x.RangeSubselect.Alias != nil {
			out[x.RangeSubselect.Alias.Aliasname] = true
		}
	case *pg.Node_RangeFunction:
		if x.RangeFunction.Alias != nil {
			out[x.RangeFunction.Alias.Aliasname] = true
		}
	case *pg.Node_JoinExpr:
		if x.JoinExpr.Alias != nil {
			out[x.JoinExpr.Alias.Aliasname] = true
		}
		aliases(x.JoinExpr.Larg, out)
		aliases(x.JoinExpr.Rarg, out)
	}
}
