package expr

import (
	"math"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

func outOfRange(t types.Type) error {
	return sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "%s out of range", t.Name())
}

var errDivZero = sqlerr.Errorf(sqlerr.DivisionByZero, "division by zero")

func (c *Compiler) arith(op string, l, r *Expr, loc int32) (*Expr, error) {
	lt, rt := l.Type, r.Type
	// Date and time arithmetic first: its operand types differ.
	if e, ok, err := c.datetimeArith(op, l, r, loc); ok || err != nil {
		return e, err
	}
	if lt.OID == types.OIDUnknown && rt.OID == types.OIDUnknown {
		return nil, sqlerr.Errorf(sqlerr.AmbiguousFunction, "operator is not unique: unknown %s unknown", op).At(loc)
	}
	t, err := c.binaryType(l, r)
	if err != nil {
		return nil, err
	}
	if numRank(t) == 0 {
		return nil, noOperator(op, lt, rt, loc)
	}
	if op == "^" {
		// power is float8 or numeric.
		if t.OID != types.OIDNumeric {
			t = types.Float8
		}
	}
	if op == "%" && (t.OID == types.OIDFloat4 || t.OID == types.OIDFloat8) {
		return nil, noOperator(op, lt, rt, loc)
	}
	if l, err = c.Coerce(l, t, false); err != nil {
		return nil, opCoerceError(err, op, lt, rt, loc)
	}
	if r, err = c.Coerce(r, t, false); err != nil {
		return nil, opCoerceError(err, op, lt, rt, loc)
	}
	return strict2(t, l, r, func(a, b any) (any, error) { return arithValues(op, t, a, b) }), nil
}

func arithValues(op string, t types.Type, a, b any) (any, error) {
	switch t.OID {
	case types.OIDInt2, types.OIDInt4, types.OIDInt8:
		z, err := intOp(op, t, toInt64(a), toInt64(b))
		if err != nil {
			return nil, err
		}
		return fromInt64(t, z), nil
	case types.OIDFloat4:
		z, err := floatOp(op, float64(a.(float32)), float64(b.(float32)))
		if err != nil {
			return nil, err
		}
		if !math.IsInf(z, 0) && math.Abs(z) > math.MaxFloat32 {
			return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: overflow")
		}
		return float32(z), nil
	case types.OIDFloat8:
		return floatOp(op, a.(float64), b.(float64))
	case types.OIDNumeric:
		return numericOp(op, a.(*apd.Decimal), b.(*apd.Decimal))
	}
	return nil, sqlerr.NotSupported("arithmetic on %s", t.Name())
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
	panic("expr: not an integer")
}

func fromInt64(t types.Type, n int64) any {
	switch t.OID {
	case types.OIDInt2:
		return int16(n)
	case types.OIDInt4:
		return int32(n)
	}
	return n
}

func intRange(t types.Type) (int64, int64) {
	switch t.OID {
	case types.OIDInt2:
		return math.MinInt16, math.MaxInt16
	case types.OIDInt4:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func intOp(op string, t types.Type, x, y int64) (int64, error) {
	var z int64
	switch op {
	case "+":
		z = x + y
		if (z > x) != (y > 0) {
			return 0, outOfRange(t)
		}
	case "-":
		z = x - y
		if (z < x) != (y > 0) {
			return 0, outOfRange(t)
		}
	case "*":
		z = x * y
		if x != 0 && (z/x != y || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64)) {
			return 0, outOfRange(t)
		}
	case "/":
		if y == 0 {
			return 0, errDivZero
		}
		if y == -1 {
			if x == math.MinInt64 {
				return 0, outOfRange(t)
			}
			z = -x
		} else {
			z = x / y
		}
	case "%":
		if y == 0 {
			return 0, errDivZero
		}
		if y == -1 {
			return 0, nil
		}
		z = x % y
	}
	lo, hi := intRange(t)
	if z < lo || z > hi {
		return 0, outOfRange(t)
	}
	return z, nil
}

func floatOp(op string, x, y float64) (float64, error) {
	var z float64
	switch op {
	case "+":
		z = x + y
	case "-":
		z = x - y
	case "*":
		z = x * y
		if z == 0 && x != 0 && y != 0 {
			return 0, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: underflow")
		}
	case "/":
		if y == 0 {
			return 0, errDivZero
		}
		z = x / y
		if z == 0 && x != 0 && !math.IsInf(y, 0) {
			return 0, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: underflow")
		}
	case "^":
		return powFloat(x, y)
	}
	if math.IsInf(z, 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
		return 0, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: overflow")
	}
	return z, nil
}

func powFloat(x, y float64) (float64, error) {
	if x == 0 && y < 0 {
		return 0, sqlerr.Errorf(sqlerr.InvalidArgumentForPower, "zero raised to a negative power is undefined")
	}
	if x < 0 && y != math.Trunc(y) {
		return 0, sqlerr.Errorf(sqlerr.InvalidArgumentForPower, "a negative number raised to a non-integer power yields a complex result")
	}
	z := math.Pow(x, y)
	if math.IsInf(z, 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
		return 0, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: overflow")
	}
	if z == 0 && x != 0 && !math.IsInf(y, 0) {
		return 0, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: underflow")
	}
	return z, nil
}

func sqrtFloat(x float64) (any, error) {
	if x < 0 {
		return nil, sqlerr.Errorf(sqlerr.InvalidArgumentForPower, "cannot take square root of a negative number")
	}
	return math.Sqrt(x), nil
}

func negate(t types.Type, v any) (any, error) {
	switch x := v.(type) {
	case int16, int32, int64:
		n := toInt64(x)
		lo, _ := intRange(t)
		if n == lo {
			return nil, outOfRange(t)
		}
		return fromInt64(t, -n), nil
	case float32:
		return -x, nil
	case float64:
		return -x, nil
	case *apd.Decimal:
		z := new(apd.Decimal).Neg(x)
		if z.IsZero() {
			z.Negative = false
		}
		return z, nil
	}
	return nil, sqlerr.NotSupported("negation of %s", t.Name())
}

// exact is a context for arithmetic that is exact in PostgreSQL (+, -,
// *): precision enough for any numeric.
var exact = apd.Context{Precision: 300000, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent, Traps: apd.DefaultTraps &^ apd.Inexact &^ apd.Rounded}

// numericMinSigDigits is PostgreSQL's NUMERIC_MIN_SIG_DIGITS: a
// quotient has at least this many significant digits.
const numericMinSigDigits = 16

func numericOp(op string, x, y *apd.Decimal) (any, error) {
	if x.Form != apd.Finite || y.Form != apd.Finite {
		return numericSpecial(op, x, y)
	}
	z := new(apd.Decimal)
	var err error
	switch op {
	case "+":
		_, err = exact.Add(z, x, y)
	case "-":
		_, err = exact.Sub(z, x, y)
	case "*":
		_, err = exact.Mul(z, x, y)
	case "/":
		if y.IsZero() {
			return nil, errDivZero
		}
		return numericDiv(x, y, divScale(x, y))
	case "%":
		if y.IsZero() {
			return nil, errDivZero
		}
		// Truncating remainder, sign of the dividend, as PostgreSQL's.
		_, err = exact.Rem(z, x, y)
	case "^":
		return numericPow(x, y)
	}
	if err != nil {
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value overflows numeric format")
	}
	if z.IsZero() {
		z.Negative = false
	}
	return types.CoerceNumeric(z, types.Numeric)
}

func numericSpecial(op string, x, y *apd.Decimal) (any, error) {
	nan := &apd.Decimal{Form: apd.NaN}
	if x.Form == apd.NaN || y.Form == apd.NaN {
		return nan, nil
	}
	// Infinities: what PostgreSQL 14+ does, by IEEE float's rules.
	fx, _ := x.Float64()
	fy, _ := y.Float64()
	if x.Form == apd.Infinite {
		fx = math.Inf(map[bool]int{true: -1, false: 1}[x.Negative])
	}
	if y.Form == apd.Infinite {
		fy = math.Inf(map[bool]int{true: -1, false: 1}[y.Negative])
	}
	var z float64
	switch op {
	case "+":
		z = fx + fy
	case "-":
		z = fx - fy
	case "*":
		z = fx * fy
	case "/":
		if fy == 0 {
			return nil, errDivZero
		}
		z = fx / fy
	case "%":
		if fy == 0 {
			return nil, errDivZero
		}
		if math.IsInf(fx, 0) {
			return nan, nil
		}
		return x, nil
	default:
		return nil, sqlerr.NotSupported("%s on infinite numerics", op)
	}
	switch {
	case math.IsNaN(z):
		return nan, nil
	case math.IsInf(z, 0):
		return &apd.Decimal{Form: apd.Infinite, Negative: z < 0}, nil
	}
	return apd.New(0, 0), nil
}

// nbaseWeight is a nonzero numeric's first base-10000 digit and its
// weight, as PostgreSQL's NumericVar holds them; divScale needs them.
func nbaseWeight(d *apd.Decimal) (first int64, weight int64) {
	if d.Coeff.IsInt64() {
		// Without formatting the coefficient: a window's bounds divide
		// an epoch per row, and the text was most of that division.
		c := d.Coeff.Int64()
		if c < 0 {
			c = -c
		}
		n := d.NumDigits()
		e10 := n + int64(d.Exponent) - 1
		weight = floorDiv(e10, 4)
		lead := e10 - weight*4 + 1
		first = c
		for i := lead; i < n; i++ {
			first /= 10
		}
		for i := n; i < lead; i++ {
			first *= 10
		}
		return first, weight
	}
	digits := d.Coeff.String()
	if digits[0] == '-' {
		digits = digits[1:]
	}
	e10 := int64(len(digits)) + int64(d.Exponent) - 1 // exponent of the leading digit
	weight = floorDiv(e10, 4)
	lead := e10 - weight*4 + 1 // decimal digits in the first base-10000 digit
	for i := int64(0); i < lead; i++ {
		first *= 10
		if i < int64(len(digits)) {
			first += int64(digits[i] - '0')
		}
	}
	return first, weight
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func dscale(d *apd.Decimal) int64 {
	if d.Exponent < 0 {
		return int64(-d.Exponent)
	}
	return 0
}

// divScale is PostgreSQL's select_div_scale: enough digits for
// numericMinSigDigits significant ones, and no fewer than either
// operand's scale.
func divScale(x, y *apd.Decimal) int64 {
	var w1, w2, f1, f2 int64
	if !x.IsZero() {
		f1, w1 = nbaseWeight(x)
	}
	if !y.IsZero() {
		f2, w2 = nbaseWeight(y)
	}
	q := w1 - w2
	if f1 <= f2 {
		q--
	}
	rscale := numericMinSigDigits - q*4
	rscale = max(rscale, dscale(x), dscale(y), 0)
	return min(rscale, 1000)
}

// numericDiv divides to rscale places, rounding half away from zero:
// the quotient is first cut (not rounded) a few digits further, which
// cannot change the rounding digit.
func numericDiv(x, y *apd.Decimal, rscale int64) (*apd.Decimal, error) {
	adj := int64(x.NumDigits()) + int64(x.Exponent) - (int64(y.NumDigits()) + int64(y.Exponent))
	prec := max(adj+rscale+5, 5)
	c := apd.BaseContext.WithPrecision(uint32(prec))
	c.Rounding = apd.RoundDown
	q := new(apd.Decimal)
	if _, err := c.Quo(q, x, y); err != nil {
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value overflows numeric format")
	}
	return roundNumeric(q, rscale)
}

// roundNumeric rounds d to scale places, half away from zero, as
// PostgreSQL's round(numeric, int) does.
func roundNumeric(d *apd.Decimal, scale int64) (*apd.Decimal, error) {
	if d.Form != apd.Finite {
		return d, nil
	}
	z := new(apd.Decimal)
	c := apd.BaseContext.WithPrecision(uint32(max(int64(d.NumDigits())+int64(d.Exponent)+scale+2, 2)))
	c.Rounding = apd.RoundHalfUp
	if _, err := c.Quantize(z, d, int32(-scale)); err != nil {
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value overflows numeric format")
	}
	if z.IsZero() {
		z.Negative = false
	}
	return z, nil
}

func numericPow(x, y *apd.Decimal) (any, error) {
	if x.Form != apd.Finite || y.Form != apd.Finite {
		return nil, sqlerr.NotSupported("power of infinite or NaN numerics")
	}
	if x.IsZero() {
		if y.Negative {
			return nil, sqlerr.Errorf(sqlerr.InvalidArgumentForPower, "zero raised to a negative power is undefined")
		}
		if y.IsZero() {
			return apd.New(1, -numericMinSigDigits+15), nil
		}
		return roundNumeric(apd.New(0, 0), max(dscale(x), dscale(y), numericMinSigDigits-15))
	}
	var frac apd.Decimal
	var integ apd.Decimal
	y.Modf(&integ, &frac)
	if x.Negative && !frac.IsZero() {
		return nil, sqlerr.Errorf(sqlerr.InvalidArgumentForPower, "a negative number raised to a non-integer power yields a complex result")
	}
	// power_var's result scale: NUMERIC_MIN_SIG_DIGITS significant
	// digits by the estimated decimal weight of the result.
	fx, _ := new(apd.Decimal).Abs(x).Float64()
	fy, _ := y.Float64()
	val := math.Log10(fx) * fy
	if math.IsInf(val, 0) || math.Abs(val) > 130000 {
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value overflows numeric format")
	}
	rscale := max(int64(numericMinSigDigits)-int64(val), dscale(x), dscale(y), 0)
	rscale = min(rscale, 1000)
	c := apd.BaseContext.WithPrecision(uint32(max(int64(val), 0) + rscale + 10))
	z := new(apd.Decimal)
	if _, err := c.Pow(z, x, y); err != nil {
		return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value overflows numeric format")
	}
	return roundNumeric(z, rscale)
}

// datetimeArith compiles + and - where a date, time or interval takes
// part; ok false when none does.
func (c *Compiler) datetimeArith(op string, l, r *Expr, loc int32) (*Expr, bool, error) {
	lc, rc := l.Type.Category(), r.Type.Category()
	isDT := func(cat types.Category) bool { return cat == types.CatDatetime || cat == types.CatTimespan }
	if !isDT(lc) && !isDT(rc) {
		return nil, false, nil
	}
	// An unknown literal beside a date or time is an interval, or the
	// same type where the operator takes two (timestamp - timestamp).
	if l.Type.OID == types.OIDUnknown || r.Type.OID == types.OIDUnknown {
		known, unk := l, r
		if l.Type.OID == types.OIDUnknown {
			known, unk = r, l
		}
		target := types.Interval
		if op == "-" && unk == r && known.Type.Category() == types.CatDatetime || known.Type.OID == types.OIDInterval {
			target = known.Type
		}
		if op == "*" || op == "/" {
			target = types.Float8
		}
		u, err := c.Coerce(unk, target, false)
		if err != nil {
			return nil, true, err
		}
		if unk == l {
			l = u
		} else {
			r = u
		}
	}
	lt, rt := l.Type.OID, r.Type.OID
	isInt := func(t uint32) bool { return t == types.OIDInt4 || t == types.OIDInt2 || t == types.OIDInt8 }
	switch {
	case lt == types.OIDDate && isInt(rt) && (op == "+" || op == "-"):
		r, _ = c.Coerce(r, types.Int4, true)
		return strict2(types.Date, l, r, func(a, b any) (any, error) {
			n := int64(b.(int32))
			if op == "-" {
				n = -n
			}
			return a.(time.Time).AddDate(0, 0, int(n)), nil
		}), true, nil
	case isInt(lt) && rt == types.OIDDate && op == "+":
		l, _ = c.Coerce(l, types.Int4, true)
		return strict2(types.Date, l, r, func(a, b any) (any, error) { return b.(time.Time).AddDate(0, 0, int(a.(int32))), nil }), true, nil
	case lt == types.OIDDate && rt == types.OIDDate && op == "-":
		return strict2(types.Int4, l, r, func(a, b any) (any, error) {
			return int32(a.(time.Time).Sub(b.(time.Time)) / (24 * time.Hour)), nil
		}), true, nil
	case l.Type.Category() == types.CatDatetime && rt == types.OIDInterval && (op == "+" || op == "-"):
		t := l.Type
		if t.OID == types.OIDDate {
			t = types.Timestamp
		}
		return strict2(t, l, r, func(a, b any) (any, error) {
			iv := b.(types.IntervalValue)
			if op == "-" {
				iv = types.IntervalValue{Months: -iv.Months, Days: -iv.Days, Micros: -iv.Micros}
			}
			return AddInterval(a.(time.Time), iv), nil
		}), true, nil
	case lt == types.OIDInterval && r.Type.Category() == types.CatDatetime && op == "+":
		t := r.Type
		if t.OID == types.OIDDate {
			t = types.Timestamp
		}
		return strict2(t, l, r, func(a, b any) (any, error) { return AddInterval(b.(time.Time), a.(types.IntervalValue)), nil }), true, nil
	case l.Type.Category() == types.CatDatetime && r.Type.Category() == types.CatDatetime && op == "-":
		t, _ := c.binaryType(l, r)
		l, _ = c.Coerce(l, t, false)
		r, _ = c.Coerce(r, t, false)
		return strict2(types.Interval, l, r, func(a, b any) (any, error) {
			us := a.(time.Time).Sub(b.(time.Time)).Microseconds()
			// timestamp_mi justifies hours into days.
			return types.IntervalValue{Days: int32(us / 86_400_000_000), Micros: us % 86_400_000_000}, nil
		}), true, nil
	case lt == types.OIDInterval && rt == types.OIDInterval && (op == "+" || op == "-"):
		return strict2(types.Interval, l, r, func(a, b any) (any, error) {
			x, y := a.(types.IntervalValue), b.(types.IntervalValue)
			if op == "-" {
				y = types.IntervalValue{Months: -y.Months, Days: -y.Days, Micros: -y.Micros}
			}
			m, d, us := int64(x.Months)+int64(y.Months), int64(x.Days)+int64(y.Days), x.Micros+y.Micros
			if m != int64(int32(m)) || d != int64(int32(d)) || (us > x.Micros) != (y.Micros > 0) {
				return nil, outOfRange(types.Interval)
			}
			return types.IntervalValue{Months: int32(m), Days: int32(d), Micros: us}, nil
		}), true, nil
	case lt == types.OIDInterval && numRank(r.Type) > 0 && (op == "*" || op == "/"):
		r, err := c.Coerce(r, types.Float8, false)
		if err != nil {
			return nil, true, err
		}
		return strict2(types.Interval, l, r, func(a, b any) (any, error) { return scaleInterval(a.(types.IntervalValue), b.(float64), op == "/") }), true, nil
	case numRank(l.Type) > 0 && rt == types.OIDInterval && op == "*":
		l, err := c.Coerce(l, types.Float8, false)
		if err != nil {
			return nil, true, err
		}
		return strict2(types.Interval, l, r, func(a, b any) (any, error) { return scaleInterval(b.(types.IntervalValue), a.(float64), false) }), true, nil
	}
	return nil, true, noOperator(op, l.Type, r.Type, loc)
}

// AddInterval adds months (clamping the day to the month's end), then
// days, then time, as PostgreSQL's timestamp_pl_interval does.
func AddInterval(t time.Time, iv types.IntervalValue) time.Time {
	if iv.Months != 0 {
		y, m, d := t.Date()
		total := int(y)*12 + int(m) - 1 + int(iv.Months)
		ny, nm := total/12, time.Month(total%12+1)
		if total < 0 && total%12 != 0 {
			ny, nm = (total-11)/12, time.Month(((total%12)+12)%12+1)
		}
		last := time.Date(ny, nm+1, 0, 0, 0, 0, 0, time.UTC).Day()
		if d > last {
			d = last
		}
		h, mi, s := t.Clock()
		t = time.Date(ny, nm, d, h, mi, s, t.Nanosecond(), time.UTC)
	}
	if iv.Days != 0 {
		t = t.AddDate(0, 0, int(iv.Days))
	}
	return t.Add(time.Duration(iv.Micros) * time.Microsecond)
}

// tsRound is PostgreSQL's TSROUND: round to microseconds.
func tsRound(x float64) float64 { return math.RoundToEven(x*1e6) / 1e6 }

// scaleInterval is interval_mul and interval_div: fractions of months
// spill into days and of days into time.
func scaleInterval(iv types.IntervalValue, f float64, divide bool) (any, error) {
	if divide {
		if f == 0 {
			return nil, errDivZero
		}
	}
	apply := func(x float64) float64 {
		if divide {
			return x / f
		}
		return x * f
	}
	md := apply(float64(iv.Months))
	dd := apply(float64(iv.Days))
	if math.IsNaN(md) || math.Abs(md) > math.MaxInt32 || math.Abs(dd) > math.MaxInt32 {
		return nil, outOfRange(types.Interval)
	}
	months := int32(md)
	days := int32(dd)
	monthRemDays := tsRound((md - float64(months)) * 30)
	secRem := tsRound((dd - float64(days) + monthRemDays - math.Trunc(monthRemDays)) * 86400)
	if math.Abs(secRem) >= 86400 {
		days += int32(secRem / 86400)
		secRem -= math.Trunc(secRem/86400) * 86400
	}
	days += int32(monthRemDays)
	us := math.RoundToEven(apply(float64(iv.Micros)) + secRem*1e6)
	if math.IsNaN(us) || math.Abs(us) > math.MaxInt64/2 {
		return nil, outOfRange(types.Interval)
	}
	return types.IntervalValue{Months: months, Days: days, Micros: int64(us)}, nil
}

// NumericDivide is numeric division with PostgreSQL's result scale
// (select_div_scale), for avg.
func NumericDivide(x, y *apd.Decimal) (*apd.Decimal, error) {
	if y.IsZero() {
		return nil, errDivZero
	}
	return numericDiv(x, y, divScale(x, y))
}

// ScaleInterval is interval / float8, for avg(interval).
func ScaleInterval(iv types.IntervalValue, by float64) (any, error) {
	return scaleInterval(iv, by, true)
}

// opCoerceError keeps a literal's own error ('a' is no integer) and
// otherwise says the operator does not exist.
func opCoerceError(err error, op string, lt, rt types.Type, loc int32) error {
	if c := sqlerr.Code(err); c != sqlerr.DatatypeMismatch && c != sqlerr.CannotCoerce {
		return err
	}
	return noOperator(op, lt, rt, loc)
}

// NumericVariance is numeric_stddev_internal's finite case: the
// variance (stddev: its square root) of n values whose sum is sumX and
// sum of squares sumX2, both exact; sample divides by n(n-1), else by
// n². The scales are PostgreSQL's: the division's select_div_scale, the
// root to the same scale; a numerator roundoff made non-positive is 0.
func NumericVariance(sumX, sumX2 *apd.Decimal, n int64, sample, stddev bool) (*apd.Decimal, error) {
	vN := apd.New(n, 0)
	num, sq := new(apd.Decimal), new(apd.Decimal)
	c := apd.BaseContext.WithPrecision(uint32(2*(sumX.NumDigits()+sumX2.NumDigits()) + 40))
	if _, err := c.Mul(sq, sumX, sumX); err != nil {
		return nil, outOfRange(types.Numeric)
	}
	if _, err := c.Mul(num, vN, sumX2); err != nil {
		return nil, outOfRange(types.Numeric)
	}
	if _, err := c.Sub(num, num, sq); err != nil {
		return nil, outOfRange(types.Numeric)
	}
	if num.Sign() <= 0 {
		return apd.New(0, 0), nil
	}
	// n(n-1) in decimal: past 3e9 rows it would overflow an int64.
	den, other := new(apd.Decimal), vN
	if sample {
		other = apd.New(n-1, 0)
	}
	if _, err := c.Mul(den, vN, other); err != nil {
		return nil, outOfRange(types.Numeric)
	}
	rscale := divScale(num, den)
	v, err := numericDiv(num, den, rscale)
	if err != nil || !stddev {
		return v, err
	}
	root := new(apd.Decimal)
	rc := apd.BaseContext.WithPrecision(uint32(rscale + int64(v.NumDigits()) + 10))
	if _, err := rc.Sqrt(root, v); err != nil {
		return nil, outOfRange(types.Numeric)
	}
	return roundNumeric(root, rscale)
}
