package engine

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// The types the minimal engine computes with, by OID.
const (
	oidBool    = pgtype.BoolOID
	oidInt2    = pgtype.Int2OID
	oidInt4    = pgtype.Int4OID
	oidInt8    = pgtype.Int8OID
	oidText    = pgtype.TextOID
	oidVarchar = pgtype.VarcharOID
	oidFloat4  = pgtype.Float4OID
	oidFloat8  = pgtype.Float8OID
	oidNumeric = pgtype.NumericOID
	oidVoid    = 2278
)

// typeNames maps the names a cast may use (PostgreSQL's grammar turns
// INTEGER into pg_catalog.int4 and so on) to OIDs.
var typeNames = map[string]uint32{
	"bool": oidBool, "boolean": oidBool,
	"int2": oidInt2, "smallint": oidInt2,
	"int4": oidInt4, "int": oidInt4, "integer": oidInt4,
	"int8": oidInt8, "bigint": oidInt8,
	"text": oidText, "varchar": oidVarchar,
	"float4": oidFloat4, "real": oidFloat4,
	"float8":  oidFloat8,
	"numeric": oidNumeric, "decimal": oidNumeric,
}

// typeName is a type's name as PostgreSQL writes it in messages.
func typeName(oid uint32) string {
	switch oid {
	case oidBool:
		return "boolean"
	case oidInt2:
		return "smallint"
	case oidInt4:
		return "integer"
	case oidInt8:
		return "bigint"
	case oidText:
		return "text"
	case oidVarchar:
		return "character varying"
	case oidFloat4:
		return "real"
	case oidFloat8:
		return "double precision"
	case oidNumeric:
		return "numeric"
	case oidVoid:
		return "void"
	}
	return fmt.Sprintf("type %d", oid)
}

func typeSize(oid uint32) int16 {
	switch oid {
	case oidBool:
		return 1
	case oidInt2:
		return 2
	case oidInt4, oidFloat4, oidVoid:
		return 4
	case oidInt8, oidFloat8:
		return 8
	}
	return -1
}

// expr is a compiled expression: its type, and how to compute it.
type expr struct {
	typ uint32
	// unknown marks an untyped literal ('abc', NULL), whose type the
	// context decides, as in PostgreSQL.
	unknown bool
	// name is the column name the expression gives ("?column?" if
	// none).
	name string
	eval func(ctx context.Context, args []any) (any, error)
}

func constant(typ uint32, v any, name string) *expr {
	return &expr{typ: typ, name: name, eval: func(context.Context, []any) (any, error) { return v, nil }}
}

// compiler compiles the expressions of one statement, inferring the
// types of its parameters.
type compiler struct {
	sess   *session
	params []uint32 // by $n-1; 0 while unknown
}

// query is a statement that returns rows.
type query struct {
	sess   *session
	cols   []pgwire.Column
	params []uint32
	tag    string // "" for SELECT n
	run    func(ctx context.Context, args []any) ([][]any, error)
}

func (q *query) Params() []uint32         { return q.params }
func (q *query) Columns() []pgwire.Column { return q.cols }

func (q *query) Start(_ context.Context, args []any) (pgwire.Rows, error) {
	if err := q.sess.checkNotFailed(false); err != nil {
		return nil, err
	}
	r := &rows{compute: func(ctx context.Context) ([][]any, error) { return q.run(ctx, args) }, tagFor: selectTag}
	if q.tag != "" {
		tag := q.tag
		r.tagFor = func(int) string { return tag }
	}
	return r, nil
}

func (s *session) prepareSelect(st *pg.SelectStmt, paramTypes []uint32) (pgwire.Statement, error) {
	switch {
	case len(st.FromClause) > 0:
		return nil, fromError(st.FromClause[0])
	case st.Op != pg.SetOperation_SET_OPERATION_UNDEFINED && st.Op != pg.SetOperation_SETOP_NONE:
		return nil, pgwire.NotSupported("UNION, INTERSECT and EXCEPT are not supported yet")
	case len(st.ValuesLists) > 0:
		return nil, pgwire.NotSupported("VALUES is not supported yet")
	case st.WhereClause != nil || len(st.GroupClause) > 0 || st.HavingClause != nil || len(st.SortClause) > 0 ||
		st.LimitCount != nil || st.LimitOffset != nil || len(st.DistinctClause) > 0 || st.WithClause != nil ||
		st.IntoClause != nil || len(st.LockingClause) > 0 || len(st.WindowClause) > 0:
		return nil, pgwire.NotSupported("only SELECT of constant expressions is supported yet (no WHERE, GROUP BY, ORDER BY, LIMIT, DISTINCT, WITH)")
	}
	c := &compiler{sess: s, params: append([]uint32(nil), paramTypes...)}
	var exprs []*expr
	for _, t := range st.TargetList {
		rt := t.GetResTarget()
		if rt == nil {
			return nil, pgwire.NotSupported("unexpected target %T", t.Node)
		}
		e, err := c.compile(rt.Val)
		if err != nil {
			return nil, err
		}
		if rt.Name != "" {
			e.name = rt.Name
		}
		e = resolveUnknown(e)
		exprs = append(exprs, e)
	}
	for i, p := range c.params {
		if p == 0 {
			// A parameter no context typed is text, as PostgreSQL
			// resolves unknown.
			c.params[i] = oidText
		}
	}
	cols := make([]pgwire.Column, len(exprs))
	for i, e := range exprs {
		cols[i] = pgwire.Column{Name: e.name, Type: e.typ, TypeSize: typeSize(e.typ), TypeMod: -1}
	}
	return &query{sess: s, cols: cols, params: c.params, run: func(ctx context.Context, args []any) ([][]any, error) {
		row := make([]any, len(exprs))
		for i, e := range exprs {
			v, err := e.eval(ctx, args)
			if err != nil {
				return nil, err
			}
			row[i] = v
		}
		return [][]any{row}, nil
	}}, nil
}

// fromError refuses a FROM item: there are no relations yet.
func fromError(n *pg.Node) error {
	rv := n.GetRangeVar()
	if rv == nil {
		return pgwire.NotSupported("this FROM clause is not supported yet")
	}
	name := rv.Relname
	if rv.Schemaname != "" {
		name = rv.Schemaname + "." + name
	}
	switch strings.ToLower(rv.Schemaname) {
	case "pg_catalog", "information_schema":
		return pgwire.NotSupported("the system catalog (%s) is not served yet: it comes with sources and views", name)
	}
	e := pgwire.Errorf(pgwire.CodeUndefinedTable, "relation %q does not exist", name)
	e.Position = rv.Location + 1
	return e
}

// resolveUnknown types an untyped literal as text, as PostgreSQL does
// for a select list.
func resolveUnknown(e *expr) *expr {
	if e.unknown && e.typ == 0 {
		e.typ = oidText
	}
	return e
}

func (c *compiler) compile(n *pg.Node) (*expr, error) {
	switch n := n.Node.(type) {
	case *pg.Node_AConst:
		return compileConst(n.AConst)
	case *pg.Node_ParamRef:
		i := int(n.ParamRef.Number) - 1
		if i < 0 || i >= 1<<16 {
			return nil, pgwire.Errorf(pgwire.CodeUndefinedParameter, "there is no parameter $%d", i+1)
		}
		for len(c.params) <= i {
			c.params = append(c.params, 0)
		}
		return &expr{typ: c.params[i], unknown: c.params[i] == 0, name: "?column?", eval: func(_ context.Context, args []any) (any, error) {
			if i >= len(args) {
				return nil, pgwire.Errorf(pgwire.CodeUndefinedParameter, "there is no parameter $%d", i+1)
			}
			return args[i], nil
		}}, nil
	case *pg.Node_TypeCast:
		return c.compileCast(n.TypeCast)
	case *pg.Node_AExpr:
		return c.compileOp(n.AExpr)
	case *pg.Node_FuncCall:
		return c.compileFunc(n.FuncCall)
	case *pg.Node_ColumnRef:
		e := pgwire.Errorf("42703", "column %q does not exist", columnName(n.ColumnRef))
		e.Position = n.ColumnRef.Location + 1
		return nil, e
	}
	return nil, pgwire.NotSupported("expression %s is not supported yet", strings.TrimPrefix(fmt.Sprintf("%T", n.Node), "*pg_query.Node_"))
}

func columnName(r *pg.ColumnRef) string {
	var parts []string
	for _, f := range r.Fields {
		if s := f.GetString_(); s != nil {
			parts = append(parts, s.Sval)
		} else {
			parts = append(parts, "*")
		}
	}
	return strings.Join(parts, ".")
}

func compileConst(c *pg.A_Const) (*expr, error) {
	switch {
	case c.Isnull:
		return &expr{unknown: true, name: "?column?", eval: func(context.Context, []any) (any, error) { return nil, nil }}, nil
	case c.GetIval() != nil:
		return constant(oidInt4, int32(c.GetIval().Ival), "?column?"), nil
	case c.GetFval() != nil:
		// The grammar makes a float of an integer too large for int4.
		s := c.GetFval().Fval
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return constant(oidInt8, n, "?column?"), nil
		}
		v, err := parseNumeric(s)
		if err != nil {
			return nil, err
		}
		return constant(oidNumeric, v, "?column?"), nil
	case c.GetBoolval() != nil:
		return constant(oidBool, c.GetBoolval().Boolval, "bool"), nil
	case c.GetSval() != nil:
		e := constant(0, c.GetSval().Sval, "?column?")
		e.unknown = true
		return e, nil
	}
	return nil, pgwire.NotSupported("bit string constants are not supported yet")
}

func (c *compiler) compileCast(tc *pg.TypeCast) (*expr, error) {
	to, name, err := castTarget(tc.TypeName)
	if err != nil {
		return nil, err
	}
	// A parameter cast directly takes the cast's type, as in
	// PostgreSQL's inference: SELECT $1::int8 makes $1 an int8.
	if p := tc.Arg.GetParamRef(); p != nil {
		i := int(p.Number) - 1
		for i >= 0 && len(c.params) <= i {
			c.params = append(c.params, 0)
		}
		if i >= 0 && c.params[i] == 0 {
			c.params[i] = to
		}
	}
	arg, err := c.compile(tc.Arg)
	if err != nil {
		return nil, err
	}
	from := arg.typ
	return &expr{typ: to, name: name, eval: func(ctx context.Context, args []any) (any, error) {
		v, err := arg.eval(ctx, args)
		if err != nil || v == nil {
			return nil, err
		}
		return castValue(v, from, to)
	}}, nil
}

func castTarget(t *pg.TypeName) (uint32, string, error) {
	if len(t.ArrayBounds) > 0 {
		return 0, "", pgwire.NotSupported("array types are not supported yet")
	}
	var names []string
	for _, n := range t.Names {
		names = append(names, n.GetString_().GetSval())
	}
	last := names[len(names)-1]
	if len(names) == 2 && names[0] != "pg_catalog" {
		return 0, "", pgwire.Errorf(pgwire.CodeUndefinedObject, "type %q does not exist", strings.Join(names, "."))
	}
	if last == "float8" && len(t.Typmods) > 0 {
		last = "float8"
	}
	oid, ok := typeNames[last]
	if !ok {
		return 0, "", pgwire.NotSupported("type %s is not supported yet", strings.Join(names, "."))
	}
	if len(t.Typmods) > 0 && oid != oidVarchar && oid != oidNumeric {
		return 0, "", pgwire.NotSupported("type modifiers on %s are not supported", last)
	}
	if len(t.Typmods) > 0 {
		return 0, "", pgwire.NotSupported("type modifiers (%s(...)) are not supported yet", last)
	}
	return oid, last, nil
}

// castValue converts v of type from to type to through its text form,
// which is what PostgreSQL's I/O conversion does, with the numeric
// conversions' rounding where the text would not parse.
func castValue(v any, from, to uint32) (any, error) {
	if from == to {
		return v, nil
	}
	if from == oidBool && (to == oidInt2 || to == oidInt8 || to == oidFloat8 || to == oidNumeric) {
		return nil, pgwire.Errorf(pgwire.CodeCannotCoerce, "cannot cast type boolean to %s", typeName(to))
	}
	text := formatValue(v)
	switch to {
	case oidText, oidVarchar:
		return text, nil
	case oidBool:
		if from != oidText && from != oidVarchar && from != 0 && from != oidInt4 {
			return nil, pgwire.Errorf(pgwire.CodeCannotCoerce, "cannot cast type %s to boolean", typeName(from))
		}
		if from == oidInt4 {
			return v.(int32) != 0, nil
		}
		b, ok := parseBool(text)
		if !ok {
			return nil, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type boolean: %q", text)
		}
		return b, nil
	case oidInt2, oidInt4, oidInt8:
		if from == oidFloat4 || from == oidFloat8 || from == oidNumeric {
			text = roundText(v, from)
		}
		bits := map[uint32]int{oidInt2: 16, oidInt4: 32, oidInt8: 64}[to]
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, bits)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, pgwire.Errorf(pgwire.CodeNumericValueOutOfRange, "%s out of range", typeName(to))
			}
			return nil, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type %s: %q", typeName(to), text)
		}
		switch to {
		case oidInt2:
			return int16(n), nil
		case oidInt4:
			return int32(n), nil
		}
		return n, nil
	case oidFloat4, oidFloat8:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), map[uint32]int{oidFloat4: 32, oidFloat8: 64}[to])
		if err != nil && !strings.EqualFold(strings.TrimSpace(text), "nan") {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, pgwire.Errorf(pgwire.CodeNumericValueOutOfRange, "%q is out of range for type %s", text, typeName(to))
			}
			return nil, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type %s: %q", typeName(to), text)
		}
		if to == oidFloat4 {
			return float32(f), nil
		}
		return f, nil
	case oidNumeric:
		return parseNumeric(text)
	}
	return nil, pgwire.NotSupported("cast to %s is not supported yet", typeName(to))
}

// roundText rounds a float or numeric to an integer's text: floats half
// to even (rint), numerics half away from zero, as PostgreSQL does.
func roundText(v any, from uint32) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(math.RoundToEven(x), 'f', 0, 64)
	case float32:
		return strconv.FormatFloat(math.RoundToEven(float64(x)), 'f', 0, 64)
	case pgtype.Numeric:
		r, ok := numericRat(x)
		if !ok {
			return "NaN"
		}
		num, den := new(big.Int).Set(r.Num()), r.Denom()
		neg := num.Sign() < 0
		num.Abs(num)
		q, m := new(big.Int).QuoRem(num, den, new(big.Int))
		if new(big.Int).Mul(m, big.NewInt(2)).Cmp(den) >= 0 {
			q.Add(q, big.NewInt(1))
		}
		if neg {
			q.Neg(q)
		}
		return q.String()
	}
	return formatValue(v)
}

// formatValue is a value's text form, as PostgreSQL's output functions
// write it.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case pgtype.Numeric:
		b, err := x.MarshalJSON()
		if err != nil {
			return "NaN"
		}
		return strings.Trim(string(b), `"`)
	}
	return fmt.Sprint(v)
}

func parseNumeric(s string) (pgtype.Numeric, error) {
	var n pgtype.Numeric
	if err := n.Scan(strings.TrimSpace(s)); err != nil || !n.Valid {
		return n, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type numeric: %q", s)
	}
	return n, nil
}

// numericRat is n as an exact rational, false for NaN and infinities.
func numericRat(n pgtype.Numeric) (*big.Rat, bool) {
	if n.NaN || n.InfinityModifier != pgtype.Finite || n.Int == nil {
		return nil, false
	}
	r := new(big.Rat).SetInt(n.Int)
	e := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(n.Exp))), nil)
	if n.Exp >= 0 {
		r.Mul(r, new(big.Rat).SetInt(e))
	} else {
		r.Quo(r, new(big.Rat).SetInt(e))
	}
	return r, true
}

func abs(x int32) int32 {
	if x < 0 {
		return -x
	}
	return x
}

func (c *compiler) compileFunc(f *pg.FuncCall) (*expr, error) {
	var names []string
	for _, n := range f.Funcname {
		names = append(names, n.GetString_().GetSval())
	}
	name := names[len(names)-1]
	if len(names) == 2 && names[0] != "pg_catalog" || f.AggStar || f.Over != nil || f.AggDistinct || len(f.AggOrder) > 0 {
		return nil, pgwire.Errorf(pgwire.CodeUndefinedFunction, "function %s does not exist", strings.Join(names, "."))
	}
	args := make([]*expr, len(f.Args))
	for i, a := range f.Args {
		e, err := c.compile(a)
		if err != nil {
			return nil, err
		}
		args[i] = e
	}
	switch {
	case name == "version" && len(args) == 0:
		return constant(oidText, c.sess.eng.version, "version"), nil
	case name == "current_setting" && len(args) == 1:
		arg := args[0]
		return &expr{typ: oidText, name: "current_setting", eval: func(ctx context.Context, a []any) (any, error) {
			v, err := arg.eval(ctx, a)
			if err != nil || v == nil {
				return nil, err
			}
			value, _, err := c.sess.vals.get(formatValue(v))
			return value, err
		}}, nil
	case name == "pg_sleep" && len(args) == 1:
		arg, clk := args[0], c.sess.eng.clock
		return &expr{typ: oidVoid, name: "pg_sleep", eval: func(ctx context.Context, a []any) (any, error) {
			v, err := arg.eval(ctx, a)
			if err != nil || v == nil {
				return nil, err
			}
			secs, err := castValue(v, arg.typ, oidFloat8)
			if err != nil {
				return nil, err
			}
			d := time.Duration(secs.(float64) * float64(time.Second))
			if err := clock.Sleep(ctx, clk, d); err != nil {
				return nil, err
			}
			return "", nil
		}}, nil
	}
	return nil, pgwire.Errorf(pgwire.CodeUndefinedFunction, "function %s(%d arguments) does not exist or is not supported yet", name, len(args))
}

// rank orders the numeric types for PostgreSQL's implicit promotion.
var rank = map[uint32]int{oidInt2: 1, oidInt4: 2, oidInt8: 3, oidNumeric: 4, oidFloat4: 5, oidFloat8: 6}

func (c *compiler) compileOp(a *pg.A_Expr) (*expr, error) {
	if a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 {
		return nil, pgwire.NotSupported("this operator is not supported yet")
	}
	op := a.Name[0].GetString_().GetSval()
	if a.Lexpr == nil && op == "-" {
		r, err := c.compile(a.Rexpr)
		if err != nil {
			return nil, err
		}
		zero := &expr{typ: r.typ, eval: func(context.Context, []any) (any, error) { return castValue(int32(0), oidInt4, r.typ) }}
		if r.unknown {
			return nil, pgwire.NotSupported("unary minus on an untyped value is not supported yet")
		}
		return arith("-", zero, r)
	}
	if a.Lexpr == nil {
		return nil, pgwire.NotSupported("prefix operator %s is not supported yet", op)
	}
	l, err := c.compile(a.Lexpr)
	if err != nil {
		return nil, err
	}
	r, err := c.compile(a.Rexpr)
	if err != nil {
		return nil, err
	}
	if op == "||" {
		return &expr{typ: oidText, name: "?column?", eval: func(ctx context.Context, args []any) (any, error) {
			lv, err := l.eval(ctx, args)
			if err != nil || lv == nil {
				return nil, err
			}
			rv, err := r.eval(ctx, args)
			if err != nil || rv == nil {
				return nil, err
			}
			return formatValue(lv) + formatValue(rv), nil
		}}, nil
	}
	// An untyped literal takes the other side's type.
	if l.unknown && !r.unknown {
		l = coerced(l, r.typ)
	} else if r.unknown && !l.unknown {
		r = coerced(r, l.typ)
	}
	return arith(op, l, r)
}

// coerced casts an untyped literal to typ when evaluated.
func coerced(e *expr, typ uint32) *expr {
	return &expr{typ: typ, name: e.name, eval: func(ctx context.Context, args []any) (any, error) {
		v, err := e.eval(ctx, args)
		if err != nil || v == nil {
			return nil, err
		}
		return castValue(v, oidText, typ)
	}}
}

func arith(op string, l, r *expr) (*expr, error) {
	lr, lok := rank[l.typ]
	rr, rok := rank[r.typ]
	if !lok || !rok || !strings.Contains("+-*/", op) || len(op) != 1 {
		return nil, pgwire.Errorf(pgwire.CodeUndefinedFunction, "operator does not exist: %s %s %s", typeName(l.typ), op, typeName(r.typ))
	}
	typ := l.typ
	if rr > lr {
		typ = r.typ
	}
	if typ == oidInt2 {
		typ = oidInt4 // PostgreSQL has int2 operators; int4 results keep this small.
	}
	if typ == oidFloat4 {
		typ = oidFloat8
	}
	return &expr{typ: typ, name: "?column?", eval: func(ctx context.Context, args []any) (any, error) {
		lv, err := l.eval(ctx, args)
		if err != nil || lv == nil {
			return nil, err
		}
		rv, err := r.eval(ctx, args)
		if err != nil || rv == nil {
			return nil, err
		}
		if lv, err = castValue(lv, l.typ, typ); err != nil {
			return nil, err
		}
		if rv, err = castValue(rv, r.typ, typ); err != nil {
			return nil, err
		}
		return compute(op, typ, lv, rv)
	}}, nil
}

func compute(op string, typ uint32, lv, rv any) (any, error) {
	switch typ {
	case oidInt4, oidInt8:
		x, y := toInt64(lv), toInt64(rv)
		var z int64
		switch op {
		case "+":
			z = x + y
			if (z > x) != (y > 0) {
				return nil, overflow(typ)
			}
		case "-":
			z = x - y
			if (z < x) != (y > 0) {
				return nil, overflow(typ)
			}
		case "*":
			z = x * y
			if x != 0 && (z/x != y || (x == -1 && y == math.MinInt64)) {
				return nil, overflow(typ)
			}
		case "/":
			if y == 0 {
				return nil, pgwire.Errorf(pgwire.CodeDivisionByZero, "division by zero")
			}
			if x == math.MinInt64 && y == -1 {
				return nil, overflow(typ)
			}
			z = x / y
		}
		if typ == oidInt4 {
			if z < math.MinInt32 || z > math.MaxInt32 {
				return nil, overflow(typ)
			}
			return int32(z), nil
		}
		return z, nil
	case oidFloat8:
		x, y := lv.(float64), rv.(float64)
		switch op {
		case "+":
			return x + y, nil
		case "-":
			return x - y, nil
		case "*":
			return x * y, nil
		}
		if y == 0 {
			return nil, pgwire.Errorf(pgwire.CodeDivisionByZero, "division by zero")
		}
		return x / y, nil
	case oidNumeric:
		x, xok := numericRat(lv.(pgtype.Numeric))
		y, yok := numericRat(rv.(pgtype.Numeric))
		if !xok || !yok {
			return pgtype.Numeric{NaN: true, Valid: true}, nil
		}
		scale := max(numericScale(lv.(pgtype.Numeric)), numericScale(rv.(pgtype.Numeric)))
		var z *big.Rat
		switch op {
		case "+":
			z = new(big.Rat).Add(x, y)
		case "-":
			z = new(big.Rat).Sub(x, y)
		case "*":
			z = new(big.Rat).Mul(x, y)
			scale = numericScale(lv.(pgtype.Numeric)) + numericScale(rv.(pgtype.Numeric))
		default:
			return nil, pgwire.NotSupported("numeric division is not supported yet")
		}
		return parseNumeric(z.FloatString(int(scale)))
	}
	return nil, pgwire.NotSupported("arithmetic on %s is not supported yet", typeName(typ))
}

func numericScale(n pgtype.Numeric) int32 {
	if n.Exp < 0 {
		return -n.Exp
	}
	return 0
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	}
	return 0
}

func overflow(typ uint32) error {
	return pgwire.Errorf(pgwire.CodeNumericValueOutOfRange, "%s out of range", typeName(typ))
}
