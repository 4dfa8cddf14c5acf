// Package exec owns planning and running batch queries: a SELECT (with
// FROM over the relations a Catalog offers, WHERE, GROUP BY and
// aggregates, HAVING, ORDER BY, LIMIT/OFFSET, DISTINCT, joins,
// subqueries, UNION/INTERSECT/EXCEPT, VALUES and non-recursive WITH)
// becomes a tree of operators that pull rows. Expressions are package
// expr's; values package types'.
//
// # Memory
//
// Operators that hold rows (sort, hash aggregation, hash and nested-loop
// joins, DISTINCT, set operations, materialized subqueries) charge an
// estimate of each row's size to the query's budget, Options.
// MemoryBudget (DefaultMemoryBudget, 64 MiB, if zero), like
// PostgreSQL's work_mem but for the whole query. A query that would
// exceed it fails with 53200 out_of_memory; nothing spills to disk yet.
// Scans, filters, projections and LIMIT stream.
package exec

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/cockroachdb/apd/v3"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Column is a relation's or a result's column.
type Column struct {
	Name string
	Type types.Type
}

// Relation is something FROM can read: a source, a view, a catalog
// table.
type Relation interface {
	Columns() []Column
	// Scan returns the relation's rows; the iterator owns nothing the
	// caller keeps (rows it returns are the caller's).
	Scan(ctx context.Context) (RowIter, error)
}

// RowIter iterates rows. Next returns ok false at the end.
type RowIter interface {
	Next(ctx context.Context) (row types.Row, ok bool, err error)
	Close()
}

// Catalog finds relations by name; ok false if there is none.
type Catalog interface {
	Relation(schema, name string) (Relation, bool, error)
}

// DefaultMemoryBudget is the per-query memory budget when Options give
// none.
const DefaultMemoryBudget = 64 << 20

// Options tune planning.
type Options struct {
	// MemoryBudget bounds the bytes a query's buffering operators hold.
	MemoryBudget int64
	// Hook compiles functions the engine serves itself (version(),
	// current_setting()); may be nil.
	Hook expr.Hook
}

// budget tracks a run's buffered bytes.
type budget struct {
	used, limit int64
}

func (b *budget) charge(n int64) error {
	b.used += n
	if b.used > b.limit {
		e := sqlerr.Errorf(sqlerr.OutOfMemory, "out of memory")
		e.Detail = fmt.Sprintf("The query needs more than its %d bytes of working memory.", b.limit)
		return e
	}
	return nil
}

func (b *budget) release(n int64) { b.used -= n }

// rowSize estimates what a row costs in memory.
func rowSize(r types.Row) int64 {
	n := int64(24 + 16*len(r))
	for _, v := range r {
		switch x := v.(type) {
		case string:
			n += int64(len(x))
		case []byte:
			n += int64(len(x))
		case *apd.Decimal:
			n += int64(unsafe.Sizeof(*x)) + int64(x.Coeff.BitLen()/8)
		case types.JSON:
			n += int64(len(x.String()))
		case time.Time:
			n += 24
		case types.IntervalValue:
			n += 16
		}
	}
	return n
}

// run is one execution's state.
type run struct {
	ctx    context.Context
	env    *expr.Env
	budget *budget
	// outer are the rows the correlated subqueries running now were
	// started for, outermost first (correlate.go).
	outer []types.Row
}

func runOf(env *expr.Env) *run { return env.Exec.(*run) }

// iter is an operator's output: the next row, or nil at the end.
type iter func() (types.Row, error)

// node is a planned operator.
type node interface {
	open(r *run) (iter, error)
}

// Query is a planned SELECT.
type Query struct {
	cols   []Column
	root   node
	params []types.Type
	budget int64
}

// Columns are the result's columns.
func (q *Query) Columns() []Column { return q.cols }

// Params are the types of $1.. as planned (declared or inferred).
func (q *Query) Params() []types.Type { return q.params }

// Run starts the query with parameter values (already of Params'
// types) and the statement's timestamp.
func (q *Query) Run(ctx context.Context, params []any, now time.Time) (RowIter, error) {
	r := &run{ctx: ctx, budget: &budget{limit: q.budget}}
	r.env = &expr.Env{Ctx: ctx, Params: params, Now: now, Exec: r}
	it, err := q.root.open(r)
	if err != nil {
		return nil, err
	}
	return &rowIter{it: it, r: r}, nil
}

type rowIter struct {
	it iter
	r  *run
}

func (ri *rowIter) Next(ctx context.Context) (types.Row, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	row, err := ri.it()
	if err != nil || row == nil {
		return nil, false, err
	}
	return row, true, nil
}

func (ri *rowIter) Close() {}

// drain reads all of it, charging the budget.
func drain(r *run, it iter) ([]types.Row, error) {
	var rows []types.Row
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		row, err := it()
		if err != nil {
			return nil, err
		}
		if row == nil {
			return rows, nil
		}
		if err := r.budget.charge(rowSize(row)); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
}

func sliceIter(rows []types.Row) iter {
	i := 0
	return func() (types.Row, error) {
		if i >= len(rows) {
			return nil, nil
		}
		i++
		return rows[i-1], nil
	}
}

// scanNode reads a relation.
type scanNode struct {
	rel Relation
	// eq are the WHERE's equalities on its columns, for a relation that
	// can look them up (plan_lookup.go).
	eq []equality
	// name is the relation's name as the query wrote it, for EXPLAIN.
	name string
}

func (s *scanNode) open(r *run) (iter, error) {
	ri, ok, err := s.lookup(r)
	if err == nil && !ok {
		ri, err = s.rel.Scan(r.ctx)
	}
	if err != nil {
		return nil, err
	}
	return func() (types.Row, error) {
		row, ok, err := ri.Next(r.ctx)
		if err != nil || !ok {
			ri.Close()
			return nil, err
		}
		return row, nil
	}, nil
}

// rowsNode yields fixed expressions' rows (VALUES, FROM-less SELECT).
type rowsNode struct {
	rows [][]*expr.Expr
}

func (v *rowsNode) open(r *run) (iter, error) {
	i := 0
	return func() (types.Row, error) {
		if i >= len(v.rows) {
			return nil, nil
		}
		exprs := v.rows[i]
		i++
		row := make(types.Row, len(exprs))
		for j, e := range exprs {
			x, err := e.Eval(r.env, nil)
			if err != nil {
				return nil, err
			}
			row[j] = x
		}
		return row, nil
	}, nil
}

type filterNode struct {
	in   node
	cond *expr.Expr
}

func (f *filterNode) open(r *run) (iter, error) {
	in, err := f.in.open(r)
	if err != nil {
		return nil, err
	}
	return func() (types.Row, error) {
		for {
			row, err := in()
			if err != nil || row == nil {
				return nil, err
			}
			v, err := f.cond.Eval(r.env, row)
			if err != nil {
				return nil, err
			}
			if expr.Truthy(v) {
				return row, nil
			}
		}
	}, nil
}

type projectNode struct {
	in    node
	exprs []*expr.Expr
}

func (p *projectNode) open(r *run) (iter, error) {
	in, err := p.in.open(r)
	if err != nil {
		return nil, err
	}
	return func() (types.Row, error) {
		row, err := in()
		if err != nil || row == nil {
			return nil, err
		}
		out := make(types.Row, len(p.exprs))
		for i, e := range p.exprs {
			if out[i], err = e.Eval(r.env, row); err != nil {
				return nil, err
			}
		}
		return out, nil
	}, nil
}

type limitNode struct {
	in            node
	limit, offset *expr.Expr
}

func (l *limitNode) open(r *run) (iter, error) {
	count := int64(-1)
	skip := int64(0)
	read := func(e *expr.Expr, what string) (int64, error) {
		v, err := e.Eval(r.env, nil)
		if err != nil || v == nil {
			return -1, err
		}
		n := v.(int64)
		if n < 0 {
			return 0, sqlerr.Errorf(sqlerr.InvalidRowCountInLimit, "%s must not be negative", what)
		}
		return n, nil
	}
	var err error
	if l.limit != nil {
		if count, err = read(l.limit, "LIMIT"); err != nil {
			return nil, err
		}
	}
	if l.offset != nil {
		if skip, err = read(l.offset, "OFFSET"); err != nil {
			return nil, err
		}
		skip = max(skip, 0)
	}
	in, err := l.in.open(r)
	if err != nil {
		return nil, err
	}
	return func() (types.Row, error) {
		for skip > 0 {
			row, err := in()
			if err != nil || row == nil {
				return nil, err
			}
			skip--
		}
		if count == 0 {
			return nil, nil
		}
		row, err := in()
		if row != nil && count > 0 {
			count--
		}
		return row, err
	}, nil
}

// sortKey is one ORDER BY key: a column of the row to sort.
type sortKey struct {
	col        int
	desc       bool
	nullsFirst bool
}

type sortNode struct {
	in   node
	keys []sortKey
}

func compareBy(keys []sortKey, a, b types.Row) int {
	for _, k := range keys {
		x, y := a[k.col], b[k.col]
		var c int
		switch {
		case x == nil && y == nil:
			c = 0
		case x == nil || y == nil:
			// NULL is larger than any value unless NULLS FIRST says.
			c = 1
			if x != nil {
				c = -1
			}
			if k.nullsFirst {
				c = -c
			}
			if c != 0 {
				return c
			}
			continue
		default:
			c = types.Compare(x, y)
			if k.desc {
				c = -c
			}
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func (s *sortNode) open(r *run) (iter, error) {
	in, err := s.in.open(r)
	if err != nil {
		return nil, err
	}
	rows, err := drain(r, in)
	if err != nil {
		return nil, err
	}
	sortStable(rows, func(a, b types.Row) int { return compareBy(s.keys, a, b) })
	return sliceIter(rows), nil
}

// distinctNode drops duplicate rows (all columns, NULLs equal).
type distinctNode struct {
	in node
}

func (d *distinctNode) open(r *run) (iter, error) {
	in, err := d.in.open(r)
	if err != nil {
		return nil, err
	}
	seen := newRowSet(r)
	return func() (types.Row, error) {
		for {
			row, err := in()
			if err != nil || row == nil {
				return nil, err
			}
			added, err := seen.add(row)
			if err != nil {
				return nil, err
			}
			if added {
				return row, nil
			}
		}
	}, nil
}

// rowSet is a set of rows by their key encoding, charged to the budget.
type rowSet struct {
	r *run
	m map[string]struct{}
}

func newRowSet(r *run) *rowSet { return &rowSet{r: r, m: map[string]struct{}{}} }

func rowKey(row types.Row) string {
	var b []byte
	for _, v := range row {
		b = types.AppendKey(b, v)
	}
	return string(b)
}

func (s *rowSet) add(row types.Row) (bool, error) {
	k := rowKey(row)
	if _, ok := s.m[k]; ok {
		return false, nil
	}
	if err := s.r.budget.charge(int64(len(k)) + 48); err != nil {
		return false, err
	}
	s.m[k] = struct{}{}
	return true, nil
}

// concatNode is UNION ALL.
type concatNode struct {
	parts []node
}

func (c *concatNode) open(r *run) (iter, error) {
	i := 0
	var cur iter
	return func() (types.Row, error) {
		for {
			if cur == nil {
				if i >= len(c.parts) {
					return nil, nil
				}
				var err error
				if cur, err = c.parts[i].open(r); err != nil {
					return nil, err
				}
				i++
			}
			row, err := cur()
			if err != nil {
				return nil, err
			}
			if row != nil {
				return row, nil
			}
			cur = nil
		}
	}, nil
}

// setOpNode is INTERSECT or EXCEPT [ALL], by counting rows of each side.
type setOpNode struct {
	left, right node
	intersect   bool
	all         bool
}

func (s *setOpNode) open(r *run) (iter, error) {
	ri, err := s.right.open(r)
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	for {
		row, err := ri()
		if err != nil {
			return nil, err
		}
		if row == nil {
			break
		}
		k := rowKey(row)
		if _, ok := counts[k]; !ok {
			if err := r.budget.charge(int64(len(k)) + 56); err != nil {
				return nil, err
			}
		}
		counts[k]++
	}
	li, err := s.left.open(r)
	if err != nil {
		return nil, err
	}
	emitted := newRowSet(r)
	return func() (types.Row, error) {
		for {
			row, err := li()
			if err != nil || row == nil {
				return nil, err
			}
			k := rowKey(row)
			n := counts[k]
			if s.all {
				if s.intersect && n > 0 {
					counts[k]--
					return row, nil
				}
				if !s.intersect {
					if n > 0 {
						counts[k]--
						continue
					}
					return row, nil
				}
				continue
			}
			if (n > 0) != s.intersect {
				continue
			}
			added, err := emitted.add(row)
			if err != nil {
				return nil, err
			}
			if added {
				return row, nil
			}
		}
	}, nil
}

// materialNode runs its input once per run and replays it (a CTE read
// twice, a subquery in an expression).
type materialNode struct {
	in node
}

func (m *materialNode) rows(r *run) ([]types.Row, error) {
	v, err := r.env.Memo(m, func() (any, error) {
		it, err := m.in.open(r)
		if err != nil {
			return nil, err
		}
		return drain(r, it)
	})
	if err != nil {
		return nil, err
	}
	return v.([]types.Row), nil
}

func (m *materialNode) open(r *run) (iter, error) {
	rows, err := m.rows(r)
	if err != nil {
		return nil, err
	}
	return sliceIter(rows), nil
}
