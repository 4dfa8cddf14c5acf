package exec

import (
	"math"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// JoinBound is an ON term of a join that bounds a timestamp column of
// one side by one of the other side plus a constant: Col <= Other +
// Offset when Upper, else Col >= Other + Offset. Columns are the joined
// row's. `b.t BETWEEN a.t AND a.t + INTERVAL '1 hour'` is two bounds,
// and so is a join key equating two timestamp columns;
// < and > are read as <= and >= (a bound no tighter than the term).
// The terms stay in the join's residual: a bound is what the residual
// implies, for a dataflow that frees a join's state by event time
// (package viewplan), never a second evaluation.
type JoinBound struct {
	Col, Other int
	Offset     time.Duration
	Upper      bool
}

// maxBoundOffset bounds a JoinBound's constant: beyond it (or with
// months, whose length varies) the term is not read as a bound.
const maxBoundOffset = 100 * 365 * 24 * time.Hour

// timeBounds reads an ON conjunct as bounds between the sides' columns
// (lw: the left side's width), or nil when it is none: x op y with op
// one of < <= > >=, or x BETWEEN y AND z, each of x, y, z a timestamp
// column plus or minus constant intervals, the bounded and bounding
// columns of different sides and of one type.
func (p *planner) timeBounds(c *pg.Node, sc *scope, lw int) []JoinBound {
	a := c.GetAExpr()
	if a == nil || a.Lexpr == nil || a.Rexpr == nil {
		return nil
	}
	x, ok := p.timeTerm(a.Lexpr, sc)
	if !ok {
		return nil
	}
	// bound is x <= y (upper) or x >= y, as a bound of whichever
	// column is bounded by the other side's.
	bound := func(y timeTerm, upper bool) []JoinBound {
		if (x.col < lw) == (y.col < lw) || x.typ != y.typ {
			return nil
		}
		// x.col + x.off <= y.col + y.off: x.col <= y.col + (y.off - x.off).
		off := y.off - x.off
		if off > maxBoundOffset || off < -maxBoundOffset {
			return nil
		}
		return []JoinBound{{Col: x.col, Other: y.col, Offset: off, Upper: upper}}
	}
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if len(a.Name) != 1 {
			return nil
		}
		y, ok := p.timeTerm(a.Rexpr, sc)
		if !ok {
			return nil
		}
		switch a.Name[0].GetString_().GetSval() {
		case "<", "<=":
			return bound(y, true)
		case ">", ">=":
			return bound(y, false)
		}
	case pg.A_Expr_Kind_AEXPR_BETWEEN:
		// Not SYMMETRIC, not NOT BETWEEN: x >= lo AND x <= hi.
		l := a.Rexpr.GetList()
		if l == nil || len(l.Items) != 2 {
			return nil
		}
		var out []JoinBound
		if lo, ok := p.timeTerm(l.Items[0], sc); ok {
			out = append(out, bound(lo, false)...)
		}
		if hi, ok := p.timeTerm(l.Items[1], sc); ok {
			out = append(out, bound(hi, true)...)
		}
		return out
	}
	return nil
}

// timeTerm is a timestamp column plus an offset.
type timeTerm struct {
	col int
	off time.Duration
	typ uint32
}

// timeTerm reads n as a column of sc (timestamp or timestamptz) plus or
// minus constant intervals without months.
func (p *planner) timeTerm(n *pg.Node, sc *scope) (timeTerm, bool) {
	if n.GetColumnRef() != nil {
		e, err := p.compile(n, sc)
		if err != nil {
			return timeTerm{}, false
		}
		col, ok := e.ColumnIndex()
		if !ok || (e.Type.OID != types.OIDTimestamp && e.Type.OID != types.OIDTimestampTZ) {
			return timeTerm{}, false
		}
		return timeTerm{col: col, typ: e.Type.OID}, true
	}
	a := n.GetAExpr()
	if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Lexpr == nil || a.Rexpr == nil {
		return timeTerm{}, false
	}
	op := a.Name[0].GetString_().GetSval()
	if op != "+" && op != "-" {
		return timeTerm{}, false
	}
	t, ok := p.timeTerm(a.Lexpr, sc)
	if !ok {
		return timeTerm{}, false
	}
	e, err := p.compile(a.Rexpr, sc)
	if err != nil || !e.Const || e.Type.OID != types.OIDInterval {
		return timeTerm{}, false
	}
	v, err := e.Eval(nil, nil)
	iv, ok := v.(types.IntervalValue)
	if err != nil || !ok || iv.Months != 0 {
		return timeTerm{}, false
	}
	// A day is 24 hours here: a timestamp has no zone, a timestamptz
	// is in the session's, UTC.
	us := float64(iv.Days)*86_400e6 + float64(iv.Micros)
	if math.Abs(us) > float64(maxBoundOffset/time.Microsecond) {
		return timeTerm{}, false
	}
	d := time.Duration(int64(iv.Days)*86_400_000_000+iv.Micros) * time.Microsecond
	if op == "-" {
		d = -d
	}
	t.off += d
	return t, true
}

// equalBounds reads a join key l = r between timestamp columns of the
// two sides (a window join's `a.window_start = b.window_start`) as the
// two bounds it implies: l <= r and l >= r.
func equalBounds(l, r *expr.Expr) []JoinBound {
	lc, lok := l.ColumnIndex()
	rc, rok := r.ColumnIndex()
	if !lok || !rok || l.Type.OID != r.Type.OID || (l.Type.OID != types.OIDTimestamp && l.Type.OID != types.OIDTimestampTZ) {
		return nil
	}
	return []JoinBound{{Col: lc, Other: rc, Upper: true}, {Col: lc, Other: rc}}
}
