package exec

import (
	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Correlated subqueries. A subquery in an expression is planned with
// the scope of the expression it is in pushed on the planner's outer
// stack (planner.outer); a name its own FROM does not resolve is looked
// up there (outerScope), and compiles to a read of the outer row the
// subquery is run for (run.outer[level]). Such a subquery is
// correlated: it runs once per row of the expression it is in, with
// that row pushed on the run's outer stack, instead of once per
// statement. A subquery whose names all resolve inside it stays
// uncorrelated and runs once, as before.
//
// Not yet: a correlated reference under an aggregate of the outer query
// (`(SELECT ... WHERE x = sum(o.y))`), and a WITH query inside a
// correlated subquery that itself reads the outer row (it is
// materialized once per statement run).

// outerScope is a scope inside a subquery: its own names first, then
// the enclosing query's (p.outer[level], itself an outerScope when that
// is a subquery too).
type outerScope struct {
	inner expr.Scope
	p     *planner
	level int
}

func (p *planner) correlate(s expr.Scope) expr.Scope {
	if len(p.outer) == 0 {
		return s
	}
	o := &outerScope{inner: s, p: p, level: len(p.outer) - 1}
	if _, ok := s.(expr.GroupedScope); ok {
		return groupedOuterScope{o}
	}
	return o
}

func (s *outerScope) Column(names []string, loc int32) (*expr.Expr, error) {
	var err error
	if s.inner != nil {
		var e *expr.Expr
		if e, err = s.inner.Column(names, loc); err == nil {
			return e, nil
		}
		if code := sqlerr.Code(err); code != sqlerr.UndefinedTable && code != sqlerr.UndefinedColumn {
			return nil, err
		}
	}
	outer := s.p.outer[s.level]
	if outer == nil {
		if err == nil {
			err = sqlerr.Errorf(sqlerr.UndefinedColumn, "column %q does not exist", names[len(names)-1]).At(loc)
		}
		return nil, err
	}
	e, oerr := outer.Column(names, loc)
	if oerr != nil {
		if err != nil {
			return nil, err // the inner error names what the query meant
		}
		return nil, oerr
	}
	// Every subquery from this level in is now correlated.
	for i := s.level; i < len(s.p.corr); i++ {
		s.p.corr[i] = true
	}
	level := s.level
	return expr.New(e.Type, func(env *expr.Env, _ types.Row) (any, error) {
		r := runOf(env)
		if level >= len(r.outer) {
			return nil, sqlerr.Errorf(sqlerr.InternalError, "correlated reference outside its subquery's run")
		}
		return e.Eval(env, r.outer[level])
	}), nil
}

// columnAt passes the planner's by-position columns (from *) through.
func (s *outerScope) columnAt(idx int, t types.Type) (*expr.Expr, error) {
	if is, ok := s.inner.(interface {
		columnAt(idx int, t types.Type) (*expr.Expr, error)
	}); ok {
		return is.columnAt(idx, t)
	}
	return nil, sqlerr.Errorf(sqlerr.InternalError, "column by position outside FROM")
}

// groupedOuterScope keeps a grouped scope's expr.GroupedScope power.
type groupedOuterScope struct{ *outerScope }

func (g groupedOuterScope) Ungrouped() expr.Scope {
	return g.p.correlate(g.inner.(expr.GroupedScope).Ungrouped())
}

// correlatedRows runs a correlated subquery's plan n for the outer row
// row, pushed as level on the run's outer stack. Its rows live only
// while the caller reads them, so their memory is given back.
func correlatedRows(env *expr.Env, n node, level int, row types.Row) ([]types.Row, error) {
	r := runOf(env)
	if len(r.outer) != level {
		return nil, sqlerr.Errorf(sqlerr.InternalError, "correlated subquery run at depth %d, planned at %d", len(r.outer), level)
	}
	r.outer = append(r.outer, row)
	defer func() { r.outer = r.outer[:level] }()
	it, err := n.open(r)
	if err != nil {
		return nil, err
	}
	rows, err := drain(r, it)
	if err != nil {
		return nil, err
	}
	for _, x := range rows {
		r.budget.release(rowSize(x))
	}
	return rows, nil
}
