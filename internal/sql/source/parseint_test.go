package source

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

// TestParseSmallInt: wherever the fast integer parse answers, it gives
// the value and Go type types.Parse does, over bounds, signs, leading
// zeros, lengths around 18 digits and texts it must leave to the
// general parse.
func TestParseSmallInt(t *testing.T) {
	texts := []string{"0", "-0", "7", "-7", "007", "-007", "", "-", "+1", " 1", "1 ", "1_0", "0x1", "1.0", "1e3",
		"32767", "32768", "-32768", "-32769", "2147483647", "2147483648", "-2147483648", "-2147483649",
		"999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807", "-9223372036854775808"}
	r := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		s := strconv.FormatInt(r.Int64N(1<<uint(1+r.IntN(62))), 10)
		if r.IntN(2) == 0 {
			s = "-" + s
		}
		texts = append(texts, s)
	}
	answered := 0
	for _, typ := range []types.Type{types.Int2, types.Int4, types.Int8} {
		for _, s := range texts {
			got, ok := parseSmallInt(typ, s)
			if !ok {
				continue
			}
			answered++
			want, err := types.Parse(typ, s)
			if err != nil {
				t.Fatalf("%s %q: fast %v, general error %v", typ.Name(), s, got, err)
			}
			if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", want, want) {
				t.Fatalf("%s %q: fast %T %v, general %T %v", typ.Name(), s, got, got, want, want)
			}
		}
	}
	if answered < len(texts) {
		t.Fatalf("the fast parse answered %d of %d texts: it is not taken", answered, 3*len(texts))
	}
	if _, ok := parseSmallInt(types.Text, "1"); ok {
		t.Fatal("a text column's value parsed as an integer")
	}
}
