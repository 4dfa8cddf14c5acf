package viewplan

import (
	"encoding/binary"
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Uncorrelated scalar subqueries. A (SELECT ...) in the select list or
// the WHERE of a query over a FROM becomes a relation of one column,
// joined to the FROM by a left join without condition (so a subquery
// without rows reads as NULL, as SQL's), and the expression reads its
// column. The dataflow keeps both sides: when the subquery's value
// changes, every row of the other side is joined anew (a cost of that
// side's size per change of the value, which a global aggregate
// changes at most once an epoch).
//
// More than one row is PostgreSQL's 21000 when a SELECT runs; in a view
// it is the same error when an epoch leaves the subquery with two or
// more rows: the view fails with 21000 and, since its input does not
// change, fails again at the same epoch when retried, until it is
// dropped (oneRow).

// aggregateNames are the aggregates exec knows, to tell a query that
// aggregates without GROUP BY (where a scalar in the select list
// cannot be added to a GROUP BY without changing its answer over no
// rows).
var aggregateNames = map[string]bool{
	"count": true, "sum": true, "avg": true, "min": true, "max": true, "bool_and": true, "bool_or": true,
	"every": true, "string_agg": true, "var_samp": true, "var_pop": true, "variance": true, "stddev": true,
	"stddev_samp": true, "stddev_pop": true,
}

// scalars rewrites st's scalar subqueries in its select list, WHERE
// and HAVING into a left join with each (after joinList: FROM is one
// item).
func (c *compiler) scalars(st *pg.SelectStmt) error {
	type found struct {
		node  *pg.Node
		inSel bool
	}
	var subs []found
	collect := func(n *pg.Node, inSel bool) {
		exec.Walk(n, func(x *pg.Node) bool {
			if s := x.GetSubLink(); s != nil {
				if s.SubLinkType == pg.SubLinkType_EXPR_SUBLINK {
					subs = append(subs, found{x, inSel})
				}
				return false
			}
			return true
		})
	}
	for _, t := range st.TargetList {
		collect(t, true)
	}
	collect(st.WhereClause, false)
	collect(st.HavingClause, true)
	if len(subs) == 0 {
		return nil
	}
	if len(st.FromClause) != 1 {
		return sqlerr.NotSupported("a scalar subquery in a query without FROM is not supported in a materialized view").At(subs[0].node.GetSubLink().Location)
	}
	grouped := len(st.GroupClause) > 0
	aggregating := grouped
	if !grouped {
		for _, t := range append(append([]*pg.Node(nil), st.TargetList...), st.HavingClause) {
			exec.Walk(t, func(x *pg.Node) bool {
				if f := x.GetFuncCall(); f != nil && (f.AggStar || aggregateNames[funcName(f)]) && f.Over == nil {
					aggregating = true
				}
				return x.GetSubLink() == nil
			})
		}
	}
	if err := c.expandStar(st); err != nil {
		return err
	}
	from := st.FromClause[0]
	for _, s := range subs {
		sl := s.node.GetSubLink()
		if s.inSel && aggregating && !grouped {
			return sqlerr.NotSupported("a scalar subquery in the select list of an aggregate without GROUP BY is not supported in a materialized view").At(sl.Location)
		}
		q := sl.Subselect.GetSelectStmt()
		if q == nil {
			return sqlerr.NotSupported("a scalar subquery of this kind is not supported in a materialized view").At(sl.Location)
		}
		l, cols, err := c.planSelect(q)
		if err != nil {
			if code := sqlerr.Code(err); code == sqlerr.UndefinedColumn || code == sqlerr.UndefinedTable {
				return sqlerr.NotSupported("a correlated scalar subquery is not supported in a materialized view (%v)", err).At(sl.Location)
			}
			return err
		}
		if len(cols) != 1 {
			return sqlerr.Errorf(sqlerr.SyntaxError, "subquery must return only one column").At(sl.Location)
		}
		c.semis++
		alias := fmt.Sprintf("strand scalar %d", c.semis)
		d := c.newDerived([]exec.Column{{Name: "v", Type: cols[0].Type}}, func() (built, error) {
			b, err := c.translate(l)
			if err != nil {
				return built{}, err
			}
			b = c.materialize(b)
			return built{node: c.add("one row", &oneRow{}, b.node), width: 1}, nil
		})
		d.scalar = true
		ref := pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode("v")}, sl.Location)
		s.node.Node = ref.Node
		from = &pg.Node{Node: &pg.Node_JoinExpr{JoinExpr: &pg.JoinExpr{Jointype: pg.JoinType_JOIN_LEFT, Larg: from,
			Rarg: &pg.Node{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Relname: d.name, Inh: true, Alias: &pg.Alias{Aliasname: alias}}}}}}}
		if grouped {
			// Constant over the whole input: grouping by it too
			// changes no group and lets the select list read it.
			st.GroupClause = append(st.GroupClause, pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode("v")}, -1))
		}
	}
	st.FromClause[0] = from
	return nil
}

// expandStar writes a bare * of the select list as the FROM item's
// own columns (alias.*), so the columns joined in for scalar
// subqueries stay out of it. A FROM join without an alias has no one
// name for its columns: refused.
func (c *compiler) expandStar(st *pg.SelectStmt) error {
	for _, t := range st.TargetList {
		rt := t.GetResTarget()
		if rt == nil {
			continue
		}
		cr := rt.Val.GetColumnRef()
		if cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetAStar() == nil {
			continue
		}
		var name string
		switch x := st.FromClause[0].Node.(type) {
		case *pg.Node_RangeVar:
			name = x.RangeVar.Relname
			if x.RangeVar.Alias != nil {
				name = x.RangeVar.Alias.Aliasname
			}
		case *pg.Node_RangeSubselect:
			if x.RangeSubselect.Alias != nil {
				name = x.RangeSubselect.Alias.Aliasname
			}
		case *pg.Node_JoinExpr:
			if x.JoinExpr.Alias != nil {
				name = x.JoinExpr.Alias.Aliasname
			}
		}
		if name == "" {
			return sqlerr.NotSupported("SELECT * over a join beside a scalar subquery is not supported in a materialized view: name the columns").At(cr.Location)
		}
		cr.Fields = []*pg.Node{pg.MakeStrNode(name), cr.Fields[0]}
	}
	return nil
}

// scalarJoin compiles the left join of a FROM with a scalar subquery's
// relation: both sides keyed by one constant, so the subquery's row
// (at most one) meets every row.
func (c *compiler) scalarJoin(l *exec.Logical) (built, error) {
	lb, err := c.translate(l.In[0])
	if err != nil {
		return built{}, err
	}
	rb, err := c.translate(l.In[1])
	if err != nil {
		return built{}, err
	}
	lb, rb = c.materialize(lb), c.materialize(rb)
	keyed := func(b built, width int) flow.Node {
		exprs := make([]flow.Expr, width+1)
		for i := range width {
			exprs[i] = func(r types.Row) (any, error) { return r[i], nil }
		}
		exprs[width] = func(types.Row) (any, error) { return true, nil }
		return c.add("join keys", &flow.Map{Exprs: exprs}, b.node)
	}
	lw, rw := l.LeftWidth, l.RightWidth
	node := c.add("join", &flow.Join{Kind: flow.LeftJoin, LeftKey: []int{lw}, RightKey: []int{rw}, LeftWidth: lw + 1, RightWidth: rw + 1},
		keyed(lb, lw), keyed(rb, rw))
	cols := allCols(lw)
	for i := range rw {
		cols = append(cols, lw+1+i)
	}
	out := built{node: c.add("project", &flow.Project{Cols: cols}, node), width: lw + rw}
	// The subquery adds one value to each row: the left side's key
	// still tells its rows apart.
	out.key, out.unique = lb.key, lb.unique
	return out, nil
}

// isScalar reports whether l reads a scalar subquery's relation.
func isScalar(l *exec.Logical) bool {
	d, ok := l.Relation.(*derived)
	return l.Op == exec.OpScan && ok && d.scalar
}

// oneRow passes a scalar subquery's rows and fails the epoch that
// leaves it with more than one, with PostgreSQL's 21000.
//
// State: 'n' -> the row count.
type oneRow struct{}

func (*oneRow) Arity() int { return 1 }

func (*oneRow) Step(ctx *flow.Context, ins [][]types.Change) ([]types.Change, error) {
	var d int64
	for _, ch := range ins[0] {
		d += ch.Diff
	}
	if d == 0 {
		return ins[0], nil
	}
	key := []byte{'n'}
	v, ok, err := ctx.State.Get(key)
	if err != nil {
		return nil, err
	}
	var n int64
	if ok {
		var k int
		if n, k = binary.Varint(v); k <= 0 {
			return nil, fmt.Errorf("viewplan: %w: row count", types.ErrCorrupt)
		}
	}
	n += d
	if n < 0 {
		return nil, fmt.Errorf("viewplan: one row: %w", flow.ErrNegative)
	}
	if n > 1 {
		return nil, sqlerr.Errorf(sqlerr.CardinalityViolation, "more than one row returned by a subquery used as an expression")
	}
	if err := ctx.State.Set(key, binary.AppendVarint(nil, n)); err != nil {
		return nil, err
	}
	return ins[0], nil
}
