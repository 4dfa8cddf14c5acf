package flow

import (
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

func TestRowsWindowSum(t *testing.T) {
	// (o int4, v int4): sum(v) OVER (ORDER BY o ROWS 1 PRECEDING).
	g := single(&RowsWindow{OrderBy: []SortKey{{Col: 0}}, Preceding: 1, Kind: Sum, Col: 1})
	runSteps(t, g, Options{}, []step{
		{in: [][]types.Change{{ins(int32(1), int32(10)), ins(int32(2), int32(20)), ins(int32(3), int32(30))}},
			want: []string{"+1 (1, 10, 10)", "+1 (2, 20, 30)", "+1 (3, 30, 50)"}},
		// A row before the first moves only the next row's frame.
		{in: [][]types.Change{{ins(int32(0), int32(5))}},
			want: []string{"+1 (0, 5, 5)", "-1 (1, 10, 10)", "+1 (1, 10, 15)"}},
		// A deleted row's follower reaches one row further back.
		{in: [][]types.Change{{del(int32(2), int32(20))}},
			want: []string{"-1 (2, 20, 30)", "-1 (3, 30, 50)", "+1 (3, 30, 40)"}},
		// A duplicate row is two rows of the frame.
		{in: [][]types.Change{{ins(int32(3), int32(30))}},
			want: []string{"+1 (3, 30, 60)"}},
	})
}

func TestResidualJoinLeft(t *testing.T) {
	// left (k, a) LEFT JOIN right (k, b) ON l.k = r.k AND r.b > l.a.
	g := func() *Graph {
		var g Graph
		l, r := g.Input("l"), g.Input("r")
		g.SetOutput(g.Add("join", &ResidualJoin{Kind: LeftJoin, LeftKey: []int{0}, RightKey: []int{0}, LeftWidth: 2, RightWidth: 2,
			Residual: func(row types.Row) (any, error) { return row[3].(int32) > row[1].(int32), nil }}, l, r))
		return &g
	}
	runSteps(t, g, Options{}, []step{
		{in: [][]types.Change{{ins("x", int32(5)), ins("x", int32(5)), ins("y", int32(1))}, {ins("x", int32(3))}},
			want: []string{"+2 (x, 5, NULL, NULL)", "+1 (y, 1, NULL, NULL)"}},
		// A right row passing the residual replaces both copies' padding.
		{in: [][]types.Change{{}, {ins("x", int32(9))}},
			want: []string{"-2 (x, 5, NULL, NULL)", "+2 (x, 5, x, 9)"}},
		// A new left row meets it at once; its going brings the padding back.
		{in: [][]types.Change{{ins("x", int32(10))}, {del("x", int32(9))}},
			want: []string{"+1 (x, 10, NULL, NULL)", "-2 (x, 5, x, 9)", "+2 (x, 5, NULL, NULL)"}},
	})
}
