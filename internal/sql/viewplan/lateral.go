package viewplan

import (
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// LATERAL subqueries correlated by equalities. A FROM item
//
//	LATERAL (SELECT ... FROM f WHERE inner = outer AND ... ORDER BY o LIMIT n [OFFSET m])
//
// is, per outer row, the top rows of f with the outer row's key: so
// it is the top-N per key of f, joined on the key. It becomes
//
//	(SELECT * FROM (SELECT ..., inner AS k0, ROW_NUMBER() OVER
//	  (PARTITION BY inner ORDER BY o) AS rn FROM f WHERE ...) x
//	 WHERE rn BETWEEN m+1 AND m+n) alias
//
// joined with inner = outer (an inner join for a comma or JOIN
// LATERAL, a left one for LEFT JOIN LATERAL ... ON true), which the
// top-N and join compilers take from there. Without ORDER BY and
// LIMIT it is the plain join. Other lateral subqueries (aggregates,
// DISTINCT, correlation other than by equalities) are refused.

// lateralRN and lateralKey name the rewrite's extra columns.
const (
	lateralRN  = "strand rn"
	lateralKey = "strand k"
)

// frameDefault is PostgreSQL's FRAMEOPTION_DEFAULTS (RANGE UNBOUNDED
// PRECEDING AND CURRENT ROW), what its grammar gives an OVER without a
// frame.
const frameDefault = 0x422

// laterals rewrites st's LATERAL FROM items (before the FROM list is
// joined).
func (c *compiler) laterals(st *pg.SelectStmt) error {
	var extra []*pg.Node // equalities for the WHERE (comma-joined items)
	for i, item := range st.FromClause {
		if rs := item.GetRangeSubselect(); rs != nil && rs.Lateral {
			if i == 0 {
				return sqlerr.NotSupported("LATERAL first in FROM is not supported in a materialized view")
			}
			n, on, err := c.lateral(rs)
			if err != nil {
				return err
			}
			st.FromClause[i] = n
			extra = append(extra, on...)
			continue
		}
		if err := c.lateralJoins(item); err != nil {
			return err
		}
	}
	if len(extra) > 0 {
		if st.WhereClause != nil {
			extra = append(conjuncts(st.WhereClause), extra...)
		}
		st.WhereClause = and(extra)
	}
	return nil
}

// lateralJoins rewrites JOIN LATERAL items inside a join tree.
func (c *compiler) lateralJoins(item *pg.Node) error {
	j := item.GetJoinExpr()
	if j == nil {
		return nil
	}
	if err := c.lateralJoins(j.Larg); err != nil {
		return err
	}
	rs := j.Rarg.GetRangeSubselect()
	if rs == nil || !rs.Lateral {
		return c.lateralJoins(j.Rarg)
	}
	if j.Jointype != pg.JoinType_JOIN_INNER && j.Jointype != pg.JoinType_JOIN_LEFT {
		return sqlerr.NotSupported("%s with LATERAL is not supported in a materialized view", j.Jointype)
	}
	n, on, err := c.lateral(rs)
	if err != nil {
		return err
	}
	j.Rarg = n
	var terms []*pg.Node
	if j.Quals != nil && !isTrue(j.Quals) {
		terms = conjuncts(j.Quals)
	}
	j.Quals = and(append(terms, on...))
	return nil
}

func isTrue(n *pg.Node) bool {
	k := n.GetAConst()
	return k != nil && k.GetBoolval() != nil && k.GetBoolval().Boolval
}

// lateral rewrites one LATERAL subquery: the FROM item that replaces
// it and the equalities joining it.
func (c *compiler) lateral(rs *pg.RangeSubselect) (*pg.Node, []*pg.Node, error) {
	refuse := sqlerr.NotSupported("LATERAL is supported in a materialized view only as a subquery correlated by equalities, with ORDER BY ... LIMIT or neither")
	q := rs.Subquery.GetSelectStmt()
	if q == nil || rs.Alias == nil || q.Larg != nil || q.WithClause != nil || len(q.GroupClause) > 0 || q.HavingClause != nil ||
		len(q.DistinctClause) > 0 || len(q.FromClause) == 0 || len(q.WindowClause) > 0 || (len(q.SortClause) > 0) != (q.LimitCount != nil) {
		return nil, nil, refuse
	}
	inner := map[string]bool{}
	for _, it := range q.FromClause {
		aliases(it, inner)
	}
	isOuter := func(n *pg.Node) (outer, innerOnly bool) {
		innerOnly = true
		exec.Walk(n, func(x *pg.Node) bool {
			if x.GetSubLink() != nil || x.GetFuncCall() != nil && x.GetFuncCall().Over != nil {
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
	for _, t := range q.TargetList {
		if o, _ := isOuter(t); o {
			return nil, nil, refuse
		}
		agg := false
		exec.Walk(t, func(x *pg.Node) bool {
			if f := x.GetFuncCall(); f != nil && f.Over == nil && (f.AggStar || aggregateNames[funcName(f)]) {
				agg = true
			}
			return x.GetSubLink() == nil
		})
		if agg {
			return nil, nil, refuse // an aggregate per outer row: not a top-N
		}
		if cr := t.GetResTarget().GetVal().GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return nil, nil, sqlerr.NotSupported("SELECT * in a LATERAL subquery is not supported in a materialized view: name the columns")
		}
	}
	var keysIn, keysOut, where []*pg.Node
	if q.WhereClause != nil {
		for _, t := range conjuncts(q.WhereClause) {
			if _, innerOnly := isOuter(t); innerOnly {
				where = append(where, t)
				continue
			}
			a := t.GetAExpr()
			if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Name[0].GetString_().GetSval() != "=" {
				return nil, nil, refuse
			}
			lo, li := isOuter(a.Lexpr)
			ro, ri := isOuter(a.Rexpr)
			switch {
			case lo && ri:
				keysOut, keysIn = append(keysOut, a.Lexpr), append(keysIn, a.Rexpr)
			case ro && li:
				keysOut, keysIn = append(keysOut, a.Rexpr), append(keysIn, a.Lexpr)
			default:
				return nil, nil, refuse
			}
		}
	}
	if len(keysIn) == 0 {
		return nil, nil, refuse // uncorrelated: a cross join
	}
	alias := rs.Alias.Aliasname
	sub := &pg.SelectStmt{FromClause: q.FromClause, WhereClause: and(where), TargetList: append([]*pg.Node(nil), q.TargetList...)}
	for i, k := range keysIn {
		sub.TargetList = append(sub.TargetList, pg.MakeResTargetNodeWithNameAndVal(fmt.Sprintf("%s%d", lateralKey, i), k, -1))
	}
	var on []*pg.Node
	for i, o := range keysOut {
		k := pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(fmt.Sprintf("%s%d", lateralKey, i))}, -1)
		on = append(on, pg.MakeAExprNode(pg.A_Expr_Kind_AEXPR_OP, []*pg.Node{pg.MakeStrNode("=")}, o, k, -1))
	}
	item := &pg.Node{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
		Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sub}}, Alias: rs.Alias}}}
	if q.LimitCount == nil {
		return item, on, nil
	}
	limit, _, err := c.constant(q.LimitCount, "LIMIT", -1)
	if err != nil {
		return nil, nil, err
	}
	var offset any = int64(0)
	if q.LimitOffset != nil {
		if offset, _, err = c.constant(q.LimitOffset, "OFFSET", -1); err != nil {
			return nil, nil, err
		}
	}
	n, ok1 := asInt64(limit)
	m, ok2 := asInt64(offset)
	if !ok1 || !ok2 || n < 0 || m < 0 {
		return nil, nil, sqlerr.NotSupported("LIMIT and OFFSET of a LATERAL subquery in a materialized view must be non-negative integer constants")
	}
	sub.TargetList = append(sub.TargetList, pg.MakeResTargetNodeWithNameAndVal(lateralRN, &pg.Node{Node: &pg.Node_FuncCall{FuncCall: &pg.FuncCall{
		Funcname: []*pg.Node{pg.MakeStrNode("row_number")},
		Over:     &pg.WindowDef{PartitionClause: keysIn, OrderClause: q.SortClause, FrameOptions: frameDefault},
		Location: -1,
	}}}, -1))
	rn := func() *pg.Node {
		return pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode("strand lateral"), pg.MakeStrNode(lateralRN)}, -1)
	}
	bound := func(op string, v int64) *pg.Node {
		return pg.MakeAExprNode(pg.A_Expr_Kind_AEXPR_OP, []*pg.Node{pg.MakeStrNode(op)}, rn(), pg.MakeAConstIntNode(v, -1), -1)
	}
	wrapper := &pg.SelectStmt{
		TargetList: []*pg.Node{pg.MakeResTargetNodeWithVal(pg.MakeColumnRefNode([]*pg.Node{pg.MakeAStarNode()}, -1), -1)},
		FromClause: []*pg.Node{{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
			Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sub}}, Alias: &pg.Alias{Aliasname: "strand lateral"}}}}},
		WhereClause: and([]*pg.Node{bound(">=", m+1), bound("<=", m+n)}),
	}
	item.GetRangeSubselect().Subquery = &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: wrapper}}
	return item, on, nil
}

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}
