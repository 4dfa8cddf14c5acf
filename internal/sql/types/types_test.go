package types

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// allTypes are the types with values, for the property tests.
var allTypes = []Type{Bool, Int2, Int4, Int8, Float4, Float8, Numeric, Text, Bytea, Date, Timestamp, TimestampTZ, Interval, JSONB}

// randValue makes a random value of t, biased to edges (0, extremes,
// NaN, -0, empty, embedded zero bytes), NULL one time in ten.
func randValue(r *rand.Rand, t Type) any {
	if r.IntN(10) == 0 {
		return nil
	}
	pick := func(xs ...int64) int64 {
		if r.IntN(2) == 0 {
			return xs[r.IntN(len(xs))]
		}
		return r.Int64N(2000) - 1000
	}
	switch t.OID {
	case OIDBool:
		return r.IntN(2) == 0
	case OIDInt2:
		return int16(pick(0, 1, -1, math.MaxInt16, math.MinInt16))
	case OIDInt4:
		return int32(pick(0, 1, -1, math.MaxInt32, math.MinInt32))
	case OIDInt8:
		if r.IntN(3) == 0 {
			return int64(r.Uint64())
		}
		return pick(0, 1, -1, math.MaxInt64, math.MinInt64)
	case OIDFloat4:
		fs := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 1.5, -2.25}
		if r.IntN(2) == 0 {
			return fs[r.IntN(len(fs))]
		}
		return float32(r.NormFloat64() * 1000)
	case OIDFloat8:
		fs := []float64{0, math.Copysign(0, -1), 1, -1, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64, 1e15, 1e-5, 0.1}
		if r.IntN(2) == 0 {
			return fs[r.IntN(len(fs))]
		}
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	case OIDNumeric:
		switch r.IntN(8) {
		case 0:
			return &apd.Decimal{Form: apd.NaN}
		case 1:
			return &apd.Decimal{Form: apd.Infinite, Negative: r.IntN(2) == 0}
		case 2:
			return apd.New(0, -int32(r.IntN(4)))
		}
		var c apd.BigInt
		c.SetInt64(r.Int64N(1_000_000_000))
		if r.IntN(3) == 0 {
			c.Mul(&c, apd.NewBigInt(r.Int64()))
		}
		d := apd.NewWithBigInt(&c, -int32(r.IntN(12)))
		d.Negative = r.IntN(2) == 0 && !d.IsZero()
		return d
	case OIDText:
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = "a\x00\x01\xffzé"[r.IntN(7)]
		}
		return string(b)
	case OIDBytea:
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = []byte{0, 1, 0xff, 'a'}[r.IntN(4)]
		}
		return b
	case OIDDate:
		return time.Date(r.IntN(4000)-100, time.Month(1+r.IntN(12)), 1+r.IntN(28), 0, 0, 0, 0, time.UTC)
	case OIDTimestamp, OIDTimestampTZ:
		return time.UnixMicro(r.Int64N(1<<50) - 1<<49).UTC()
	case OIDInterval:
		return IntervalValue{int32(pick(0, 1, -1, math.MaxInt32, math.MinInt32)), int32(pick(0, 30, -30, math.MaxInt32)), pick(0, microsPerDay, -1, math.MaxInt64, math.MinInt64)}
	case OIDJSONB:
		return randJSON(r, 3)
	}
	panic(t)
}

func randJSON(r *rand.Rand, depth int) JSON {
	k := r.IntN(6)
	if depth == 0 {
		k %= 4
	}
	switch JSONKind(k) {
	case JSONNull:
		return JSON{}
	case JSONString:
		return MakeJSONString([]string{"", "a", "b", "ab", "\x00"[:0] + "é", "\"q\""}[r.IntN(6)])
	case JSONNumber:
		return MakeJSONNumber(apd.New(r.Int64N(200)-100, -int32(r.IntN(3))))
	case JSONBool:
		return MakeJSONBool(r.IntN(2) == 0)
	case JSONArray:
		var es []JSON
		for range r.IntN(3) {
			es = append(es, randJSON(r, depth-1))
		}
		return MakeJSONArray(es)
	}
	var ks []string
	var vs []JSON
	for range r.IntN(4) {
		ks = append(ks, []string{"a", "b", "aa", ""}[r.IntN(4)])
		vs = append(vs, randJSON(r, depth-1))
	}
	return MakeJSONObject(ks, vs)
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// identical is stricter than Equal: the same Go type and the same text.
func identical(a, b any) bool {
	if fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
		return false
	}
	if f, ok := a.(float64); ok && math.IsNaN(f) {
		return math.IsNaN(b.(float64))
	}
	if f, ok := a.(float32); ok && math.IsNaN(float64(f)) {
		return math.IsNaN(float64(b.(float32)))
	}
	if f, ok := a.(float64); ok {
		return math.Float64bits(f) == math.Float64bits(b.(float64))
	}
	if f, ok := a.(float32); ok {
		return math.Float32bits(f) == math.Float32bits(b.(float32))
	}
	if _, ok := a.(IntervalValue); ok {
		return a == b
	}
	return Format(a) == Format(b) && Compare(a, b) == 0
}

func TestValueRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range allTypes {
		for range 2000 {
			v := randValue(r, typ)
			enc := AppendValue([]byte("prefix"), v)
			got, rest, err := DecodeValue(enc[len("prefix"):])
			if err != nil || len(rest) != 0 {
				t.Fatalf("%s %#v: decode: %v, %d bytes left", typ, v, err, len(rest))
			}
			if !identical(v, got) {
				t.Fatalf("%s: %v (%T) round-tripped to %v (%T)", typ, Format(v), v, Format(got), got)
			}
		}
	}
}

func TestRowRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		row := make(Row, r.IntN(6))
		for i := range row {
			row[i] = randValue(r, allTypes[r.IntN(len(allTypes))])
		}
		got, rest, err := DecodeRow(AppendRow(nil, row))
		if err != nil || len(rest) != 0 || len(got) != len(row) {
			t.Fatalf("%v: %v %v", row, got, err)
		}
		for i := range row {
			if !identical(row[i], got[i]) {
				t.Fatalf("column %d: %v became %v", i, row[i], got[i])
			}
		}
	}
}

// TestKeyOrder checks the key encoding's two promises on random pairs:
// memcmp order is Compare order, and a key decodes to an equal value.
func TestKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range allTypes {
		for range 5000 {
			a, b := randValue(r, typ), randValue(r, typ)
			ka, kb := AppendKey(nil, a), AppendKey(nil, b)
			if got, want := sign(bytes.Compare(ka, kb)), sign(Compare(a, b)); got != want {
				t.Fatalf("%s: Compare(%v, %v) = %d but keys compare %d", typ, Format(a), Format(b), want, got)
			}
			if (Hash(a) == Hash(b)) != (Compare(a, b) == 0) && Compare(a, b) == 0 {
				t.Fatalf("%s: equal values %v, %v hash apart", typ, Format(a), Format(b))
			}
			got, rest, err := DecodeKey(append(ka, 0xAA), typ)
			if err != nil || !bytes.Equal(rest, []byte{0xAA}) {
				t.Fatalf("%s %v: DecodeKey: %v, rest %x", typ, Format(a), err, rest)
			}
			if Compare(got, a) != 0 {
				t.Fatalf("%s: key of %v decoded to %v", typ, Format(a), Format(got))
			}
		}
	}
}

// TestKeyTupleOrder: keys of tuples appended in sequence order as the
// tuples do, which needs each encoding to be prefix-free.
func TestKeyTupleOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		t1, t2 := allTypes[r.IntN(len(allTypes))], allTypes[r.IntN(len(allTypes))]
		a := Row{randValue(r, t1), randValue(r, t2)}
		b := Row{randValue(r, t1), randValue(r, t2)}
		if r.IntN(2) == 0 {
			b[0] = a[0]
		}
		ka := AppendKey(AppendKey(nil, a[0]), a[1])
		kb := AppendKey(AppendKey(nil, b[0]), b[1])
		if got, want := sign(bytes.Compare(ka, kb)), sign(CompareRows(a, b)); got != want {
			t.Fatalf("(%s, %s): rows %v %v compare %d, keys %d", t1, t2, a, b, want, got)
		}
	}
}

func TestCompareAcrossIntegerWidths(t *testing.T) {
	if Compare(int32(1), int64(1)) != 0 || Hash(int32(1)) != Hash(int64(1)) || Hash(int16(-5)) != Hash(int64(-5)) {
		t.Fatal("1::int4 and 1::int8 must be equal and hash alike")
	}
	if Compare(float32(1.5), 1.5) != 0 || Hash(float32(1.5)) != Hash(1.5) {
		t.Fatal("float4 1.5 and float8 1.5 must be equal and hash alike")
	}
	a, _ := ParseDecimal("1.50")
	b, _ := ParseDecimal("1.5")
	if Compare(a, b) != 0 || Hash(a) != Hash(b) {
		t.Fatal("1.50 and 1.5 must be equal and hash alike")
	}
	if Compare(IntervalValue{Months: 1}, IntervalValue{Days: 30}) != 0 || Hash(IntervalValue{Months: 1}) != Hash(IntervalValue{Days: 30}) {
		t.Fatal("'1 mon' and '30 days' must be equal and hash alike")
	}
	if Compare(nil, int64(math.MaxInt64)) != 1 || Compare(math.NaN(), math.Inf(1)) != 1 || Compare(math.Copysign(0, -1), 0.0) != 0 {
		t.Fatal("NULL and NaN sort last; -0 = 0")
	}
}

func TestJSONCanonical(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{`{"b": 1, "a": 2, "aa": [1, 2.50, "x"]}`, `{"a": 2, "b": 1, "aa": [1, 2.50, "x"]}`},
		{`{"a":1,"a":2}`, `{"a": 2}`},
		{` [ ] `, `[]`},
		{`"\u00e9\n\"\\/"`, `"é\n\"\\/"`},
		{`1e2`, `100`},
		{`-0.0`, `0.0`},
	} {
		j, err := ParseJSON(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if j.String() != c.out {
			t.Errorf("%s: got %s, want %s", c.in, j.String(), c.out)
		}
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a" 1}`, `1 2`, `nul`, `"\u0000"`} {
		if _, err := ParseJSON(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range allTypes {
		f.Add(AppendValue(nil, randValue(r, typ)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := DecodeValue(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		v2, rest, err := DecodeValue(AppendValue(nil, v))
		if err != nil || len(rest) != 0 || !identical(v, v2) {
			t.Fatalf("%v re-decoded to %v (%v)", v, v2, err)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	r := rand.New(rand.NewPCG(11, 12))
	for i, typ := range allTypes {
		f.Add(uint8(i), AppendKey(nil, randValue(r, typ)))
	}
	f.Fuzz(func(t *testing.T, ti uint8, b []byte) {
		typ := allTypes[int(ti)%len(allTypes)]
		v, _, err := DecodeKey(b, typ)
		if err != nil {
			return
		}
		v2, rest, err := DecodeKey(AppendKey(nil, v), typ)
		if err != nil || len(rest) != 0 || Compare(v, v2) != 0 {
			t.Fatalf("%s: %v re-decoded to %v (%v)", typ, v, v2, err)
		}
	})
}

// FuzzKeyOrderText: memcmp order of text keys is Compare order.
func FuzzKeyOrderText(f *testing.F) {
	f.Add("a", "a\x00")
	f.Add("", "\x00")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := sign(bytes.Compare(AppendKey(nil, a), AppendKey(nil, b))), sign(Compare(a, b)); got != want {
			t.Fatalf("%q %q: keys %d, Compare %d", a, b, got, want)
		}
	})
}

// FuzzKeyOrderNumeric: memcmp order of numeric keys is numeric order,
// for numerics read from any text numeric_in takes.
func FuzzKeyOrderNumeric(f *testing.F) {
	f.Add("1.5", "1.50")
	f.Add("-1.2", "-1.23")
	f.Add("0.001", "1e-3")
	f.Add("NaN", "Infinity")
	f.Fuzz(func(t *testing.T, a, b string) {
		da, err1 := ParseDecimal(a)
		db, err2 := ParseDecimal(b)
		if err1 != nil || err2 != nil || len(a) > 40 || len(b) > 40 {
			return
		}
		if got, want := sign(bytes.Compare(AppendKey(nil, da), AppendKey(nil, db))), sign(Compare(da, db)); got != want {
			t.Fatalf("%s %s: keys %d, Compare %d", a, b, got, want)
		}
	})
}

func FuzzKeyOrderFloat(f *testing.F) {
	f.Add(0.0, math.Copysign(0, -1))
	f.Add(math.NaN(), math.Inf(1))
	f.Fuzz(func(t *testing.T, a, b float64) {
		if got, want := sign(bytes.Compare(AppendKey(nil, a), AppendKey(nil, b))), sign(Compare(a, b)); got != want {
			t.Fatalf("%v %v: keys %d, Compare %d", a, b, got, want)
		}
	})
}

// TestAppendKeyBytesEscapes: text and bytea keys escape NUL as 0 0xff
// and end in 0 1, whether or not a NUL is there, after a prefix.
func TestAppendKeyBytesEscapes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		s := make([]byte, r.IntN(40))
		for i := range s {
			s[i] = byte(r.IntN(4)) // NULs often
		}
		want := []byte("pre")
		for _, c := range s {
			if c == 0 {
				want = append(want, 0, 0xff)
			} else {
				want = append(want, c)
			}
		}
		want = append(want, 0, 1)
		if got := appendKeyBytes([]byte("pre"), s); !bytes.Equal(got, want) {
			t.Fatalf("bytes %x: got %x, want %x", s, got, want)
		}
		if got := appendKeyBytes([]byte("pre"), string(s)); !bytes.Equal(got, want) {
			t.Fatalf("string %x: got %x, want %x", s, got, want)
		}
	}
}
