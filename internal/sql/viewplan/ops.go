package viewplan

import (
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/types"
)

// constRows is a constant relation (VALUES, generate_series, a SELECT
// without FROM): its rows, inserted in the dataflow's first epoch and
// never changed. Stateless: flow marks the first epoch.
type constRows struct{ rows []types.Row }

func (*constRows) Arity() int { return 0 }

func (c *constRows) Step(ctx *flow.Context, _ [][]types.Change) ([]types.Change, error) {
	if !ctx.First {
		return nil, nil
	}
	out := make([]types.Change, len(c.rows))
	for i, r := range c.rows {
		out[i] = types.Change{Row: r, Diff: 1}
	}
	return out, nil
}

// crossRows is a cross join with a constant relation: each change
// repeated for each constant row, joined on its left (left) or right.
// Stateless: the constant never changes.
type crossRows struct {
	rows []types.Row
	left bool
}

func (*crossRows) Arity() int { return 1 }

func (x *crossRows) Step(_ *flow.Context, ins [][]types.Change) ([]types.Change, error) {
	out := make([]types.Change, 0, len(ins[0])*len(x.rows))
	for _, c := range ins[0] {
		for _, k := range x.rows {
			row := make(types.Row, 0, len(c.Row)+len(k))
			if x.left {
				row = append(append(row, k...), c.Row...)
			} else {
				row = append(append(row, c.Row...), k...)
			}
			out = append(out, types.Change{Row: row, Diff: c.Diff})
		}
	}
	return out, nil
}
