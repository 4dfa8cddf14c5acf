package types

import (
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// ToWire converts a value to what the wire layer's pgtype encodes for
// its type: numerics to pgtype.Numeric, intervals to pgtype.Interval,
// jsonb to its text; the rest pass as they are.
func ToWire(v any) any {
	switch x := v.(type) {
	case *apd.Decimal:
		switch {
		case x.Form == apd.Infinite && x.Negative:
			return pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		case x.Form == apd.Infinite:
			return pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}
		case x.Form != apd.Finite:
			return pgtype.Numeric{NaN: true, Valid: true}
		}
		n := new(big.Int).Set(x.Coeff.MathBigInt())
		if x.Negative {
			n.Neg(n)
		}
		return pgtype.Numeric{Int: n, Exp: x.Exponent, Valid: true}
	case IntervalValue:
		return pgtype.Interval{Months: x.Months, Days: x.Days, Microseconds: x.Micros, Valid: true}
	case JSON:
		return x.String()
	}
	return v
}

// FromWire converts a parameter value the wire layer decoded (pgtype's
// Go types) to the value of type t.
func FromWire(t Type, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case pgtype.Numeric:
		if !x.Valid {
			return nil, nil
		}
		b, err := x.MarshalJSON()
		if err != nil {
			return nil, err
		}
		text := string(b)
		if len(text) > 1 && text[0] == '"' {
			text = text[1 : len(text)-1]
		}
		return ParseDecimal(text)
	case pgtype.Interval:
		if !x.Valid {
			return nil, nil
		}
		return IntervalValue{x.Months, x.Days, x.Microseconds}, nil
	case pgtype.InfinityModifier:
		return nil, sqlerr.NotSupported("infinite dates and timestamps are not supported")
	case time.Time:
		return x.UTC(), nil
	case string:
		if t.OID != OIDText && t.OID != OIDVarchar && t.OID != OIDUnknown {
			return Parse(t, x)
		}
		return x, nil
	}
	if t.OID == OIDJSONB {
		// pgtype decodes json into maps and slices; its text is what
		// jsonb reads.
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return ParseJSON(string(b))
	}
	switch v.(type) {
	case bool, int16, int32, int64, float32, float64, []byte:
		return v, nil
	}
	return nil, fmt.Errorf("types: parameter of Go type %T for %s", v, t.Name())
}
