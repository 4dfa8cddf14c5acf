package types

import (
	"bytes"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/apd/v3"
)

// Row is one row: a value per column.
type Row = []any

// Change is a row with a multiplicity, the unit of the dataflow: Diff +1
// inserts one copy of Row, -1 deletes one; larger magnitudes are several
// copies. Retractions are data, not a special case.
type Change struct {
	Row  Row
	Diff int64
}

// IntervalValue is PostgreSQL's interval: months, days and microseconds kept
// apart, because a month's and a day's length depend on the date they
// are added to.
type IntervalValue struct {
	Months int32
	Days   int32
	Micros int64
}

const (
	microsPerSecond = 1_000_000
	microsPerDay    = 86_400 * microsPerSecond
	// daysPerMonth is what comparing and justifying intervals take a
	// month to be, as PostgreSQL does.
	daysPerMonth = 30
)

// span is the interval's length in microseconds, a month as 30 days, as
// a 128-bit (hi, lo) two's complement number: it can exceed int64.
func (iv IntervalValue) span() (hi int64, lo uint64) {
	days := int64(iv.Months)*daysPerMonth + int64(iv.Days)
	neg := days < 0
	ud := uint64(days)
	if neg {
		ud = uint64(-days)
	}
	h, l := bits.Mul64(ud, microsPerDay)
	if neg {
		h, l = neg128(h, l)
	}
	// Add micros, sign-extended.
	m := uint64(iv.Micros)
	var mh uint64
	if iv.Micros < 0 {
		mh = math.MaxUint64
	}
	l, c := bits.Add64(l, m, 0)
	h, _ = bits.Add64(h, mh, c)
	return int64(h), l
}

func neg128(h, l uint64) (uint64, uint64) {
	l = ^l + 1
	h = ^h
	if l == 0 {
		h++
	}
	return h, l
}

func cmp128(ah int64, al uint64, bh int64, bl uint64) int {
	switch {
	case ah < bh:
		return -1
	case ah > bh:
		return 1
	case al < bl:
		return -1
	case al > bl:
		return 1
	}
	return 0
}

// rank orders the Go kinds of values against each other, for the safety
// net when values of different types meet (see the package doc).
func rank(v any) int {
	switch v.(type) {
	case bool:
		return 1
	case int16, int32, int64:
		return 2
	case float32, float64:
		return 3
	case *apd.Decimal:
		return 4
	case string:
		return 5
	case []byte:
		return 6
	case time.Time:
		return 7
	case IntervalValue:
		return 8
	case JSON:
		return 9
	case nil:
		return 100
	}
	return 99
}

// Compare orders a and b (-1, 0, +1) as PostgreSQL orders two values of
// one type, NULL (nil) last: see the package doc.
func Compare(a, b any) int {
	switch x := a.(type) {
	case nil:
		if b == nil {
			return 0
		}
		return 1
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	case int16, int32, int64:
		if y, ok := asInt64(b); ok {
			return cmpInt(asInt(x), y)
		}
	case float32:
		if y, ok := asFloat(b); ok {
			return CompareFloat(float64(x), y)
		}
	case float64:
		if y, ok := asFloat(b); ok {
			return CompareFloat(x, y)
		}
	case *apd.Decimal:
		if y, ok := b.(*apd.Decimal); ok {
			return CompareDecimal(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y)
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y)
		}
	case IntervalValue:
		if y, ok := b.(IntervalValue); ok {
			ah, al := x.span()
			bh, bl := y.span()
			return cmp128(ah, al, bh, bl)
		}
	case JSON:
		if y, ok := b.(JSON); ok {
			return compareJSON(x, y)
		}
	}
	return cmpInt(int64(rank(a)), int64(rank(b)))
}

// Equal is Compare(a, b) == 0: NULL equals NULL here, as grouping and
// DISTINCT treat it; SQL's = is expr's.
func Equal(a, b any) bool { return Compare(a, b) == 0 }

// Hash hashes v consistently with Equal; stable across processes.
func Hash(v any) uint64 {
	var buf [32]byte
	return xxhash.Sum64(AppendKey(buf[:0], v))
}

// HashRow hashes the values of row at cols (all of them if cols is nil).
func HashRow(row Row, cols []int) uint64 {
	var buf [128]byte
	b := buf[:0]
	if cols == nil {
		for _, v := range row {
			b = AppendKey(b, v)
		}
	} else {
		for _, c := range cols {
			b = AppendKey(b, row[c])
		}
	}
	return xxhash.Sum64(b)
}

// CompareRows compares rows column by column.
func CompareRows(a, b Row) int {
	for i := range min(len(a), len(b)) {
		if c := Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmpInt(int64(len(a)), int64(len(b)))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func asInt(v any) int64 {
	n, _ := asInt64(v)
	return n
}

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// CompareFloat is PostgreSQL's float order: NaN above everything and
// equal to itself; -0 equals 0.
func CompareFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CompareDecimal is PostgreSQL's numeric order: -Infinity < finite <
// +Infinity < NaN; NaN equals NaN.
func CompareDecimal(a, b *apd.Decimal) int {
	ra, rb := decimalClass(a), decimalClass(b)
	if ra != rb || ra != classFinite {
		return cmpInt(int64(ra), int64(rb))
	}
	return a.Cmp(b)
}

const (
	classNegInf = iota
	classFinite
	classPosInf
	classNaN
)

func decimalClass(d *apd.Decimal) int {
	switch d.Form {
	case apd.Finite:
		return classFinite
	case apd.Infinite:
		if d.Negative {
			return classNegInf
		}
		return classPosInf
	}
	return classNaN
}

// divU128 divides the 128-bit (h, l) by d, h < d.
func divU128(h, l, d uint64) (q, r uint64) { return bits.Div64(h, l, d) }
