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

// prepareShow lists one kind's relations the caller may DESCRIBE, by
// name: SHOW SOURCES (name, topic, format, owner), SHOW MATERIALIZED
// VIEWS (name, reads, owner, status: the view on this agent, from
// Config.Views: starting, running, or failed and why), SHOW SINKS (name, topic, format, reads,
// owner, status: the agent running it, and there its state, from
// Config.Sinks); reads names the relations a query reads, comma-separated.
func (s *session) prepareShow(k parse.Kind) (pgwire.Statement, error) {
	kind := kindOf(k)
	var cols []string
	switch kind {
	case meta.RelationSource:
		cols = []string{"name", "topic", "format", "owner"}
	case meta.RelationView:
		cols = []string{"name", "reads", "owner", "status"}
	default:
		cols = []string{"name", "topic", "format", "reads", "owner", "status"}
	}
	q := &listing{run: func(ctx context.Context) ([][]any, error) {
		if s.next.TxStatus() == 'E' {
			return nil, pgwire.Errorf(pgwire.CodeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
		}
		if err := s.sync(ctx); err != nil {
			return nil, err
		}
		v := s.e.cfg.Store.View()
		defer v.Close()
		rels, err := v.Relations()
		if err != nil {
			return nil, err
		}
		byID := make(map[uint64]string, len(rels))
		for _, r := range rels {
			byID[r.ID] = r.Name
		}
		var out [][]any
		for _, r := range rels {
			if r.Kind != kind {
				continue
			}
			if ok, err := s.may(kmsg.ACLOperationDescribe, acl.ResourceTypeRelation, r.Name); err != nil || !ok {
				if err != nil {
					return nil, pgwire.Errorf(pgwire.CodeInsufficientPrivilege, "cannot authorize: %v", err)
				}
				continue
			}
			var reads []string
			for _, d := range r.DependsOn {
				reads = append(reads, byID[d])
			}
			switch kind {
			case meta.RelationSource:
				out = append(out, []any{r.Name, r.Topic, r.Format, r.Owner})
			case meta.RelationView:
				out = append(out, []any{r.Name, strings.Join(reads, ","), r.Owner, s.viewStatus(r.ID)})
			default:
				out = append(out, []any{r.Name, r.Topic, r.Format, strings.Join(reads, ","), r.Owner, s.sinkStatus(r.ID)})
			}
		}
		return out, nil
	}}
	for _, c := range cols {
		q.cols = append(q.cols, pgwire.Column{Name: c, Type: pgtype.TextOID, TypeSize: -1, TypeMod: -1})
	}
	return q, nil
}

// listing is a statement whose rows are computed when it starts.
type listing struct {
	cols []pgwire.Column
	run  func(ctx context.Context) ([][]any, error)
}

func (l *listing) Params() []uint32         { return nil }
func (l *listing) Columns() []pgwire.Column { return l.cols }
func (l *listing) Start(ctx context.Context, _ []any) (pgwire.Rows, error) {
	data, err := l.run(ctx)
	if err != nil {
		return nil, err
	}
	return &rows{data: data, tag: fmt.Sprintf("SELECT %d", len(data))}, nil
}

// rows is a computed result.
type rows struct {
	data [][]any
	next int
	tag  string
}

func (r *rows) Next(context.Context) ([]any, bool, error) {
	if r.next < len(r.data) {
		r.next++
		return r.data[r.next-1], true, nil
	}
	return nil, false, nil
}

func (r *rows) Tag() string { return r.tag }
func (r *rows) Close()      {}

// viewStatus is a view's state on this agent as SHOW MATERIALIZED
// VIEWS lists it.
func (s *session) viewStatus(id uint64) string {
	if s.e.cfg.Views == nil {
		return "not maintained"
	}
	st, err := s.e.cfg.Views.Status(id)
	if err != "" {
		return st + ": " + err
	}
	return st
}

// sinkStatus is a sink's state as SHOW SINKS lists it.
func (s *session) sinkStatus(id uint64) string {
	if s.e.cfg.Sinks == nil {
		return "not run"
	}
	st, err := s.e.cfg.Sinks.Status(id)
	if err != "" {
		return st + ": " + err
	}
	return st
}
