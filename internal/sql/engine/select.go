package engine

import (
	"context"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// query is a statement that returns rows.
type query struct {
	sess   *session
	cols   []pgwire.Column
	params []uint32
	tag    string // "" for SELECT n
	run    func(ctx context.Context, args []any) ([][]any, error)
	// plan runs a SELECT; run is used when it is nil.
	plan *exec.Query
}

func (q *query) Params() []uint32         { return q.params }
func (q *query) Columns() []pgwire.Column { return q.cols }

func (q *query) Start(ctx context.Context, args []any) (pgwire.Rows, error) {
	if err := q.sess.checkNotFailed(false); err != nil {
		return nil, err
	}
	if q.plan != nil {
		return q.startPlan(ctx, args)
	}
	r := &rows{compute: func(ctx context.Context) ([][]any, error) { return q.run(ctx, args) }, tagFor: selectTag}
	if q.tag != "" {
		tag := q.tag
		r.tagFor = func(int) string { return tag }
	}
	return r, nil
}

func (q *query) startPlan(ctx context.Context, args []any) (pgwire.Rows, error) {
	ptypes := q.plan.Params()
	vals := make([]any, len(ptypes))
	for i, t := range ptypes {
		if i >= len(args) {
			break
		}
		v, err := types.FromWire(t, args[i])
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	// now() is the statement's start, from the engine's clock.
	it, err := q.plan.Run(ctx, vals, q.sess.eng.clock.Now())
	if err != nil {
		return nil, err
	}
	return &planRows{it: it}, nil
}

// planRows streams a plan's rows to the wire, converting values to the
// Go types pgtype encodes.
type planRows struct {
	it exec.RowIter
	n  int
}

func (r *planRows) Next(ctx context.Context) ([]any, bool, error) {
	row, ok, err := r.it.Next(ctx)
	if err != nil || !ok {
		return nil, false, err
	}
	out := make([]any, len(row))
	for i, v := range row {
		out[i] = types.ToWire(v)
	}
	r.n++
	return out, true, nil
}

func (r *planRows) Tag() string { return selectTag(r.n) }
func (r *planRows) Close()      { r.it.Close() }

func (s *session) prepareSelect(st *pg.SelectStmt, paramTypes []uint32) (pgwire.Statement, error) {
	cat := s.eng.catalogFor(s)
	hook := s.hook
	if sc, ok := cat.(systemCatalog); !ok {
	} else if f, ok := sc.inner.(Functions); ok {
		if h := f.Functions(); h != nil {
			hook = func(c *expr.Compiler, n *pg.Node) (*expr.Expr, bool, error) {
				if e, ok, err := h(c, n); ok || err != nil {
					return e, ok, err
				}
				return s.hook(c, n)
			}
		}
	}
	plan, err := exec.Plan(cat, st, paramTypes, exec.Options{Hook: hook})
	if err != nil {
		return nil, err
	}
	q := &query{sess: s, plan: plan}
	for _, t := range plan.Params() {
		q.params = append(q.params, t.OID)
	}
	for _, c := range plan.Columns() {
		q.cols = append(q.cols, pgwire.Column{Name: c.Name, Type: c.Type.OID, TypeSize: c.Type.Size(), TypeMod: c.Type.Mod})
	}
	return q, nil
}

// hook compiles the functions that read the session or the engine:
// version(), current_setting(), pg_sleep().
func (s *session) hook(c *expr.Compiler, n *pg.Node) (*expr.Expr, bool, error) {
	f := n.GetFuncCall()
	if f == nil || len(f.Funcname) > 2 {
		return nil, false, nil
	}
	if len(f.Funcname) == 2 && f.Funcname[0].GetString_().GetSval() != "pg_catalog" {
		return nil, false, nil
	}
	name := f.Funcname[len(f.Funcname)-1].GetString_().GetSval()
	switch {
	case name == "version" && len(f.Args) == 0:
		return expr.Constant(types.Text, s.eng.version), true, nil
	case name == "current_setting" && len(f.Args) == 1:
		arg, err := c.Compile(f.Args[0])
		if err == nil {
			arg, err = c.Coerce(arg, types.Text, false)
		}
		if err != nil {
			return nil, true, err
		}
		return expr.New(types.Text, func(env *expr.Env, row types.Row) (any, error) {
			v, err := arg.Eval(env, row)
			if err != nil || v == nil {
				return nil, err
			}
			value, _, err := s.vals.get(v.(string))
			return value, err
		}), true, nil
	case name == "pg_sleep" && len(f.Args) == 1:
		arg, err := c.Compile(f.Args[0])
		if err == nil {
			arg, err = c.Coerce(arg, types.Float8, false)
		}
		if err != nil {
			return nil, true, err
		}
		clk := s.eng.clock
		return expr.New(types.Void, func(env *expr.Env, row types.Row) (any, error) {
			v, err := arg.Eval(env, row)
			if err != nil || v == nil {
				return nil, err
			}
			d := time.Duration(v.(float64) * float64(time.Second))
			if err := clock.Sleep(env.Ctx, clk, d); err != nil {
				return nil, err
			}
			return "", nil
		}), true, nil
	}
	return nil, false, nil
}

// Functions is a catalog's optional power: the system functions it
// serves (pg_catalog's, which read the catalog), compiled before the
// engine's own.
type Functions interface {
	Functions() expr.Hook
}

// systemCatalog answers for the schemas PostgreSQL's clients look into
// when the engine was given no catalog, and passes everything to the
// catalog it was given, which serves them (or not) itself.
type systemCatalog struct {
	inner exec.Catalog
}

func (c systemCatalog) Relation(schema, name string) (exec.Relation, bool, error) {
	if c.inner != nil {
		return c.inner.Relation(schema, name)
	}
	switch strings.ToLower(schema) {
	case "pg_catalog", "information_schema":
		return nil, false, sqlerr.NotSupported("the system catalog (%s.%s) is not served by this engine", schema, name)
	}
	return nil, false, nil
}
