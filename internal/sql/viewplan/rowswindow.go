package viewplan

import (
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Aggregates over a ROWS frame: a select list item
//
//	avg(x) OVER (PARTITION BY p ORDER BY o ROWS BETWEEN n PRECEDING AND CURRENT ROW)
//
// (or ROWS n PRECEDING; count, sum, avg, min, max), as Nexmark's q6
// writes it. The query becomes its own select list, the call's
// argument, partition and order keys as columns of a derived relation
// through flow.RowsWindow (which appends the value), and the select
// list reads that relation. One such call per query; a query with
// GROUP BY, DISTINCT, ORDER BY or LIMIT beside it is refused.

// PostgreSQL's frame option bits (nodes/parsenodes.h).
const (
	frameNonDefault          = 0x1
	frameRows                = 0x4
	frameBetween             = 0x10
	frameEndCurrentRow       = 0x400
	frameStartOffsetPreceded = 0x800
)

var windowAggKinds = map[string]flow.AggKind{"count": flow.Count, "sum": flow.Sum, "avg": flow.Avg, "min": flow.Min, "max": flow.Max}

// rowsWindow rewrites st's window aggregate, if it has one.
func (c *compiler) rowsWindow(st *pg.SelectStmt) error {
	pos := -1
	var fc *pg.FuncCall
	for i, t := range st.TargetList {
		f := t.GetResTarget().GetVal().GetFuncCall()
		if f == nil || f.Over == nil || funcName(f) == "row_number" {
			continue
		}
		if pos >= 0 {
			return sqlerr.NotSupported("more than one window function in a query is not supported in a materialized view").At(f.Location)
		}
		pos, fc = i, f
	}
	if pos < 0 {
		return nil
	}
	name := funcName(fc)
	kind, ok := windowAggKinds[name]
	win := fc.Over
	opts := win.FrameOptions
	switch {
	case !ok:
		return nil // check refuses it, naming it
	case fc.AggStar && name == "count":
		kind = flow.CountStar
	case len(fc.Args) != 1 || fc.AggDistinct || fc.AggFilter != nil || len(fc.AggOrder) > 0:
		return sqlerr.NotSupported("window function %s with DISTINCT, FILTER, ORDER BY or other than one argument is not supported in a materialized view", name).At(fc.Location)
	}
	if win.Refname != "" || len(st.WindowClause) > 0 {
		return sqlerr.NotSupported("named windows are not supported in a materialized view").At(fc.Location)
	}
	if opts&frameRows == 0 || opts&frameStartOffsetPreceded == 0 || opts&frameEndCurrentRow == 0 ||
		opts&^(frameNonDefault|frameRows|frameBetween|frameEndCurrentRow|frameStartOffsetPreceded) != 0 {
		return sqlerr.NotSupported("window function %s is supported in a materialized view over ROWS BETWEEN n PRECEDING AND CURRENT ROW only", name).At(fc.Location)
	}
	if len(st.GroupClause) > 0 || st.HavingClause != nil || len(st.DistinctClause) > 0 || len(st.SortClause) > 0 ||
		st.LimitCount != nil || st.LimitOffset != nil || len(st.FromClause) != 1 {
		return sqlerr.NotSupported("window function %s beside GROUP BY, DISTINCT, ORDER BY or LIMIT is not supported in a materialized view", name).At(fc.Location)
	}
	nv, _, err := c.constant(win.StartOffset, "the frame's offset", fc.Location)
	if err != nil {
		return err
	}
	var preceding int64
	switch x := nv.(type) {
	case int32:
		preceding = int64(x)
	case int64:
		preceding = x
	default:
		return sqlerr.Errorf(sqlerr.DatatypeMismatch, "the frame's offset must be an integer").At(fc.Location)
	}
	if preceding < 0 {
		return sqlerr.Errorf("22013", "frame starting offset must not be negative").At(fc.Location)
	}
	if preceding > 10_000 {
		return sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "a ROWS frame of %d preceding rows in a materialized view: at most 10000", preceding).At(fc.Location)
	}
	// The inner query: the select list's other items, the argument,
	// the partition and order keys, under names of the compiler's own.
	inner := &pg.SelectStmt{FromClause: st.FromClause, WhereClause: st.WhereClause}
	names := make([]string, len(st.TargetList))
	for i, t := range st.TargetList {
		rt := t.GetResTarget()
		if cr := rt.Val.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return sqlerr.NotSupported("SELECT * beside a window function is not supported in a materialized view: name the columns").At(cr.Location)
		}
		names[i] = outputName(rt)
		if i != pos {
			inner.TargetList = append(inner.TargetList, pg.MakeResTargetNodeWithNameAndVal(fmt.Sprintf("strand c%d", i), rt.Val, -1))
		}
	}
	if kind == flow.CountStar {
		inner.TargetList = append(inner.TargetList, pg.MakeResTargetNodeWithNameAndVal("strand arg", pg.MakeAConstIntNode(1, -1), -1))
	} else {
		inner.TargetList = append(inner.TargetList, pg.MakeResTargetNodeWithNameAndVal("strand arg", fc.Args[0], -1))
	}
	for i, p := range win.PartitionClause {
		inner.TargetList = append(inner.TargetList, pg.MakeResTargetNodeWithNameAndVal(fmt.Sprintf("strand p%d", i), p, -1))
	}
	var order []flow.SortKey
	for i, o := range win.OrderClause {
		sb := o.GetSortBy()
		if sb.SortbyDir == pg.SortByDir_SORTBY_USING {
			return sqlerr.NotSupported("ORDER BY USING is not supported in a materialized view").At(sb.Location)
		}
		inner.TargetList = append(inner.TargetList, pg.MakeResTargetNodeWithNameAndVal(fmt.Sprintf("strand o%d", i), sb.Node, -1))
		k := flow.SortKey{Desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC}
		switch sb.SortbyNulls {
		case pg.SortByNulls_SORTBY_NULLS_FIRST:
			k.Nulls = flow.NullsFirst
		case pg.SortByNulls_SORTBY_NULLS_LAST:
			k.Nulls = flow.NullsLast
		}
		order = append(order, k)
	}
	l, cols, err := c.planSelect(inner)
	if err != nil {
		return err
	}
	argCol := len(st.TargetList) - 1
	argType := cols[argCol].Type
	resType := argType
	switch kind {
	case flow.CountStar, flow.Count:
		resType = types.Int8
	case flow.Sum, flow.Avg:
		switch argType.OID {
		case types.OIDInt2, types.OIDInt4:
			resType = map[bool]types.Type{true: types.Int8, false: types.Numeric}[kind == flow.Sum]
		case types.OIDInt8, types.OIDNumeric:
			resType = types.Numeric
		case types.OIDFloat4:
			resType = map[bool]types.Type{true: types.Float4, false: types.Float8}[kind == flow.Sum]
		case types.OIDFloat8:
		default:
			return sqlerr.NotSupported("window function %s(%s) is not supported in a materialized view", name, argType.Name()).At(fc.Location)
		}
	}
	op := &flow.RowsWindow{Preceding: preceding, Kind: kind, Col: argCol}
	for i := range win.PartitionClause {
		op.PartitionBy = append(op.PartitionBy, argCol+1+i)
	}
	for i, o := range order {
		o.Col = argCol + 1 + len(win.PartitionClause) + i
		op.OrderBy = append(op.OrderBy, o)
	}
	// The derived relation: the select list's items in their places,
	// the window's value at pos.
	var out []exec.Column
	var proj []int
	for i := range st.TargetList {
		switch {
		case i < pos:
			out, proj = append(out, exec.Column{Name: fmt.Sprintf("strand c%d", i), Type: cols[i].Type}), append(proj, i)
		case i == pos:
			out, proj = append(out, exec.Column{Name: fmt.Sprintf("strand c%d", i), Type: resType}), append(proj, len(cols))
		default:
			out, proj = append(out, exec.Column{Name: fmt.Sprintf("strand c%d", i), Type: cols[i-1].Type}), append(proj, i-1)
		}
	}
	d := c.newDerived(out, func() (built, error) {
		b, err := c.translate(l)
		if err != nil {
			return built{}, err
		}
		b = c.materialize(b)
		n := c.add("rows window", op, b.node)
		return built{node: c.add("project", &flow.Project{Cols: proj}, n), width: len(proj)}, nil
	})
	alias := "strand window"
	st.FromClause = []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Relname: d.name, Inh: true, Relpersistence: "p", Alias: &pg.Alias{Aliasname: alias}, Location: -1}}}}
	st.WhereClause = nil
	st.TargetList = nil
	for i, n := range names {
		st.TargetList = append(st.TargetList, pg.MakeResTargetNodeWithNameAndVal(n,
			pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(fmt.Sprintf("strand c%d", i))}, -1), -1))
	}
	return nil
}

// outputName is the name PostgreSQL gives a select list item: its
// alias, a column's name, a function's, else ?column?.
func outputName(rt *pg.ResTarget) string {
	if rt.Name != "" {
		return rt.Name
	}
	switch x := rt.Val.Node.(type) {
	case *pg.Node_ColumnRef:
		f := x.ColumnRef.Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval
		}
	case *pg.Node_FuncCall:
		return funcName(x.FuncCall)
	case *pg.Node_TypeCast:
		if n := x.TypeCast.TypeName.GetNames(); len(n) > 0 {
			return n[len(n)-1].GetString_().GetSval()
		}
	}
	return "?column?"
}
