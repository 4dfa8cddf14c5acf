package flow

import (
	"fmt"
	"math"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// maxStringAgg bounds a string_agg result: PostgreSQL's text is at
// most 1 GB; a view's row is read whole, so a smaller bound keeps one
// group from holding the store's memory hostage.
const maxStringAgg = 64 << 20

// stringAgg rebuilds a string_agg call's string from its multiset, in
// the multiset's key order (the ORDER BY inside the call): each value
// as many times as it counts, each but the first behind its own
// delimiter (a NULL delimiter adds nothing), as PostgreSQL's
// string_agg_transfn. NULL when the multiset is empty.
func stringAgg(st Reader, call byte, gkey string) (any, error) {
	var sb strings.Builder
	first := true
	err := scanPrefix(st, append([]byte{'x', call}, gkey...), false, func(_, val []byte) (bool, error) {
		n, row, err := decodeCounted(val)
		if err != nil {
			return false, err
		}
		if len(row) != 2 || n <= 0 {
			return false, fmt.Errorf("flow: %w: string_agg value", types.ErrCorrupt)
		}
		s, ok := row[0].(string)
		if !ok {
			return false, fmt.Errorf("flow: string_agg of a %T", row[0])
		}
		delim, _ := row[1].(string)
		for ; n > 0; n-- {
			if !first {
				sb.WriteString(delim)
			}
			first = false
			sb.WriteString(s)
			if sb.Len() > maxStringAgg {
				return false, fmt.Errorf("flow: string_agg result over %d bytes", maxStringAgg)
			}
		}
		return true, nil
	})
	if err != nil || first {
		return nil, err
	}
	return sb.String(), nil
}

// exactCtx adds and multiplies numerics without rounding (the
// variances' sums must retract to exactly what they were).
var exactCtx = apd.Context{Precision: 0, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent, Traps: apd.DefaultTraps}

// addVariance adds d copies of the non-NULL v to a variance's state:
// the finite values' count, exact sum and sum of squares; non-finite
// ones counted apart (any makes the result NaN, as PostgreSQL's).
func (acc *accumulator) addVariance(v any, d int64) error {
	var x *apd.Decimal
	switch y := v.(type) {
	case int16:
		acc.in, x = inInt, apd.New(int64(y), 0)
	case int32:
		acc.in, x = inInt, apd.New(int64(y), 0)
	case int64:
		acc.in, x = inInt8, apd.New(y, 0)
	case float32, float64:
		f, _ := y.(float64)
		acc.in = inFloat8
		if g, ok := y.(float32); ok {
			f, acc.in = float64(g), inFloat4
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			acc.nan += d
			return acc.resetIfEmpty()
		}
		// The shortest decimal that reads back as f: the same float
		// always gives the same decimal, so its retraction is exact.
		x = new(apd.Decimal)
		if _, err := x.SetFloat64(f); err != nil {
			return err
		}
	case *apd.Decimal:
		acc.in = inNumeric
		if y.Form != apd.Finite {
			acc.nan += d
			return acc.resetIfEmpty()
		}
		x = y
	default:
		return fmt.Errorf("flow: variance of a %T", v)
	}
	acc.n += d
	dd := apd.New(d, 0)
	sum, sq := acc.decimal(acc.sum), acc.decimal(acc.sq)
	var p, p2 apd.Decimal
	if _, err := exactCtx.Mul(&p, x, dd); err != nil {
		return err
	}
	if _, err := exactCtx.Mul(&p2, x, &p); err != nil {
		return err
	}
	ns, nq := new(apd.Decimal), new(apd.Decimal)
	if _, err := exactCtx.Add(ns, sum, &p); err != nil {
		return err
	}
	if _, err := exactCtx.Add(nq, sq, &p2); err != nil {
		return err
	}
	acc.sum, acc.sq = ns, nq
	return acc.resetIfEmpty()
}

// resetIfEmpty restarts a variance's state from exact zeros when its
// last value went (the input kind stays for the NULL result's sake).
func (acc *accumulator) resetIfEmpty() error {
	if acc.n == 0 && acc.nan == 0 {
		*acc = accumulator{in: acc.in}
	}
	return nil
}

func (acc *accumulator) decimal(v any) *apd.Decimal {
	if d, ok := v.(*apd.Decimal); ok {
		return d
	}
	return apd.New(0, 0)
}

// varianceResult is a variance's result: NULL without enough values
// (none; one for the sample kinds), NaN with a non-finite one, else
// from the exact sums: numeric at PostgreSQL's scale
// (expr.NumericVariance) over integers and numerics, float8 over
// floats.
func (acc *accumulator) varianceResult(kind AggKind) (any, error) {
	sample := kind == VarSamp || kind == StddevSamp
	root := kind == StddevSamp || kind == StddevPop
	all := acc.n + acc.nan
	if all == 0 || (sample && all <= 1) {
		return nil, nil
	}
	float := acc.in == inFloat4 || acc.in == inFloat8
	if acc.nan > 0 {
		if float {
			return math.NaN(), nil
		}
		return &apd.Decimal{Form: apd.NaN}, nil
	}
	sum, sq := acc.decimal(acc.sum), acc.decimal(acc.sq)
	if !float {
		return expr.NumericVariance(sum, sq, acc.n, sample, root)
	}
	// (n·Σx² - (Σx)²) / (n·(n-1) or n²), exact up to the division.
	c := apd.BaseContext.WithPrecision(uint32(2*(sum.NumDigits()+sq.NumDigits()) + 40))
	num, s2, den := new(apd.Decimal), new(apd.Decimal), new(apd.Decimal)
	vn := apd.New(acc.n, 0)
	if _, err := c.Mul(num, vn, sq); err != nil {
		return nil, err
	}
	if _, err := c.Mul(s2, sum, sum); err != nil {
		return nil, err
	}
	if _, err := c.Sub(num, num, s2); err != nil {
		return nil, err
	}
	other := vn
	if sample {
		other = apd.New(acc.n-1, 0)
	}
	if _, err := c.Mul(den, vn, other); err != nil {
		return nil, err
	}
	q := new(apd.Decimal)
	if _, err := apd.BaseContext.WithPrecision(40).Quo(q, num, den); err != nil {
		return nil, err
	}
	f, err := q.Float64()
	if err != nil {
		return nil, err
	}
	if f < 0 {
		f = 0
	}
	if root {
		return math.Sqrt(f), nil
	}
	return f, nil
}
