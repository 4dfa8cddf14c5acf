package expr

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

func opName(names []*pg.Node) string {
	n := names[len(names)-1]
	return n.GetString_().GetSval()
}

func (c *Compiler) compileAExpr(a *pg.A_Expr) (*Expr, error) {
	op := ""
	if len(a.Name) > 0 {
		op = opName(a.Name)
	}
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if a.Lexpr == nil {
			r, err := c.Compile(a.Rexpr)
			if err != nil {
				return nil, err
			}
			return c.prefix(op, r, a.Location)
		}
		l, err := c.Compile(a.Lexpr)
		if err != nil {
			return nil, err
		}
		r, err := c.Compile(a.Rexpr)
		if err != nil {
			return nil, err
		}
		return c.Binary(op, l, r, a.Location)
	case pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		l, r, err := c.comparable(a.Lexpr, a.Rexpr, "=", a.Location)
		if err != nil {
			return nil, err
		}
		distinct := a.Kind == pg.A_Expr_Kind_AEXPR_DISTINCT
		return New(types.Bool, func(env *Env, row types.Row) (any, error) {
			lv, err := l.eval(env, row)
			if err != nil {
				return nil, err
			}
			rv, err := r.eval(env, row)
			if err != nil {
				return nil, err
			}
			return (types.Compare(lv, rv) != 0) == distinct, nil
		}), nil
	case pg.A_Expr_Kind_AEXPR_NULLIF:
		l0, err := c.Compile(a.Lexpr)
		if err != nil {
			return nil, err
		}
		r0, err := c.Compile(a.Rexpr)
		if err != nil {
			return nil, err
		}
		l, r, err := c.comparableExprs(l0, r0, "=", a.Location)
		if err != nil {
			return nil, err
		}
		// The result is the first argument as = took it: uncast where
		// PostgreSQL has a cross-type operator (int2 = int4), cast
		// otherwise (varchar to text, int4 to numeric).
		out := l
		if crossTypeFamily(l0.Type) != 0 && crossTypeFamily(l0.Type) == crossTypeFamily(r0.Type) {
			out = l0
		}
		return New(out.Type, func(env *Env, row types.Row) (any, error) {
			lv, err := l.eval(env, row)
			if err != nil || lv == nil {
				return nil, err
			}
			rv, err := r.eval(env, row)
			if err != nil {
				return nil, err
			}
			if rv != nil && types.Compare(lv, rv) == 0 {
				return nil, nil
			}
			if out != l {
				return out.eval(env, row)
			}
			return lv, nil
		}), nil
	case pg.A_Expr_Kind_AEXPR_IN:
		return c.compileIn(a, op == "<>")
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		return c.compileLike(a, op)
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN, pg.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		return c.compileBetween(a)
	}
	return nil, sqlerr.NotSupported("operator form %s is not supported yet", strings.TrimPrefix(a.Kind.String(), "AEXPR_")).At(a.Location)
}

// comparable compiles two operands and casts them to a type the
// comparison op is defined on.
func (c *Compiler) comparable(ln, rn *pg.Node, op string, loc int32) (*Expr, *Expr, error) {
	l, err := c.Compile(ln)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.Compile(rn)
	if err != nil {
		return nil, nil, err
	}
	return c.comparableExprs(l, r, op, loc)
}

func (c *Compiler) comparableExprs(l, r *Expr, op string, loc int32) (*Expr, *Expr, error) {
	t, err := c.binaryType(l, r)
	if err != nil {
		return nil, nil, err
	}
	if t.OID == 0 {
		return nil, nil, noOperator(op, l.Type, r.Type, loc)
	}
	lc, err := c.Coerce(l, t, false)
	if err == nil {
		var rc *Expr
		if rc, err = c.Coerce(r, t, false); err == nil {
			return lc, rc, nil
		}
	}
	// A literal of unknown type that does not read as t (int4_col =
	// 'gold') is PostgreSQL's invalid input (22P02), not a missing
	// operator.
	if l.Type.OID == types.OIDUnknown || r.Type.OID == types.OIDUnknown {
		return nil, nil, err
	}
	return nil, nil, noOperator(op, l.Type, r.Type, loc)
}

func noOperator(op string, l, r types.Type, loc int32) error {
	e := sqlerr.Errorf(sqlerr.UndefinedFunction, "operator does not exist: %s %s %s", l.Name(), op, r.Name())
	e.Hint = "No operator matches the given name and argument types. You might need to add explicit type casts."
	return e.At(loc)
}

// numRank orders the numeric types for PostgreSQL's promotion.
func numRank(t types.Type) int {
	switch t.OID {
	case types.OIDInt2:
		return 1
	case types.OIDInt4:
		return 2
	case types.OIDInt8:
		return 3
	case types.OIDNumeric:
		return 4
	case types.OIDFloat4:
		return 5
	case types.OIDFloat8:
		return 6
	}
	return 0
}

// binaryType is the type both operands of a comparison (or of a
// same-type arithmetic operator) are cast to; OID 0 when none.
func (c *Compiler) binaryType(l, r *Expr) (types.Type, error) {
	lu, ru := l.Type.OID == types.OIDUnknown, r.Type.OID == types.OIDUnknown
	// varchar has no operators of its own: text's serve it.
	base := func(t types.Type) types.Type {
		if t.OID == types.OIDVarchar {
			return types.Text
		}
		return t.Base()
	}
	switch {
	case lu && ru:
		return types.Text, nil
	case lu:
		return base(r.Type), nil
	case ru:
		return base(l.Type), nil
	}
	lt, rt := l.Type.Base(), r.Type.Base()
	if lt == rt {
		return lt, nil
	}
	if lr, rr := numRank(lt), numRank(rt); lr > 0 && rr > 0 {
		t := lt
		if rr > lr {
			t = rt
		}
		if t.OID == types.OIDFloat4 {
			t = types.Float8
		}
		return t, nil
	}
	if lt.Category() == types.CatString && rt.Category() == types.CatString {
		return types.Text, nil
	}
	if lt.Category() == types.CatDatetime && rt.Category() == types.CatDatetime {
		if lt.OID == types.OIDTimestampTZ || rt.OID == types.OIDTimestampTZ {
			return types.TimestampTZ, nil
		}
		return types.Timestamp, nil
	}
	return types.Type{}, nil
}

// Binary compiles l op r.
func (c *Compiler) Binary(op string, l, r *Expr, loc int32) (*Expr, error) {
	switch op {
	case "=", "<>", "!=", "<", ">", "<=", ">=":
		return c.compare(op, l, r, loc)
	case "+", "-", "*", "/", "%", "^":
		return c.arith(op, l, r, loc)
	case "||":
		return c.concat(l, r, loc)
	case "->", "->>", "#>", "#>>":
		return c.jsonAccess(op, l, r, loc)
	case "~~", "!~~", "~~*", "!~~*":
		return c.like(op, l, r, nil, loc)
	case "~", "!~", "~*", "!~*":
		return c.regexMatch(op, l, r, loc)
	}
	return nil, noOperator(op, l.Type, r.Type, loc)
}

// regexMatch is POSIX regular-expression matching (~, ~*, !~, !~*),
// psql's name patterns among its uses. The pattern is Go's RE2 syntax,
// which agrees with PostgreSQL's ARE for the common subset (anchors,
// classes, alternation, repetition); what RE2 refuses (backreferences,
// lookahead) fails with 2201B.
func (c *Compiler) regexMatch(op string, l, r *Expr, loc int32) (*Expr, error) {
	l, r = c.textTyped(l), c.textTyped(r)
	if l.Type.Category() != types.CatString || r.Type.Category() != types.CatString {
		return nil, noOperator(op, l.Type, r.Type, loc)
	}
	fold := strings.Contains(op, "*")
	not := strings.HasPrefix(op, "!")
	compile := func(p string) (*regexp.Regexp, *sqlerr.Error) {
		if fold {
			p = "(?i)" + p
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, sqlerr.Errorf(sqlerr.InvalidRegularExpression, "invalid regular expression: %v", err)
		}
		return re, nil
	}
	var cached *regexp.Regexp
	if r.Const {
		if p, _ := r.eval(&Env{}, nil); p != nil {
			re, err := compile(p.(string))
			if err != nil {
				return nil, errAt(err, loc)
			}
			cached = re
		}
	}
	return New(types.Bool, func(env *Env, row types.Row) (any, error) {
		s, err := l.eval(env, row)
		if err != nil || s == nil {
			return nil, err
		}
		re := cached
		if re == nil {
			p, err := r.eval(env, row)
			if err != nil || p == nil {
				return nil, err
			}
			re, cerr := compile(p.(string))
			if cerr != nil {
				return nil, cerr
			}
			return re.MatchString(s.(string)) != not, nil
		}
		return re.MatchString(s.(string)) != not, nil
	}), nil
}

func (c *Compiler) compareExprs(op string, l *Expr, rn *pg.Node, loc int32) (*Expr, error) {
	r, err := c.Compile(rn)
	if err != nil {
		return nil, err
	}
	return c.compare(op, l, r, loc)
}

func (c *Compiler) compare(op string, l, r *Expr, loc int32) (*Expr, error) {
	l, r, err := c.comparableExprs(l, r, op, loc)
	if err != nil {
		return nil, err
	}
	if l.Type.Category() == types.CatUser && l.Type.OID != types.OIDJSONB && l.Type.OID != types.OIDBytea {
		return nil, noOperator(op, l.Type, r.Type, loc)
	}
	var test func(int) bool
	switch op {
	case "=":
		test = func(c int) bool { return c == 0 }
	case "<>", "!=":
		test = func(c int) bool { return c != 0 }
	case "<":
		test = func(c int) bool { return c < 0 }
	case ">":
		test = func(c int) bool { return c > 0 }
	case "<=":
		test = func(c int) bool { return c <= 0 }
	default:
		test = func(c int) bool { return c >= 0 }
	}
	return strict2(types.Bool, l, r, func(a, b any) (any, error) { return test(types.Compare(a, b)), nil }), nil
}

// strict2 is a strict binary function: NULL in, NULL out.
func strict2(t types.Type, l, r *Expr, f func(a, b any) (any, error)) *Expr {
	e := New(t, func(env *Env, row types.Row) (any, error) {
		a, err := l.eval(env, row)
		if err != nil || a == nil {
			return nil, err
		}
		b, err := r.eval(env, row)
		if err != nil || b == nil {
			return nil, err
		}
		return f(a, b)
	})
	e.Const = l.Const && r.Const
	return e
}

func strict1(t types.Type, a *Expr, f func(v any) (any, error)) *Expr {
	e := New(t, func(env *Env, row types.Row) (any, error) {
		v, err := a.eval(env, row)
		if err != nil || v == nil {
			return nil, err
		}
		return f(v)
	})
	e.Const = a.Const
	return e
}

func (c *Compiler) prefix(op string, r *Expr, loc int32) (*Expr, error) {
	if r.Type.OID == types.OIDUnknown && r.ParamIndex < 0 {
		// PostgreSQL picks the numeric operator for -'1'... and then
		// fails; it is rare enough to refuse plainly.
		return nil, sqlerr.Errorf(sqlerr.AmbiguousFunction, "operator is not unique: %s unknown", op).At(loc)
	}
	switch op {
	case "+":
		if numRank(r.Type) > 0 || r.Type.OID == types.OIDInterval {
			return r, nil
		}
	case "-":
		t := r.Type
		switch {
		case numRank(t) > 0:
			return strict1(t, r, func(v any) (any, error) { return negate(t, v) }), nil
		case t.OID == types.OIDInterval:
			return strict1(t, r, func(v any) (any, error) {
				iv := v.(types.IntervalValue)
				return types.IntervalValue{Months: -iv.Months, Days: -iv.Days, Micros: -iv.Micros}, nil
			}), nil
		}
	case "|/":
		r, err := c.Coerce(r, types.Float8, false)
		if err == nil {
			return strict1(types.Float8, r, func(v any) (any, error) { return sqrtFloat(v.(float64)) }), nil
		}
	}
	return nil, sqlerr.Errorf(sqlerr.UndefinedFunction, "operator does not exist: %s %s", op, r.Type.Name()).At(loc)
}

func (c *Compiler) concat(l, r *Expr, loc int32) (*Expr, error) {
	if l.Type.OID == types.OIDJSONB || r.Type.OID == types.OIDJSONB {
		l, r, err := c.comparableExprs(l, r, "||", loc)
		if err != nil {
			return nil, err
		}
		if l.Type.OID == types.OIDJSONB {
			return strict2(types.JSONB, l, r, func(a, b any) (any, error) { return jsonConcat(a.(types.JSON), b.(types.JSON)), nil }), nil
		}
	}
	// anytextcat: either side text (or unknown, which becomes text)
	// and the other any non-array type, through its text.
	if l.Type.OID == types.OIDUnknown && r.Type.OID == types.OIDUnknown {
		l, r = c.textTyped(l), c.textTyped(r)
	}
	lt, rt := l.Type.Category() == types.CatString || l.Type.OID == types.OIDUnknown, r.Type.Category() == types.CatString || r.Type.OID == types.OIDUnknown
	if !lt && !rt {
		return nil, noOperator("||", l.Type, r.Type, loc)
	}
	if l.Type.OID == types.OIDBytea && r.Type.OID == types.OIDBytea {
		return strict2(types.Bytea, l, r, func(a, b any) (any, error) { return append(append([]byte{}, a.([]byte)...), b.([]byte)...), nil }), nil
	}
	l, r = c.textTyped(l), c.textTyped(r)
	ltyp, rtyp := l.Type, r.Type
	return strict2(types.Text, l, r, func(a, b any) (any, error) {
		return types.CastText(ltyp, a) + types.CastText(rtyp, b), nil
	}), nil
}

func (c *Compiler) compileIn(a *pg.A_Expr, not bool) (*Expr, error) {
	if a.Rexpr.GetSubLink() != nil {
		return nil, sqlerr.NotSupported("IN (subquery) is handled by the planner").At(a.Location)
	}
	list := a.Rexpr.GetList()
	if list == nil {
		return nil, sqlerr.NotSupported("IN with this right side is not supported yet").At(a.Location)
	}
	l, err := c.Compile(a.Lexpr)
	if err != nil {
		return nil, err
	}
	all := []*Expr{l}
	for _, n := range list.Items {
		e, err := c.Compile(n)
		if err != nil {
			return nil, err
		}
		all = append(all, e)
	}
	if _, err := c.unify(all, "IN"); err != nil {
		return nil, err
	}
	return InList(all[0], all[1:], not), nil
}

// InList is x IN (list) (or NOT IN): true if any item equals x, else
// NULL if x or any item is NULL, else false; items already cast to x's
// type.
func InList(x *Expr, items []*Expr, not bool) *Expr {
	return New(types.Bool, func(env *Env, row types.Row) (any, error) {
		v, err := x.eval(env, row)
		if err != nil || v == nil {
			return nil, err
		}
		sawNull := false
		for _, it := range items {
			w, err := it.eval(env, row)
			if err != nil {
				return nil, err
			}
			if w == nil {
				sawNull = true
			} else if types.Compare(v, w) == 0 {
				return !not, nil
			}
		}
		if sawNull {
			return nil, nil
		}
		return not, nil
	})
}

func (c *Compiler) compileBetween(a *pg.A_Expr) (*Expr, error) {
	bounds := a.Rexpr.GetList().GetItems()
	if len(bounds) != 2 {
		return nil, sqlerr.NotSupported("BETWEEN needs two bounds").At(a.Location)
	}
	x, err := c.Compile(a.Lexpr)
	if err != nil {
		return nil, err
	}
	lo, err := c.Compile(bounds[0])
	if err != nil {
		return nil, err
	}
	hi, err := c.Compile(bounds[1])
	if err != nil {
		return nil, err
	}
	ge, err := c.compare(">=", x, lo, a.Location)
	if err != nil {
		return nil, err
	}
	le, err := c.compare("<=", x, hi, a.Location)
	if err != nil {
		return nil, err
	}
	sym := a.Kind == pg.A_Expr_Kind_AEXPR_BETWEEN_SYM || a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM
	not := a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN || a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM
	var ge2, le2 *Expr
	if sym {
		if ge2, err = c.compare(">=", x, hi, a.Location); err != nil {
			return nil, err
		}
		if le2, err = c.compare("<=", x, lo, a.Location); err != nil {
			return nil, err
		}
	}
	and := func(env *Env, row types.Row, p, q *Expr) (any, error) {
		a, err := p.eval(env, row)
		if err != nil {
			return nil, err
		}
		if a == false {
			return false, nil
		}
		b, err := q.eval(env, row)
		if err != nil {
			return nil, err
		}
		if b == false {
			return false, nil
		}
		if a == nil || b == nil {
			return nil, nil
		}
		return true, nil
	}
	return New(types.Bool, func(env *Env, row types.Row) (any, error) {
		v, err := and(env, row, ge, le)
		if err != nil {
			return nil, err
		}
		if sym && v != true {
			w, err := and(env, row, ge2, le2)
			if err != nil {
				return nil, err
			}
			if w == true || v == nil && w == false {
				v = w
			}
		}
		if not && v != nil {
			return !v.(bool), nil
		}
		return v, nil
	}), nil
}

func (c *Compiler) compileLike(a *pg.A_Expr, op string) (*Expr, error) {
	l, err := c.Compile(a.Lexpr)
	if err != nil {
		return nil, err
	}
	var escape *Expr
	rn := a.Rexpr
	// LIKE x ESCAPE e arrives as like_escape(x, e).
	if f := rn.GetFuncCall(); f != nil && opName(f.Funcname) == "like_escape" && len(f.Args) == 2 {
		rn = f.Args[0]
		if escape, err = c.Compile(f.Args[1]); err != nil {
			return nil, err
		}
		if escape, err = c.Coerce(escape, types.Text, false); err != nil {
			return nil, err
		}
	}
	r, err := c.Compile(rn)
	if err != nil {
		return nil, err
	}
	return c.like(op, l, r, escape, a.Location)
}

func (c *Compiler) like(op string, l, r, escape *Expr, loc int32) (*Expr, error) {
	l, r = c.textTyped(l), c.textTyped(r)
	if l.Type.Category() != types.CatString || r.Type.Category() != types.CatString {
		return nil, noOperator(op, l.Type, r.Type, loc)
	}
	fold := strings.Contains(op, "*")
	not := strings.HasPrefix(op, "!")
	// A constant pattern compiles once.
	var cached *regexp.Regexp
	if r.Const && (escape == nil || escape.Const) {
		p, _ := r.eval(&Env{}, nil)
		esc := any(`\`)
		if escape != nil {
			esc, _ = escape.eval(&Env{}, nil)
		}
		if p != nil && esc != nil {
			re, err := likeRegexp(p.(string), esc.(string), fold)
			if err != nil {
				return nil, err
			}
			cached = re
		}
	}
	return New(types.Bool, func(env *Env, row types.Row) (any, error) {
		s, err := l.eval(env, row)
		if err != nil || s == nil {
			return nil, err
		}
		re := cached
		if re == nil {
			p, err := r.eval(env, row)
			if err != nil || p == nil {
				return nil, err
			}
			esc := any(`\`)
			if escape != nil {
				if esc, err = escape.eval(env, row); err != nil || esc == nil {
					return nil, err
				}
			}
			if re, err = likeRegexp(p.(string), esc.(string), fold); err != nil {
				return nil, err
			}
		}
		return re.MatchString(s.(string)) != not, nil
	}), nil
}

// likeRegexp translates a LIKE pattern (% any run, _ one character, the
// escape character quoting the next) into an anchored regexp.
func likeRegexp(pattern, escape string, fold bool) (*regexp.Regexp, error) {
	if utf8.RuneCountInString(escape) > 1 {
		return nil, sqlerr.Errorf(sqlerr.InvalidEscapeSequence, "invalid escape string")
	}
	esc, _ := utf8.DecodeRuneInString(escape)
	var b strings.Builder
	b.WriteString(`(?s)^`)
	if fold {
		b.WriteString(`(?i)`)
	}
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch {
		case escape != "" && rs[i] == esc:
			if i+1 >= len(rs) {
				// PostgreSQL takes a trailing escape as itself.
				b.WriteString(regexp.QuoteMeta(string(rs[i])))
				continue
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		case rs[i] == '%':
			b.WriteString(`.*`)
		case rs[i] == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		}
	}
	b.WriteString(`$`)
	return regexp.Compile(b.String())
}

func jsonConcat(a, b types.JSON) types.JSON {
	switch {
	case a.Kind() == types.JSONObject && b.Kind() == types.JSONObject:
		keys := append(append([]string{}, a.Keys()...), b.Keys()...)
		var vals []types.JSON
		for i := range a.Len() {
			vals = append(vals, a.ValueAt(i))
		}
		for i := range b.Len() {
			vals = append(vals, b.ValueAt(i))
		}
		return types.MakeJSONObject(keys, vals)
	}
	// Anything else concatenates as arrays, a scalar or object as a
	// one-element array.
	var elems []types.JSON
	for _, x := range []types.JSON{a, b} {
		if x.Kind() == types.JSONArray {
			for i := range x.Len() {
				elems = append(elems, x.Index(i))
			}
		} else {
			elems = append(elems, x)
		}
	}
	return types.MakeJSONArray(elems)
}

// jsonAccess compiles ->, ->>, #> and #>>.
func (c *Compiler) jsonAccess(op string, l, r *Expr, loc int32) (*Expr, error) {
	if l.Type.OID == types.OIDUnknown {
		var err error
		if l, err = c.Coerce(l, types.JSONB, false); err != nil {
			return nil, err
		}
	}
	if l.Type.OID != types.OIDJSONB {
		return nil, noOperator(op, l.Type, r.Type, loc)
	}
	asText := strings.HasSuffix(op, ">>")
	rt := types.JSONB
	if asText {
		rt = types.Text
	}
	out := func(j types.JSON) any {
		if !asText {
			return j
		}
		switch j.Kind() {
		case types.JSONNull:
			return nil
		case types.JSONString:
			return j.Str()
		}
		return j.String()
	}
	if strings.HasPrefix(op, "#") {
		r = c.textTyped(r)
		if r.Type.Category() != types.CatString {
			return nil, noOperator(op, l.Type, r.Type, loc)
		}
		return strict2(rt, l, r, func(a, b any) (any, error) {
			path, err := parseTextArray(b.(string))
			if err != nil {
				return nil, err
			}
			j := a.(types.JSON)
			for _, p := range path {
				if p == nil {
					return nil, nil
				}
				next, ok := jsonStep(j, *p)
				if !ok {
					return nil, nil
				}
				j = next
			}
			return out(j), nil
		}), nil
	}
	if r.Type.OID == types.OIDUnknown {
		r = c.textTyped(r)
	}
	switch {
	case r.Type.Category() == types.CatString:
		return strict2(rt, l, r, func(a, b any) (any, error) {
			j, ok := a.(types.JSON).Field(b.(string))
			if !ok {
				return nil, nil
			}
			return out(j), nil
		}), nil
	case r.Type.OID == types.OIDInt4 || r.Type.OID == types.OIDInt2 || r.Type.OID == types.OIDInt8:
		r, err := c.Coerce(r, types.Int4, true)
		if err != nil {
			return nil, err
		}
		return strict2(rt, l, r, func(a, b any) (any, error) {
			j, ok := a.(types.JSON).Elem(int(b.(int32)))
			if k := a.(types.JSON).Kind(); k != types.JSONArray && k != types.JSONObject && (b.(int32) == 0 || b.(int32) == -1) {
				// jsonb keeps a top-level scalar as a one-element array,
				// and -> 0 reads it.
				j, ok = a.(types.JSON), true
			}
			if !ok {
				return nil, nil
			}
			return out(j), nil
		}), nil
	}
	return nil, noOperator(op, l.Type, r.Type, loc)
}

// jsonStep follows one path element: an object's key, or an array's
// index written as an integer.
func jsonStep(j types.JSON, key string) (types.JSON, bool) {
	switch j.Kind() {
	case types.JSONObject:
		return j.Field(key)
	case types.JSONArray:
		n, err := types.Parse(types.Int4, key)
		if err != nil {
			return types.JSON{}, false
		}
		return j.Elem(int(n.(int32)))
	}
	return types.JSON{}, false
}

// parseTextArray reads a one-dimensional text[] literal, '{a,"b c",NULL}'.
func parseTextArray(s string) ([]*string, error) {
	bad := sqlerr.Errorf(sqlerr.InvalidTextRepresentation, "malformed array literal: %q", s)
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return nil, bad
	}
	t = t[1 : len(t)-1]
	var out []*string
	if strings.TrimSpace(t) == "" {
		return out, nil
	}
	for i := 0; i <= len(t); {
		for i < len(t) && t[i] == ' ' {
			i++
		}
		var b strings.Builder
		quoted := false
		if i < len(t) && t[i] == '"' {
			quoted = true
			i++
			for i < len(t) && t[i] != '"' {
				if t[i] == '\\' && i+1 < len(t) {
					i++
				}
				b.WriteByte(t[i])
				i++
			}
			if i >= len(t) {
				return nil, bad
			}
			i++
		} else {
			for i < len(t) && t[i] != ',' {
				if t[i] == '{' || t[i] == '}' || t[i] == '"' {
					return nil, bad
				}
				if t[i] == '\\' && i+1 < len(t) {
					i++
				}
				b.WriteByte(t[i])
				i++
			}
		}
		v := b.String()
		if !quoted {
			v = strings.TrimRight(v, " ")
		}
		if !quoted && strings.EqualFold(v, "null") {
			out = append(out, nil)
		} else {
			out = append(out, &v)
		}
		for i < len(t) && t[i] == ' ' {
			i++
		}
		if i < len(t) && t[i] != ',' {
			return nil, bad
		}
		i++
	}
	return out, nil
}

var _ = apd.New

// crossTypeFamily groups the types between which PostgreSQL has
// cross-type comparison operators (0: none).
func crossTypeFamily(t types.Type) int {
	switch t.OID {
	case types.OIDInt2, types.OIDInt4, types.OIDInt8:
		return 1
	case types.OIDFloat4, types.OIDFloat8:
		return 2
	case types.OIDDate, types.OIDTimestamp, types.OIDTimestampTZ:
		return 3
	}
	return 0
}
