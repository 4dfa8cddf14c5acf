package flow

import (
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

func setOpGraph(op *SetOp) func() *Graph {
	return func() *Graph {
		var g Graph
		l, r := g.Input("l"), g.Input("r")
		g.SetOutput(g.Add("setop", op, l, r))
		return &g
	}
}

func TestSetOpExcept(t *testing.T) {
	runSteps(t, setOpGraph(&SetOp{}), Options{}, []step{
		{in: [][]types.Change{{ins("a"), ins("a"), ins("b")}, {ins("b")}}, want: []string{"+1 (a)"}},
		// The right side's b goes: b comes back; a NULL row is one row.
		{in: [][]types.Change{{ins(nil)}, {del("b")}}, want: []string{"+1 (NULL)", "+1 (b)"}},
		// a leaves the right side only when both its copies go.
		{in: [][]types.Change{{}, {ins("a")}}, want: []string{"-1 (a)"}},
	})
}

func TestSetOpAll(t *testing.T) {
	runSteps(t, setOpGraph(&SetOp{All: true}), Options{}, []step{
		{in: [][]types.Change{{ins("a"), ins("a"), ins("a")}, {ins("a")}}, want: []string{"+2 (a)"}},
		{in: [][]types.Change{{}, {ins("a"), ins("a"), ins("a")}}, want: []string{"-2 (a)"}},
		{in: [][]types.Change{{}, {del("a"), del("a")}}, want: []string{"+1 (a)"}},
	})
	runSteps(t, setOpGraph(&SetOp{Intersect: true, All: true}), Options{}, []step{
		{in: [][]types.Change{{ins("a"), ins("a"), ins("a")}, {ins("a"), ins("a")}}, want: []string{"+2 (a)"}},
		{in: [][]types.Change{{del("a"), del("a")}, {}}, want: []string{"-1 (a)"}},
	})
	runSteps(t, setOpGraph(&SetOp{Intersect: true}), Options{}, []step{
		{in: [][]types.Change{{ins("a"), ins("a"), ins("b")}, {ins("a")}}, want: []string{"+1 (a)"}},
		{in: [][]types.Change{{}, {del("a"), ins("b")}}, want: []string{"-1 (a)", "+1 (b)"}},
	})
}
