package pgcatalog

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Arrays, until package types has them: an array is its text form
// (types.FormatTextArray), as the catalog's array columns are and as
// ARRAY(subquery) makes one. What clients' catalog queries do with
// arrays is compiled here over that form: x = ANY(array) (each element
// read as x's type, PostgreSQL's three-valued answer), array_to_string,
// array_upper, a cast to an array type (the text checked as an array
// literal) and a subscript (an element, typed unknown so that it
// compares with a column of any type, as a literal would).

// arrayHook compiles n if it is one of the array forms above.
func (c *Catalog) arrayHook(comp *expr.Compiler, n *pg.Node) (*expr.Expr, bool, error) {
	switch {
	case isArrayAny(n):
		return c.anyOf(comp, n.GetAExpr())
	case n.GetTypeCast() != nil && len(n.GetTypeCast().GetTypeName().GetArrayBounds()) > 0:
		e, err := textArray(comp, n.GetTypeCast().Arg)
		if err != nil {
			return nil, true, err
		}
		return expr.New(text, func(env *expr.Env, row types.Row) (any, error) {
			v, err := e.Eval(env, row)
			if v == nil || err != nil {
				return nil, err
			}
			if _, err := types.ParseTextArray(v.(string)); err != nil {
				return nil, sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "malformed array literal: %q", v)
			}
			return v, nil
		}), true, nil
	case isSubscript(n):
		ind := n.GetAIndirection()
		arr, err := textArray(comp, ind.Arg)
		if err != nil {
			return nil, true, err
		}
		idx, err := comp.Compile(ind.Indirection[0].GetAIndices().Uidx)
		if err == nil {
			idx, err = comp.Coerce(idx, types.Int8, false)
		}
		if err != nil {
			return nil, true, err
		}
		return expr.New(types.Unknown, func(env *expr.Env, row types.Row) (any, error) {
			elems, err := evalArray(env, row, arr)
			if elems == nil || err != nil {
				return nil, err
			}
			i, err := idx.Eval(env, row)
			if i == nil || err != nil {
				return nil, err
			}
			// PostgreSQL's arrays start at 1; out of range is NULL.
			if k := i.(int64); k >= 1 && k <= int64(len(elems)) && elems[k-1] != nil {
				return *elems[k-1], nil
			}
			return nil, nil
		}), true, nil
	}
	return nil, false, nil
}

func isArrayAny(n *pg.Node) bool {
	a := n.GetAExpr()
	return a != nil && a.Kind == pg.A_Expr_Kind_AEXPR_OP_ANY && len(a.Name) > 0 && a.Name[len(a.Name)-1].GetString_().GetSval() == "="
}

func isSubscript(n *pg.Node) bool {
	ind := n.GetAIndirection()
	if ind == nil || len(ind.Indirection) != 1 {
		return false
	}
	ix := ind.Indirection[0].GetAIndices()
	return ix != nil && !ix.IsSlice && ix.Uidx != nil
}

// textArray compiles an array-valued argument: a text (or an untyped
// literal) holding an array literal.
func textArray(comp *expr.Compiler, n *pg.Node) (*expr.Expr, error) {
	e, err := comp.Compile(n)
	if err != nil {
		return nil, err
	}
	return comp.Coerce(e, text, false)
}

// evalArray evaluates e to its elements; nil, nil for NULL.
func evalArray(env *expr.Env, row types.Row, e *expr.Expr) ([]*string, error) {
	v, err := e.Eval(env, row)
	if v == nil || err != nil {
		return nil, err
	}
	elems, err := types.ParseTextArray(v.(string))
	if err != nil {
		return nil, sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "malformed array literal: %q", v)
	}
	if elems == nil {
		elems = []*string{}
	}
	return elems, nil
}

// anyOf is x = ANY(array): true if an element (read as x's type)
// equals x, else NULL if x or an element is NULL, else false.
func (c *Catalog) anyOf(comp *expr.Compiler, a *pg.A_Expr) (*expr.Expr, bool, error) {
	x, err := comp.Compile(a.Lexpr)
	if err != nil {
		return nil, true, err
	}
	arr, err := textArray(comp, a.Rexpr)
	if err != nil {
		return nil, true, err
	}
	xt := x.Type
	return expr.New(bool_, func(env *expr.Env, row types.Row) (any, error) {
		elems, err := evalArray(env, row, arr)
		if elems == nil || err != nil {
			return nil, err
		}
		if len(elems) == 0 {
			return false, nil
		}
		v, err := x.Eval(env, row)
		if v == nil || err != nil {
			return nil, err
		}
		sawNull := false
		for _, e := range elems {
			if e == nil {
				sawNull = true
				continue
			}
			// The element read as x's type (PostgreSQL reads the array
			// as an array of it): 1.0 = ANY('{1}') for a numeric.
			ev, err := types.Parse(xt, *e)
			if err != nil {
				return nil, err
			}
			if types.Compare(v, ev) == 0 {
				return true, nil
			}
		}
		if sawNull {
			return nil, nil
		}
		return false, nil
	}), true, nil
}

// arrayFunctions are the array functions over the text form.
var arrayFunctions = map[string][]function{
	"array_to_string": {
		{args: []types.Type{text, text}, ret: text, body: func(_ *Catalog, a []any) (any, error) { return joinArray(a[0].(string), a[1].(string), nil) }},
		{args: []types.Type{text, text, text}, ret: text, callsOnNull: true, body: func(_ *Catalog, a []any) (any, error) {
			if a[0] == nil || a[1] == nil {
				return nil, nil
			}
			return joinArray(a[0].(string), a[1].(string), a[2])
		}},
	},
	"array_upper": {{args: []types.Type{text, int4}, ret: int4, body: func(_ *Catalog, a []any) (any, error) {
		elems, err := types.ParseTextArray(a[0].(string))
		if err != nil {
			return nil, sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "malformed array literal: %q", a[0])
		}
		if a[1].(int32) != 1 || len(elems) == 0 {
			return nil, nil
		}
		return int32(len(elems)), nil
	}}},
}

// joinArray is array_to_string: the elements joined by sep, NULLs left
// out, or written as null when it is given.
func joinArray(arr, sep string, null any) (any, error) {
	elems, err := types.ParseTextArray(arr)
	if err != nil {
		return nil, sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "malformed array literal: %q", arr)
	}
	out := ""
	first := true
	for _, e := range elems {
		var s string
		switch {
		case e != nil:
			s = *e
		case null != nil:
			s = null.(string)
		default:
			continue
		}
		if !first {
			out += sep
		}
		out += s
		first = false
	}
	return out, nil
}
