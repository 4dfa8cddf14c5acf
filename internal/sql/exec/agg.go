package exec

import (
	"math"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// aggSpec is one aggregate call: its function, argument expressions
// over the input row, and its result type.
type aggSpec struct {
	name     string
	star     bool
	args     []*expr.Expr
	distinct bool
	filter   *expr.Expr
	// order are ORDER BY keys inside the call (string_agg(x, ',' ORDER
	// BY x)): expressions and directions.
	order []*expr.Expr
	keys  []sortKey
	typ   types.Type
}

// aggResultType is the aggregate's result type for its argument type,
// as PostgreSQL's pg_aggregate gives it.
func aggResultType(name string, arg types.Type) (types.Type, bool) {
	switch name {
	case "count":
		return types.Int8, true
	case "sum":
		switch arg.OID {
		case types.OIDInt2, types.OIDInt4:
			return types.Int8, true
		case types.OIDInt8, types.OIDNumeric:
			return types.Numeric, true
		case types.OIDFloat4, types.OIDFloat8, types.OIDInterval:
			return arg.Base(), true
		}
	case "avg":
		switch arg.OID {
		case types.OIDInt2, types.OIDInt4, types.OIDInt8, types.OIDNumeric:
			return types.Numeric, true
		case types.OIDFloat4, types.OIDFloat8:
			return types.Float8, true
		case types.OIDInterval:
			return types.Interval, true
		}
	case "min", "max":
		if arg.OID == types.OIDVarchar {
			// varchar has no max of its own: text's serves it.
			return types.Text, true
		}
		if arg.Category() != types.CatUser || arg.OID == types.OIDBytea {
			return arg.Base(), true
		}
	case "var_samp", "var_pop", "stddev_samp", "stddev_pop":
		switch arg.OID {
		case types.OIDInt2, types.OIDInt4, types.OIDInt8, types.OIDNumeric:
			return types.Numeric, true
		case types.OIDFloat4, types.OIDFloat8:
			return types.Float8, true
		}
	case "bool_and", "bool_or", "every":
		if arg.OID == types.OIDBool {
			return types.Bool, true
		}
	case "string_agg":
		if arg.Category() == types.CatString {
			return types.Text, true
		}
	}
	return types.Type{}, false
}

// aggState accumulates one aggregate for one group.
type aggState struct {
	spec  *aggSpec
	count int64
	i64   int64
	dec   *apd.Decimal
	f64   float64
	f32   float32
	iv    types.IntervalValue
	best  any
	b     *bool
	sb    *strings.Builder
	// The variances' state: over numerics (and integers) the exact sum
	// of squares beside dec, the sum, and how many NaNs and infinities
	// came (count then counts only the finite values); over floats PostgreSQL's
	// float8_accum: Youngs-Cramer's sum and sum of squared differences.
	dec2      *apd.Decimal
	nonFinite int64
	fsx, fsxx float64
	// held are argument rows kept for DISTINCT or ORDER BY, fed to the
	// accumulator at the end.
	held []types.Row
	seen *rowSet
}

func (s *aggState) add(r *run, vals types.Row) error {
	spec := s.spec
	if spec.distinct || len(spec.order) > 0 {
		if spec.distinct {
			if s.seen == nil {
				s.seen = newRowSet(r)
			}
			if added, err := s.seen.add(vals[:len(spec.args)]); err != nil || !added {
				return err
			}
		}
		if err := r.budget.charge(rowSize(vals)); err != nil {
			return err
		}
		s.held = append(s.held, vals)
		return nil
	}
	return s.accumulate(vals)
}

func (s *aggState) accumulate(vals types.Row) error {
	spec := s.spec
	if spec.star {
		s.count++
		return nil
	}
	v := vals[0]
	if v == nil {
		return nil
	}
	s.count++
	switch spec.name {
	case "count":
	case "sum", "avg":
		switch x := v.(type) {
		case int16, int32:
			n := asInt64(x)
			z := s.i64 + n
			if (z > s.i64) != (n > 0) {
				return sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "bigint out of range")
			}
			s.i64 = z
		case int64:
			if s.dec == nil {
				s.dec = apd.New(0, 0)
			}
			if _, err := exactCtx.Add(s.dec, s.dec, apd.New(x, 0)); err != nil {
				return err
			}
		case *apd.Decimal:
			if s.dec == nil {
				s.dec = apd.New(0, 0)
			}
			if x.Form != apd.Finite || s.dec.Form != apd.Finite {
				s.dec = special(s.dec, x)
				return nil
			}
			if _, err := exactCtx.Add(s.dec, s.dec, x); err != nil {
				return err
			}
		case float32:
			if spec.name == "sum" {
				s.f32 += x
			} else {
				s.f64 += float64(x)
			}
		case float64:
			s.f64 += x
		case types.IntervalValue:
			s.iv = types.IntervalValue{Months: s.iv.Months + x.Months, Days: s.iv.Days + x.Days, Micros: s.iv.Micros + x.Micros}
		}
	case "var_samp", "var_pop", "stddev_samp", "stddev_pop":
		return s.accumulateVariance(v)
	case "min", "max":
		want := -1
		if spec.name == "max" {
			want = 1
		}
		if s.best == nil || types.Compare(v, s.best) == want {
			s.best = v
		}
	case "bool_and", "every", "bool_or":
		b := v.(bool)
		if s.b == nil {
			s.b = &b
		} else if spec.name == "bool_or" {
			*s.b = *s.b || b
		} else {
			*s.b = *s.b && b
		}
	case "string_agg":
		if s.sb == nil {
			s.sb = &strings.Builder{}
		} else if vals[1] != nil {
			s.sb.WriteString(vals[1].(string))
		}
		s.sb.WriteString(v.(string))
	}
	return nil
}

// accumulateVariance adds v to a variance's state as PostgreSQL's
// numeric_accum and float8_accum do.
func (s *aggState) accumulateVariance(v any) error {
	switch x := v.(type) {
	case float32, float64:
		f := asFloat64(x)
		oldN, oldSx := float64(s.count-1), s.fsx
		n := oldN + 1
		s.fsx += f
		if oldN > 0 {
			tmp := f*n - s.fsx
			s.fsxx += tmp * tmp / (n * oldN)
			// Infinite sums from finite values overflowed; from an
			// infinite one they are NaN.
			if math.IsInf(s.fsx, 0) || math.IsInf(s.fsxx, 0) {
				if !math.IsInf(oldSx, 0) && !math.IsInf(f, 0) {
					return sqlerr.Errorf(sqlerr.NumericValueOutOfRange, "value out of range: overflow")
				}
				s.fsxx = math.NaN()
			}
		} else if math.IsNaN(f) || math.IsInf(f, 0) {
			s.fsxx = math.NaN()
		}
		return nil
	}
	var d *apd.Decimal
	switch x := v.(type) {
	case int16, int32, int64:
		d = apd.New(asInt64(x), 0)
	case *apd.Decimal:
		if x.Form != apd.Finite {
			s.nonFinite++
			s.count--
			return nil
		}
		d = x
	}
	if s.dec == nil {
		s.dec, s.dec2 = apd.New(0, 0), apd.New(0, 0)
	}
	sq := new(apd.Decimal)
	if _, err := exactCtx.Mul(sq, d, d); err != nil {
		return err
	}
	if _, err := exactCtx.Add(s.dec, s.dec, d); err != nil {
		return err
	}
	_, err := exactCtx.Add(s.dec2, s.dec2, sq)
	return err
}

// variance is a variance's result: NULL without enough values, as
// PostgreSQL's float8_var_samp and numeric_stddev_internal answer.
func (s *aggState) variance() (any, error) {
	spec := s.spec
	sample := spec.name == "var_samp" || spec.name == "stddev_samp"
	root := spec.name == "stddev_samp" || spec.name == "stddev_pop"
	if spec.typ.OID == types.OIDFloat8 {
		n := float64(s.count)
		if n == 0 || sample && n <= 1 {
			return nil, nil
		}
		den := n
		if sample {
			den = n - 1
		}
		v := s.fsxx / den
		if root {
			return math.Sqrt(v), nil
		}
		return v, nil
	}
	n := s.count + s.nonFinite
	if n == 0 || sample && n <= 1 {
		return nil, nil
	}
	if s.nonFinite > 0 {
		return &apd.Decimal{Form: apd.NaN}, nil
	}
	return expr.NumericVariance(s.dec, s.dec2, s.count, sample, root)
}

func asFloat64(v any) float64 {
	if f, ok := v.(float32); ok {
		return float64(f)
	}
	return v.(float64)
}

// special adds numerics where one is NaN or infinite, as PostgreSQL's
// numeric addition does.
func special(a, b *apd.Decimal) *apd.Decimal {
	switch {
	case a.Form == apd.NaN || b.Form == apd.NaN:
		return &apd.Decimal{Form: apd.NaN}
	case a.Form == apd.Infinite && b.Form == apd.Infinite && a.Negative != b.Negative:
		return &apd.Decimal{Form: apd.NaN}
	case a.Form == apd.Infinite:
		return a
	}
	return b
}

var exactCtx = apd.Context{Precision: 300000, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent, Traps: apd.DefaultTraps &^ apd.Inexact &^ apd.Rounded}

func asInt64(v any) int64 {
	switch x := v.(type) {
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	}
	return v.(int64)
}

func (s *aggState) result(r *run) (any, error) {
	spec := s.spec
	if len(s.held) > 0 {
		if len(spec.order) > 0 {
			sortStable(s.held, func(a, b types.Row) int { return compareBy(spec.keys, a, b) })
		}
		held := s.held
		s.held = nil
		for _, vals := range held {
			if err := s.accumulate(vals); err != nil {
				return nil, err
			}
		}
	}
	switch spec.name {
	case "count":
		return s.count, nil
	case "min", "max":
		return s.best, nil
	case "bool_and", "every", "bool_or":
		if s.b == nil {
			return nil, nil
		}
		return *s.b, nil
	case "string_agg":
		if s.sb == nil {
			return nil, nil
		}
		return s.sb.String(), nil
	case "var_samp", "var_pop", "stddev_samp", "stddev_pop":
		return s.variance()
	}
	if s.count == 0 {
		return nil, nil
	}
	argType := spec.args[0].Type
	switch spec.name {
	case "sum":
		switch argType.OID {
		case types.OIDInt2, types.OIDInt4:
			return s.i64, nil
		case types.OIDInt8, types.OIDNumeric:
			return s.dec, nil
		case types.OIDFloat4:
			return s.f32, nil
		case types.OIDFloat8:
			return s.f64, nil
		case types.OIDInterval:
			return s.iv, nil
		}
	case "avg":
		switch argType.OID {
		case types.OIDInt2, types.OIDInt4:
			return divide(apd.New(s.i64, 0), s.count)
		case types.OIDInt8, types.OIDNumeric:
			if s.dec.Form != apd.Finite {
				return s.dec, nil
			}
			return divide(s.dec, s.count)
		case types.OIDFloat4, types.OIDFloat8:
			return s.f64 / float64(s.count), nil
		case types.OIDInterval:
			return expr.ScaleInterval(s.iv, float64(s.count))
		}
	}
	return nil, sqlerr.Errorf(sqlerr.InternalError, "aggregate %s(%s) has no result", spec.name, argType.Name())
}

func divide(sum *apd.Decimal, n int64) (any, error) {
	return expr.NumericDivide(sum, apd.New(n, 0))
}

// aggNode groups its input by groups and computes aggs per group: the
// output row is the group values, then the aggregates' results.
type aggNode struct {
	in     node
	groups []*expr.Expr
	aggs   []*aggSpec
}

type group struct {
	key    types.Row
	states []*aggState
}

func (a *aggNode) open(r *run) (iter, error) {
	in, err := a.in.open(r)
	if err != nil {
		return nil, err
	}
	index := map[string]*group{}
	var order []*group
	newGroup := func(key types.Row) (*group, error) {
		g := &group{key: key}
		for _, spec := range a.aggs {
			g.states = append(g.states, &aggState{spec: spec})
		}
		if err := r.budget.charge(rowSize(key) + int64(len(a.aggs))*160); err != nil {
			return nil, err
		}
		order = append(order, g)
		return g, nil
	}
	if len(a.groups) == 0 {
		// An aggregate without GROUP BY has one row, even over none.
		g, err := newGroup(nil)
		if err != nil {
			return nil, err
		}
		index[""] = g
	}
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		row, err := in()
		if err != nil {
			return nil, err
		}
		if row == nil {
			break
		}
		key := make(types.Row, len(a.groups))
		for i, g := range a.groups {
			if key[i], err = g.Eval(r.env, row); err != nil {
				return nil, err
			}
		}
		k := rowKey(key)
		g, ok := index[k]
		if !ok {
			if g, err = newGroup(key); err != nil {
				return nil, err
			}
			index[k] = g
		}
		for i, spec := range a.aggs {
			if spec.filter != nil {
				v, err := spec.filter.Eval(r.env, row)
				if err != nil {
					return nil, err
				}
				if !expr.Truthy(v) {
					continue
				}
			}
			vals := make(types.Row, len(spec.args)+len(spec.order))
			for j, e := range spec.args {
				if vals[j], err = e.Eval(r.env, row); err != nil {
					return nil, err
				}
			}
			for j, e := range spec.order {
				if vals[len(spec.args)+j], err = e.Eval(r.env, row); err != nil {
					return nil, err
				}
			}
			if err := g.states[i].add(r, vals); err != nil {
				return nil, err
			}
		}
	}
	i := 0
	return func() (types.Row, error) {
		if i >= len(order) {
			return nil, nil
		}
		g := order[i]
		i++
		out := make(types.Row, 0, len(a.groups)+len(a.aggs))
		out = append(out, g.key...)
		for _, s := range g.states {
			v, err := s.result(r)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}, nil
}
