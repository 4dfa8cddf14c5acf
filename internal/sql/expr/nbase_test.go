package expr

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

// nbaseWeightText is nbaseWeight by the coefficient's decimal text,
// for any coefficient: what the integer path must agree with.
func nbaseWeightText(d *apd.Decimal) (first int64, weight int64) {
	digits := d.Coeff.String()
	if digits[0] == '-' {
		digits = digits[1:]
	}
	e10 := int64(len(digits)) + int64(d.Exponent) - 1
	weight = floorDiv(e10, 4)
	lead := e10 - weight*4 + 1
	for i := int64(0); i < lead; i++ {
		first *= 10
		if i < int64(len(digits)) {
			first += int64(digits[i] - '0')
		}
	}
	return first, weight
}

// TestNbaseWeight: the integer path gives the text path's first digit
// and weight for coefficients of every length and exponents of every
// residue.
func TestNbaseWeight(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 29))
	for range 20_000 {
		c := r.Int64N(int64(1) << uint(r.IntN(62)+1))
		if c == 0 {
			continue
		}
		if r.IntN(2) == 0 {
			c = -c
		}
		d := apd.New(c, int32(r.IntN(41)-20))
		f, w := nbaseWeight(d)
		tf, tw := nbaseWeightText(d)
		if f != tf || w != tw {
			t.Fatalf("%s: got (%d, %d), want (%d, %d)", d, f, w, tf, tw)
		}
	}
	for _, s := range []string{"1", "9999", "10000", "0.0001", "123456789012345678901234567890", "1.5", "-42.125"} {
		d, _, _ := apd.NewFromString(s)
		f, w := nbaseWeight(d)
		tf, tw := nbaseWeightText(d)
		if fmt.Sprint(f, w) != fmt.Sprint(tf, tw) {
			t.Fatalf("%s: got (%d, %d), want (%d, %d)", s, f, w, tf, tw)
		}
	}
}
