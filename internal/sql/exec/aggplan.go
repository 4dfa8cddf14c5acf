package exec

import (
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// aggCtx is the scope above an aggregation: its row is the group
// values, then the aggregates' results. Names resolve to group columns;
// anything else ungrouped is 42803.
type aggCtx struct {
	from       *scope
	groups     []*expr.Expr
	groupTypes []types.Type
	groupIndex map[string]int
	groupCol   map[int]int
	aggs       []*aggSpec
	inArgs     bool
}

func (a *aggCtx) Column(names []string, loc int32) (*expr.Expr, error) {
	c, err := a.from.find(names, loc)
	if err != nil {
		return nil, err
	}
	if i, ok := a.groupCol[c.idx]; ok {
		return expr.Column(i, a.groupTypes[i]), nil
	}
	name := c.name
	if c.table != "" {
		name = c.table + "." + c.name
	}
	return nil, sqlerr.Errorf(sqlerr.GroupingError, "column %q must appear in the GROUP BY clause or be used in an aggregate function", name).At(loc)
}

// Ungrouped is the scope below the aggregation (expr.GroupedScope).
func (a *aggCtx) Ungrouped() expr.Scope { return a.from }

func (a *aggCtx) columnAt(idx int, t types.Type) (*expr.Expr, error) {
	if i, ok := a.groupCol[idx]; ok {
		return expr.Column(i, a.groupTypes[i]), nil
	}
	for _, c := range a.from.cols {
		if c.idx == idx {
			return nil, sqlerr.Errorf(sqlerr.GroupingError, "column %q must appear in the GROUP BY clause or be used in an aggregate function", c.table+"."+c.name)
		}
	}
	return nil, sqlerr.Errorf(sqlerr.InternalError, "no column %d", idx)
}

func (s *scope) columnAt(idx int, t types.Type) (*expr.Expr, error) {
	for _, c := range s.cols {
		if c.idx == idx {
			return expr.Column(idx, c.typ), nil
		}
	}
	return expr.Column(idx, t), nil
}

func (p *planner) newAgg(st *pg.SelectStmt, sc *scope, targets []target) (*aggCtx, error) {
	a := &aggCtx{from: sc, groupIndex: map[string]int{}, groupCol: map[int]int{}}
	for _, g := range st.GroupClause {
		n := g
		switch {
		case g.GetGroupingSet() != nil:
			return nil, sqlerr.NotSupported("GROUPING SETS, ROLLUP and CUBE are not supported yet")
		case g.GetAConst() != nil && g.GetAConst().GetIval() != nil:
			i := int(g.GetAConst().GetIval().Ival)
			if i < 1 || i > len(targets) {
				return nil, sqlerr.Errorf(sqlerr.InvalidColumnReference, "GROUP BY position %d is not in select list", i).At(g.GetAConst().Location)
			}
			n = targets[i-1].node
		case g.GetColumnRef() != nil && len(g.GetColumnRef().Fields) == 1:
			// A name FROM does not know may be an output column's.
			name := g.GetColumnRef().Fields[0].GetString_().GetSval()
			if _, err := sc.find([]string{name}, -1); err != nil && sqlerr.Code(err) == sqlerr.UndefinedColumn {
				for _, t := range targets {
					if t.name == name {
						n = t.node
						break
					}
				}
			}
		}
		p.noAggIn = "GROUP BY"
		e, err := p.compile(n, sc)
		p.noAggIn = ""
		if err != nil {
			return nil, err
		}
		key := nodeKey(n)
		if _, dup := a.groupIndex[key]; dup {
			continue
		}
		i := len(a.groups)
		a.groups = append(a.groups, e)
		a.groupTypes = append(a.groupTypes, e.Type)
		a.groupIndex[key] = i
		if cr := n.GetColumnRef(); cr != nil {
			var names []string
			for _, f := range cr.Fields {
				names = append(names, f.GetString_().GetSval())
			}
			if c, err := sc.find(names, -1); err == nil {
				if _, ok := a.groupCol[c.idx]; !ok {
					a.groupCol[c.idx] = i
				}
			}
		}
		if pr := n.GetParamRef(); pr != nil && pr.Number < 0 {
			a.groupCol[int(-1-pr.Number)] = i
		}
	}
	return a, nil
}

// add compiles an aggregate call over the input rows and returns the
// expression reading its result from the aggregation's output.
func (a *aggCtx) add(p *planner, f *pg.FuncCall, name string) (*expr.Expr, error) {
	a.inArgs = true
	defer func() { a.inArgs = false }()
	spec := &aggSpec{name: name, star: f.AggStar, distinct: f.AggDistinct}
	// PostgreSQL's aliases, its pg_aggregate giving each the same
	// functions.
	switch name {
	case "every":
		spec.name = "bool_and"
	case "variance":
		spec.name = "var_samp"
	case "stddev":
		spec.name = "stddev_samp"
	}
	if f.Over != nil {
		return nil, sqlerr.NotSupported("window functions are not supported yet").At(f.Location)
	}
	for _, arg := range f.Args {
		e, err := p.compile(arg, a.from)
		if err != nil {
			return nil, err
		}
		spec.args = append(spec.args, e)
	}
	var argTypes []string
	for _, e := range spec.args {
		argTypes = append(argTypes, e.Type.Name())
	}
	undefined := func() error {
		e := sqlerr.Errorf(sqlerr.UndefinedFunction, "function %s(%s) does not exist", name, strings.Join(argTypes, ", "))
		e.Hint = "No function matches the given name and argument types. You might need to add explicit type casts."
		return e.At(f.Location)
	}
	switch {
	case spec.star:
		if name != "count" {
			return nil, undefined()
		}
		spec.typ = types.Int8
	case spec.name == "string_agg":
		if len(spec.args) != 2 {
			return nil, undefined()
		}
		for i := range spec.args {
			var err error
			if spec.args[i], err = p.comp.Coerce(spec.args[i], types.Text, false); err != nil {
				return nil, undefined()
			}
		}
		spec.typ = types.Text
	default:
		if len(spec.args) != 1 {
			return nil, undefined()
		}
		arg := spec.args[0]
		if arg.Type.OID == types.OIDUnknown {
			if name != "count" && name != "min" && name != "max" {
				return nil, sqlerr.Errorf(sqlerr.AmbiguousFunction, "function %s(unknown) is not unique", name).At(f.Location)
			}
			spec.args[0] = p.comp.ResolveUnknown(arg)
			arg = spec.args[0]
		}
		if spec.name == "bool_and" || spec.name == "bool_or" {
			var err error
			if spec.args[0], err = p.comp.Coerce(arg, types.Bool, false); err != nil {
				return nil, undefined()
			}
			arg = spec.args[0]
		}
		t, ok := aggResultType(spec.name, arg.Type)
		if !ok {
			return nil, undefined()
		}
		spec.typ = t
	}
	if f.AggFilter != nil {
		e, err := p.compile(f.AggFilter, a.from)
		if err != nil {
			return nil, err
		}
		if spec.filter, err = p.comp.Coerce(e, types.Bool, false); err != nil {
			return nil, err
		}
	}
	for _, o := range f.AggOrder {
		sb := o.GetSortBy()
		e, err := p.compile(sb.Node, a.from)
		if err != nil {
			return nil, err
		}
		spec.order = append(spec.order, p.comp.ResolveUnknown(e))
		spec.keys = append(spec.keys, sortKeyOf(sb, len(spec.args)+len(spec.order)-1))
	}
	if spec.distinct && len(spec.order) > 0 {
		// PostgreSQL requires ORDER BY items of a DISTINCT aggregate to
		// be its arguments; sorting then dedupes in order.
		for _, o := range f.AggOrder {
			found := false
			for _, arg := range f.Args {
				if nodeKey(o.GetSortBy().Node) == nodeKey(arg) {
					found = true
				}
			}
			if !found {
				return nil, sqlerr.Errorf(sqlerr.InvalidColumnReference, "in an aggregate with DISTINCT, ORDER BY expressions must appear in argument list").At(f.Location)
			}
		}
	}
	a.aggs = append(a.aggs, spec)
	return expr.Column(len(a.groups)+len(a.aggs)-1, spec.typ), nil
}
