package exec

import (
	"context"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Point lookups: a WHERE over one relation whose conjuncts include
// `column = constant or $n` lets a relation that keeps its rows by key
// (a materialized view's index, package flow) read only the rows of
// that key, instead of all of them. The WHERE is still applied to what
// it returns, so a relation may return more than the matching rows,
// never fewer: the lookup changes the cost, not the answer.

// EqualScanner is an optional power of a Relation: reading the rows
// whose columns equal given values without reading the others.
type EqualScanner interface {
	Relation
	// ScanEqual returns at least every row whose column cols[i] equals
	// vals[i] for every i (more is fine: the caller filters). vals are
	// never NULL, and each is of its column's type or, for an integer
	// column, another integer width: equal as SQL's = says exactly when
	// their key encodings (types.AppendKey) are.
	ScanEqual(ctx context.Context, cols []int, vals types.Row) (RowIter, error)
}

// lookupScan is in if it is the scan of the FROM's one relation, made
// for this SELECT alone: not a WITH query's plan, which every reference
// to it shares.
func (p *planner) lookupScan(in node, from []*pg.Node) *scanNode {
	s, ok := in.(*scanNode)
	if !ok || len(from) != 1 || s.eq != nil {
		return nil
	}
	rv := from[0].GetRangeVar()
	if rv == nil {
		return nil
	}
	if rv.Schemaname == "" {
		for _, ctes := range p.ctes {
			if _, ok := ctes[rv.Relname]; ok {
				return nil
			}
		}
	}
	return s
}

// equality is a WHERE conjunct column = value.
type equality struct {
	col int
	typ types.Type
	val *expr.Expr
}

// maxEqualities bounds the conjuncts a scan looks at.
const maxEqualities = 16

// equalities are where's conjuncts `column = value` over sc's columns,
// value a constant or a parameter (possibly cast). Anything else is
// left to the filter.
func (p *planner) equalities(where *pg.Node, sc *scope) []equality {
	var out []equality
	var walk func(n *pg.Node)
	walk = func(n *pg.Node) {
		if len(out) >= maxEqualities {
			return
		}
		if b := n.GetBoolExpr(); b != nil {
			if b.Boolop == pg.BoolExprType_AND_EXPR {
				for _, a := range b.Args {
					walk(a)
				}
			}
			return
		}
		a := n.GetAExpr()
		if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Name[0].GetString_().GetSval() != "=" {
			return
		}
		for _, sides := range [][2]*pg.Node{{a.Lexpr, a.Rexpr}, {a.Rexpr, a.Lexpr}} {
			cr := sides[0].GetColumnRef()
			if cr == nil || !isConstant(sides[1]) {
				continue
			}
			var names []string
			for _, f := range cr.Fields {
				s := f.GetString_()
				if s == nil {
					names = nil
					break
				}
				names = append(names, s.Sval)
			}
			if names == nil {
				continue
			}
			c, err := sc.find(names, cr.Location)
			if err != nil {
				continue
			}
			v, err := p.compile(sides[1], sc)
			if err != nil {
				continue
			}
			out = append(out, equality{col: c.idx, typ: c.typ, val: v})
			return
		}
	}
	walk(where)
	return out
}

// isConstant reports a constant or a parameter, possibly cast: a value
// the same for every row, evaluated once per scan.
func isConstant(n *pg.Node) bool {
	if n == nil {
		return false
	}
	if tc := n.GetTypeCast(); tc != nil {
		return isConstant(tc.Arg)
	}
	return n.GetAConst() != nil || n.GetParamRef() != nil
}

// keyable reports whether v, of static type vt, may be looked up in a
// column of type col: SQL's = between them is exactly their key
// encodings' equality. Integers of any width (encoded alike), and
// otherwise the same type of text, booleans, dates and timestamps.
// Floats and numerics (whose = is not their encoding's: -0, scale) and
// anything else are left to the filter.
func keyable(col, vt types.Type, v any) bool {
	switch col.OID {
	case types.OIDInt2, types.OIDInt4, types.OIDInt8:
		switch v.(type) {
		case int16, int32, int64:
			return true
		}
	case types.OIDText, types.OIDVarchar:
		_, ok := v.(string)
		return ok && (vt.OID == types.OIDText || vt.OID == types.OIDVarchar || vt.OID == types.OIDUnknown)
	case types.OIDBool:
		_, ok := v.(bool)
		return ok
	case types.OIDDate, types.OIDTimestamp, types.OIDTimestampTZ:
		_, ok := v.(time.Time)
		return ok && vt.OID == col.OID
	}
	return false
}

// lookup opens s's relation by its equalities when it can: ok false
// means scan it whole.
func (s *scanNode) lookup(r *run) (ri RowIter, ok bool, err error) {
	es, can := s.rel.(EqualScanner)
	if !can || len(s.eq) == 0 {
		return nil, false, nil
	}
	var cols []int
	var vals types.Row
	for _, e := range s.eq {
		v, err := e.val.Eval(r.env, nil)
		if err != nil {
			// The filter evaluates it too and says what is wrong.
			return nil, false, nil
		}
		if v == nil {
			// column = NULL is never true.
			return emptyRows{}, true, nil
		}
		if keyable(e.typ, e.val.Type, v) {
			cols, vals = append(cols, e.col), append(vals, v)
		}
	}
	if len(cols) == 0 {
		return nil, false, nil
	}
	ri, err = es.ScanEqual(r.ctx, cols, vals)
	return ri, err == nil, err
}

// emptyRows is a RowIter of no rows.
type emptyRows struct{}

func (emptyRows) Next(context.Context) (types.Row, bool, error) { return nil, false, nil }
func (emptyRows) Close()                                        {}
