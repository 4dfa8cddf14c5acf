package sqltest

import (
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// PGType is PostgreSQL's name for a DuckDB type: what a PostgreSQL
// client would be told (RowDescription's type) for the same column.
// Types PostgreSQL lacks map to the nearest one that holds every value:
// TINYINT to int2, UINTEGER to int8, UBIGINT and HUGEINT to numeric
// (PostgreSQL's SUM of int8 is numeric too). Unknown names come back
// lower-cased.
func PGType(duck string) string {
	t := strings.ToUpper(strings.TrimSpace(duck))
	switch {
	case strings.HasPrefix(t, "DECIMAL"), strings.HasPrefix(t, "NUMERIC"):
		return "numeric"
	case strings.HasPrefix(t, "VARCHAR"):
		return "text"
	case strings.HasPrefix(t, "TIMESTAMP WITH TIME ZONE"), t == "TIMESTAMPTZ":
		return "timestamptz"
	case strings.HasPrefix(t, "TIMESTAMP"):
		// TIMESTAMP, TIMESTAMP_MS, TIMESTAMP_S, TIMESTAMP_NS.
		return "timestamp"
	case strings.HasSuffix(t, "[]"):
		return "_" + PGType(strings.TrimSuffix(t, "[]"))
	}
	switch t {
	case "BOOLEAN":
		return "bool"
	case "TINYINT", "SMALLINT", "UTINYINT":
		return "int2"
	case "INTEGER", "USMALLINT":
		return "int4"
	case "BIGINT", "UINTEGER":
		return "int8"
	case "UBIGINT", "HUGEINT", "UHUGEINT", "BIGNUM":
		return "numeric"
	case "FLOAT":
		return "float4"
	case "DOUBLE":
		return "float8"
	case "BLOB":
		return "bytea"
	case "DATE":
		return "date"
	case "TIME":
		return "time"
	case "TIME WITH TIME ZONE":
		return "timetz"
	case "INTERVAL":
		return "interval"
	case "UUID":
		return "uuid"
	case "JSON":
		return "json"
	}
	return strings.ToLower(t)
}

// timeLayout is PostgreSQL's (and DuckDB's) timestamp text form.
const timeLayout = "2006-01-02 15:04:05.999999999"

// duckValue decodes one value of the node API's JSON form (see
// duckdb.js) by its DuckDB type into the Go type Result documents.
func duckValue(duckType string, raw json.RawMessage) (any, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var s string
	str := func() error { return json.Unmarshal(raw, &s) }
	switch pg := PGType(duckType); pg {
	case "bool":
		var b bool
		err := json.Unmarshal(raw, &b)
		return b, err
	case "int2", "int4", "int8":
		// Small integers come as numbers, BIGINT as a string.
		t := strings.Trim(string(raw), `"`)
		return strconv.ParseInt(t, 10, 64)
	case "float4", "float8":
		if raw[0] == '"' {
			if err := str(); err != nil {
				return nil, err
			}
			return parseSpecialFloat(s)
		}
		return strconv.ParseFloat(string(raw), 64)
	case "numeric":
		var n pgtype.Numeric
		if err := n.Scan(strings.Trim(string(raw), `"`)); err != nil {
			return nil, err
		}
		return n, nil
	case "timestamp", "timestamptz", "date":
		if err := str(); err != nil {
			return nil, err
		}
		return parseTime(s)
	case "interval":
		var iv struct {
			Months int32  `json:"months"`
			Days   int32  `json:"days"`
			Micros string `json:"micros"`
		}
		if err := json.Unmarshal(raw, &iv); err != nil {
			return nil, err
		}
		us, err := strconv.ParseInt(iv.Micros, 10, 64)
		if err != nil {
			return nil, err
		}
		return pgtype.Interval{Months: iv.Months, Days: iv.Days, Microseconds: us, Valid: true}, nil
	default:
		if raw[0] == '"' {
			if err := str(); err != nil {
				return nil, err
			}
			return s, nil
		}
		// Lists and structs: their JSON, as text.
		return string(raw), nil
	}
}

func parseSpecialFloat(s string) (float64, error) {
	switch strings.ToLower(s) {
	case "nan":
		return math.NaN(), nil
	case "infinity", "inf":
		return math.Inf(1), nil
	case "-infinity", "-inf":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}

// parseTime reads DuckDB's DATE, TIMESTAMP and TIMESTAMP WITH TIME ZONE
// text (the zone is UTC: duckdb.js sets it) as a UTC time.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{timeLayout + "-07", timeLayout + "-07:00", timeLayout, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: not a timestamp DuckDB writes", s)
}

// textValue is v's text form for loading into DuckDB, and false for
// NULL.
func textValue(v any) (string, bool, error) {
	c, err := toCell(v)
	if err != nil {
		return "", false, err
	}
	switch c.kind {
	case kindNull:
		return "", false, nil
	case kindText:
		return c.s, true, nil
	case kindBytes:
		// DuckDB's BLOB text: \xHH per byte.
		var sb strings.Builder
		for _, b := range []byte(c.s) {
			fmt.Fprintf(&sb, `\x%02X`, b)
		}
		return sb.String(), true, nil
	case kindTime:
		return c.t.Format(timeLayout), true, nil
	case kindInterval:
		return fmt.Sprintf("%d months %d days %d microseconds", c.iv.Months, c.iv.Days, c.iv.Microseconds), true, nil
	}
	return c.String(), true, nil
}

type cellKind uint8

const (
	kindNull cellKind = iota
	kindBool
	kindExact // integers and numeric: r
	kindFloat // f
	kindText  // s
	kindBytes // s
	kindTime  // t
	kindInterval
)

// cell is a value normalized for comparison: the kinds a PostgreSQL
// column can hold, numbers split into exact and floating.
type cell struct {
	kind cellKind
	b    bool
	r    *big.Rat
	f    float64
	s    string
	t    time.Time
	iv   pgtype.Interval
}

// toCell normalizes the Go values engines hand over (database/sql's,
// pgx's and this package's) into a cell.
func toCell(v any) (cell, error) {
	switch x := v.(type) {
	case nil:
		return cell{}, nil
	case bool:
		return cell{kind: kindBool, b: x}, nil
	case int:
		return exactInt(int64(x)), nil
	case int8:
		return exactInt(int64(x)), nil
	case int16:
		return exactInt(int64(x)), nil
	case int32:
		return exactInt(int64(x)), nil
	case int64:
		return exactInt(x), nil
	case uint8:
		return exactInt(int64(x)), nil
	case uint16:
		return exactInt(int64(x)), nil
	case uint32:
		return exactInt(int64(x)), nil
	case uint64:
		return cell{kind: kindExact, r: new(big.Rat).SetInt(new(big.Int).SetUint64(x))}, nil
	case float32:
		return cell{kind: kindFloat, f: float64(x)}, nil
	case float64:
		return cell{kind: kindFloat, f: x}, nil
	case *big.Int:
		if x == nil {
			return cell{}, nil
		}
		return cell{kind: kindExact, r: new(big.Rat).SetInt(x)}, nil
	case *big.Rat:
		if x == nil {
			return cell{}, nil
		}
		return cell{kind: kindExact, r: new(big.Rat).Set(x)}, nil
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return cell{}, fmt.Errorf("json.Number %q is not a number", x)
		}
		return cell{kind: kindExact, r: r}, nil
	case string:
		return cell{kind: kindText, s: x}, nil
	case []byte:
		if x == nil {
			return cell{}, nil
		}
		return cell{kind: kindBytes, s: string(x)}, nil
	case time.Time:
		return cell{kind: kindTime, t: x.UTC()}, nil
	case time.Duration:
		return cell{kind: kindInterval, iv: pgtype.Interval{Microseconds: x.Microseconds(), Valid: true}}, nil
	case pgtype.Numeric:
		return numericCell(x)
	case *pgtype.Numeric:
		if x == nil {
			return cell{}, nil
		}
		return numericCell(*x)
	case pgtype.Interval:
		if !x.Valid {
			return cell{}, nil
		}
		return cell{kind: kindInterval, iv: x}, nil
	case driver.Valuer:
		// pgtype's other wrappers (Int8, Float8, Text, Timestamp, ...)
		// give database/sql's values.
		dv, err := x.Value()
		if err != nil {
			return cell{}, fmt.Errorf("%T: %w", v, err)
		}
		if _, again := dv.(driver.Valuer); again {
			return cell{}, fmt.Errorf("%T: Value returns a Valuer", v)
		}
		return toCell(dv)
	}
	return cell{}, fmt.Errorf("unsupported value type %T", v)
}

func exactInt(v int64) cell { return cell{kind: kindExact, r: new(big.Rat).SetInt64(v)} }

func numericCell(n pgtype.Numeric) (cell, error) {
	switch {
	case !n.Valid:
		return cell{}, nil
	case n.NaN:
		return cell{kind: kindFloat, f: math.NaN()}, nil
	case n.InfinityModifier == pgtype.Infinity:
		return cell{kind: kindFloat, f: math.Inf(1)}, nil
	case n.InfinityModifier == pgtype.NegativeInfinity:
		return cell{kind: kindFloat, f: math.Inf(-1)}, nil
	case n.Int == nil:
		return cell{}, fmt.Errorf("pgtype.Numeric without Int")
	}
	r := new(big.Rat).SetInt(n.Int)
	if n.Exp != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(n.Exp))), nil)
		if n.Exp > 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
	}
	return cell{kind: kindExact, r: r}, nil
}

func abs(x int32) int32 {
	if x < 0 {
		return -x
	}
	return x
}

// float is the cell as a float64, for comparing it with a float.
func (c cell) float() (float64, bool) {
	switch c.kind {
	case kindFloat:
		return c.f, true
	case kindExact:
		f, _ := c.r.Float64()
		return f, true
	}
	return 0, false
}

// String is the cell in SQL literal style, for diffs: NULL, numbers
// bare, text quoted.
func (c cell) String() string {
	switch c.kind {
	case kindNull:
		return "NULL"
	case kindBool:
		return strconv.FormatBool(c.b)
	case kindExact:
		if c.r.IsInt() {
			return c.r.Num().String()
		}
		// Exact decimals (numeric) end in powers of ten; anything else
		// (a *big.Rat of 1/3) is shown to 30 places.
		if s, ok := decimalString(c.r); ok {
			return s
		}
		return c.r.FloatString(30)
	case kindFloat:
		switch {
		case math.IsNaN(c.f):
			return "NaN"
		case math.IsInf(c.f, 1):
			return "Infinity"
		case math.IsInf(c.f, -1):
			return "-Infinity"
		}
		return strconv.FormatFloat(c.f, 'g', -1, 64)
	case kindText:
		return "'" + strings.ReplaceAll(c.s, "'", "''") + "'"
	case kindBytes:
		return `'\x` + hex.EncodeToString([]byte(c.s)) + "'"
	case kindTime:
		return c.t.Format(timeLayout)
	case kindInterval:
		return fmt.Sprintf("interval(%d months %d days %d us)", c.iv.Months, c.iv.Days, c.iv.Microseconds)
	}
	return "?"
}

// decimalString writes r exactly if its denominator divides a power of
// ten.
func decimalString(r *big.Rat) (string, bool) {
	d := new(big.Int).Set(r.Denom())
	places := 0
	ten, two, five := big.NewInt(10), big.NewInt(2), big.NewInt(5)
	var m big.Int
	for d.Cmp(big.NewInt(1)) != 0 {
		switch {
		case m.Mod(d, ten).Sign() == 0:
			d.Quo(d, ten)
		case m.Mod(d, two).Sign() == 0:
			d.Quo(d, two)
		case m.Mod(d, five).Sign() == 0:
			d.Quo(d, five)
		default:
			return "", false
		}
		places++
		if places > 1000 {
			return "", false
		}
	}
	return r.FloatString(places), true
}

// intervalMicros is PostgreSQL's interval ordering key: a month is 30
// days, a day 24 hours.
func intervalMicros(iv pgtype.Interval) *big.Int {
	const day = 86_400_000_000
	t := big.NewInt(int64(iv.Months)*30 + int64(iv.Days))
	t.Mul(t, big.NewInt(day))
	return t.Add(t, big.NewInt(iv.Microseconds))
}
