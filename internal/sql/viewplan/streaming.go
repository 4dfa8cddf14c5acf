package viewplan

import (
	"fmt"
	"math"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// maxTopN is flow.TopN's bound on offset+limit: a changed partition's
// top rows are read into memory.
const maxTopN = 100_000

// maxConstRows bounds a constant relation (generate_series): each row
// of what it is joined with is repeated by it.
const maxConstRows = 10_000

// topN compiles item, a subquery in outer's FROM, when it is the top-N
// form: a ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) column the
// outer WHERE bounds (rn <= N, rn < N, rn = N, rn BETWEEN a AND b). It
// returns nil when item is not one. The subquery becomes a derived
// relation: its own query with the window's keys as extra columns,
// through flow.TopN, which appends the row number. The outer WHERE is
// kept: over the top-N's rows it passes all (or those of a narrower
// bound).
func (c *compiler) topN(outer *pg.SelectStmt, item *pg.Node) (*pg.Node, error) {
	rs := item.GetRangeSubselect()
	if rs == nil || rs.Lateral {
		return nil, nil
	}
	inner := rs.Subquery.GetSelectStmt()
	if inner == nil || inner.Larg != nil {
		return nil, nil
	}
	pos := -1
	var fc *pg.FuncCall
	for i, t := range inner.TargetList {
		f := t.GetResTarget().GetVal().GetFuncCall()
		if f == nil || f.Over == nil || funcName(f) != "row_number" {
			continue
		}
		if pos >= 0 {
			return nil, sqlerr.NotSupported("more than one ROW_NUMBER() in a subquery is not supported in a materialized view").At(f.Location)
		}
		pos, fc = i, f
	}
	if pos < 0 {
		return nil, nil
	}
	win := fc.Over
	switch {
	case win.Refname != "" || len(inner.WindowClause) > 0:
		return nil, sqlerr.NotSupported("named windows are not supported in a materialized view").At(fc.Location)
	case len(inner.DistinctClause) > 0:
		return nil, sqlerr.NotSupported("SELECT DISTINCT with ROW_NUMBER() is not supported in a materialized view").At(fc.Location)
	case len(inner.SortClause) > 0 || inner.LimitCount != nil || inner.LimitOffset != nil:
		return nil, sqlerr.NotSupported("ORDER BY or LIMIT beside ROW_NUMBER() is not supported in a materialized view").At(fc.Location)
	case len(fc.Args) > 0:
		return nil, sqlerr.Errorf(sqlerr.UndefinedFunction, "function row_number takes no arguments").At(fc.Location)
	}
	rt := inner.TargetList[pos].GetResTarget()
	rn := rt.Name
	if rn == "" {
		rn = "row_number"
	}
	alias := ""
	if rs.Alias != nil {
		alias = rs.Alias.Aliasname
		if pos < len(rs.Alias.Colnames) {
			rn = rs.Alias.Colnames[pos].GetString_().GetSval()
		}
	}
	lo, hi := int64(1), int64(math.MaxInt64)
	bounded := false
	if outer.WhereClause != nil {
		for _, t := range conjuncts(outer.WhereClause) {
			l, h, ok := rowNumberBound(t, alias, rn)
			if ok {
				lo, hi = max(lo, l), min(hi, h)
				bounded = bounded || h != math.MaxInt64
			}
		}
	}
	if !bounded {
		return nil, sqlerr.NotSupported("ROW_NUMBER() in a materialized view needs an upper bound on %s in the WHERE over its subquery (the top-N form, %s <= N)", rn, rn).At(fc.Location)
	}
	limit := max(hi-lo+1, 1) // an empty range: the kept WHERE passes nothing
	if lo-1 > maxTopN || limit > maxTopN-(lo-1) {
		return nil, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "top-N of rows %d to %d: at most %d rows per partition are kept", lo, hi, maxTopN).At(fc.Location)
	}
	// The subquery with the window's keys in ROW_NUMBER's place (at the
	// end): they are computed where ROW_NUMBER would be, after any
	// GROUP BY.
	targets := append(append([]*pg.Node(nil), inner.TargetList[:pos]...), inner.TargetList[pos+1:]...)
	np := len(win.PartitionClause)
	for i, p := range win.PartitionClause {
		targets = append(targets, pg.MakeResTargetNodeWithNameAndVal(fmt.Sprintf("strand partition %d", i), p, -1))
	}
	var order []flow.SortKey
	for i, o := range win.OrderClause {
		sb := o.GetSortBy()
		if sb.SortbyDir == pg.SortByDir_SORTBY_USING {
			return nil, sqlerr.NotSupported("ORDER BY USING is not supported in a materialized view").At(sb.Location)
		}
		targets = append(targets, pg.MakeResTargetNodeWithNameAndVal(fmt.Sprintf("strand order %d", i), sb.Node, -1))
		k := flow.SortKey{Desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC}
		switch sb.SortbyNulls {
		case pg.SortByNulls_SORTBY_NULLS_FIRST:
			k.Nulls = flow.NullsFirst
		case pg.SortByNulls_SORTBY_NULLS_LAST:
			k.Nulls = flow.NullsLast
		}
		order = append(order, k)
	}
	inner.TargetList = targets
	l, cols, err := c.planSelect(inner)
	if err != nil {
		return nil, err
	}
	k := len(cols) - np - len(order) // the subquery's own columns
	op := &flow.TopN{Limit: limit, Offset: lo - 1, RowNumber: true}
	for i := range np {
		op.PartitionBy = append(op.PartitionBy, k+i)
	}
	for i, o := range order {
		o.Col = k + np + i
		op.OrderBy = append(op.OrderBy, o)
	}
	// The derived relation's columns are the subquery's, the row
	// number in its place; TopN appends it after all of its input's.
	var out []exec.Column
	var proj []int
	for i := 0; i <= k; i++ {
		switch {
		case i < pos:
			out, proj = append(out, cols[i]), append(proj, i)
		case i == pos:
			out, proj = append(out, exec.Column{Name: rt.Name, Type: types.Int8}), append(proj, len(cols))
		default:
			out, proj = append(out, cols[i-1]), append(proj, i-1)
		}
	}
	if out[pos].Name == "" {
		out[pos].Name = "row_number"
	}
	d := c.newDerived(out, func() (built, error) {
		b, err := c.translate(l)
		if err != nil {
			return built{}, err
		}
		b = c.materialize(b)
		n := c.add("top-n", op, b.node)
		return built{node: c.add("project", &flow.Project{Cols: proj}, n), width: len(proj)}, nil
	})
	return &pg.Node{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Relname: d.name, Inh: true, Relpersistence: "p", Alias: rs.Alias, Location: -1}}}, nil
}

// rowNumberBound reads a WHERE term bounding the row number column:
// the rows lo..hi it passes, ok false if it is not such a term.
func rowNumberBound(t *pg.Node, alias, rn string) (lo, hi int64, ok bool) {
	lo, hi = 1, math.MaxInt64
	a := t.GetAExpr()
	if a == nil || len(a.Name) != 1 {
		return 0, 0, false
	}
	isRN := func(n *pg.Node) bool {
		cr := n.GetColumnRef()
		if cr == nil {
			return false
		}
		switch len(cr.Fields) {
		case 1:
			return cr.Fields[0].GetString_().GetSval() == rn
		case 2:
			return alias != "" && cr.Fields[0].GetString_().GetSval() == alias && cr.Fields[1].GetString_().GetSval() == rn
		}
		return false
	}
	intOf := func(n *pg.Node) (int64, bool) {
		k := n.GetAConst()
		if k == nil || k.GetIval() == nil {
			return 0, false
		}
		return int64(k.GetIval().Ival), true
	}
	op := a.Name[0].GetString_().GetSval()
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		var k int64
		switch {
		case isRN(a.Lexpr):
			if k, ok = intOf(a.Rexpr); !ok {
				return 0, 0, false
			}
		case isRN(a.Rexpr):
			if k, ok = intOf(a.Lexpr); !ok {
				return 0, 0, false
			}
			op = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]
		default:
			return 0, 0, false
		}
		switch op {
		case "<=":
			hi = k
		case "<":
			hi = k - 1
		case "=":
			lo, hi = k, k
		case ">=":
			lo = k
		case ">":
			lo = k + 1
		default:
			return 0, 0, false
		}
		return lo, hi, true
	case pg.A_Expr_Kind_AEXPR_BETWEEN:
		items := a.Rexpr.GetList().GetItems()
		if !isRN(a.Lexpr) || len(items) != 2 {
			return 0, 0, false
		}
		l, ok1 := intOf(items[0])
		h, ok2 := intOf(items[1])
		if !ok1 || !ok2 {
			return 0, 0, false
		}
		return l, h, true
	}
	return 0, 0, false
}

// tableFunction compiles a function in FROM: TUMBLE and HOP (windows
// on event time, as RisingWave and Flink write them) and
// generate_series over constants.
func (c *compiler) tableFunction(rf *pg.RangeFunction) (*pg.Node, error) {
	if rf.Ordinality || rf.IsRowsfrom || len(rf.Functions) != 1 || len(rf.Coldeflist) > 0 {
		return nil, sqlerr.NotSupported("ROWS FROM, WITH ORDINALITY and column definitions of functions in FROM are not supported in a materialized view")
	}
	items := rf.Functions[0].GetList().GetItems()
	if len(items) == 0 || items[0].GetFuncCall() == nil || len(items) > 1 && items[1].GetNode() != nil {
		return nil, sqlerr.NotSupported("this function in FROM is not supported in a materialized view")
	}
	fc := items[0].GetFuncCall()
	name := funcName(fc)
	var d *derived
	var err error
	switch name {
	case "tumble", "hop":
		d, err = c.window(fc, name)
	case "session":
		d, err = c.session(fc)
	case "generate_series":
		d, err = c.series(fc)
	default:
		return nil, sqlerr.NotSupported("table function %s is not supported in a materialized view (TUMBLE, HOP, SESSION and generate_series are)", name).At(fc.Location)
	}
	if err != nil {
		return nil, err
	}
	alias := rf.Alias
	if alias == nil {
		alias = &pg.Alias{Aliasname: name}
	}
	return &pg.Node{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Relname: d.name, Inh: true, Relpersistence: "p", Alias: alias, Location: fc.Location}}}, nil
}

// constant evaluates an argument that must be a constant.
func (c *compiler) constant(n *pg.Node, what string, loc int32) (any, types.Type, error) {
	bad := sqlerr.Errorf(sqlerr.InvalidParameterValue, "%s must be a constant", what).At(loc)
	if n.GetColumnRef() != nil {
		return nil, types.Type{}, bad
	}
	var noColumns noScope
	comp := expr.NewCompiler(nil)
	comp.Scope = noColumns
	e, err := comp.Compile(n)
	if err != nil {
		return nil, types.Type{}, err
	}
	if !e.Const {
		return nil, types.Type{}, bad
	}
	v, err := e.Eval(c.env, nil)
	return v, e.Type, err
}

// noScope has no columns.
type noScope struct{}

func (noScope) Column(names []string, loc int32) (*expr.Expr, error) {
	return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "a table function's size arguments must be constants").At(loc)
}

// duration reads an interval argument as a fixed span: a month is none.
func (c *compiler) duration(n *pg.Node, what string, loc int32) (time.Duration, error) {
	v, t, err := c.constant(n, what, loc)
	if err != nil {
		return 0, err
	}
	iv, ok := v.(types.IntervalValue)
	if !ok || t.OID != types.OIDInterval {
		return 0, sqlerr.Errorf(sqlerr.DatatypeMismatch, "%s must be an interval, not %s", what, t.Name()).At(loc)
	}
	if iv.Months != 0 {
		return 0, sqlerr.Errorf(sqlerr.InvalidParameterValue, "%s of months is not a fixed span of time", what).At(loc)
	}
	return time.Duration(iv.Days)*24*time.Hour + time.Duration(iv.Micros)*time.Microsecond, nil
}

// window compiles TUMBLE(rel, time_col, size [, offset]) and HOP(rel,
// time_col, slide, size [, offset]): rel's rows with window_start and
// window_end appended (HOP: a row per window holding the time).
func (c *compiler) window(fc *pg.FuncCall, name string) (*derived, error) {
	nsizes := 1
	if name == "hop" {
		nsizes = 2
	}
	args := fc.Args
	if len(args) != 2+nsizes && len(args) != 3+nsizes {
		return nil, sqlerr.Errorf(sqlerr.UndefinedFunction, "%s takes a relation, a time column, %d interval(s) and an optional offset", name, nsizes).At(fc.Location)
	}
	rel := args[0].GetColumnRef()
	tc := args[1].GetColumnRef()
	if rel == nil || len(rel.Fields) > 2 || tc == nil || len(tc.Fields) != 1 {
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "%s's first arguments are a relation's name and its time column's", name).At(fc.Location)
	}
	var sizes []time.Duration
	for i, a := range args[2:] {
		what := []string{"window size", "window offset"}[min(i, 1)]
		if nsizes == 2 {
			what = []string{"hop slide", "window size", "window offset"}[i]
		}
		d, err := c.duration(a, what, fc.Location)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, d)
	}
	var offset time.Duration
	if len(sizes) > nsizes {
		offset = sizes[nsizes]
	}
	rv := &pg.RangeVar{Relname: rel.Fields[len(rel.Fields)-1].GetString_().GetSval(), Inh: true, Relpersistence: "p", Location: rel.Location}
	if len(rel.Fields) == 2 {
		rv.Schemaname = rel.Fields[0].GetString_().GetSval()
	}
	all := &pg.SelectStmt{
		TargetList: []*pg.Node{pg.MakeResTargetNodeWithVal(pg.MakeColumnRefNode([]*pg.Node{pg.MakeAStarNode()}, -1), -1)},
		FromClause: []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: rv}}},
	}
	l, cols, err := c.planSelect(all)
	if err != nil {
		return nil, err
	}
	timeName := tc.Fields[0].GetString_().GetSval()
	timeCol := -1
	for i, col := range cols {
		if col.Name == timeName {
			timeCol = i
		}
	}
	if timeCol < 0 {
		return nil, sqlerr.Errorf(sqlerr.UndefinedColumn, "column %q does not exist", timeName).At(tc.Location)
	}
	tt := cols[timeCol].Type
	if tt.OID != types.OIDTimestamp && tt.OID != types.OIDTimestampTZ {
		return nil, sqlerr.Errorf(sqlerr.DatatypeMismatch, "%s's time column %s is %s, not a timestamp", name, timeName, tt.Name()).At(tc.Location)
	}
	var op flow.Operator
	if name == "tumble" {
		if sizes[0] < time.Microsecond {
			return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "window size must be at least 1 microsecond").At(fc.Location)
		}
		op = &flow.Tumble{TimeCol: timeCol, Size: sizes[0], Offset: offset}
	} else {
		slide, size := sizes[0], sizes[1]
		if slide < time.Microsecond || size < slide {
			return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "hop slide must be at least 1 microsecond and at most the window size").At(fc.Location)
		}
		if (size+slide-1)/slide > 1024 {
			return nil, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "a hop window of %v sliding by %v puts a row in more than 1024 windows", size, slide).At(fc.Location)
		}
		op = &flow.Hop{TimeCol: timeCol, Slide: slide, Size: size, Offset: offset}
	}
	out := append(append([]exec.Column(nil), cols...), exec.Column{Name: "window_start", Type: tt}, exec.Column{Name: "window_end", Type: tt})
	return c.newDerived(out, func() (built, error) {
		b, err := c.translate(l)
		if err != nil {
			return built{}, err
		}
		b = c.materialize(b)
		nb := built{node: c.add(name, op, b.node), width: len(out), appendOnly: b.appendOnly}
		if timeCol < len(b.times) && b.times[timeCol].kind == timeEvent {
			// The window start's lineage: its windows close by the
			// watermark (emit.go).
			nb.times = make([]colTime, len(out))
			copy(nb.times, b.times)
			size := sizes[0]
			if name == "hop" {
				size = sizes[1]
			}
			nb.times[len(out)-2] = colTime{kind: timeWindowStart, size: size}
		}
		return nb, nil
	}), nil
}

// series compiles generate_series(start, stop [, step]) over integer
// constants: a constant relation.
func (c *compiler) series(fc *pg.FuncCall) (*derived, error) {
	if len(fc.Args) != 2 && len(fc.Args) != 3 {
		return nil, sqlerr.NotSupported("generate_series with %d arguments is not supported in a materialized view", len(fc.Args)).At(fc.Location)
	}
	var vals []int64
	typ := types.Int4
	for _, a := range fc.Args {
		v, t, err := c.constant(a, "generate_series' arguments", fc.Location)
		if err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case int32:
			vals = append(vals, int64(x))
		case int64:
			vals = append(vals, x)
			typ = types.Int8
		case int16:
			vals = append(vals, int64(x))
		default:
			return nil, sqlerr.NotSupported("generate_series over %s is not supported in a materialized view (integers are)", t.Name()).At(fc.Location)
		}
	}
	step := int64(1)
	if len(vals) == 3 {
		step = vals[2]
	}
	if step == 0 {
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "step size cannot equal zero").At(fc.Location)
	}
	var rows []types.Row
	for v := vals[0]; step > 0 && v <= vals[1] || step < 0 && v >= vals[1]; v += step {
		if len(rows) == maxConstRows {
			return nil, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "generate_series of more than %d rows in a materialized view", maxConstRows).At(fc.Location)
		}
		var x any = v
		if typ == types.Int4 {
			x = int32(v)
		}
		rows = append(rows, types.Row{x})
	}
	d := c.newDerived([]exec.Column{{Name: "generate_series", Type: typ}}, nil)
	d.consts = rows
	d.emit = func() (built, error) { return built{node: -1, width: 1, consts: rows, isConst: true}, nil }
	return d, nil
}
