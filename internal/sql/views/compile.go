package views

// Compiling a view: its query, with the views it reads inlined, into a
// dataflow over the catalog's sources (package viewplan).

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/viewplan"
)

// compile compiles the view over the catalog's sources as they were
// when the task started (a relation's definition never changes; a
// dropped input drops its dependents first).
//
// A view over other views reads their queries inlined as WITH queries
// (inline): one graph per dependency chain, reading the sources, so a
// view's exactly-once is its own checkpoint's alone and no task waits
// on another's output epochs. The price is state: an upstream view's
// operators are kept again in each view reading it.
func (t *task) compile() (*viewplan.View, []*source.Def, error) { return compile(t.rel, t.rels) }

// Check compiles rel, a materialized view about to be created, over
// rels (the catalog's relations, its inputs among them) as its task
// will: CREATE refuses with the error a task would fail with (0A000
// naming a construct the dataflow does not keep, say), instead of
// storing a view that never runs.
func Check(rel meta.Relation, rels []meta.Relation) error {
	_, _, err := compile(rel, rels)
	return err
}

// Compile compiles rel's SELECT (a materialized view's or a sink's)
// over rels as a view's task does, with the sources it reads in the
// graph's input order: package sinks runs a sink's query with it.
func Compile(rel meta.Relation, rels []meta.Relation) (*viewplan.View, []*source.Def, error) {
	return compile(rel, rels)
}

func compile(rel meta.Relation, rels []meta.Relation) (*viewplan.View, []*source.Def, error) {
	byID := make(map[uint64]meta.Relation, len(rels))
	for _, r := range rels {
		byID[r.ID] = r
	}
	st, err := inline(rel, byID, 0)
	if err != nil {
		return nil, nil, err
	}
	cat := &compileCatalog{rels: rels, defs: map[string]*source.Def{}}
	opts, err := viewOptions(rel)
	if err != nil {
		return nil, nil, err
	}
	vw, err := viewplan.CompileSelectWith(st, cat, opts)
	if err != nil {
		return nil, nil, err
	}
	defs := make([]*source.Def, len(vw.Inputs))
	for i, name := range vw.Inputs {
		d, ok := cat.defs[name]
		if !ok {
			return nil, nil, sqlerr.Errorf(sqlerr.InternalError, "materialized view %q reads %q, which is not a source", rel.Name, name)
		}
		defs[i] = d
	}
	return vw, defs, nil
}

// maxViewDepth bounds a chain of views over views.
const maxViewDepth = 16

// inline returns rel's SELECT with each view it reads (its DependsOn)
// prepended as a WITH query of the view's name, itself inlined.
func inline(rel meta.Relation, byID map[uint64]meta.Relation, depth int) (*pg.SelectStmt, error) {
	if depth > maxViewDepth {
		return nil, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "materialized view %q: views over views nested deeper than %d", rel.Name, maxViewDepth)
	}
	q := rel.Query
	if q == "" {
		q = rel.SQL
	}
	st, err := viewplan.ParseSelect(q)
	if err != nil {
		return nil, err
	}
	var ctes []*pg.Node
	for _, id := range rel.DependsOn {
		up, ok := byID[id]
		if !ok || up.Kind != meta.RelationView {
			continue
		}
		if st.WithClause != nil {
			for _, c := range st.WithClause.Ctes {
				if c.GetCommonTableExpr().GetCtename() == up.Name {
					return nil, sqlerr.NotSupported("materialized view %q names a WITH query %q like the view it reads", rel.Name, up.Name)
				}
			}
		}
		ust, err := inline(up, byID, depth+1)
		if err != nil {
			return nil, err
		}
		ctes = append(ctes, &pg.Node{Node: &pg.Node_CommonTableExpr{CommonTableExpr: &pg.CommonTableExpr{
			Ctename: up.Name, Ctequery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: ust}}}}})
	}
	if len(ctes) > 0 {
		if st.WithClause == nil {
			st.WithClause = &pg.WithClause{}
		}
		st.WithClause.Ctes = append(ctes, st.WithClause.Ctes...)
	}
	return st, nil
}

// compileCatalog is viewplan.Catalog over the catalog's sources.
type compileCatalog struct {
	rels []meta.Relation
	defs map[string]*source.Def
}

func (c *compileCatalog) Relation(schema, name string) (*viewplan.Relation, bool, error) {
	if schema != "" && schema != "public" {
		return nil, false, nil
	}
	for _, rel := range c.rels {
		if rel.Name != name {
			continue
		}
		if rel.Kind != meta.RelationSource {
			return nil, false, sqlerr.Errorf(sqlerr.WrongObjectType, "%s %q cannot be read by a materialized view", rel.Kind, rel.Name)
		}
		def, err := source.DefOf(rel)
		if err != nil {
			return nil, false, err
		}
		c.defs[name] = def
		cols := make([]exec.Column, len(def.Columns))
		for i, col := range def.Columns {
			cols[i] = exec.Column{Name: col.Name, Type: col.Type}
		}
		return &viewplan.Relation{Name: name, Columns: cols,
			// An upsert source's rows change after their windows: no
			// window over one closes (emit.go).
			Watermark: def.WatermarkColumn >= 0 && def.Envelope == source.Append, EventTime: def.WatermarkColumn}, true, nil
	}
	return nil, false, nil
}
