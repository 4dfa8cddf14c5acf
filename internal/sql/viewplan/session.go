package viewplan

import (
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// session compiles SESSION(rel, time_col, gap [, key_col ...]): rel's
// rows with window_start and window_end of their session appended
// (flow.Session): per value of the key columns, rows whose times follow
// each other by less than gap are one session, from its first time to
// its last plus gap. As TUMBLE and HOP, written the way RisingWave and
// Flink write their window table functions, the partition columns
// after the sizes (Flink's PARTITION BY inside the call has no place in
// PostgreSQL's grammar).
func (c *compiler) session(fc *pg.FuncCall) (*derived, error) {
	args := fc.Args
	if len(args) < 3 {
		return nil, sqlerr.Errorf(sqlerr.UndefinedFunction, "session takes a relation, a time column, a gap interval and optional key columns").At(fc.Location)
	}
	rel := args[0].GetColumnRef()
	if rel == nil || len(rel.Fields) > 2 {
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "session's first argument is a relation's name").At(fc.Location)
	}
	var names []string // the time column, then the keys
	for _, a := range append([]*pg.Node{args[1]}, args[3:]...) {
		cr := a.GetColumnRef()
		if cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetString_() == nil {
			return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "session's time and key arguments are column names of its relation").At(fc.Location)
		}
		names = append(names, cr.Fields[0].GetString_().GetSval())
	}
	gap, err := c.duration(args[2], "session gap", fc.Location)
	if err != nil {
		return nil, err
	}
	if gap < time.Microsecond {
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "session gap must be at least 1 microsecond").At(fc.Location)
	}
	rv := &pg.RangeVar{Relname: rel.Fields[len(rel.Fields)-1].GetString_().GetSval(), Inh: true, Relpersistence: "p", Location: rel.Location}
	if len(rel.Fields) == 2 {
		rv.Schemaname = rel.Fields[0].GetString_().GetSval()
	}
	all := &pg.SelectStmt{
		TargetList: []*pg.Node{pg.MakeResTargetNodeWithVal(pg.MakeColumnRefNode([]*pg.Node{pg.MakeAStarNode()}, -1), -1)},
		FromClause: []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: rv}}},
	}
	l, cols, err := c.planSelect(all)
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(names))
	for i, name := range names {
		idx[i] = -1
		for j, col := range cols {
			if col.Name == name {
				idx[i] = j
			}
		}
		if idx[i] < 0 {
			return nil, sqlerr.Errorf(sqlerr.UndefinedColumn, "column %q does not exist", name).At(fc.Location)
		}
	}
	tt := cols[idx[0]].Type
	if tt.OID != types.OIDTimestamp && tt.OID != types.OIDTimestampTZ {
		return nil, sqlerr.Errorf(sqlerr.DatatypeMismatch, "session's time column %s is %s, not a timestamp", names[0], tt.Name()).At(fc.Location)
	}
	op := &flow.Session{TimeCol: idx[0], PartitionBy: idx[1:], Gap: gap}
	out := append(append([]exec.Column(nil), cols...), exec.Column{Name: "window_start", Type: tt}, exec.Column{Name: "window_end", Type: tt})
	return c.newDerived(out, func() (built, error) {
		b, err := c.translate(l)
		if err != nil {
			return built{}, err
		}
		b = c.materialize(b)
		nb := built{width: len(out)}
		if b.appendOnly && idx[0] < len(b.times) && b.times[idx[0]].kind == timeEvent {
			// Over a source's watermark column, rows only inserted: a
			// session ending at or before the watermark is closed, its
			// rows freed, and its window_end closes the windows of an
			// aggregate grouping by it (emit.go). The view drops late
			// records, which could reopen a freed session.
			op.Expire = true
			c.expiring++
			nb.times = make([]colTime, len(out))
			copy(nb.times, b.times)
			nb.times[len(out)-1] = colTime{kind: timeWindowEnd}
		}
		nb.node = c.add("session", op, b.node)
		return nb, nil
	}), nil
}
