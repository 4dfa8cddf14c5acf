package flow

// The accumulators behind Aggregate: each call's state in one group, how
// it is encoded, and the exact arithmetic (int64 until it overflows, then
// PostgreSQL's numeric) that lets SUM, AVG and the variance family retract.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// accumulator is one call's state in one group. Which fields a kind
// uses: n is the non-NULL count (COUNT, SUM, AVG, MIN, MAX) or the
// distinct count (COUNT(DISTINCT)); t and f count true and false
// (bool_and, bool_or); sum is the current extreme (MIN, MAX) or the
// finite sum (int64, or *apd.Decimal once an int64 overflows or for
// numeric input, or float64) and pinf,
// ninf, nan count the non-finite values; in is the input's kind. The
// variance family keeps the finite values' count in n, their exact
// sum in sum and sum of squares in sq (*apd.Decimal), and the
// non-finite values' count in nan; string_agg keeps its current
// string in sum.
type accumulator struct {
	n, t, f         int64
	pinf, ninf, nan int64
	in              inputKind
	sum             any
	sq              any
}

type inputKind byte

const (
	inNone   inputKind = iota
	inInt              // int2, int4: SUM int8, AVG numeric
	inInt8             // SUM, AVG numeric
	inFloat4           // SUM float4, AVG float8
	inFloat8
	inNumeric
)

func (acc *accumulator) append(b []byte, kind AggKind) []byte {
	for _, v := range []int64{acc.n, acc.t, acc.f, acc.pinf, acc.ninf, acc.nan} {
		b = binary.AppendVarint(b, v)
	}
	b = append(b, byte(acc.in))
	b = types.AppendValue(b, acc.sum)
	if kind.variance() {
		// Only the variances have a second sum: the other kinds' state
		// is as it was before they existed.
		b = types.AppendValue(b, acc.sq)
	}
	return b
}

func (acc *accumulator) decode(b []byte, kind AggKind) ([]byte, error) {
	for _, p := range []*int64{&acc.n, &acc.t, &acc.f, &acc.pinf, &acc.ninf, &acc.nan} {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("flow: %w: accumulator", types.ErrCorrupt)
		}
		*p, b = v, b[k:]
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("flow: %w: accumulator", types.ErrCorrupt)
	}
	acc.in = inputKind(b[0])
	var err error
	acc.sum, b, err = types.DecodeValue(b[1:])
	if err == nil && kind.variance() {
		acc.sq, b, err = types.DecodeValue(b)
	}
	return b, err
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// decimalCtx adds and multiplies numerics exactly (precision 0 means no
// rounding for those operations).
var decimalCtx = apd.BaseContext

// extreme updates a MIN or MAX call's current extreme (kept in sum)
// with d copies of v, and reports whether the extreme was retracted, so
// that the next one must be read from the multiset. Only that case
// reads the multiset: an insert compares with the extreme.
func (acc *accumulator) extreme(kind AggKind, v any, d int64) (rescan bool) {
	acc.n += d
	if d < 0 {
		return acc.sum != nil && types.Compare(v, acc.sum) == 0
	}
	if acc.sum == nil {
		acc.sum = v
		return false
	}
	c := types.Compare(v, acc.sum)
	if (kind == Min && c < 0) || (kind == Max && c > 0) {
		acc.sum = v
	}
	return false
}

// add adds d copies of the non-NULL v to the accumulator.
func (acc *accumulator) add(kind AggKind, v any, d int64) error {
	switch kind {
	case Count:
		acc.n += d
		return nil
	case BoolAnd, BoolOr:
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("flow: bool_and/bool_or of a %T", v)
		}
		if b {
			acc.t += d
		} else {
			acc.f += d
		}
		return nil
	case Sum, Avg:
	case StringAgg:
		acc.n += d
		return nil
	case VarSamp, VarPop, StddevSamp, StddevPop:
		return acc.addVariance(v, d)
	default:
		return nil
	}
	acc.n += d
	defer func() {
		if acc.n == 0 {
			// Nothing left: restart exactly, whatever rounding the
			// retractions left behind.
			*acc = accumulator{}
		}
	}()
	switch x := v.(type) {
	case int16, int32, int64:
		var i int64
		switch x := x.(type) {
		case int16:
			i, acc.in = int64(x), inInt
		case int32:
			i, acc.in = int64(x), inInt
		case int64:
			i, acc.in = x, inInt8
		}
		if s, ok := acc.sum.(int64); ok || acc.sum == nil {
			if p, ok := mulInt64(i, d); ok {
				if r, ok := addInt64(s, p); ok {
					acc.sum = r
					return nil
				}
			}
		}
		return acc.addDecimal(apd.New(i, 0), d)
	case float32:
		acc.in = inFloat4
		return acc.addFloat(float64(x), d)
	case float64:
		if acc.in != inFloat4 {
			acc.in = inFloat8
		}
		return acc.addFloat(x, d)
	case *apd.Decimal:
		acc.in = inNumeric
		switch {
		case x.Form == apd.NaN || x.Form == apd.NaNSignaling:
			acc.nan += d
			return nil
		case x.Form == apd.Infinite && x.Negative:
			acc.ninf += d
			return nil
		case x.Form == apd.Infinite:
			acc.pinf += d
			return nil
		}
		return acc.addDecimal(x, d)
	}
	return fmt.Errorf("flow: SUM/AVG of a %T", v)
}

func (acc *accumulator) addFloat(f float64, d int64) error {
	switch {
	case math.IsNaN(f):
		acc.nan += d
	case math.IsInf(f, 1):
		acc.pinf += d
	case math.IsInf(f, -1):
		acc.ninf += d
	default:
		s, _ := acc.sum.(float64)
		acc.sum = s + f*float64(d)
	}
	return nil
}

func (acc *accumulator) addDecimal(x *apd.Decimal, d int64) error {
	var s apd.Decimal
	switch cur := acc.sum.(type) {
	case int64:
		s.SetInt64(cur)
	case *apd.Decimal:
		s.Set(cur)
	}
	var p apd.Decimal
	if _, err := decimalCtx.Mul(&p, x, apd.New(d, 0)); err != nil {
		return err
	}
	r := new(apd.Decimal)
	if _, err := decimalCtx.Add(r, &s, &p); err != nil {
		return err
	}
	acc.sum = r
	return nil
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	r := a * b
	if r/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return r, true
}

func addInt64(a, b int64) (int64, bool) {
	r := a + b
	return r, (a >= 0) != (b >= 0) || (r >= 0) == (a >= 0)
}

// nonFinite is the sum's value if a NaN or infinity is in it.
func (acc *accumulator) nonFinite() (float64, bool) {
	switch {
	case acc.nan > 0 || (acc.pinf > 0 && acc.ninf > 0):
		return math.NaN(), true
	case acc.pinf > 0:
		return math.Inf(1), true
	case acc.ninf > 0:
		return math.Inf(-1), true
	}
	return 0, false
}

func (acc *accumulator) decimalSum() *apd.Decimal {
	switch s := acc.sum.(type) {
	case int64:
		return apd.New(s, 0)
	case *apd.Decimal:
		return s
	}
	return apd.New(0, 0)
}

func decimalOf(f float64) *apd.Decimal {
	switch {
	case math.IsNaN(f):
		return &apd.Decimal{Form: apd.NaN}
	case math.IsInf(f, 1):
		return &apd.Decimal{Form: apd.Infinite}
	}
	return &apd.Decimal{Form: apd.Infinite, Negative: true}
}

func (acc *accumulator) sumResult() (any, error) {
	if acc.n == 0 {
		return nil, nil
	}
	nf, isNF := acc.nonFinite()
	switch acc.in {
	case inInt:
		s, ok := acc.sum.(int64)
		if !ok {
			return nil, sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "bigint out of range")
		}
		return s, nil
	case inFloat4:
		if isNF {
			return float32(nf), nil
		}
		s, _ := acc.sum.(float64)
		return float32(s), nil
	case inFloat8:
		if isNF {
			return nf, nil
		}
		s, _ := acc.sum.(float64)
		return s, nil
	}
	if isNF {
		return decimalOf(nf), nil
	}
	return acc.decimalSum(), nil
}

func (acc *accumulator) avgResult() (any, error) {
	if acc.n == 0 {
		return nil, nil
	}
	nf, isNF := acc.nonFinite()
	switch acc.in {
	case inFloat4, inFloat8:
		if isNF {
			return nf, nil
		}
		s, _ := acc.sum.(float64)
		return s / float64(acc.n), nil
	}
	if isNF {
		return decimalOf(nf), nil
	}
	return divNumeric(acc.decimalSum(), acc.n)
}

// divNumeric is x / n as PostgreSQL's numeric division gives it: the
// result scale select_div_scale picks (at least 16 significant digits,
// at least the operands' scales), rounded half away from zero.
func divNumeric(x *apd.Decimal, n int64) (*apd.Decimal, error) {
	y := apd.New(n, 0)
	w1, f1 := pgWeight(x)
	w2, f2 := pgWeight(y)
	qweight := w1 - w2
	if f1 <= f2 {
		qweight--
	}
	rscale := 16 - qweight*4
	rscale = max(rscale, dscale(x), 0)
	rscale = min(rscale, 1000)
	// Truncate to more digits than needed, then round half up once:
	// rounding twice could round a tie the wrong way.
	intDigits := int64(x.NumDigits()) + int64(x.Exponent)
	prec := max(intDigits, 1) + int64(rscale) + 2
	qctx := apd.Context{Precision: uint32(prec), MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent, Traps: apd.DefaultTraps, Rounding: apd.RoundDown}
	q := new(apd.Decimal)
	if _, err := qctx.Quo(q, x, y); err != nil {
		return nil, err
	}
	rctx := qctx
	rctx.Rounding = apd.RoundHalfUp
	rctx.Precision = uint32(prec + 2)
	r := new(apd.Decimal)
	if _, err := rctx.Quantize(r, q, -int32(rscale)); err != nil {
		return nil, err
	}
	return r, nil
}

// pgWeight is PostgreSQL's weight (the power of 10000 of the first
// base-10000 digit) and that digit, for a finite x; 0, 0 for zero.
func pgWeight(x *apd.Decimal) (int32, int64) {
	if x.IsZero() {
		return 0, 0
	}
	digits := x.Coeff.String()
	p := int32(len(digits)) + x.Exponent - 1 // 10^p <= |x| < 10^(p+1)
	w := p / 4
	if p < 0 && p%4 != 0 {
		w-- // floor
	}
	lead := int(p - 4*w + 1) // digits in the first base-10000 digit
	var first int64
	for i := 0; i < lead; i++ {
		first *= 10
		if i < len(digits) {
			first += int64(digits[i] - '0')
		}
	}
	return w, first
}

// dscale is x's digits after the point.
func dscale(x *apd.Decimal) int32 {
	if x.Exponent < 0 {
		return -x.Exponent
	}
	return 0
}
