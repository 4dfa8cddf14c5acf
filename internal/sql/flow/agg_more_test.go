package flow

import (
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

func TestAggregateStringAggAndVariance(t *testing.T) {
	// (k text, v text, d text, o int4, f float8, n int4):
	// string_agg(v, d ORDER BY o DESC), var_samp(f), var_pop(n), stddev_samp(f).
	agg := single(&Aggregate{GroupBy: []int{0}, Aggs: []AggCall{
		{Kind: StringAgg, Col: 1, Delim: 2, Order: []SortKey{{Col: 3, Desc: true}}},
		{Kind: VarSamp, Col: 4}, {Kind: VarPop, Col: 5}, {Kind: StddevSamp, Col: 4},
	}})
	runSteps(t, agg, Options{Index: &IndexSpec{KeyCols: []int{0}, Unique: true}}, []step{
		// Each value but the first behind its own delimiter, in the
		// call's order.
		{in: [][]types.Change{{
			ins("a", "x", ",", int32(1), 1.5, int32(1)),
			ins("a", "y", ";", int32(2), 2.5, int32(3)),
			ins("a", "z", ",", int32(3), nil, int32(5)),
		}}, want: []string{"+1 (a, z;y,x, 0.5, 2.6666666666666667, 0.7071067811865476)"}},
		// The first one goes: the string is rebuilt, the sums retract
		// exactly.
		{in: [][]types.Change{{del("a", "z", ",", int32(3), nil, int32(5))}},
			want: []string{"-1 (a, z;y,x, 0.5, 2.6666666666666667, 0.7071067811865476)", "+1 (a, y,x, 0.5, 1.00000000000000000000, 0.7071067811865476)"}},
		// One value left: the sample variance is NULL, the population's 0.
		{in: [][]types.Change{{del("a", "y", ";", int32(2), 2.5, int32(3))}},
			want: []string{"-1 (a, y,x, 0.5, 1.00000000000000000000, 0.7071067811865476)", "+1 (a, x, NULL, 0, NULL)"}},
		// A NULL delimiter adds nothing; a NULL value is skipped.
		{in: [][]types.Change{{ins("a", "w", nil, int32(0), nil, nil), ins("a", nil, ",", int32(9), nil, nil)}},
			want: []string{"-1 (a, x, NULL, 0, NULL)", "+1 (a, xw, NULL, 0, NULL)"}},
	})
}
