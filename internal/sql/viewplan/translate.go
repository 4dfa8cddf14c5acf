package viewplan

import (
	"slices"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// built is a plan node compiled into the graph.
type built struct {
	node  flow.Node // -1 for a constant not yet given a node
	width int
	// key are columns no two rows share the values of (unique) or the
	// columns the view is best read by; nil: none.
	key    []int
	unique bool
	// A constant relation's rows: a join repeats each row of its other
	// side by them (materialize gives it a node otherwise).
	consts  []types.Row
	isConst bool
	// times is what is known of each column's event time (emit.go);
	// nil: nothing.
	times []colTime
	// final: every row is emitted once and never changed (the rows of
	// aggregates emitting on window close, filtered and projected).
	final bool
	// appendOnly: rows are only ever inserted (an append source with a
	// watermark, through filters, projections, inner joins, UNION ALL
	// and TUMBLE or HOP), so a join may forget a row no record to come
	// can match (joinExpiry).
	appendOnly bool
}

func (c *compiler) input(name string) flow.Node {
	if n, ok := c.inputs[name]; ok {
		return n
	}
	c.nodes = append(c.nodes, recNode{name: name})
	n := flow.Node(len(c.nodes) - 1)
	c.inputs[name] = n
	c.inputNames = append(c.inputNames, name)
	return n
}

func (c *compiler) add(name string, op flow.Operator, ins ...flow.Node) flow.Node {
	c.nodes = append(c.nodes, recNode{name: name, op: op, ins: ins})
	return flow.Node(len(c.nodes) - 1)
}

// materialize gives a constant relation its node.
func (c *compiler) materialize(b built) built {
	if b.isConst && b.node < 0 {
		b.node = c.add("constant", &constRows{rows: b.consts})
	}
	return b
}

// fx is e as a flow expression.
func (c *compiler) fx(e *expr.Expr) flow.Expr {
	env := c.env
	return func(r types.Row) (any, error) { return e.Eval(env, r) }
}

// translate compiles a plan node (once: a WITH query read twice is one
// node).
func (c *compiler) translate(l *exec.Logical) (built, error) {
	if b, ok := c.memo[l]; ok {
		return b, nil
	}
	b, err := c.translateOp(l)
	if err != nil {
		return built{}, err
	}
	c.memo[l] = b
	return b, nil
}

func (c *compiler) in(l *exec.Logical) (built, error) {
	b, err := c.translate(l.In[0])
	return c.materialize(b), err
}

func (c *compiler) translateOp(l *exec.Logical) (built, error) {
	switch l.Op {
	case exec.OpScan:
		switch r := l.Relation.(type) {
		case *derived:
			if r.done == nil {
				b, err := r.emit()
				if err != nil {
					return built{}, err
				}
				r.done = &b
			}
			return *r.done, nil
		case input:
			// A relation with a watermark is an append source: views
			// and upsert sources have none.
			b := built{node: c.input(r.rel.Name), width: len(r.rel.Columns), appendOnly: r.rel.Watermark}
			if r.rel.Watermark && r.rel.EventTime >= 0 && r.rel.EventTime < b.width {
				b.times = make([]colTime, b.width)
				b.times[r.rel.EventTime] = colTime{kind: timeEvent}
			}
			return b, nil
		}
		return built{}, sqlerr.Errorf(sqlerr.InternalError, "viewplan: scan of a %T", l.Relation)
	case exec.OpValues:
		rows, err := c.constRows(l)
		if err != nil {
			return built{}, err
		}
		w := 0
		if len(rows) > 0 {
			w = len(rows[0])
		}
		return built{node: -1, width: w, consts: rows, isConst: true}, nil
	case exec.OpFilter:
		in, err := c.in(l)
		if err != nil {
			return built{}, err
		}
		in.node = c.add("filter", &flow.Filter{Pred: c.fx(l.Pred)}, in.node)
		return in, nil
	case exec.OpProject:
		return c.project(l)
	case exec.OpAggregate:
		return c.aggregate(l)
	case exec.OpJoin:
		return c.join(l)
	case exec.OpDistinct:
		in, err := c.in(l)
		if err != nil {
			return built{}, err
		}
		return built{node: c.add("distinct", &flow.Distinct{}, in.node), width: in.width, key: allCols(in.width), unique: true, times: in.times}, nil
	case exec.OpSort:
		c.notices = append(c.notices, "ORDER BY without LIMIT is ignored in a materialized view: its rows have no order; order them when reading it")
		return c.in(l)
	case exec.OpLimit:
		return c.limit(l)
	case exec.OpConcat:
		var ins []flow.Node
		width, appendOnly := 0, true
		for _, x := range l.In {
			b, err := c.translate(x)
			if err != nil {
				return built{}, err
			}
			b = c.materialize(b)
			ins, width = append(ins, b.node), b.width
			appendOnly = appendOnly && b.appendOnly
		}
		return built{node: c.add("union all", &flow.Union{Inputs: len(ins)}, ins...), width: width, appendOnly: appendOnly}, nil
	case exec.OpSetOp:
		lb, err := c.translate(l.In[0])
		if err != nil {
			return built{}, err
		}
		rb, err := c.translate(l.In[1])
		if err != nil {
			return built{}, err
		}
		lb, rb = c.materialize(lb), c.materialize(rb)
		name := map[bool]string{true: "intersect", false: "except"}[l.Intersect]
		out := built{node: c.add(name, &flow.SetOp{Intersect: l.Intersect, All: l.All}, lb.node, rb.node), width: lb.width}
		if !l.All {
			out.key, out.unique = allCols(lb.width), true
		}
		return out, nil
	}
	return built{}, sqlerr.Errorf(sqlerr.InternalError, "viewplan: plan operator %d", l.Op)
}

func allCols(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func (c *compiler) constRows(l *exec.Logical) ([]types.Row, error) {
	var rows []types.Row
	for _, r := range l.Rows {
		row := make(types.Row, len(r))
		for i, e := range r {
			v, err := e.Eval(c.env, nil)
			if err != nil {
				return nil, err
			}
			row[i] = v
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// project is a select list: flow.Project when every item is a column,
// flow.Map otherwise. The input's key survives if its columns do.
func (c *compiler) project(l *exec.Logical) (built, error) {
	cols := make([]int, len(l.Exprs))
	pure := true
	for i, e := range l.Exprs {
		if j, ok := e.ColumnIndex(); ok {
			cols[i] = j
		} else {
			cols[i], pure = -1, false
		}
	}
	var in built
	pruned := false
	if pure {
		// A join below keeps only the columns read here (prune.go).
		var err error
		var pcols []int
		if in, pcols, pruned, err = c.prunedJoin(l.In[0], cols); err != nil {
			return built{}, err
		} else if pruned {
			cols = pcols
		}
	}
	if !pruned {
		var err error
		if in, err = c.in(l); err != nil {
			return built{}, err
		}
	}
	out := built{width: len(l.Exprs), times: timesOf(in.times, cols), final: in.final, appendOnly: in.appendOnly}
	if pure {
		out.node = c.add("project", &flow.Project{Cols: cols}, in.node)
	} else {
		exprs := make([]flow.Expr, len(l.Exprs))
		for i, e := range l.Exprs {
			exprs[i] = c.fx(e)
		}
		out.node = c.add("map", &flow.Map{Exprs: exprs}, in.node)
	}
	if in.key != nil {
		key := make([]int, 0, len(in.key))
		for _, k := range in.key {
			for i, col := range cols {
				if col == k {
					key = append(key, i)
					break
				}
			}
		}
		if len(key) == len(in.key) {
			out.key, out.unique = key, in.unique
		}
	}
	return out, nil
}

// aggregate is GROUP BY: the group keys and the calls' arguments
// computed by a Map when any is not a plain column, then
// flow.Aggregate, whose row is the group keys then the calls' results
// as exec's plan has it.
func (c *compiler) aggregate(l *exec.Logical) (built, error) {
	in, err := c.in(l)
	if err != nil {
		return built{}, err
	}
	// The columns the aggregate reads: the group keys, then each
	// call's argument (COUNT(*) has none).
	var exprs []flow.Expr
	var cols []int // the input column of each, -1 if computed
	read := func(f flow.Expr, x *expr.Expr) {
		exprs = append(exprs, f)
		i, ok := -1, false
		if x != nil {
			i, ok = x.ColumnIndex()
		}
		if !ok {
			i = -1
		}
		cols = append(cols, i)
	}
	for _, g := range l.Exprs {
		read(c.fx(g), g)
	}
	var calls []flow.AggCall
	for _, a := range l.Aggs {
		call, arg, argExpr, err := c.aggCall(a)
		if err != nil {
			return built{}, err
		}
		if call.Kind != flow.CountStar {
			read(arg, argExpr)
		}
		if call.Kind == flow.StringAgg {
			// The delimiter and the ORDER BY keys are read beside
			// the value; their columns are set below.
			read(c.fx(a.Args[1]), a.Args[1])
			for _, o := range a.Order {
				read(c.fx(o.Expr), o.Expr)
				sk := flow.SortKey{Desc: o.Desc, Nulls: flow.NullsLast}
				if o.NullsFirst {
					sk.Nulls = flow.NullsFirst
				}
				call.Order = append(call.Order, sk)
			}
		}
		calls = append(calls, call)
	}
	node := in.node
	if slices.Contains(cols, -1) {
		// Computed: a Map makes exactly these columns.
		node = c.add("map", &flow.Map{Exprs: exprs}, node)
		cols = allCols(len(exprs))
	}
	groupBy := cols[:len(l.Exprs)]
	next := len(l.Exprs)
	for j := range calls {
		if calls[j].Kind != flow.CountStar {
			calls[j].Col = cols[next]
			next++
		}
		if calls[j].Kind == flow.StringAgg {
			calls[j].Delim = cols[next]
			next++
			for k := range calls[j].Order {
				calls[j].Order[k].Col = cols[next]
				next++
			}
		}
	}
	// What is known of the group keys' times: a window start's lineage
	// makes the aggregate windowed (emit.go).
	var keyTimes []colTime
	if in.times != nil {
		keyCols := make([]int, len(l.Exprs))
		for i, g := range l.Exprs {
			keyCols[i] = -1
			if j, ok := g.ColumnIndex(); ok {
				keyCols[i] = j
			}
		}
		keyTimes = timesOf(in.times, keyCols)
	}
	pol, aggGroupBy, perm := c.windowPolicy(groupBy, timesByCol(keyTimes, groupBy), len(calls))
	width := len(groupBy) + len(calls)
	out := built{node: c.add("aggregate", &flow.Aggregate{GroupBy: aggGroupBy, Aggs: calls, Window: pol}, node), width: width}
	if perm != nil {
		out.node = c.add("project", &flow.Project{Cols: perm}, out.node)
	}
	if pol != nil {
		c.windowed++
		out.final = pol.EmitOnClose
	}
	if keyTimes != nil {
		out.times = make([]colTime, width)
		copy(out.times, keyTimes)
	}
	if len(groupBy) > 0 {
		out.key, out.unique = allCols(len(groupBy)), true
		// Without aggregate calls a group's row is its values: emitted
		// once when the group appears (or closes), never changed, and
		// over rows only inserted never retracted (q8's windowed
		// GROUP BY id, name, window_start).
		// Not when emitting on close: a row would come after its
		// window closed (a view refuses joining such rows anyway).
		out.appendOnly = in.appendOnly && len(calls) == 0 && (pol == nil || !pol.EmitOnClose)
	}
	return out, nil
}

// aggCall maps an aggregate call to flow's: its kind and its argument
// (with FILTER, NULL where the filter does not pass, which every kind
// but COUNT(*) skips).
func (c *compiler) aggCall(a exec.LogicalAgg) (flow.AggCall, flow.Expr, *expr.Expr, error) {
	var kind flow.AggKind
	switch a.Name {
	case "count":
		switch {
		case a.Star:
			kind = flow.CountStar
		case a.Distinct:
			kind = flow.CountDistinct
		default:
			kind = flow.Count
		}
	case "sum", "avg":
		kind = flow.Sum
		if a.Name == "avg" {
			kind = flow.Avg
		}
		if a.Distinct {
			return flow.AggCall{}, nil, nil, sqlerr.NotSupported("%s(DISTINCT) is not supported in a materialized view", a.Name)
		}
		switch a.Args[0].Type.OID {
		case types.OIDInt2, types.OIDInt4, types.OIDInt8, types.OIDNumeric, types.OIDFloat4, types.OIDFloat8:
		default:
			return flow.AggCall{}, nil, nil, sqlerr.NotSupported("%s(%s) is not supported in a materialized view", a.Name, a.Args[0].Type.Name())
		}
	case "min":
		kind = flow.Min
	case "max":
		kind = flow.Max
	case "bool_and":
		kind = flow.BoolAnd
	case "bool_or":
		kind = flow.BoolOr
	case "string_agg":
		kind = flow.StringAgg
		if a.Distinct {
			return flow.AggCall{}, nil, nil, sqlerr.NotSupported("string_agg(DISTINCT ...) is not supported in a materialized view")
		}
	case "var_samp", "var_pop", "stddev_samp", "stddev_pop":
		kind = map[string]flow.AggKind{"var_samp": flow.VarSamp, "var_pop": flow.VarPop,
			"stddev_samp": flow.StddevSamp, "stddev_pop": flow.StddevPop}[a.Name]
	default:
		return flow.AggCall{}, nil, nil, sqlerr.NotSupported("aggregate %s is not supported in a materialized view (%s are)", a.Name, keptAggregates)
	}
	if len(a.Args) > 1 && kind != flow.StringAgg {
		return flow.AggCall{}, nil, nil, sqlerr.NotSupported("aggregate %s of %d arguments is not supported in a materialized view", a.Name, len(a.Args))
	}
	if a.Filter == nil {
		if kind == flow.CountStar {
			return flow.AggCall{Kind: kind}, nil, nil, nil
		}
		return flow.AggCall{Kind: kind}, c.fx(a.Args[0]), a.Args[0], nil
	}
	env, filter := c.env, a.Filter
	var arg *expr.Expr
	if kind == flow.CountStar {
		// COUNT(*) FILTER (...) counts the rows the filter passes:
		// COUNT of a value that is NULL where it does not.
		kind = flow.Count
	} else {
		arg = a.Args[0]
	}
	return flow.AggCall{Kind: kind}, func(r types.Row) (any, error) {
		ok, err := filter.Eval(env, r)
		if err != nil || !expr.Truthy(ok) {
			return nil, err
		}
		if arg == nil {
			return true, nil
		}
		return arg.Eval(env, r)
	}, nil, nil
}

// join compiles a join on its equalities: each side's keys as columns
// (computed by a Map when not plain columns), flow.Join, the extra key
// columns dropped, and the other ON terms as a filter (inner joins
// only: an outer join's padding depends on them).
func (c *compiler) join(l *exec.Logical) (built, error) {
	lw, rw := l.LeftWidth, l.RightWidth
	if len(l.EqLeft) == 0 && l.Join == exec.JoinLeft && l.Pred == nil && isScalar(l.In[1]) {
		return c.scalarJoin(l)
	}
	if len(l.EqLeft) == 0 {
		return c.crossConst(l)
	}
	lb, err := c.translate(l.In[0])
	if err != nil {
		return built{}, err
	}
	rb, err := c.translate(l.In[1])
	if err != nil {
		return built{}, err
	}
	lb, rb = c.materialize(lb), c.materialize(rb)
	// keys returns the side's node with its key columns and their
	// indexes; off is where the side starts in the joined row the key
	// expressions read.
	keys := func(b built, eq []*expr.Expr, off, width int) (flow.Node, []int, int) {
		var cols []int
		var extra []*expr.Expr
		for _, e := range eq {
			if i, ok := e.ColumnIndex(); ok {
				cols = append(cols, i-off)
				continue
			}
			extra = append(extra, e)
			cols = append(cols, width+len(extra)-1)
		}
		if len(extra) == 0 {
			return b.node, cols, width
		}
		exprs := make([]flow.Expr, width, width+len(extra))
		for i := range width {
			exprs[i] = func(r types.Row) (any, error) { return r[i], nil }
		}
		env := c.env
		for _, e := range extra {
			exprs = append(exprs, func(r types.Row) (any, error) {
				if off == 0 {
					return e.Eval(env, r)
				}
				joined := make(types.Row, off+len(r))
				copy(joined[off:], r)
				return e.Eval(env, joined)
			})
		}
		return c.add("join keys", &flow.Map{Exprs: exprs}, b.node), cols, width + len(extra)
	}
	ln, lk, lw2 := keys(lb, l.EqLeft, 0, lw)
	rn, rk, rw2 := keys(rb, l.EqRight, lw, rw)
	kind := map[exec.JoinKind]flow.JoinKind{exec.JoinInner: flow.InnerJoin, exec.JoinLeft: flow.LeftJoin,
		exec.JoinRight: flow.RightJoin, exec.JoinFull: flow.FullJoin}[l.Join]
	expire := c.joinExpiry(l, lb, rb)
	var node flow.Node
	if l.Pred != nil && kind != flow.InnerJoin {
		// An outer join's other ON terms decide which rows are padded:
		// the join evaluates them itself.
		node = c.add("outer join", &flow.ResidualJoin{Kind: kind, LeftKey: lk, RightKey: rk, LeftWidth: lw2, RightWidth: rw2,
			Residual: c.residual(l.Pred, lw, lw2, rw), Expire: expire}, ln, rn)
	} else {
		node = c.add("join", &flow.Join{Kind: kind, LeftKey: lk, RightKey: rk, LeftWidth: lw2, RightWidth: rw2, Expire: expire}, ln, rn)
	}
	if lw2 != lw || rw2 != rw {
		cols := allCols(lw)
		for i := range rw {
			cols = append(cols, lw2+i)
		}
		node = c.add("project", &flow.Project{Cols: cols}, node)
	}
	if l.Pred != nil && kind == flow.InnerJoin {
		node = c.add("filter", &flow.Filter{Pred: c.fx(l.Pred)}, node)
	}
	out := built{node: node, width: lw + rw, times: concatTimes(lb.times, lw, rb.times, rw),
		appendOnly: kind == flow.InnerJoin && lb.appendOnly && rb.appendOnly}
	if lb.key != nil && rb.key != nil {
		out.key = append(append([]int(nil), lb.key...), rb.key...)
		for i := len(lb.key); i < len(out.key); i++ {
			out.key[i] += lw
		}
		out.unique = lb.unique && rb.unique
	}
	return out, nil
}

// residual is an outer join's ON terms over the joined row of sides
// lw2 and rw wide whose left side has lw columns of its own (the rest
// computed join keys, which the terms do not read).
func (c *compiler) residual(pred *expr.Expr, lw, lw2, rw int) flow.Expr {
	f := c.fx(pred)
	if lw == lw2 {
		return f
	}
	return func(r types.Row) (any, error) {
		row := make(types.Row, 0, lw+rw)
		row = append(append(row, r[:lw]...), r[lw2:lw2+rw]...)
		return f(row)
	}
}

// crossConst compiles a join without equalities, which a view keeps
// only when a side is constant: each row of the other side repeated by
// the constant rows, the ON condition a filter (inner joins only).
func (c *compiler) crossConst(l *exec.Logical) (built, error) {
	refuse := sqlerr.NotSupported("a join without an equality between its sides (a cross or non-equi join) is not supported in a materialized view")
	if l.Join != exec.JoinInner {
		return built{}, refuse
	}
	constSide := -1
	for i, side := range l.In {
		if side.Op == exec.OpValues {
			constSide = i
		} else if d, ok := side.Relation.(*derived); ok && side.Op == exec.OpScan && d.consts != nil {
			constSide = i
		}
		if constSide >= 0 {
			break
		}
	}
	if constSide < 0 {
		return built{}, refuse
	}
	cb, err := c.translate(l.In[constSide])
	if err != nil {
		return built{}, err
	}
	ob, err := c.translate(l.In[1-constSide])
	if err != nil {
		return built{}, err
	}
	ob = c.materialize(ob)
	node := c.add("cross constant", &crossRows{rows: cb.consts, left: constSide == 0}, ob.node)
	if l.Pred != nil {
		node = c.add("filter", &flow.Filter{Pred: c.fx(l.Pred)}, node)
	}
	return built{node: node, width: l.LeftWidth + l.RightWidth}, nil
}

// limit compiles ORDER BY ... LIMIT [OFFSET] into flow.TopN over one
// partition.
func (c *compiler) limit(l *exec.Logical) (built, error) {
	sort := l.In[0]
	if sort.Op != exec.OpSort {
		return built{}, sqlerr.NotSupported("LIMIT or OFFSET without ORDER BY is not supported in a materialized view: which rows it keeps is not a function of the input")
	}
	read := func(e *expr.Expr) (int64, bool, error) {
		if e == nil {
			return 0, false, nil
		}
		v, err := e.Eval(c.env, nil)
		if err != nil || v == nil {
			return 0, false, err
		}
		n := v.(int64)
		if n < 0 {
			return 0, false, sqlerr.Errorf(sqlerr.InvalidRowCountInLimit, "LIMIT must not be negative")
		}
		return n, true, nil
	}
	limit, hasLimit, err := read(l.Limit)
	if err != nil {
		return built{}, err
	}
	offset, _, err := read(l.Offset)
	if err != nil {
		return built{}, err
	}
	if !hasLimit {
		return built{}, sqlerr.NotSupported("ORDER BY with OFFSET and no LIMIT is not supported in a materialized view")
	}
	if offset > maxTopN || limit > maxTopN-offset {
		return built{}, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "LIMIT %d OFFSET %d in a materialized view: at most %d rows are kept in order", limit, offset, maxTopN)
	}
	in, err := c.in(sort)
	if err != nil {
		return built{}, err
	}
	if limit == 0 {
		return built{node: c.add("filter", &flow.Filter{Pred: func(types.Row) (any, error) { return false, nil }}, in.node), width: in.width}, nil
	}
	op := &flow.TopN{Limit: limit, Offset: offset}
	for _, k := range sort.Sort {
		sk := flow.SortKey{Col: k.Col, Desc: k.Desc, Nulls: flow.NullsLast}
		if k.NullsFirst {
			sk.Nulls = flow.NullsFirst
		}
		op.OrderBy = append(op.OrderBy, sk)
	}
	return built{node: c.add("top-n", op, in.node), width: in.width}, nil
}
