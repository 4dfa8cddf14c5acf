package expr

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// canImplicit reports whether PostgreSQL casts from to to implicitly
// (pg_cast's castcontext 'i', and an unknown literal to anything).
func canImplicit(from, to types.Type) bool {
	if from.OID == types.OIDUnknown || from == to || from.OID == to.OID {
		return true
	}
	if fr, tr := numRank(from), numRank(to); fr > 0 && tr > 0 {
		return fr < tr
	}
	switch {
	case from.Category() == types.CatString && to.Category() == types.CatString:
		return true
	case from.OID == types.OIDDate:
		return to.OID == types.OIDTimestamp || to.OID == types.OIDTimestampTZ
	case from.OID == types.OIDTimestamp:
		return to.OID == types.OIDTimestampTZ
	}
	return false
}

func cannotCast(from, to types.Type) *sqlerr.Error {
	return sqlerr.Errorf(sqlerr.CannotCoerce, "cannot cast type %s to %s", from.Name(), to.Name())
}

// castFunc is the conversion of a non-NULL value from one type to
// another, or 42846 when PostgreSQL has no such cast.
func castFunc(from, to types.Type, explicit bool) (func(any) (any, error), error) {
	if from.OID == to.OID {
		return modifierFunc(to, explicit), nil
	}
	withMod := func(f func(any) (any, error)) func(any) (any, error) {
		m := modifierFunc(to, explicit)
		return func(v any) (any, error) {
			w, err := f(v)
			if err != nil {
				return nil, err
			}
			return m(w)
		}
	}
	// Text in: the target's input function (an unknown literal is text).
	if from.Category() == types.CatString || from.OID == types.OIDUnknown {
		if to.OID == types.OIDText || to.OID == types.OIDVarchar {
			return withMod(func(v any) (any, error) { return v, nil }), nil
		}
		base := to.Base()
		return withMod(func(v any) (any, error) { return types.Parse(base, v.(string)) }), nil
	}
	// Text out: the output function (a boolean as true/false).
	if to.Category() == types.CatString {
		return withMod(func(v any) (any, error) { return types.CastText(from, v), nil }), nil
	}
	if numRank(from) > 0 && numRank(to) > 0 {
		return withMod(func(v any) (any, error) { return castNumber(v, to) }), nil
	}
	switch {
	case from.OID == types.OIDInt4 && to.OID == types.OIDBool:
		return func(v any) (any, error) { return v.(int32) != 0, nil }, nil
	case from.OID == types.OIDBool && to.OID == types.OIDInt4:
		return func(v any) (any, error) {
			if v.(bool) {
				return int32(1), nil
			}
			return int32(0), nil
		}, nil
	case from.Category() == types.CatDatetime && to.Category() == types.CatDatetime:
		if to.OID == types.OIDDate {
			return func(v any) (any, error) { return v.(time.Time).Truncate(24 * time.Hour), nil }, nil
		}
		// The session's zone is UTC: timestamp and timestamptz hold the
		// same instant.
		return func(v any) (any, error) { return v, nil }, nil
	case from.OID == types.OIDJSONB:
		return withMod(func(v any) (any, error) { return castJSON(v.(types.JSON), to) }), nil
	}
	return nil, cannotCast(from, to)
}

// modifierFunc applies to's modifier, if any.
func modifierFunc(to types.Type, explicit bool) func(any) (any, error) {
	switch {
	case to.OID == types.OIDNumeric && to.Mod >= 0:
		return func(v any) (any, error) { return types.CoerceNumeric(v.(*apd.Decimal), to) }
	case to.OID == types.OIDVarchar && to.Mod >= 0:
		return func(v any) (any, error) { return types.CoerceVarchar(v.(string), to, explicit) }
	}
	return func(v any) (any, error) { return v, nil }
}

// castNumber converts between the numeric types: integers range-checked,
// floats to integers rounded half to even, numerics to integers half
// away from zero, floats to numeric through 15 (float8) or 6 (float4)
// significant digits, as PostgreSQL does.
func castNumber(v any, to types.Type) (any, error) {
	switch to.OID {
	case types.OIDInt2, types.OIDInt4, types.OIDInt8:
		var n int64
		switch x := v.(type) {
		case int16, int32, int64:
			n = toInt64(x)
		case float32, float64:
			f := toFloat(x)
			f = math.RoundToEven(f)
			lo, hi := intRange(to)
			// The bounds as floats: hi rounds up for int8, so < not <=.
			if math.IsNaN(f) || f < float64(lo) || f >= float64(hi)+1 {
				return nil, outOfRange(to)
			}
			n = int64(f)
		case *apd.Decimal:
			switch x.Form {
			case apd.NaN:
				return nil, sqlerr.NotSupported("cannot convert NaN to %s", to.Name())
			case apd.Infinite:
				return nil, sqlerr.NotSupported("cannot convert infinity to %s", to.Name())
			}
			r, err := roundNumeric(x, 0)
			if err != nil {
				return nil, outOfRange(to)
			}
			i, err := r.Int64()
			if err != nil {
				return nil, outOfRange(to)
			}
			n = i
		}
		lo, hi := intRange(to)
		if n < lo || n > hi {
			return nil, outOfRange(to)
		}
		return fromInt64(to, n), nil
	case types.OIDFloat4, types.OIDFloat8:
		var f float64
		switch x := v.(type) {
		case int16, int32, int64:
			f = float64(toInt64(x))
		case float32, float64:
			f = toFloat(x)
		case *apd.Decimal:
			switch {
			case x.Form == apd.NaN:
				f = math.NaN()
			case x.Form == apd.Infinite:
				f = math.Inf(map[bool]int{true: -1, false: 1}[x.Negative])
			default:
				var err error
				if f, err = strconv.ParseFloat(x.Text('e'), 64); err != nil {
					return nil, outOfRange(to)
				}
			}
		}
		if to.OID == types.OIDFloat4 {
			if !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
				return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: overflow")
			}
			if f != 0 && float32(f) == 0 {
				return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: underflow")
			}
			return float32(f), nil
		}
		return f, nil
	case types.OIDNumeric:
		switch x := v.(type) {
		case int16, int32, int64:
			return apd.New(toInt64(x), 0), nil
		case float32:
			return floatToNumeric(float64(x), 6)
		case float64:
			return floatToNumeric(x, 15)
		case *apd.Decimal:
			return x, nil
		}
	}
	return nil, sqlerr.NotSupported("cast to %s", to.Name())
}

func toFloat(v any) float64 {
	if f, ok := v.(float32); ok {
		return float64(f)
	}
	return v.(float64)
}

// floatToNumeric is float8_numeric: the float printed with digits
// significant digits, read as numeric.
func floatToNumeric(f float64, digits int) (*apd.Decimal, error) {
	switch {
	case math.IsNaN(f):
		return &apd.Decimal{Form: apd.NaN}, nil
	case math.IsInf(f, 0):
		return &apd.Decimal{Form: apd.Infinite, Negative: f < 0}, nil
	}
	s := strconv.FormatFloat(f, 'e', digits-1, 64)
	d, err := types.ParseDecimal(s)
	if err != nil {
		return nil, err
	}
	// %g drops trailing zeros.
	r, _ := new(apd.Decimal).Reduce(d)
	if r.Exponent > 0 {
		return types.ParseDecimal(r.Text('f'))
	}
	return r, nil
}

// castJSON converts a jsonb scalar to a SQL type, as PostgreSQL 11+'s
// jsonb casts do.
func castJSON(j types.JSON, to types.Type) (any, error) {
	kindName := map[types.JSONKind]string{types.JSONNull: "null", types.JSONString: "string", types.JSONNumber: "numeric", types.JSONBool: "boolean", types.JSONArray: "array", types.JSONObject: "object"}[j.Kind()]
	bad := sqlerr.Errorf(sqlerr.InvalidParameterValue, "cannot cast jsonb %s to type %s", kindName, to.Name())
	switch {
	case numRank(to) > 0:
		if j.Kind() != types.JSONNumber {
			return nil, bad
		}
		return castNumber(j.Num(), to)
	case to.OID == types.OIDBool:
		if j.Kind() != types.JSONBool {
			return nil, bad
		}
		return j.BoolValue(), nil
	}
	return nil, cannotCast(types.JSONB, to)
}

// TypeFromName resolves a TypeName node (with its modifiers) to a type.
func TypeFromName(t *pg.TypeName) (types.Type, error) {
	if len(t.ArrayBounds) > 0 {
		return types.Type{}, sqlerr.NotSupported("array types are not supported yet").At(t.Location)
	}
	var names []string
	for _, n := range t.Names {
		names = append(names, n.GetString_().GetSval())
	}
	if len(names) == 2 && names[0] != "pg_catalog" || len(names) > 2 {
		return types.Type{}, sqlerr.Errorf(sqlerr.UndefinedObject, "type %q does not exist", strings.Join(names, ".")).At(t.Location)
	}
	last := names[len(names)-1]
	typ, ok := types.ByName(last)
	if !ok {
		if last == "bpchar" || last == "char" || last == "time" || last == "timetz" || last == "json" || last == "uuid" {
			return types.Type{}, sqlerr.NotSupported("type %s is not supported yet", last).At(t.Location)
		}
		return types.Type{}, sqlerr.Errorf(sqlerr.UndefinedObject, "type %q does not exist", last).At(t.Location)
	}
	var mods []int32
	for _, m := range t.Typmods {
		k := m.GetAConst()
		if k == nil || k.GetIval() == nil {
			return types.Type{}, sqlerr.Errorf(sqlerr.SyntaxError, "type modifiers must be simple constants or identifiers").At(t.Location)
		}
		mods = append(mods, k.GetIval().Ival)
	}
	switch {
	case len(mods) == 0:
		return typ, nil
	case typ.OID == types.OIDVarchar && len(mods) == 1:
		if mods[0] < 1 {
			return types.Type{}, sqlerr.Errorf(sqlerr.InvalidParameterValue, "length for type varchar must be at least 1").At(t.Location)
		}
		return types.VarcharN(mods[0]), nil
	case typ.OID == types.OIDNumeric && len(mods) <= 2:
		p, s := mods[0], int32(0)
		if len(mods) == 2 {
			s = mods[1]
		}
		if p < 1 || p > 1000 {
			return types.Type{}, sqlerr.Errorf(sqlerr.InvalidParameterValue, "NUMERIC precision %d must be between 1 and 1000", p).At(t.Location)
		}
		if s < 0 || s > p {
			return types.Type{}, sqlerr.Errorf(sqlerr.InvalidParameterValue, "NUMERIC scale %d must be between 0 and precision %d", s, p).At(t.Location)
		}
		return types.NumericPS(p, s), nil
	case typ.OID == types.OIDFloat8 && last == "float" && len(mods) == 1:
		// float(p): float4 up to 24 bits, float8 beyond.
		if mods[0] <= 24 {
			return types.Float4, nil
		}
		return types.Float8, nil
	case typ.Category() == types.CatDatetime || typ.OID == types.OIDInterval:
		return types.Type{}, sqlerr.NotSupported("precision on %s is not supported yet", typ.Name()).At(t.Location)
	}
	return types.Type{}, sqlerr.Errorf(sqlerr.SyntaxError, "type modifier is not allowed for type %q", last).At(t.Location)
}

func (c *Compiler) compileCast(tc *pg.TypeCast) (*Expr, error) {
	to, err := TypeFromName(tc.TypeName)
	if err != nil {
		return nil, err
	}
	arg, err := c.Compile(tc.Arg)
	if err != nil {
		return nil, err
	}
	// A parameter cast directly takes the cast's type, as in
	// PostgreSQL's inference: SELECT $1::int8 makes $1 an int8.
	if arg.ParamIndex >= 0 && arg.Type.OID == types.OIDUnknown {
		c.setParam(arg, to.Base())
	}
	e, err := c.Coerce(arg, to, true)
	if err != nil {
		if sqlerr.Code(err) == sqlerr.CannotCoerce {
			return nil, err.(*sqlerr.Error).At(tc.Location)
		}
		return nil, err
	}
	return e, nil
}
