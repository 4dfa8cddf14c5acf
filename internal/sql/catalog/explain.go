package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// Explainer is an optional power of Config.Views: EXPLAIN of a
// materialized view prints its dataflow, one operator a line (package
// views' Runner).
type Explainer interface {
	Explain(id uint64) ([]string, error)
}

// prepareExplain is EXPLAIN [MATERIALIZED VIEW] name: one text column,
// "QUERY PLAN", as PostgreSQL's EXPLAIN answers. A view shows its
// dataflow (Explainer); a source and a sink what they read and write.
// It needs DESCRIBE on the relation (READ implies it), as SHOW lists.
// EXPLAIN SELECT is the next engine's (the batch plan).
func (s *session) prepareExplain(st parse.Statement) (pgwire.Statement, error) {
	rv := parse.ExplainTarget(st)
	name, _ := relationName(rv)
	return &explain{run: func(ctx context.Context) ([]string, error) {
		if s.next.TxStatus() == 'E' {
			return nil, pgwire.Errorf(pgwire.CodeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
		}
		v := s.e.cfg.Store.View()
		rel, ok, err := v.Relation(name)
		var rels []meta.Relation
		if err == nil && ok {
			rels, err = v.Relations()
		}
		v.Close()
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, &pgwire.Error{Code: pgwire.CodeUndefinedTable, Message: fmt.Sprintf("relation %q does not exist", rv.Relname), Position: rv.Location + 1}
		}
		if err := s.require(kmsg.ACLOperationDescribe, acl.ResourceTypeRelation, rel.Name, fmt.Sprintf("%s %s", rel.Kind, rel.Name)); err != nil {
			return nil, err
		}
		reads := func() string {
			var names []string
			for _, id := range rel.DependsOn {
				for _, r := range rels {
					if r.ID == id {
						names = append(names, r.Name)
					}
				}
			}
			return strings.Join(names, ", ")
		}
		switch rel.Kind {
		case meta.RelationView:
			ex, ok := s.e.cfg.Views.(Explainer)
			if !ok {
				return nil, notMaintained(rel)
			}
			return ex.Explain(rel.ID)
		case meta.RelationSource:
			envelope, _ := rel.Option("envelope")
			if envelope == "" {
				envelope = "append"
			}
			return []string{"Source " + rel.Name, "  Topic: " + rel.Topic, "  Format: " + rel.Format, "  Envelope: " + envelope}, nil
		default:
			q := rel.Query
			if q == "" {
				q = rel.SQL
			}
			return []string{"Sink " + rel.Name, "  Topic: " + rel.Topic, "  Format: " + rel.Format, "  Reads: " + reads(), "  Query: " + q}, nil
		}
	}}, nil
}

// explain is a statement answering plan lines.
type explain struct {
	run func(ctx context.Context) ([]string, error)
}

// explainColumns is PostgreSQL's EXPLAIN result: one text column.
var explainColumns = []pgwire.Column{{Name: "QUERY PLAN", Type: pgtype.TextOID, TypeSize: -1, TypeMod: -1}}

func (e *explain) Params() []uint32         { return nil }
func (e *explain) Columns() []pgwire.Column { return explainColumns }
func (e *explain) Start(ctx context.Context, _ []any) (pgwire.Rows, error) {
	lines, err := e.run(ctx)
	if err != nil {
		return nil, err
	}
	data := make([][]any, len(lines))
	for i, l := range lines {
		data[i] = []any{l}
	}
	return &rows{data: data, tag: "EXPLAIN"}, nil
}
