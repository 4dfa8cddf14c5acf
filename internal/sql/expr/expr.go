// Package expr owns compiling SQL expressions (pg_query's parse nodes)
// into typed, evaluable expressions: PostgreSQL's type resolution for
// operators and functions (implicit casts, untyped literals, parameter
// types inferred from their context), NULL semantics (three-valued
// logic, strict functions), casts and their SQLSTATEs, and the built-in
// operators and functions. What a column reference, an aggregate or a
// subquery means is the caller's (the planner's): it answers through
// Scope and Hook.
package expr

import (
	"context"
	"fmt"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Env is what evaluation reads besides the row: the statement's
// parameters and its timestamp (now(), which is fixed for a statement
// as PostgreSQL's statement_timestamp-based transaction time is).
type Env struct {
	// Ctx is the running statement's context: a function that waits
	// (pg_sleep) stops when it is canceled.
	Ctx    context.Context
	Params []any
	Now    time.Time
	// Exec is the executor's state for this run (subqueries run
	// through it); expr does not look inside.
	Exec any
	memo map[any]any
}

// Memo computes a value once per run (an uncorrelated subquery's
// result), keyed by key.
func (env *Env) Memo(key any, compute func() (any, error)) (any, error) {
	if v, ok := env.memo[key]; ok {
		return v, nil
	}
	v, err := compute()
	if err != nil {
		return nil, err
	}
	if env.memo == nil {
		env.memo = map[any]any{}
	}
	env.memo[key] = v
	return v, nil
}

// Expr is a compiled expression. Eval is safe for concurrent use.
type Expr struct {
	Type types.Type
	// Const is set for an expression with no inputs (literals, casts of
	// them), which the compiler may fold.
	Const bool
	// ParamIndex is n-1 for a bare $n, else -1.
	ParamIndex int
	eval       func(env *Env, row types.Row) (any, error)
	// column is i+1 for Column(i), else 0: a planner compiling the plan
	// into a dataflow tells a column it can pass through (and index
	// by) from a computed value.
	column int
}

// ColumnIndex reports whether e is Column(i) and which.
func (e *Expr) ColumnIndex() (int, bool) { return e.column - 1, e.column > 0 }

// Eval computes e over row.
func (e *Expr) Eval(env *Env, row types.Row) (any, error) { return e.eval(env, row) }

// New makes an expression from a function, for the planner's own
// (column references, aggregate results, subqueries).
func New(t types.Type, f func(env *Env, row types.Row) (any, error)) *Expr {
	return &Expr{Type: t, ParamIndex: -1, eval: f}
}

// Column is a reference to the input row's column i.
func Column(i int, t types.Type) *Expr {
	e := New(t, func(_ *Env, row types.Row) (any, error) { return row[i], nil })
	e.column = i + 1
	return e
}

// Constant is a literal of type t.
func Constant(t types.Type, v any) *Expr {
	e := New(t, func(*Env, types.Row) (any, error) { return v, nil })
	e.Const = true
	return e
}

// Scope resolves column references for the compiler.
type Scope interface {
	// Column resolves a (possibly qualified) name to an expression over
	// the input row; nil with an error (42703, 42702) if it cannot.
	Column(names []string, location int32) (*Expr, error)
}

// GroupedScope is a Scope above an aggregation, where a column outside
// GROUP BY is 42803. Ungrouped is the scope below it: a call of a
// function that does not exist compiles its arguments there, for their
// types, so that it fails with PostgreSQL's 42883 naming them and not
// with a grouping error PostgreSQL would find only later.
type GroupedScope interface {
	Scope
	Ungrouped() Scope
}

// Hook lets the planner compile a node before the compiler does:
// aggregates, grouped expressions, subqueries. ok false leaves the node
// to the compiler.
type Hook func(c *Compiler, n *pg.Node) (e *Expr, ok bool, err error)

// Compiler compiles the expressions of one statement; it infers the
// types of its parameters across all of them.
type Compiler struct {
	Scope Scope
	Hook  Hook
	// Params are $1..'s types; Unknown until inferred.
	Params []types.Type
}

// NewCompiler starts a statement with the parameter types the client
// declared (OID 0: infer).
func NewCompiler(paramOIDs []uint32) *Compiler {
	c := &Compiler{}
	for _, oid := range paramOIDs {
		t, ok := types.ByOID(oid)
		if !ok || oid == 0 {
			t = types.Unknown
		}
		c.Params = append(c.Params, t)
	}
	return c
}

// ParamTypes are the parameters' final types: one still unknown is text,
// as PostgreSQL resolves it.
func (c *Compiler) ParamTypes() []types.Type {
	out := make([]types.Type, len(c.Params))
	for i, t := range c.Params {
		if t.OID == types.OIDUnknown {
			t = types.Text
		}
		out[i] = t
	}
	return out
}

func errAt(e *sqlerr.Error, loc int32) error { return e.At(loc) }

// Compile compiles n.
func (c *Compiler) Compile(n *pg.Node) (*Expr, error) {
	if c.Hook != nil {
		if e, ok, err := c.Hook(c, n); ok || err != nil {
			return e, err
		}
	}
	switch x := n.Node.(type) {
	case *pg.Node_AConst:
		return compileConst(x.AConst)
	case *pg.Node_ParamRef:
		return c.param(int(x.ParamRef.Number)-1, x.ParamRef.Location)
	case *pg.Node_ColumnRef:
		if c.Scope == nil {
			return nil, errAt(sqlerr.Errorf(sqlerr.UndefinedColumn, "column %q does not exist", ColumnName(x.ColumnRef)), x.ColumnRef.Location)
		}
		return c.Scope.Column(columnNames(x.ColumnRef), x.ColumnRef.Location)
	case *pg.Node_TypeCast:
		return c.compileCast(x.TypeCast)
	case *pg.Node_AExpr:
		return c.compileAExpr(x.AExpr)
	case *pg.Node_BoolExpr:
		return c.compileBool(x.BoolExpr)
	case *pg.Node_NullTest:
		arg, err := c.Compile(x.NullTest.Arg)
		if err != nil {
			return nil, err
		}
		not := x.NullTest.Nulltesttype == pg.NullTestType_IS_NOT_NULL
		return New(types.Bool, func(env *Env, row types.Row) (any, error) {
			v, err := arg.eval(env, row)
			if err != nil {
				return nil, err
			}
			return (v == nil) != not, nil
		}), nil
	case *pg.Node_BooleanTest:
		return c.compileBoolTest(x.BooleanTest)
	case *pg.Node_CaseExpr:
		return c.compileCase(x.CaseExpr)
	case *pg.Node_CoalesceExpr:
		return c.compileCoalesce(x.CoalesceExpr.Args, "COALESCE", nil)
	case *pg.Node_MinMaxExpr:
		return c.compileMinMax(x.MinMaxExpr)
	case *pg.Node_FuncCall:
		return c.compileFunc(x.FuncCall)
	case *pg.Node_SqlvalueFunction:
		return c.compileSQLValueFunction(x.SqlvalueFunction)
	case *pg.Node_SubLink:
		return nil, sqlerr.NotSupported("subqueries are not supported here").At(x.SubLink.Location)
	case *pg.Node_CollateClause:
		return c.compileCollate(x.CollateClause)
	}
	return nil, sqlerr.NotSupported("expression %s is not supported yet", nodeName(n))
}

func nodeName(n *pg.Node) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", n.Node), "*pg_query.Node_")
}

func columnNames(r *pg.ColumnRef) []string {
	var parts []string
	for _, f := range r.Fields {
		if s := f.GetString_(); s != nil {
			parts = append(parts, s.Sval)
		} else {
			parts = append(parts, "*")
		}
	}
	return parts
}

// ColumnName is a column reference as written, "t.a".
func ColumnName(r *pg.ColumnRef) string { return strings.Join(columnNames(r), ".") }

func (c *Compiler) param(i int, loc int32) (*Expr, error) {
	if i < 0 || i >= 1<<16 {
		return nil, errAt(sqlerr.Errorf(sqlerr.UndefinedParameter, "there is no parameter $%d", i+1), loc)
	}
	for len(c.Params) <= i {
		c.Params = append(c.Params, types.Unknown)
	}
	e := New(c.Params[i], func(env *Env, _ types.Row) (any, error) {
		if i >= len(env.Params) {
			return nil, sqlerr.Errorf(sqlerr.UndefinedParameter, "there is no parameter $%d", i+1)
		}
		return env.Params[i], nil
	})
	e.ParamIndex = i
	return e, nil
}

// setParam fixes an inferred parameter's type; the expression already
// compiled for it takes the type too.
func (c *Compiler) setParam(e *Expr, t types.Type) {
	if e.ParamIndex >= 0 && e.Type.OID == types.OIDUnknown {
		c.Params[e.ParamIndex] = t
		e.Type = t
	}
}

func compileConst(k *pg.A_Const) (*Expr, error) {
	switch {
	case k.Isnull:
		return Constant(types.Unknown, nil), nil
	case k.GetIval() != nil:
		return Constant(types.Int4, int32(k.GetIval().Ival)), nil
	case k.GetFval() != nil:
		// The grammar makes a float of any number with a point or an
		// exponent, and of an integer too large for int4.
		// An integer that fits int4 (-2147483648 after the grammar's
		// negation) is int4, one that fits int8 int8, as make_const has it.
		s := k.GetFval().Fval
		if v, err := types.Parse(types.Int8, s); err == nil && !strings.ContainsAny(s, ".eE") {
			if n := v.(int64); n == int64(int32(n)) {
				return Constant(types.Int4, int32(n)), nil
			}
			return Constant(types.Int8, v), nil
		}
		d, err := types.ParseDecimal(s)
		if err != nil {
			return nil, err
		}
		return Constant(types.Numeric, d), nil
	case k.GetBoolval() != nil:
		return Constant(types.Bool, k.GetBoolval().Boolval), nil
	case k.GetSval() != nil:
		return Constant(types.Unknown, k.GetSval().Sval), nil
	}
	return nil, sqlerr.NotSupported("bit string constants are not supported yet").At(k.Location)
}

// Coerce converts e to type t as an implicit (or, if explicit, an
// explicit) cast would: an unknown literal or parameter takes the type,
// others cast when PostgreSQL allows it implicitly.
func (c *Compiler) Coerce(e *Expr, t types.Type, explicit bool) (*Expr, error) {
	if e.Type == t {
		return e, nil
	}
	if e.ParamIndex >= 0 && e.Type.OID == types.OIDUnknown {
		c.setParam(e, t.Base())
		if e.Type == t {
			return e, nil
		}
	}
	if !explicit && !canImplicit(e.Type, t) {
		return nil, sqlerr.Errorf(sqlerr.DatatypeMismatch, "cannot cast type %s to %s implicitly", e.Type.Name(), t.Name())
	}
	f, err := castFunc(e.Type, t, explicit)
	if err != nil {
		return nil, err
	}
	inner := e
	out := New(t, func(env *Env, row types.Row) (any, error) {
		v, err := inner.eval(env, row)
		if err != nil || v == nil {
			return nil, err
		}
		return f(v)
	})
	out.Const = e.Const
	return fold(out)
}

// fold evaluates a constant expression once, so its errors (a bad
// literal) surface at prepare as PostgreSQL's do, and its cost is paid
// once.
func fold(e *Expr) (*Expr, error) {
	if !e.Const {
		return e, nil
	}
	v, err := e.eval(&Env{}, nil)
	if err != nil {
		return nil, err
	}
	k := Constant(e.Type, v)
	return k, nil
}

// textTyped resolves an unknown literal or parameter to text, as
// PostgreSQL does where nothing else decides.
func (c *Compiler) textTyped(e *Expr) *Expr {
	if e.Type.OID == types.OIDUnknown {
		if e.ParamIndex >= 0 {
			c.setParam(e, types.Text)
			return e
		}
		k := *e
		k.Type = types.Text
		return &k
	}
	return e
}

// ResolveUnknown types an untyped select-list item as text.
func (c *Compiler) ResolveUnknown(e *Expr) *Expr { return c.textTyped(e) }

func (c *Compiler) compileBool(b *pg.BoolExpr) (*Expr, error) {
	args := make([]*Expr, len(b.Args))
	for i, a := range b.Args {
		e, err := c.Compile(a)
		if err != nil {
			return nil, err
		}
		if e, err = c.Coerce(e, types.Bool, false); err != nil {
			return nil, argTypeError(b.Boolop.String(), e, err)
		}
		args[i] = e
	}
	switch b.Boolop {
	case pg.BoolExprType_NOT_EXPR:
		a := args[0]
		return New(types.Bool, func(env *Env, row types.Row) (any, error) {
			v, err := a.eval(env, row)
			if err != nil || v == nil {
				return nil, err
			}
			return !v.(bool), nil
		}), nil
	case pg.BoolExprType_AND_EXPR, pg.BoolExprType_OR_EXPR:
		// AND: false wins, then NULL; OR: true wins, then NULL.
		decisive := b.Boolop == pg.BoolExprType_OR_EXPR
		return New(types.Bool, func(env *Env, row types.Row) (any, error) {
			sawNull := false
			for _, a := range args {
				v, err := a.eval(env, row)
				if err != nil {
					return nil, err
				}
				if v == nil {
					sawNull = true
				} else if v.(bool) == decisive {
					return decisive, nil
				}
			}
			if sawNull {
				return nil, nil
			}
			return !decisive, nil
		}), nil
	}
	return nil, sqlerr.NotSupported("boolean expression %s", b.Boolop)
}

func argTypeError(what string, e *Expr, err error) error {
	if e == nil {
		return err
	}
	return sqlerr.Errorf(sqlerr.DatatypeMismatch, "argument of %s must be type boolean, not type %s", strings.TrimSuffix(what, "_EXPR"), e.Type.Name())
}

func (c *Compiler) compileBoolTest(b *pg.BooleanTest) (*Expr, error) {
	arg, err := c.Compile(b.Arg)
	if err != nil {
		return nil, err
	}
	if arg, err = c.Coerce(arg, types.Bool, false); err != nil {
		return nil, err
	}
	kind := b.Booltesttype
	return New(types.Bool, func(env *Env, row types.Row) (any, error) {
		v, err := arg.eval(env, row)
		if err != nil {
			return nil, err
		}
		switch kind {
		case pg.BoolTestType_IS_TRUE:
			return v == true, nil
		case pg.BoolTestType_IS_NOT_TRUE:
			return v != true, nil
		case pg.BoolTestType_IS_FALSE:
			return v == false, nil
		case pg.BoolTestType_IS_NOT_FALSE:
			return v != false, nil
		case pg.BoolTestType_IS_UNKNOWN:
			return v == nil, nil
		}
		return v != nil, nil
	}), nil
}

// CommonType is PostgreSQL's select_common_type for UNION, CASE, IN,
// COALESCE and VALUES: all unknown is text; otherwise the first known
// type's category, and within it the preferred type or the one all
// others implicitly cast to.
func CommonType(ts []types.Type, context string) (types.Type, error) {
	var out types.Type
	found := false
	// A type modifier survives only if every input has the same one.
	sameMod := true
	for _, t := range ts {
		if t.OID == types.OIDUnknown {
			continue
		}
		if !found {
			out, found = t, true
			continue
		}
		if t != out {
			sameMod = false
		}
		if t.Base() == out.Base() {
			continue
		}
		if t.Category() != out.Category() {
			return types.Type{}, sqlerr.Errorf(sqlerr.DatatypeMismatch, "%s types %s and %s cannot be matched", context, out.Name(), t.Name())
		}
		if !out.Preferred() && canImplicit(out, t) && !canImplicit(t, out) {
			out = t
		}
	}
	if !found {
		return types.Text, nil
	}
	if !sameMod {
		out = out.Base()
	}
	return out, nil
}

func (c *Compiler) compileCase(k *pg.CaseExpr) (*Expr, error) {
	var arg *Expr
	var err error
	if k.Arg != nil {
		if arg, err = c.Compile(k.Arg); err != nil {
			return nil, err
		}
	}
	var conds, results []*Expr
	for _, w := range k.Args {
		cw := w.GetCaseWhen()
		var cond *Expr
		if arg != nil {
			cond, err = c.compareExprs("=", arg, cw.Expr, cw.Location)
		} else {
			cond, err = c.Compile(cw.Expr)
			if err == nil {
				cond, err = c.Coerce(cond, types.Bool, false)
				if err != nil {
					err = sqlerr.Errorf(sqlerr.DatatypeMismatch, "argument of CASE/WHEN must be type boolean, not type %s", cond.Type.Name())
				}
			}
		}
		if err != nil {
			return nil, err
		}
		r, err := c.Compile(cw.Result)
		if err != nil {
			return nil, err
		}
		conds, results = append(conds, cond), append(results, r)
	}
	var def *Expr
	if k.Defresult != nil {
		if def, err = c.Compile(k.Defresult); err != nil {
			return nil, err
		}
		results = append(results, def)
	}
	rt, err := c.unify(results, "CASE")
	if err != nil {
		return nil, err
	}
	if def != nil {
		def = results[len(results)-1]
	}
	return New(rt, func(env *Env, row types.Row) (any, error) {
		for i, cond := range conds {
			v, err := cond.eval(env, row)
			if err != nil {
				return nil, err
			}
			if v == true {
				return results[i].eval(env, row)
			}
		}
		if def != nil {
			return def.eval(env, row)
		}
		return nil, nil
	}), nil
}

// unify casts es in place to their common type, returning it.
func (c *Compiler) unify(es []*Expr, context string) (types.Type, error) {
	ts := make([]types.Type, len(es))
	for i, e := range es {
		ts[i] = e.Type
	}
	t, err := CommonType(ts, context)
	if err != nil {
		return t, err
	}
	for i, e := range es {
		if es[i], err = c.Coerce(e, t, false); err != nil {
			if sqlerr.Code(err) != sqlerr.DatatypeMismatch {
				return t, err
			}
			return t, sqlerr.Errorf(sqlerr.DatatypeMismatch, "%s types %s and %s cannot be matched", context, t.Name(), e.Type.Name())
		}
	}
	return t, nil
}

func (c *Compiler) compileCoalesce(nodes []*pg.Node, name string, _ any) (*Expr, error) {
	args := make([]*Expr, len(nodes))
	for i, n := range nodes {
		e, err := c.Compile(n)
		if err != nil {
			return nil, err
		}
		args[i] = e
	}
	t, err := c.unify(args, name)
	if err != nil {
		return nil, err
	}
	return New(t, func(env *Env, row types.Row) (any, error) {
		for _, a := range args {
			v, err := a.eval(env, row)
			if err != nil || v != nil {
				return v, err
			}
		}
		return nil, nil
	}), nil
}

func (c *Compiler) compileMinMax(m *pg.MinMaxExpr) (*Expr, error) {
	args := make([]*Expr, len(m.Args))
	for i, n := range m.Args {
		e, err := c.Compile(n)
		if err != nil {
			return nil, err
		}
		args[i] = e
	}
	name := "GREATEST"
	want := 1
	if m.Op == pg.MinMaxOp_IS_LEAST {
		name, want = "LEAST", -1
	}
	t, err := c.unify(args, name)
	if err != nil {
		return nil, err
	}
	// NULLs are ignored; the result is NULL only if all are.
	return New(t, func(env *Env, row types.Row) (any, error) {
		var best any
		for _, a := range args {
			v, err := a.eval(env, row)
			if err != nil {
				return nil, err
			}
			if v != nil && (best == nil || types.Compare(v, best) == want) {
				best = v
			}
		}
		return best, nil
	}), nil
}

func (c *Compiler) compileSQLValueFunction(f *pg.SQLValueFunction) (*Expr, error) {
	switch f.Op {
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP:
		return New(types.TimestampTZ, func(env *Env, _ types.Row) (any, error) { return statementTime(env), nil }), nil
	case pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:
		return New(types.Timestamp, func(env *Env, _ types.Row) (any, error) { return statementTime(env), nil }), nil
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE:
		return New(types.Date, func(env *Env, _ types.Row) (any, error) {
			return statementTime(env).Truncate(24 * time.Hour), nil
		}), nil
	}
	return nil, sqlerr.NotSupported("%s is not supported yet", strings.TrimPrefix(f.Op.String(), "SVFOP_")).At(f.Location)
}

// statementTime is now(), to the microsecond, in UTC (the session's
// only time zone).
func statementTime(env *Env) time.Time { return env.Now.UTC().Truncate(time.Microsecond) }

// Truthy reports whether a WHERE/HAVING/ON value passes: only true does.
func Truthy(v any) bool { b, ok := v.(bool); return ok && b }

// FigureColname is the name PostgreSQL gives a select-list item without
// an alias (FigureColname in its parser).
func FigureColname(n *pg.Node) string {
	if name, strength := figure(n); strength > 0 {
		return name
	}
	return "?column?"
}

// figure is FigureColnameInternal: a name and its strength (2: from a
// column or function, 1: a fallback such as a cast's type name).
func figure(n *pg.Node) (string, int) {
	switch x := n.Node.(type) {
	case *pg.Node_ColumnRef:
		f := x.ColumnRef.Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval, 2
		}
	case *pg.Node_FuncCall:
		f := x.FuncCall.Funcname
		return f[len(f)-1].GetString_().GetSval(), 2
	case *pg.Node_TypeCast:
		if name, s := figure(x.TypeCast.Arg); s == 2 {
			return name, 2
		}
		names := x.TypeCast.TypeName.Names
		return names[len(names)-1].GetString_().GetSval(), 1
	case *pg.Node_CaseExpr:
		if x.CaseExpr.Defresult != nil {
			if name, s := figure(x.CaseExpr.Defresult); s == 2 {
				return name, 2
			}
		}
		return "case", 1
	case *pg.Node_CoalesceExpr:
		return "coalesce", 2
	case *pg.Node_MinMaxExpr:
		if x.MinMaxExpr.Op == pg.MinMaxOp_IS_LEAST {
			return "least", 2
		}
		return "greatest", 2
	case *pg.Node_AExpr:
		if x.AExpr.Kind == pg.A_Expr_Kind_AEXPR_NULLIF {
			return "nullif", 2
		}
	case *pg.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE:
			return "current_date", 2
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP:
			return "current_timestamp", 2
		case pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:
			return "localtimestamp", 2
		}
	case *pg.Node_SubLink:
		switch x.SubLink.SubLinkType {
		case pg.SubLinkType_EXISTS_SUBLINK:
			return "exists", 2
		case pg.SubLinkType_EXPR_SUBLINK:
			if s := x.SubLink.Subselect.GetSelectStmt(); s != nil && len(s.TargetList) > 0 {
				rt := s.TargetList[0].GetResTarget()
				if rt.Name != "" {
					return rt.Name, 2
				}
				return figure(rt.Val)
			}
		}
	}
	return "", 0
}

// compileCollate accepts the collations that mean what Strand does,
// comparing text by its bytes (PostgreSQL's "C"): psql writes COLLATE
// pg_catalog.default after its name patterns.
func (c *Compiler) compileCollate(k *pg.CollateClause) (*Expr, error) {
	var parts []string
	for _, n := range k.Collname {
		parts = append(parts, n.GetString_().GetSval())
	}
	name := parts[len(parts)-1]
	if len(parts) > 2 || len(parts) == 2 && parts[0] != "pg_catalog" {
		name = ""
	}
	switch name {
	case "default", "C", "POSIX", "ucs_basic":
	default:
		return nil, sqlerr.NotSupported("collation %q is not supported: text compares by its bytes, as collation \"C\" does", strings.Join(parts, ".")).At(k.Location)
	}
	e, err := c.Compile(k.Arg)
	if err != nil {
		return nil, err
	}
	if e.Type.OID != types.OIDUnknown && e.Type.Category() != types.CatString {
		return nil, sqlerr.Errorf(sqlerr.DatatypeMismatch, "collations are not supported by type %s", e.Type.Name()).At(k.Location)
	}
	return e, nil
}
