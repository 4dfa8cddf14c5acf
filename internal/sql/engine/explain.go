package engine

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// prepareExplain is EXPLAIN SELECT: the batch plan (exec.Query.
// Explain) without running it, one text column "QUERY PLAN" as
// PostgreSQL answers. COSTS is accepted and has nothing to turn off
// (no costs are estimated); other options (ANALYZE, VERBOSE, FORMAT,
// ...) and other statements are 0A000.
func (s *session) prepareExplain(st *pg.ExplainStmt, paramTypes []uint32) (pgwire.Statement, error) {
	for _, o := range st.Options {
		if name := o.GetDefElem().GetDefname(); name != "costs" {
			return nil, pgwire.NotSupported("EXPLAIN option %s is not supported", strings.ToUpper(name))
		}
	}
	sel := st.Query.GetSelectStmt()
	if sel == nil {
		return nil, pgwire.NotSupported("EXPLAIN of %s is not supported: EXPLAIN takes a SELECT or a relation's name", statementName(st.Query))
	}
	q, err := s.prepareSelect(sel, paramTypes)
	if err != nil {
		return nil, err
	}
	lines := q.(*query).plan.Explain()
	return &query{sess: s, tag: "EXPLAIN", params: q.Params(),
		cols: []pgwire.Column{{Name: "QUERY PLAN", Type: pgtype.TextOID, TypeSize: -1, TypeMod: -1}},
		run: func(context.Context, []any) ([][]any, error) {
			out := make([][]any, len(lines))
			for i, l := range lines {
				out[i] = []any{l}
			}
			return out, nil
		}}, nil
}
