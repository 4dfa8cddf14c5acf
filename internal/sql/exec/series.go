package exec

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Functions in FROM: generate_series(start, stop [, step]) over
// integers and unnest(array) over an array's text form (types.
// ParseTextArray: its elements as text), the set-returning functions
// clients' catalog queries use (psql's \d and \d+ join them). Their
// arguments may read a correlated subquery's outer row, not a FROM item
// beside it (LATERAL). Other functions, WITH ORDINALITY and ROWS FROM
// are 0A000.

// seriesNode yields start, start+step, ... up to stop (down to, for a
// negative step), as PostgreSQL's generate_series does.
type seriesNode struct {
	start, stop, step *expr.Expr
	typ               types.Type
}

func (s *seriesNode) open(r *run) (iter, error) {
	var vals [3]int64
	for i, e := range []*expr.Expr{s.start, s.stop, s.step} {
		if e == nil {
			vals[i] = 1
			continue
		}
		v, err := e.Eval(r.env, nil)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return func() (types.Row, error) { return nil, nil }, nil // a NULL argument: no rows
		}
		vals[i] = v.(int64)
	}
	cur, stop, step := vals[0], vals[1], vals[2]
	if step == 0 {
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "step size cannot equal zero")
	}
	done := false
	return func() (types.Row, error) {
		if done || (step > 0 && cur > stop) || (step < 0 && cur < stop) {
			return nil, nil
		}
		v := cur
		next := cur + step
		// Overflow ends the series, as PostgreSQL's does.
		if (step > 0 && next < cur) || (step < 0 && next > cur) {
			done = true
		}
		cur = next
		if s.typ.OID == types.OIDInt4 {
			return types.Row{int32(v)}, nil
		}
		return types.Row{v}, nil
	}, nil
}

// planFunction plans a function in FROM.
func (p *planner) planFunction(rf *pg.RangeFunction) (node, *scope, error) {
	if rf.Lateral || rf.Ordinality || rf.IsRowsfrom || len(rf.Functions) != 1 || len(rf.Coldeflist) > 0 {
		return nil, nil, sqlerr.NotSupported("this form of function in FROM is not supported yet")
	}
	items := rf.Functions[0].GetList().GetItems()
	if len(items) == 0 || items[0].GetFuncCall() == nil {
		return nil, nil, sqlerr.NotSupported("this form of function in FROM is not supported yet")
	}
	fc := items[0].GetFuncCall()
	names := fc.Funcname
	fname := names[len(names)-1].GetString_().GetSval()
	if (fname != "generate_series" && fname != "unnest") || (len(names) == 2 && names[0].GetString_().GetSval() != "pg_catalog") {
		return nil, nil, sqlerr.NotSupported("function %s in FROM is not supported yet (generate_series and unnest are)", fname).At(fc.Location)
	}
	if fname == "unnest" {
		return p.planUnnest(rf, fc)
	}
	if len(fc.Args) < 2 || len(fc.Args) > 3 {
		return nil, nil, sqlerr.Errorf(sqlerr.UndefinedFunction, "function generate_series with %d arguments does not exist", len(fc.Args)).At(fc.Location)
	}
	args := make([]*expr.Expr, 3)
	typ := types.Int4
	for i, a := range fc.Args {
		e, err := p.compile(a, nil)
		if err != nil {
			return nil, nil, err
		}
		switch e.Type.OID {
		case types.OIDInt2, types.OIDInt4, types.OIDUnknown:
		case types.OIDInt8:
			typ = types.Int8
		default:
			return nil, nil, sqlerr.NotSupported("generate_series over %s is not supported yet (integers are)", e.Type.Name()).At(fc.Location)
		}
		args[i] = e
	}
	for i, e := range args {
		if e == nil {
			continue
		}
		ce, err := p.comp.Coerce(e, types.Int8, false)
		if err != nil {
			return nil, nil, err
		}
		args[i] = ce
	}
	col := "generate_series"
	alias := col
	var colAliases []*pg.Node
	if rf.Alias != nil {
		// A scalar function's one column takes the table alias's name
		// unless column aliases are given, as in PostgreSQL.
		alias, col, colAliases = rf.Alias.Aliasname, rf.Alias.Aliasname, rf.Alias.Colnames
	}
	s, err := newScope(alias, []Column{{Name: col, Type: typ}}, colAliases)
	if err != nil {
		return nil, nil, err
	}
	return &seriesNode{start: args[0], stop: args[1], step: args[2], typ: typ}, s, nil
}

// unnestNode yields the elements of an array in its text form.
type unnestNode struct{ arr *expr.Expr }

func (u *unnestNode) open(r *run) (iter, error) {
	v, err := u.arr.Eval(r.env, nil)
	if err != nil {
		return nil, err
	}
	var elems []*string
	if v != nil {
		if elems, err = types.ParseTextArray(v.(string)); err != nil {
			return nil, sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "malformed array literal: %q", v)
		}
	}
	i := 0
	return func() (types.Row, error) {
		if i >= len(elems) {
			return nil, nil
		}
		e := elems[i]
		i++
		if e == nil {
			return types.Row{nil}, nil
		}
		return types.Row{*e}, nil
	}, nil
}

func (p *planner) planUnnest(rf *pg.RangeFunction, fc *pg.FuncCall) (node, *scope, error) {
	if len(fc.Args) != 1 {
		return nil, nil, sqlerr.NotSupported("unnest of %d arrays is not supported yet", len(fc.Args)).At(fc.Location)
	}
	e, err := p.compile(fc.Args[0], nil)
	if err == nil {
		e, err = p.comp.Coerce(e, types.Text, false)
	}
	if err != nil {
		return nil, nil, err
	}
	alias, col := "unnest", "unnest"
	var colAliases []*pg.Node
	if rf.Alias != nil {
		alias, col, colAliases = rf.Alias.Aliasname, rf.Alias.Aliasname, rf.Alias.Colnames
	}
	s, err := newScope(alias, []Column{{Name: col, Type: types.Text}}, colAliases)
	if err != nil {
		return nil, nil, err
	}
	return &unnestNode{arr: e}, s, nil
}
