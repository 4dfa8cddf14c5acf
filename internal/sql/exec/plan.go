package exec

import (
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// scopeCol is a column FROM makes visible.
type scopeCol struct {
	table string // qualifier: the alias or relation name
	name  string
	typ   types.Type
	idx   int
	// qualOnly columns answer only to table.name (a USING column's
	// sides); hidden ones are left out of *.
	qualOnly, hidden bool
}

// scope resolves names to the columns of the row FROM produces.
type scope struct {
	cols  []scopeCol
	width int
}

func (s *scope) Column(names []string, loc int32) (*expr.Expr, error) {
	c, err := s.find(names, loc)
	if err != nil {
		return nil, err
	}
	return expr.Column(c.idx, c.typ), nil
}

func (s *scope) find(names []string, loc int32) (*scopeCol, error) {
	var table, name string
	switch len(names) {
	case 1:
		name = names[0]
	case 2:
		table, name = names[0], names[1]
	default:
		return nil, sqlerr.NotSupported("column reference %s is not supported", strings.Join(names, ".")).At(loc)
	}
	var found *scopeCol
	tableSeen := false
	for i := range s.cols {
		c := &s.cols[i]
		if table != "" {
			if c.table != table {
				continue
			}
			tableSeen = true
		} else if c.qualOnly {
			continue
		}
		if c.name != name {
			continue
		}
		if found != nil {
			return nil, sqlerr.Errorf(sqlerr.AmbiguousColumn, "column reference %q is ambiguous", strings.Join(names, ".")).At(loc)
		}
		found = c
	}
	if found == nil {
		if table != "" && !tableSeen {
			return nil, sqlerr.Errorf(sqlerr.UndefinedTable, "missing FROM-clause entry for table %q", table).At(loc)
		}
		if table != "" {
			return nil, sqlerr.Errorf(sqlerr.UndefinedColumn, "column %s.%s does not exist", table, name).At(loc)
		}
		return nil, sqlerr.Errorf(sqlerr.UndefinedColumn, "column %q does not exist", name).At(loc)
	}
	return found, nil
}

// cte is a WITH query, planned once and materialized per run.
type cte struct {
	node *materialNode
	cols []Column
}

// planner plans one statement.
type planner struct {
	cat  Catalog
	comp *expr.Compiler
	opts Options
	ctes []map[string]*cte
	// agg is the aggregation being planned, when compiling above it.
	agg *aggCtx
	// aggAllowed says where aggregates may appear now (the clause's
	// name when not, for the error).
	noAggIn string
	// outer are the scopes of the expressions the subqueries being
	// planned are in, outermost first; corr says which of those
	// subqueries read their outer row (correlate.go).
	outer []expr.Scope
	corr  []bool
}

// Plan plans a SELECT (or VALUES) statement over cat. paramOIDs are the
// client's declared parameter types (0: infer).
func Plan(cat Catalog, st *pg.SelectStmt, paramOIDs []uint32, opts Options) (*Query, error) {
	p := &planner{cat: cat, comp: expr.NewCompiler(paramOIDs), opts: opts}
	n, cols, err := p.planSelect(st)
	if err != nil {
		return nil, err
	}
	b := opts.MemoryBudget
	if b <= 0 {
		b = DefaultMemoryBudget
	}
	return &Query{cols: cols, root: n, params: p.comp.ParamTypes(), budget: b}, nil
}

// compile compiles n against s (nil: no columns), with the planner's
// hook for aggregates and subqueries.
func (p *planner) compile(n *pg.Node, s expr.Scope) (*expr.Expr, error) {
	saveScope, saveHook := p.comp.Scope, p.comp.Hook
	p.comp.Scope, p.comp.Hook = p.correlate(s), p.hook
	defer func() { p.comp.Scope, p.comp.Hook = saveScope, saveHook }()
	return p.comp.Compile(n)
}

func (p *planner) hook(c *expr.Compiler, n *pg.Node) (*expr.Expr, bool, error) {
	if p.agg != nil && !p.agg.inArgs {
		if i, ok := p.agg.groupIndex[nodeKey(n)]; ok {
			return expr.Column(i, p.agg.groupTypes[i]), true, nil
		}
	}
	switch x := n.Node.(type) {
	case *pg.Node_ParamRef:
		if x.ParamRef.Number < 0 {
			// A column * expanded to, by position.
			idx, t := int(-1-x.ParamRef.Number), types.Type{OID: uint32(x.ParamRef.Location), Mod: -1}
			is, ok := c.Scope.(interface {
				columnAt(idx int, t types.Type) (*expr.Expr, error)
			})
			if !ok {
				return nil, true, sqlerr.Errorf(sqlerr.InternalError, "column by position outside FROM")
			}
			e, err := is.columnAt(idx, t)
			return e, true, err
		}
	case *pg.Node_SubLink:
		e, err := p.subLink(x.SubLink)
		return e, true, err
	case *pg.Node_FuncCall:
		name := x.FuncCall.Funcname[len(x.FuncCall.Funcname)-1].GetString_().GetSval()
		if expr.Aggregates[name] && x.FuncCall.Over == nil {
			if p.agg == nil || p.agg.inArgs {
				where := p.noAggIn
				if p.agg != nil && p.agg.inArgs {
					return nil, true, sqlerr.Errorf(sqlerr.GroupingError, "aggregate function calls cannot be nested").At(x.FuncCall.Location)
				}
				if where == "" {
					where = "this context"
				}
				return nil, true, sqlerr.Errorf(sqlerr.GroupingError, "aggregate functions are not allowed in %s", where).At(x.FuncCall.Location)
			}
			e, err := p.agg.add(p, x.FuncCall, name)
			return e, true, err
		}
	}
	if p.opts.Hook != nil {
		return p.opts.Hook(c, n)
	}
	return nil, false, nil
}

func (p *planner) planSelect(st *pg.SelectStmt) (node, []Column, error) {
	return p.planSelectKeep(st, false)
}

// planSelectKeep plans st; keepUnknown leaves untyped literals in its
// select list untyped, for a set operation above to type them, as
// PostgreSQL does (SELECT 1 UNION SELECT 'x' reads 'x' as an integer).
func (p *planner) planSelectKeep(st *pg.SelectStmt, keepUnknown bool) (node, []Column, error) {
	if st.WithClause != nil {
		if st.WithClause.Recursive {
			return nil, nil, sqlerr.NotSupported("WITH RECURSIVE is not supported yet")
		}
		frame := map[string]*cte{}
		p.ctes = append(p.ctes, frame)
		defer func() { p.ctes = p.ctes[:len(p.ctes)-1] }()
		for _, cn := range st.WithClause.Ctes {
			c := cn.GetCommonTableExpr()
			q := c.Ctequery.GetSelectStmt()
			if q == nil {
				return nil, nil, sqlerr.NotSupported("WITH %s: only SELECT is supported in WITH", c.Ctename)
			}
			if _, dup := frame[c.Ctename]; dup {
				return nil, nil, sqlerr.Errorf(sqlerr.DuplicateAlias, "WITH query name %q specified more than once", c.Ctename).At(c.Location)
			}
			n, cols, err := p.planSelect(q)
			if err != nil {
				return nil, nil, err
			}
			if len(c.Aliascolnames) > len(cols) {
				return nil, nil, sqlerr.Errorf(sqlerr.InvalidColumnReference, "WITH query %q has %d columns available but %d columns specified", c.Ctename, len(cols), len(c.Aliascolnames))
			}
			cols = append([]Column(nil), cols...)
			for i, a := range c.Aliascolnames {
				cols[i].Name = a.GetString_().GetSval()
			}
			frame[c.Ctename] = &cte{node: &materialNode{in: n}, cols: cols}
		}
	}
	if st.Op != pg.SetOperation_SETOP_NONE && st.Op != pg.SetOperation_SET_OPERATION_UNDEFINED {
		// CommonType makes an all-unknown column text.
		return p.planSetOp(st)
	}
	if len(st.ValuesLists) > 0 {
		n, cols, err := p.planValues(st.ValuesLists)
		if err != nil {
			return nil, nil, err
		}
		return p.orderAndLimit(st, n, cols)
	}
	switch {
	case st.IntoClause != nil:
		return nil, nil, sqlerr.NotSupported("SELECT INTO is not supported")
	case len(st.LockingClause) > 0:
		return nil, nil, sqlerr.NotSupported("SELECT FOR UPDATE/SHARE is not supported")
	case len(st.WindowClause) > 0:
		return nil, nil, sqlerr.NotSupported("window functions are not supported yet")
	}
	// FROM.
	var in node = &rowsNode{rows: [][]*expr.Expr{{}}}
	sc := &scope{}
	for _, item := range st.FromClause {
		n, s, err := p.planFrom(item)
		if err != nil {
			return nil, nil, err
		}
		if len(sc.cols) == 0 && sc.width == 0 && in != nil {
			if _, ok := in.(*rowsNode); ok {
				in, sc = n, s
				continue
			}
		}
		in, sc = p.cross(in, sc, n, s)
	}
	// WHERE.
	if st.WhereClause != nil {
		p.noAggIn = "WHERE"
		cond, err := p.compile(st.WhereClause, sc)
		p.noAggIn = ""
		if err != nil {
			return nil, nil, err
		}
		b, err := p.comp.Coerce(cond, types.Bool, false)
		if err != nil {
			return nil, nil, boolArgError("WHERE", cond, err)
		}
		if s := p.lookupScan(in, st.FromClause); s != nil {
			s.eq = p.equalities(st.WhereClause, sc)
		}
		if in, err = p.filterWhere(in, sc, st.WhereClause, b); err != nil {
			return nil, nil, err
		}
	}
	targets, err := p.expandTargets(st.TargetList, sc)
	if err != nil {
		return nil, nil, err
	}
	// Aggregation.
	var outScope expr.Scope = sc
	if len(st.GroupClause) > 0 || st.HavingClause != nil || hasAggregate(targets, st.SortClause) {
		a, err := p.newAgg(st, sc, targets)
		if err != nil {
			return nil, nil, err
		}
		p.agg = a
		defer func() { p.agg = nil }()
		outScope = a
	}
	// Select list.
	var exprs []*expr.Expr
	var cols []Column
	for _, t := range targets {
		e, err := p.compile(t.node, outScope)
		if err != nil {
			return nil, nil, err
		}
		if !keepUnknown {
			// A set operation's branches keep unknown literals for
			// the set operation to type, as PostgreSQL does.
			e = p.comp.ResolveUnknown(e)
		}
		exprs = append(exprs, e)
		cols = append(cols, Column{Name: t.name, Type: e.Type})
	}
	var having *expr.Expr
	if st.HavingClause != nil {
		if having, err = p.compile(st.HavingClause, outScope); err != nil {
			return nil, nil, err
		}
		b, err := p.comp.Coerce(having, types.Bool, false)
		if err != nil {
			return nil, nil, boolArgError("HAVING", having, err)
		}
		having = b
	}
	// ORDER BY keys: output columns, or hidden extra ones.
	var keys []sortKey
	hidden := 0
	for _, sn := range st.SortClause {
		sb := sn.GetSortBy()
		col, err := p.outputColumn(sb.Node, targets, cols)
		if err != nil {
			return nil, nil, err
		}
		if col < 0 {
			if len(st.DistinctClause) > 0 {
				return nil, nil, sqlerr.Errorf(sqlerr.InvalidColumnReference, "for SELECT DISTINCT, ORDER BY expressions must appear in select list").At(sb.Location)
			}
			e, err := p.compile(sb.Node, outScope)
			if err != nil {
				return nil, nil, err
			}
			exprs = append(exprs, p.comp.ResolveUnknown(e))
			col = len(exprs) - 1
			hidden++
		}
		keys = append(keys, sortKeyOf(sb, col))
	}
	if p.agg != nil {
		in = &aggNode{in: in, groups: p.agg.groups, aggs: p.agg.aggs}
		if having != nil {
			in = &filterNode{in: in, cond: having}
		}
	}
	var out node = &projectNode{in: in, exprs: exprs}
	if len(st.DistinctClause) > 0 {
		if st.DistinctClause[0] != nil && st.DistinctClause[0].Node != nil {
			return nil, nil, sqlerr.NotSupported("SELECT DISTINCT ON is not supported yet")
		}
		out = &distinctNode{in: out}
	}
	if len(keys) > 0 {
		out = &sortNode{in: out, keys: keys}
	}
	if out, err = p.limit(st, out); err != nil {
		return nil, nil, err
	}
	if hidden > 0 {
		strip := make([]*expr.Expr, len(cols))
		for i, c := range cols {
			strip[i] = expr.Column(i, c.Type)
		}
		out = &projectNode{in: out, exprs: strip}
	}
	return out, cols, nil
}

func sortKeyOf(sb *pg.SortBy, col int) sortKey {
	k := sortKey{col: col, desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC}
	switch sb.SortbyNulls {
	case pg.SortByNulls_SORTBY_NULLS_FIRST:
		k.nullsFirst = true
	case pg.SortByNulls_SORTBY_NULLS_LAST:
		k.nullsFirst = false
	default:
		// NULLs are larger than values: last ascending, first descending.
		k.nullsFirst = k.desc
	}
	return k
}

// outputColumn finds an ORDER BY (or GROUP BY) item among the select
// list: an ordinal, an output column's name, or the same expression;
// -1 if it is none.
func (p *planner) outputColumn(n *pg.Node, targets []target, cols []Column) (int, error) {
	if k := n.GetAConst(); k != nil && k.GetIval() != nil {
		i := int(k.GetIval().Ival)
		if i < 1 || i > len(cols) {
			return 0, sqlerr.Errorf(sqlerr.InvalidColumnReference, "ORDER BY position %d is not in select list", i).At(k.Location)
		}
		return i - 1, nil
	}
	if r := n.GetColumnRef(); r != nil && len(r.Fields) == 1 && r.Fields[0].GetString_() != nil {
		name := r.Fields[0].GetString_().Sval
		found := -1
		for i, c := range cols {
			if c.Name == name && targets[i].named {
				if found >= 0 {
					return 0, sqlerr.Errorf(sqlerr.AmbiguousColumn, "ORDER BY %q is ambiguous", name).At(r.Location)
				}
				found = i
			}
		}
		if found >= 0 {
			return found, nil
		}
	}
	key := nodeKey(n)
	for i, t := range targets {
		if t.key == key {
			return i, nil
		}
	}
	return -1, nil
}

func (p *planner) limit(st *pg.SelectStmt, in node) (node, error) {
	if st.LimitCount == nil && st.LimitOffset == nil {
		return in, nil
	}
	if st.LimitOption == pg.LimitOption_LIMIT_OPTION_WITH_TIES {
		return nil, sqlerr.NotSupported("FETCH ... WITH TIES is not supported yet")
	}
	l := &limitNode{in: in}
	for _, c := range []struct {
		n    *pg.Node
		dst  **expr.Expr
		what string
	}{{st.LimitCount, &l.limit, "LIMIT"}, {st.LimitOffset, &l.offset, "OFFSET"}} {
		if c.n == nil {
			continue
		}
		p.noAggIn = c.what
		e, err := p.compile(c.n, nil)
		p.noAggIn = ""
		if err != nil {
			return nil, err
		}
		b, err := p.comp.Coerce(e, types.Int8, false)
		if err != nil {
			if sqlerr.Code(err) != sqlerr.DatatypeMismatch {
				return nil, err
			}
			return nil, sqlerr.Errorf(sqlerr.DatatypeMismatch, "argument of %s must be type bigint, not type %s", c.what, e.Type.Name())
		}
		*c.dst = b
	}
	return l, nil
}

func (p *planner) orderAndLimit(st *pg.SelectStmt, n node, cols []Column) (node, []Column, error) {
	targets := make([]target, len(cols))
	for i, c := range cols {
		targets[i] = target{name: c.Name, named: true}
	}
	var keys []sortKey
	for _, sn := range st.SortClause {
		sb := sn.GetSortBy()
		col, err := p.outputColumn(sb.Node, targets, cols)
		if err != nil {
			return nil, nil, err
		}
		if col < 0 {
			return nil, nil, sqlerr.NotSupported("ORDER BY on a UNION/INTERSECT/EXCEPT or VALUES result must name an output column").At(sb.Location)
		}
		keys = append(keys, sortKeyOf(sb, col))
	}
	if len(keys) > 0 {
		n = &sortNode{in: n, keys: keys}
	}
	n, err := p.limit(st, n)
	return n, cols, err
}

// target is a select-list item after * expansion.
type target struct {
	node  *pg.Node
	name  string
	named bool // an output name ORDER BY may use
	key   string
}

func (p *planner) expandTargets(list []*pg.Node, sc *scope) ([]target, error) {
	var out []target
	for _, t := range list {
		rt := t.GetResTarget()
		if rt == nil {
			return nil, sqlerr.NotSupported("unexpected select-list item")
		}
		if cr := rt.Val.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			table := ""
			if len(cr.Fields) == 2 {
				table = cr.Fields[0].GetString_().GetSval()
			}
			n := 0
			for _, c := range sc.cols {
				if table == "" && c.hidden || table != "" && c.table != table {
					continue
				}
				ref := &pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: []*pg.Node{pg.MakeStrNode(c.name)}, Location: -1}}}
				if c.table != "" {
					ref.GetColumnRef().Fields = []*pg.Node{pg.MakeStrNode(c.table), pg.MakeStrNode(c.name)}
				}
				// Resolve by position, not by name: two tables may share
				// a column name.
				out = append(out, target{node: colNode(c.idx, c.typ), name: c.name, named: true, key: nodeKey(ref)})
				n++
			}
			if n == 0 && table != "" {
				return nil, sqlerr.Errorf(sqlerr.UndefinedTable, "missing FROM-clause entry for table %q", table).At(cr.Location)
			}
			if n == 0 && len(sc.cols) == 0 {
				return nil, sqlerr.Errorf(sqlerr.SyntaxError, "SELECT * with no tables specified is not valid").At(cr.Location)
			}
			continue
		}
		name := rt.Name
		if name == "" {
			name = expr.FigureColname(rt.Val)
		}
		out = append(out, target{node: rt.Val, name: name, named: true, key: nodeKey(rt.Val)})
	}
	return out, nil
}

// colNode is a placeholder node for a column found by position (from
// *): the hook compiles it to the column.
func colNode(idx int, t types.Type) *pg.Node {
	return &pg.Node{Node: &pg.Node_ParamRef{ParamRef: &pg.ParamRef{Number: int32(-1 - idx), Location: int32(t.OID)}}}
}

func hasAggregate(targets []target, sort []*pg.Node) bool {
	found := false
	check := func(n *pg.Node) {
		walk(n, func(x *pg.Node) bool {
			if found {
				return false
			}
			if x.GetSubLink() != nil {
				return false
			}
			if f := x.GetFuncCall(); f != nil && f.Over == nil && expr.Aggregates[f.Funcname[len(f.Funcname)-1].GetString_().GetSval()] {
				found = true
				return false
			}
			return true
		})
	}
	for _, t := range targets {
		check(t.node)
	}
	for _, s := range sort {
		check(s)
	}
	return found
}

func (p *planner) planValues(lists []*pg.Node) (node, []Column, error) {
	var rows [][]*expr.Expr
	width := -1
	for _, l := range lists {
		items := l.GetList().GetItems()
		if width >= 0 && len(items) != width {
			return nil, nil, sqlerr.Errorf(sqlerr.SyntaxError, "VALUES lists must all be the same length")
		}
		width = len(items)
		var row []*expr.Expr
		for _, it := range items {
			p.noAggIn = "VALUES"
			e, err := p.compile(it, nil)
			p.noAggIn = ""
			if err != nil {
				return nil, nil, err
			}
			row = append(row, e)
		}
		rows = append(rows, row)
	}
	cols := make([]Column, width)
	for c := range width {
		col := make([]*expr.Expr, len(rows))
		ts := make([]types.Type, len(rows))
		for i := range rows {
			col[i], ts[i] = rows[i][c], rows[i][c].Type
		}
		t, err := expr.CommonType(ts, "VALUES")
		if err != nil {
			return nil, nil, err
		}
		for i := range rows {
			if rows[i][c], err = p.comp.Coerce(rows[i][c], t, false); err != nil {
				return nil, nil, err
			}
		}
		cols[c] = Column{Name: fmt.Sprintf("column%d", c+1), Type: t}
	}
	return &rowsNode{rows: rows}, cols, nil
}

func (p *planner) planSetOp(st *pg.SelectStmt) (node, []Column, error) {
	ln, lcols, err := p.planSelectKeep(st.Larg, true)
	if err != nil {
		return nil, nil, err
	}
	rn, rcols, err := p.planSelectKeep(st.Rarg, true)
	if err != nil {
		return nil, nil, err
	}
	opName := map[pg.SetOperation]string{pg.SetOperation_SETOP_UNION: "UNION", pg.SetOperation_SETOP_INTERSECT: "INTERSECT", pg.SetOperation_SETOP_EXCEPT: "EXCEPT"}[st.Op]
	if len(lcols) != len(rcols) {
		return nil, nil, sqlerr.Errorf(sqlerr.SyntaxError, "each %s query must have the same number of columns", opName)
	}
	cols := make([]Column, len(lcols))
	var lx, rx []*expr.Expr
	for i := range lcols {
		t, err := expr.CommonType([]types.Type{lcols[i].Type, rcols[i].Type}, opName)
		if err != nil {
			return nil, nil, err
		}
		if t.OID == types.OIDUnknown {
			t = types.Text
		}
		l, err := p.comp.Coerce(expr.Column(i, lcols[i].Type), t, false)
		if err != nil {
			return nil, nil, err
		}
		r, err := p.comp.Coerce(expr.Column(i, rcols[i].Type), t, false)
		if err != nil {
			return nil, nil, err
		}
		lx, rx = append(lx, l), append(rx, r)
		cols[i] = Column{Name: lcols[i].Name, Type: t}
	}
	ln, rn = &projectNode{in: ln, exprs: lx}, &projectNode{in: rn, exprs: rx}
	var n node
	switch st.Op {
	case pg.SetOperation_SETOP_UNION:
		n = &concatNode{parts: []node{ln, rn}}
		if !st.All {
			n = &distinctNode{in: n}
		}
	default:
		n = &setOpNode{left: ln, right: rn, intersect: st.Op == pg.SetOperation_SETOP_INTERSECT, all: st.All}
	}
	return p.orderAndLimit(st, n, cols)
}

// subLink plans a subquery in an expression. An uncorrelated one (its
// names resolve inside it) runs once per statement run; a correlated
// one once per row of the expression it is in (correlate.go).
func (p *planner) subLink(s *pg.SubLink) (*expr.Expr, error) {
	q := s.Subselect.GetSelectStmt()
	saveAgg, saveNo := p.agg, p.noAggIn
	saveScope, saveHook := p.comp.Scope, p.comp.Hook
	p.agg, p.noAggIn = nil, ""
	level := len(p.outer)
	p.outer, p.corr = append(p.outer, saveScope), append(p.corr, false)
	n, cols, err := p.planSelect(q)
	correlated := p.corr[level]
	p.outer, p.corr = p.outer[:level], p.corr[:level]
	p.agg, p.noAggIn = saveAgg, saveNo
	p.comp.Scope, p.comp.Hook = saveScope, saveHook
	if err != nil {
		return nil, err
	}
	m := &materialNode{in: n}
	rows := func(env *expr.Env, row types.Row) ([]types.Row, error) {
		if correlated {
			return correlatedRows(env, n, level, row)
		}
		return m.rows(runOf(env))
	}
	switch s.SubLinkType {
	case pg.SubLinkType_EXISTS_SUBLINK:
		return expr.New(types.Bool, func(env *expr.Env, row types.Row) (any, error) {
			rs, err := rows(env, row)
			return len(rs) > 0, err
		}), nil
	case pg.SubLinkType_EXPR_SUBLINK:
		if len(cols) != 1 {
			return nil, sqlerr.Errorf(sqlerr.SyntaxError, "subquery must return only one column").At(s.Location)
		}
		return expr.New(cols[0].Type, func(env *expr.Env, row types.Row) (any, error) {
			rs, err := rows(env, row)
			if err != nil {
				return nil, err
			}
			switch len(rs) {
			case 0:
				return nil, nil
			case 1:
				return rs[0][0], nil
			}
			return nil, sqlerr.Errorf(sqlerr.CardinalityViolation, "more than one row returned by a subquery used as an expression")
		}), nil
	case pg.SubLinkType_ARRAY_SUBLINK:
		// Until package types has arrays, ARRAY(subquery) is the array's
		// text form (types.FormatTextArray), which the system catalog's
		// array functions and = ANY read.
		if len(cols) != 1 {
			return nil, sqlerr.Errorf(sqlerr.SyntaxError, "subquery must return only one column").At(s.Location)
		}
		t := cols[0].Type
		return expr.New(types.Text, func(env *expr.Env, row types.Row) (any, error) {
			rs, err := rows(env, row)
			if err != nil {
				return nil, err
			}
			elems := make([]*string, len(rs))
			for i, r := range rs {
				if r[0] != nil {
					s := types.FormatTyped(t, r[0])
					elems[i] = &s
				}
			}
			return types.FormatTextArray(elems), nil
		}), nil
	case pg.SubLinkType_ANY_SUBLINK, pg.SubLinkType_ALL_SUBLINK:
		if len(cols) != 1 {
			return nil, sqlerr.Errorf(sqlerr.SyntaxError, "subquery has too many columns").At(s.Location)
		}
		op := "="
		if len(s.OperName) > 0 {
			op = s.OperName[len(s.OperName)-1].GetString_().GetSval()
		}
		x, err := p.comp.Compile(s.Testexpr)
		if err != nil {
			return nil, err
		}
		// Type the comparison once, on a stand-in for the subquery's
		// column.
		cmp, err := p.comp.Binary(op, expr.Column(0, x.Type), expr.Column(1, cols[0].Type), s.Location)
		if err != nil {
			return nil, err
		}
		all := s.SubLinkType == pg.SubLinkType_ALL_SUBLINK
		return expr.New(types.Bool, func(env *expr.Env, row types.Row) (any, error) {
			v, err := x.Eval(env, row)
			if err != nil {
				return nil, err
			}
			rs, err := rows(env, row)
			if err != nil {
				return nil, err
			}
			// ANY: true if any comparison is, else NULL if any was NULL;
			// ALL: false if any is false, else NULL if any was NULL.
			sawNull := false
			for _, r := range rs {
				b, err := cmp.Eval(env, types.Row{v, r[0]})
				if err != nil {
					return nil, err
				}
				switch {
				case b == nil:
					sawNull = true
				case b.(bool) != all:
					return !all, nil
				}
			}
			if sawNull {
				return nil, nil
			}
			return all, nil
		}), nil
	}
	return nil, sqlerr.NotSupported("this kind of subquery (%s) is not supported yet", s.SubLinkType).At(s.Location)
}

// boolArgError is the error for a clause whose expression is not a
// boolean; a literal that fails to read as one keeps its own error.
func boolArgError(clause string, e *expr.Expr, err error) error {
	if sqlerr.Code(err) != sqlerr.DatatypeMismatch {
		return err
	}
	return sqlerr.Errorf(sqlerr.DatatypeMismatch, "argument of %s must be type boolean, not type %s", clause, e.Type.Name())
}
