package expr

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// overload is one signature of a built-in function. Functions are
// strict (NULL in, NULL out) unless nonStrict.
type overload struct {
	args []types.Type
	ret  types.Type
	// variadic takes any number (at least len(args)) of any type.
	variadic  bool
	nonStrict bool
	// impl computes the result; env is there for now().
	impl func(env *Env, args []any) (any, error)
}

var (
	tText  = types.Text
	tInt4  = types.Int4
	tInt8  = types.Int8
	tInt2  = types.Int2
	tF8    = types.Float8
	tF4    = types.Float4
	tNum   = types.Numeric
	tTS    = types.Timestamp
	tTSTZ  = types.TimestampTZ
	tDate  = types.Date
	tIv    = types.Interval
	tJSONB = types.JSONB
)

func sig(ret types.Type, impl func(env *Env, a []any) (any, error), args ...types.Type) overload {
	return overload{args: args, ret: ret, impl: impl}
}

// Aggregates names the aggregate functions, which the planner compiles;
// met anywhere else they are a grouping error.
var Aggregates = map[string]bool{"count": true, "sum": true, "min": true, "max": true, "avg": true, "bool_and": true, "bool_or": true, "every": true, "string_agg": true,
	"var_samp": true, "var_pop": true, "variance": true, "stddev_samp": true, "stddev_pop": true, "stddev": true}

// PostgresAggregates are the names of PostgreSQL's aggregate functions
// (pg_proc's prokind 'a' in pg_catalog), each with the major version
// that added it (0: before 15); TestPostgresAggregates checks the list
// against a server. Those not in Aggregates are refused with 0A000
// naming them, not the 42883 of a function PostgreSQL lacks.
var PostgresAggregates = map[string]int{
	"array_agg": 0, "avg": 0, "bit_and": 0, "bit_or": 0, "bit_xor": 0, "bool_and": 0, "bool_or": 0,
	"corr": 0, "count": 0, "covar_pop": 0, "covar_samp": 0, "cume_dist": 0, "dense_rank": 0, "every": 0,
	"json_agg": 0, "json_object_agg": 0, "jsonb_agg": 0, "jsonb_object_agg": 0, "max": 0, "min": 0,
	"mode": 0, "percent_rank": 0, "percentile_cont": 0, "percentile_disc": 0, "range_agg": 0,
	"range_intersect_agg": 0, "rank": 0, "regr_avgx": 0, "regr_avgy": 0, "regr_count": 0,
	"regr_intercept": 0, "regr_r2": 0, "regr_slope": 0, "regr_sxx": 0, "regr_sxy": 0, "regr_syy": 0,
	"stddev": 0, "stddev_pop": 0, "stddev_samp": 0, "string_agg": 0, "sum": 0, "var_pop": 0,
	"var_samp": 0, "variance": 0, "xmlagg": 0,
	"any_value": 16, "json_agg_strict": 16, "json_object_agg_strict": 16, "json_object_agg_unique": 16,
	"json_object_agg_unique_strict": 16, "jsonb_agg_strict": 16, "jsonb_object_agg_strict": 16,
	"jsonb_object_agg_unique": 16, "jsonb_object_agg_unique_strict": 16,
}

var builtins map[string][]overload

func init() {
	str := func(f func(s string) any) func(*Env, []any) (any, error) {
		return func(_ *Env, a []any) (any, error) { return f(a[0].(string)), nil }
	}
	builtins = map[string][]overload{
		"lower":            {sig(tText, str(func(s string) any { return strings.ToLower(s) }), tText)},
		"upper":            {sig(tText, str(func(s string) any { return strings.ToUpper(s) }), tText)},
		"length":           {sig(tInt4, str(func(s string) any { return int32(utf8.RuneCountInString(s)) }), tText)},
		"char_length":      {sig(tInt4, str(func(s string) any { return int32(utf8.RuneCountInString(s)) }), tText)},
		"character_length": {sig(tInt4, str(func(s string) any { return int32(utf8.RuneCountInString(s)) }), tText)},
		"octet_length":     {sig(tInt4, str(func(s string) any { return int32(len(s)) }), tText)},
		"reverse": {sig(tText, str(func(s string) any {
			r := []rune(s)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			return string(r)
		}), tText)},
		"substring": {sig(tText, substr, tText, tInt4, tInt4), sig(tText, substr, tText, tInt4)},
		"substr":    {sig(tText, substr, tText, tInt4, tInt4), sig(tText, substr, tText, tInt4)},
		"concat":    {{ret: tText, variadic: true, nonStrict: true}},
		"btrim":     {sig(tText, trimFunc(strings.Trim), tText, tText), sig(tText, trimFunc(strings.Trim), tText)},
		"ltrim":     {sig(tText, trimFunc(strings.TrimLeft), tText, tText), sig(tText, trimFunc(strings.TrimLeft), tText)},
		"rtrim":     {sig(tText, trimFunc(strings.TrimRight), tText, tText), sig(tText, trimFunc(strings.TrimRight), tText)},
		"replace": {sig(tText, func(_ *Env, a []any) (any, error) {
			if a[1].(string) == "" {
				return a[0], nil
			}
			return strings.ReplaceAll(a[0].(string), a[1].(string), a[2].(string)), nil
		}, tText, tText, tText)},
		"split_part": {sig(tText, splitPart, tText, tText, tInt4)},
		"strpos":     {sig(tInt4, strpos, tText, tText)},
		"position":   {sig(tInt4, strpos, tText, tText)},
		"left":       {sig(tText, leftRight(true), tText, tInt4)},
		"right":      {sig(tText, leftRight(false), tText, tInt4)},
		"repeat": {sig(tText, func(_ *Env, a []any) (any, error) {
			n := int(a[1].(int32))
			if n <= 0 {
				return "", nil
			}
			if int64(n)*int64(len(a[0].(string))) > 1<<30 {
				return nil, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "requested length too large")
			}
			return strings.Repeat(a[0].(string), n), nil
		}, tText, tInt4)},
		"starts_with": {sig(types.Bool, func(_ *Env, a []any) (any, error) { return strings.HasPrefix(a[0].(string), a[1].(string)), nil }, tText, tText)},

		"abs": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return math.Abs(a[0].(float64)), nil }, tF8),
			sig(tF4, func(_ *Env, a []any) (any, error) { return float32(math.Abs(float64(a[0].(float32)))), nil }, tF4),
			sig(tNum, func(_ *Env, a []any) (any, error) { return new(apd.Decimal).Abs(a[0].(*apd.Decimal)), nil }, tNum),
			sig(tInt8, absInt(tInt8), tInt8), sig(tInt4, absInt(tInt4), tInt4), sig(tInt2, absInt(tInt2), tInt2),
		},
		"round": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return math.RoundToEven(a[0].(float64)), nil }, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return roundNumeric(a[0].(*apd.Decimal), 0) }, tNum),
			sig(tNum, func(_ *Env, a []any) (any, error) { return roundTo(a[0].(*apd.Decimal), int64(a[1].(int32))) }, tNum, tInt4),
		},
		"trunc": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return math.Trunc(a[0].(float64)), nil }, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return truncNumeric(a[0].(*apd.Decimal), 0) }, tNum),
			sig(tNum, func(_ *Env, a []any) (any, error) { return truncNumeric(a[0].(*apd.Decimal), int64(a[1].(int32))) }, tNum, tInt4),
		},
		"floor": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return math.Floor(a[0].(float64)), nil }, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return integral(a[0].(*apd.Decimal), false) }, tNum),
		},
		"ceil": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return math.Ceil(a[0].(float64)), nil }, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return integral(a[0].(*apd.Decimal), true) }, tNum),
		},
		"ceiling": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return math.Ceil(a[0].(float64)), nil }, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return integral(a[0].(*apd.Decimal), true) }, tNum),
		},
		"sign": {
			sig(tF8, func(_ *Env, a []any) (any, error) {
				f := a[0].(float64)
				switch {
				case f > 0:
					return 1.0, nil
				case f < 0:
					return -1.0, nil
				}
				return 0.0, nil
			}, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return apd.New(int64(a[0].(*apd.Decimal).Sign()), 0), nil }, tNum),
		},
		"mod": {
			sig(tInt2, modInt(tInt2), tInt2, tInt2), sig(tInt4, modInt(tInt4), tInt4, tInt4), sig(tInt8, modInt(tInt8), tInt8, tInt8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return numericOp("%", a[0].(*apd.Decimal), a[1].(*apd.Decimal)) }, tNum, tNum),
		},
		"power": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return powFloat(a[0].(float64), a[1].(float64)) }, tF8, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return numericPow(a[0].(*apd.Decimal), a[1].(*apd.Decimal)) }, tNum, tNum),
		},
		"pow": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return powFloat(a[0].(float64), a[1].(float64)) }, tF8, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return numericPow(a[0].(*apd.Decimal), a[1].(*apd.Decimal)) }, tNum, tNum),
		},
		"sqrt": {
			sig(tF8, func(_ *Env, a []any) (any, error) { return sqrtFloat(a[0].(float64)) }, tF8),
			sig(tNum, func(_ *Env, a []any) (any, error) { return sqrtNumeric(a[0].(*apd.Decimal)) }, tNum),
		},

		"now":                   {sig(tTSTZ, func(env *Env, _ []any) (any, error) { return statementTime(env), nil })},
		"statement_timestamp":   {sig(tTSTZ, func(env *Env, _ []any) (any, error) { return statementTime(env), nil })},
		"transaction_timestamp": {sig(tTSTZ, func(env *Env, _ []any) (any, error) { return statementTime(env), nil })},
		"date_trunc": {
			sig(tTS, dateTrunc, tText, tTS),
			sig(tTSTZ, dateTrunc, tText, tTSTZ),
			sig(tIv, dateTruncInterval, tText, tIv),
		},
		"date_part": {
			sig(tF8, datePartF8, tText, tTSTZ), sig(tF8, datePartF8, tText, tTS), sig(tF8, datePartF8, tText, tDate), sig(tF8, datePartF8, tText, tIv),
		},
		"extract": {
			sig(tNum, extractNumeric, tText, tTSTZ), sig(tNum, extractNumeric, tText, tTS), sig(tNum, extractDate, tText, tDate), sig(tNum, extractNumeric, tText, tIv),
		},
		"to_timestamp": {sig(tTSTZ, toTimestamp, tF8)},

		"jsonb_typeof": {sig(tText, func(_ *Env, a []any) (any, error) {
			return map[types.JSONKind]string{types.JSONNull: "null", types.JSONString: "string", types.JSONNumber: "number", types.JSONBool: "boolean", types.JSONArray: "array", types.JSONObject: "object"}[a[0].(types.JSON).Kind()], nil
		}, tJSONB)},
		"jsonb_array_length": {sig(tInt4, func(_ *Env, a []any) (any, error) {
			j := a[0].(types.JSON)
			if j.Kind() != types.JSONArray {
				return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "cannot get array length of a non-array")
			}
			return int32(j.Len()), nil
		}, tJSONB)},
	}
}

func (c *Compiler) compileFunc(f *pg.FuncCall) (*Expr, error) {
	var names []string
	for _, n := range f.Funcname {
		names = append(names, n.GetString_().GetSval())
	}
	name := names[len(names)-1]
	if len(names) == 2 && names[0] != "pg_catalog" || len(names) > 2 {
		return nil, sqlerr.Errorf(sqlerr.UndefinedFunction, "function %s does not exist", strings.Join(names, ".")).At(f.Location)
	}
	if Aggregates[name] || f.AggStar {
		return nil, sqlerr.Errorf(sqlerr.GroupingError, "aggregate functions are not allowed here").At(f.Location)
	}
	if f.Over != nil {
		return nil, sqlerr.NotSupported("window functions are not supported yet").At(f.Location)
	}
	if f.AggDistinct || len(f.AggOrder) > 0 || f.AggFilter != nil {
		return nil, sqlerr.Errorf(sqlerr.WrongObjectType, "%s is not an aggregate function", name).At(f.Location)
	}
	if _, ok := builtins[name]; !ok {
		if _, ok := PostgresAggregates[name]; ok {
			return nil, sqlerr.NotSupported("aggregate function %s is not supported", name).At(f.Location)
		}
		if g, ok := c.Scope.(GroupedScope); ok {
			saved := c.Scope
			c.Scope = g.Ungrouped()
			defer func() { c.Scope = saved }()
		}
	}
	args := make([]*Expr, len(f.Args))
	for i, a := range f.Args {
		e, err := c.Compile(a)
		if err != nil {
			return nil, err
		}
		args[i] = e
	}
	return c.Call(name, args, f.Location)
}

// Call compiles a call of the built-in function name on args.
func (c *Compiler) Call(name string, args []*Expr, loc int32) (*Expr, error) {
	ovs, ok := builtins[name]
	if !ok {
		return nil, undefinedFunction(name, args, loc)
	}
	if len(ovs) == 1 && ovs[0].variadic && len(args) > 0 {
		return c.callConcat(args), nil
	}
	best, bestScore := -1, [2]int{-1, -1}
	ambiguous := false
	for i, ov := range ovs {
		if len(ov.args) != len(args) || ov.variadic {
			continue
		}
		score, ok := [2]int{}, true
		for j, a := range args {
			p := ov.args[j]
			switch {
			case a.Type.Base() == p:
				score[0]++
			case a.Type.OID == types.OIDUnknown:
				if p.Category() == types.CatString {
					score[1]++
				}
			case canImplicit(a.Type, p):
				if p.Preferred() {
					score[1]++
				}
			default:
				ok = false
			}
		}
		if !ok {
			continue
		}
		if score[0] > bestScore[0] || score[0] == bestScore[0] && score[1] > bestScore[1] {
			best, bestScore, ambiguous = i, score, false
		} else if score == bestScore {
			ambiguous = true
		}
	}
	if best < 0 {
		return nil, undefinedFunction(name, args, loc)
	}
	if ambiguous {
		return nil, sqlerr.Errorf(sqlerr.AmbiguousFunction, "function %s is not unique", callName(name, args)).At(loc)
	}
	ov := ovs[best]
	for j := range args {
		var err error
		if args[j], err = c.Coerce(args[j], ov.args[j], false); err != nil {
			return nil, err
		}
	}
	allConst := true
	for _, a := range args {
		allConst = allConst && a.Const
	}
	e := New(ov.ret, func(env *Env, row types.Row) (any, error) {
		vals := make([]any, len(args))
		for i, a := range args {
			v, err := a.eval(env, row)
			if err != nil {
				return nil, err
			}
			if v == nil && !ov.nonStrict {
				return nil, nil
			}
			vals[i] = v
		}
		return ov.impl(env, vals)
	})
	// now() is fixed per statement, not per prepare: never folded.
	e.Const = allConst && len(args) > 0
	return e, nil
}

func callName(name string, args []*Expr) string {
	var ts []string
	for _, a := range args {
		ts = append(ts, a.Type.Name())
	}
	return name + "(" + strings.Join(ts, ", ") + ")"
}

func undefinedFunction(name string, args []*Expr, loc int32) error {
	e := sqlerr.Errorf(sqlerr.UndefinedFunction, "function %s does not exist", callName(name, args))
	e.Hint = "No function matches the given name and argument types. You might need to add explicit type casts."
	return e.At(loc)
}

// callConcat is concat(any, ...): each non-NULL argument's text.
func (c *Compiler) callConcat(args []*Expr) *Expr {
	for i := range args {
		args[i] = c.textTyped(args[i])
	}
	return New(types.Text, func(env *Env, row types.Row) (any, error) {
		var b strings.Builder
		for _, a := range args {
			v, err := a.eval(env, row)
			if err != nil {
				return nil, err
			}
			if v != nil {
				b.WriteString(types.FormatTyped(a.Type, v))
			}
		}
		return b.String(), nil
	})
}

func substr(_ *Env, a []any) (any, error) {
	r := []rune(a[0].(string))
	start := int64(a[1].(int32))
	end := int64(math.MaxInt64)
	if len(a) == 3 {
		n := int64(a[2].(int32))
		if n < 0 {
			return nil, sqlerr.Errorf("22011", "negative substring length not allowed")
		}
		end = start + n
	}
	lo := max(start, 1)
	if end <= lo || lo > int64(len(r)) {
		return "", nil
	}
	hi := min(end, int64(len(r))+1)
	return string(r[lo-1 : hi-1]), nil
}

func trimFunc(f func(string, string) string) func(*Env, []any) (any, error) {
	return func(_ *Env, a []any) (any, error) {
		chars := " "
		if len(a) == 2 {
			chars = a[1].(string)
		}
		return f(a[0].(string), chars), nil
	}
}

func splitPart(_ *Env, a []any) (any, error) {
	s, sep, n := a[0].(string), a[1].(string), int(a[2].(int32))
	if n == 0 {
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "field position must not be zero")
	}
	var parts []string
	if sep == "" {
		parts = []string{s}
	} else {
		parts = strings.Split(s, sep)
	}
	if n < 0 {
		n = len(parts) + n + 1
	}
	if n < 1 || n > len(parts) {
		return "", nil
	}
	return parts[n-1], nil
}

func strpos(_ *Env, a []any) (any, error) {
	i := strings.Index(a[0].(string), a[1].(string))
	if i < 0 {
		return int32(0), nil
	}
	return int32(utf8.RuneCountInString(a[0].(string)[:i]) + 1), nil
}

func leftRight(left bool) func(*Env, []any) (any, error) {
	return func(_ *Env, a []any) (any, error) {
		r := []rune(a[0].(string))
		n := int(a[1].(int32))
		if n < 0 {
			n = max(len(r)+n, 0)
		}
		n = min(n, len(r))
		if left {
			return string(r[:n]), nil
		}
		return string(r[len(r)-n:]), nil
	}
}

func absInt(t types.Type) func(*Env, []any) (any, error) {
	return func(_ *Env, a []any) (any, error) {
		n := toInt64(a[0])
		if n < 0 {
			return negate(t, a[0])
		}
		return a[0], nil
	}
}

func modInt(t types.Type) func(*Env, []any) (any, error) {
	return func(_ *Env, a []any) (any, error) {
		z, err := intOp("%", t, toInt64(a[0]), toInt64(a[1]))
		if err != nil {
			return nil, err
		}
		return fromInt64(t, z), nil
	}
}

func roundTo(d *apd.Decimal, s int64) (any, error) {
	if s < 0 {
		r, err := roundNumeric(d, s)
		if err != nil {
			return nil, err
		}
		// round(1234, -2) is 1200 with scale 0.
		return types.ParseDecimal(types.FormatDecimal(r))
	}
	return roundNumeric(d, min(s, 1000))
}

func truncNumeric(d *apd.Decimal, s int64) (any, error) {
	if d.Form != apd.Finite {
		return d, nil
	}
	z := new(apd.Decimal)
	c := apd.BaseContext.WithPrecision(uint32(max(int64(d.NumDigits())+int64(d.Exponent)+s+2, 2)))
	c.Rounding = apd.RoundDown
	if _, err := c.Quantize(z, d, int32(-s)); err != nil {
		return nil, outOfRange(types.Numeric)
	}
	if z.IsZero() {
		z.Negative = false
	}
	if s < 0 {
		return types.ParseDecimal(types.FormatDecimal(z))
	}
	return z, nil
}

// integral is floor (down false) or ceil (up) of a numeric. It works
// on the coefficient itself: apd's Quantize rounds 0.001 up to 0 when
// every digit is dropped.
func integral(d *apd.Decimal, up bool) (any, error) {
	if d.Form != apd.Finite || d.Exponent >= 0 {
		return d, nil
	}
	var pow, q, r apd.BigInt
	pow.Exp(apd.NewBigInt(10), apd.NewBigInt(int64(-d.Exponent)), nil)
	var mag apd.BigInt
	mag.Abs(&d.Coeff)
	q.QuoRem(&mag, &pow, &r)
	// Away from zero when the remainder is not zero and the direction
	// points away: ceil of a positive, floor of a negative.
	if r.Sign() != 0 && up != d.Negative {
		q.Add(&q, apd.NewBigInt(1))
	}
	z := apd.NewWithBigInt(&q, 0)
	z.Negative = d.Negative && !z.IsZero()
	return z, nil
}

// sqrtNumeric follows numeric_sqrt's scale: NUMERIC_MIN_SIG_DIGITS
// significant digits, at least the argument's scale.
func sqrtNumeric(d *apd.Decimal) (any, error) {
	if d.Form == apd.NaN {
		return d, nil
	}
	if d.Negative && !d.IsZero() {
		return nil, sqlerr.Errorf(sqlerr.InvalidArgumentForPower, "cannot take square root of a negative number")
	}
	if d.Form == apd.Infinite {
		return d, nil
	}
	var sweight int64
	if !d.IsZero() {
		_, w := nbaseWeight(d)
		// sweight = (arg.weight + 1) * DEC_DIGITS / 2 - 1
		sweight = (w+1)*4/2 - 1
	}
	rscale := max(numericMinSigDigits-sweight, dscale(d), 0)
	rscale = min(rscale, 1000)
	c := apd.BaseContext.WithPrecision(uint32(rscale + int64(d.NumDigits()) + 10))
	z := new(apd.Decimal)
	if _, err := c.Sqrt(z, d); err != nil {
		return nil, outOfRange(types.Numeric)
	}
	return roundNumeric(z, rscale)
}

var truncUnits = map[string]int{"microseconds": 0, "milliseconds": 1, "second": 2, "minute": 3, "hour": 4, "day": 5, "week": 6, "month": 7, "quarter": 8, "year": 9, "decade": 10, "century": 11, "millennium": 12}

func dateTrunc(_ *Env, a []any) (any, error) {
	unit := strings.ToLower(a[0].(string))
	t := a[1].(time.Time).UTC()
	u, ok := truncUnits[unit]
	if !ok {
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "unit %q not recognized for type timestamp", unit)
	}
	y, m, d := t.Date()
	switch u {
	case 0:
		return t.Truncate(time.Microsecond), nil
	case 1:
		return t.Truncate(time.Millisecond), nil
	case 2:
		return t.Truncate(time.Second), nil
	case 3:
		return t.Truncate(time.Minute), nil
	case 4:
		return t.Truncate(time.Hour), nil
	case 5:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC), nil
	case 6:
		wd := (int(t.Weekday()) + 6) % 7 // ISO: Monday first
		return time.Date(y, m, d-wd, 0, 0, 0, 0, time.UTC), nil
	case 7:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC), nil
	case 8:
		return time.Date(y, time.Month((int(m)-1)/3*3+1), 1, 0, 0, 0, 0, time.UTC), nil
	case 9:
		return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC), nil
	case 10:
		return time.Date(y-mod(y, 10), 1, 1, 0, 0, 0, 0, time.UTC), nil
	case 11:
		return time.Date(y-mod(y-1, 100), 1, 1, 0, 0, 0, 0, time.UTC), nil
	}
	return time.Date(y-mod(y-1, 1000), 1, 1, 0, 0, 0, 0, time.UTC), nil
}

func mod(a, b int) int { return ((a % b) + b) % b }

func dateTruncInterval(_ *Env, a []any) (any, error) {
	unit := strings.ToLower(a[0].(string))
	iv := a[1].(types.IntervalValue)
	const usHour, usMin, usSec = 3_600_000_000, 60_000_000, 1_000_000
	switch unit {
	case "year":
		return types.IntervalValue{Months: iv.Months / 12 * 12}, nil
	case "month":
		return types.IntervalValue{Months: iv.Months}, nil
	case "day":
		return types.IntervalValue{Months: iv.Months, Days: iv.Days}, nil
	case "hour":
		return types.IntervalValue{Months: iv.Months, Days: iv.Days, Micros: iv.Micros / usHour * usHour}, nil
	case "minute":
		return types.IntervalValue{Months: iv.Months, Days: iv.Days, Micros: iv.Micros / usMin * usMin}, nil
	case "second":
		return types.IntervalValue{Months: iv.Months, Days: iv.Days, Micros: iv.Micros / usSec * usSec}, nil
	}
	return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "unit %q not supported for type interval", unit)
}

// extractField computes extract's field of a time or interval as an
// exact decimal: seconds keep their microseconds, epoch is seconds.
func extractField(field string, v any) (*apd.Decimal, error) {
	field = strings.ToLower(field)
	if iv, ok := v.(types.IntervalValue); ok {
		switch field {
		case "epoch":
			// A month is 30 days, a year 365.25 days.
			years, months := int64(iv.Months/12), int64(iv.Months%12)
			secs := new(apd.Decimal)
			micros := apd.New(years*36525*864+months*30*86400*100+int64(iv.Days)*86400*100, -2)
			_, _ = exact.Add(secs, micros, apd.New(iv.Micros, -6))
			return secs, nil
		case "year":
			return apd.New(int64(iv.Months/12), 0), nil
		case "month":
			return apd.New(int64(iv.Months%12), 0), nil
		case "day":
			return apd.New(int64(iv.Days), 0), nil
		case "hour":
			return apd.New(iv.Micros/3_600_000_000, 0), nil
		case "minute":
			return apd.New(iv.Micros/60_000_000%60, 0), nil
		case "second":
			return apd.New(iv.Micros%60_000_000, -6), nil
		}
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "unit %q not supported for type interval", field)
	}
	t := v.(time.Time).UTC()
	switch field {
	case "epoch":
		return apd.New(t.UnixMicro(), -6), nil
	case "year":
		return apd.New(int64(t.Year()), 0), nil
	case "quarter":
		return apd.New(int64((int(t.Month())-1)/3+1), 0), nil
	case "month":
		return apd.New(int64(t.Month()), 0), nil
	case "week":
		_, w := t.ISOWeek()
		return apd.New(int64(w), 0), nil
	case "day":
		return apd.New(int64(t.Day()), 0), nil
	case "dow":
		return apd.New(int64(t.Weekday()), 0), nil
	case "isodow":
		return apd.New(int64((int(t.Weekday())+6)%7+1), 0), nil
	case "doy":
		return apd.New(int64(t.YearDay()), 0), nil
	case "hour":
		return apd.New(int64(t.Hour()), 0), nil
	case "minute":
		return apd.New(int64(t.Minute()), 0), nil
	case "second":
		return apd.New(int64(t.Second())*1_000_000+int64(t.Nanosecond()/1000), -6), nil
	case "milliseconds":
		return apd.New(int64(t.Second())*1_000_000+int64(t.Nanosecond()/1000), -3), nil
	case "microseconds":
		return apd.New(int64(t.Second())*1_000_000+int64(t.Nanosecond()/1000), 0), nil
	case "timezone":
		return apd.New(0, 0), nil
	}
	return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "unit %q not recognized for type timestamp", field)
}

func datePartF8(_ *Env, a []any) (any, error) {
	d, err := extractField(a[0].(string), a[1])
	if err != nil {
		return nil, err
	}
	f, _ := d.Float64()
	return f, nil
}

// extractNumeric is EXTRACT: numeric since PostgreSQL 14, with the
// scale the field has (seconds 6 places, a date's epoch none).
func extractNumeric(_ *Env, a []any) (any, error) {
	d, err := extractField(a[0].(string), a[1])
	if err != nil {
		return nil, err
	}
	return d, nil
}

func toTimestamp(_ *Env, a []any) (any, error) {
	f := a[0].(float64)
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 9e12 {
		return nil, sqlerr.Errorf(sqlerr.DatetimeFieldOverflow, "timestamp out of range: %q", types.FormatFloat(f, 64))
	}
	us := math.RoundToEven(f * 1e6)
	return time.UnixMicro(int64(us)).UTC(), nil
}

// extractDate is EXTRACT from a date: whole numbers, and no time
// fields.
func extractDate(env *Env, a []any) (any, error) {
	field := strings.ToLower(a[0].(string))
	switch field {
	case "hour", "minute", "second", "milliseconds", "microseconds", "timezone":
		return nil, sqlerr.Errorf(sqlerr.FeatureNotSupported, "unit %q not supported for type date", field)
	case "epoch":
		return apd.New(a[1].(time.Time).Unix(), 0), nil
	}
	return extractNumeric(env, a)
}
