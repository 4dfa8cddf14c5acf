package pgsource

import (
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
)

// TestTwosComplement: Java's BigInteger.toByteArray, which Connect's
// Decimal holds.
func TestTwosComplement(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want []byte
	}{
		{0, []byte{0}}, {1, []byte{1}}, {127, []byte{0x7f}}, {128, []byte{0, 0x80}}, {255, []byte{0, 0xff}},
		{-1, []byte{0xff}}, {-128, []byte{0x80}}, {-129, []byte{0xff, 0x7f}}, {1230, []byte{0x04, 0xce}},
		{-12345678, []byte{0xff, 0x43, 0x9e, 0xb2}},
	} {
		if got := twosComplement(big.NewInt(tc.n)); string(got) != string(tc.want) {
			t.Errorf("%d: % x, want % x", tc.n, got, tc.want)
		}
	}
}

// TestAppendValue: PostgreSQL's text values as Debezium writes them.
func TestAppendValue(t *testing.T) {
	for _, tc := range []struct {
		oid    uint32
		typmod int32
		mode   string
		text   string
		want   string
	}{
		{oidBool, -1, "precise", "t", "true"},
		{oidInt8, -1, "precise", "-9223372036854775808", "-9223372036854775808"},
		{oidFloat8, -1, "precise", "1e+300", "1e+300"},
		{oidFloat8, -1, "precise", "NaN", `"NaN"`},
		{oidFloat4, -1, "precise", "0.1", "0.1"},
		{oidNumeric, (10<<16 | 2) + 4, "precise", "-0.01", `"` + base64.StdEncoding.EncodeToString([]byte{0xff}) + `"`},
		{oidNumeric, (10<<16 | 2) + 4, "precise", "NaN", "null"},
		{oidNumeric, (10<<16 | 2) + 4, "string", "12.30", `"12.30"`},
		{oidNumeric, (10<<16 | 2) + 4, "double", "12.30", "12.3"},
		{oidNumeric, -1, "precise", "100", `{"scale":0,"value":"ZA=="}`},
		{oidDate, -1, "precise", "1970-01-01", "0"},
		{oidDate, -1, "precise", "1969-12-31", "-1"},
		{oidDate, -1, "precise", "0001-01-01 BC", "-719528"}, // year 0, a leap year,
		{oidTimestamp, -1, "precise", "1969-12-31 23:59:59.999999", "-1"},
		{oidTimestamp, 3, "precise", "1970-01-01 00:00:01.5", "1500"},
		{oidTimestampTZ, -1, "precise", "2024-05-01 10:00:00+00", `"2024-05-01T10:00:00Z"`},
		{oidTimestampTZ, -1, "precise", "2024-05-01 10:00:00.123+05:30", `"2024-05-01T04:30:00.123Z"`},
		{oidTime, -1, "precise", "24:00:00", "86400000000"},
		{oidTime, 0, "precise", "00:00:01", "1000"},
		{oidInterval, -1, "precise", "P1Y2M3DT4H5M6.5S", "37091106500000"},
		{oidInterval, -1, "precise", "PT-1H", "-3600000000"},
		{oidBytea, -1, "precise", `\x00ff`, `"AP8="`},
		{25, -1, "precise", "tab\tquote\"é\x01", `"tab\tquote\"é\u0001"`},
	} {
		k, scale, prec := kindOf(tc.oid, tc.typmod, tc.mode)
		c := &column{name: "c", oid: tc.oid, typmod: tc.typmod, kind: k, scale: scale, precision: prec}
		got, err := appendValue(nil, c, []byte(tc.text))
		if err != nil {
			t.Errorf("%d %q: %v", tc.oid, tc.text, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%d/%d %s %q: %s, want %s", tc.oid, tc.typmod, tc.mode, tc.text, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("%q: invalid JSON %s", tc.text, got)
		}
	}
	// Text that is not of its type is an error, never a guess.
	for _, tc := range []struct {
		oid  uint32
		text string
	}{{oidInt4, "x"}, {oidBool, "yes"}, {oidDate, "2024-13-01"}, {oidBytea, "zz"}} {
		k, _, _ := kindOf(tc.oid, -1, "precise")
		if _, err := appendValue(nil, &column{name: "c", oid: tc.oid, kind: k}, []byte(tc.text)); err == nil {
			t.Errorf("%d %q accepted", tc.oid, tc.text)
		}
	}
}

// FuzzAppendValue: any text of any mapped type gives valid JSON or an
// error, never a panic.
func FuzzAppendValue(f *testing.F) {
	for _, s := range []string{"1", "12.30", "2024-02-29", "P1D", `\xff`, "10:00:00", "2024-05-01 10:00:00+02"} {
		f.Add(uint8(0), s)
	}
	oids := []uint32{oidBool, oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8, oidNumeric, oidBytea, oidDate,
		oidTimestamp, oidTimestampTZ, oidTime, oidInterval, oidUUID, oidJSON, 25}
	f.Fuzz(func(t *testing.T, which uint8, text string) {
		oid := oids[int(which)%len(oids)]
		for _, typmod := range []int32{-1, 2, (10<<16 | 2) + 4} {
			k, scale, prec := kindOf(oid, typmod, "precise")
			b, err := appendValue(nil, &column{name: "c", oid: oid, kind: k, scale: scale, precision: prec}, []byte(text))
			if err == nil && !json.Valid(b) {
				t.Fatalf("%d %q: %s", oid, text, b)
			}
		}
	})
}
