package agent

// The console's SQL page (console.SQL) over the SQL endpoint's catalog
// and engine: the same statements, the same planner and the same
// materialized views as a psql session, run as the console's caller.
// That caller is a super user by the console's rule (the admin token,
// the loopback default, or a client certificate of a super user), and
// its SQL session is authorized as that principal: authorizeSQL lets
// the token's and the loopback default's principals do anything, as
// they may over HTTP; a certificate's principal goes through the
// authorizer like any SQL user.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/console"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// maxConsoleValueBytes bounds one value the SQL page shows.
const maxConsoleValueBytes = 16 << 10

type consoleSQL struct{ a *Agent }

// Relations implements console.SQL: what r's caller may DESCRIBE, as
// SHOW lists it, with the views' state on this agent.
func (s consoleSQL) Relations(r *http.Request) ([]console.SQLRelation, error) {
	c, _, err := s.a.callerOf(r)
	if err != nil {
		return nil, err
	}
	v := s.a.replica.View()
	rels, err := v.Relations()
	v.Close()
	if err != nil {
		return nil, err
	}
	names := make(map[uint64]string, len(rels))
	for _, rel := range rels {
		names[rel.ID] = rel.Name
	}
	var out []console.SQLRelation
	for _, rel := range rels {
		ok, err := s.a.authorizeSQL(acl.Request{Principal: c.principal, Host: c.host}, kmsg.ACLOperationDescribe, acl.ResourceTypeRelation, rel.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		var reads []string
		for _, id := range rel.DependsOn {
			reads = append(reads, names[id])
		}
		sr := console.SQLRelation{Kind: rel.Kind.String(), Name: rel.Name, Topic: rel.Topic, Format: rel.Format, Reads: strings.Join(reads, ", ")}
		if rel.Kind == meta.RelationView {
			sr.Status, sr.LagRecords, sr.StateBytes = "not maintained here", -1, -1
			if st, ok := s.a.sqlViews.ViewStatus(rel.ID); ok {
				sr.Status = st.State
				if st.Err != "" {
					sr.Status += ": " + st.Err
				}
				sr.Epochs, sr.LagRecords, sr.LagSeconds, sr.StateBytes = st.Epochs, st.LagRecords, st.LagSeconds, st.StateBytes
				sr.UpdatesPerSecond, sr.Late, sr.Bad = st.UpdatesPerSecond, st.Late, st.Bad
			}
		}
		out = append(out, sr)
	}
	return out, nil
}

// noticeList collects a session's notices for the page.
type noticeList struct{ notices []string }

func (n *noticeList) ParameterStatus(string, string) {}
func (n *noticeList) Notice(_, code, message string) {
	if len(n.notices) < 100 {
		n.notices = append(n.notices, code+": "+message)
	}
}

// Run implements console.SQL: query's statements in one session, as
// psql's simple query runs them, each result's rows in PostgreSQL's
// text format. SUBSCRIBE, which never ends, is refused.
func (s consoleSQL) Run(ctx context.Context, r *http.Request, query string, maxRows int) ([]console.SQLResult, error) {
	c, _, err := s.a.callerOf(r)
	if err != nil {
		return nil, err
	}
	notices := &noticeList{}
	sess, err := s.a.sqlCatalog.NewSessionAs(ctx, pgwire.SessionInfo{User: c.principal.Name, Database: "strand", Host: c.host, Client: notices}, c.principal)
	if err != nil {
		return nil, sqlError(ctx, err)
	}
	defer sess.Close()
	stmts, err := sess.Prepare(ctx, query, nil)
	if err != nil {
		return nil, sqlError(ctx, err)
	}
	m := pgtype.NewMap()
	var out []console.SQLResult
	for _, st := range stmts {
		if len(st.Params()) > 0 {
			return out, &console.SQLError{Code: pgwire.CodeUndefinedParameter, Message: "there is no parameter $1: the console sends no parameters"}
		}
		res, err := runConsoleStatement(ctx, m, st, maxRows)
		res.Notices, notices.notices = notices.notices, nil
		if err != nil {
			if len(res.Notices) > 0 {
				out = append(out, res)
			}
			return out, sqlError(ctx, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func runConsoleStatement(ctx context.Context, m *pgtype.Map, st pgwire.Statement, maxRows int) (console.SQLResult, error) {
	var res console.SQLResult
	cols := st.Columns()
	for _, col := range cols {
		res.Columns = append(res.Columns, col.Name)
	}
	rows, err := st.Start(ctx, nil)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	if _, ok := rows.(pgwire.StreamingRows); ok {
		return res, pgwire.NotSupported("SUBSCRIBE streams until cancelled: run it from psql or a driver, not the console")
	}
	for {
		row, ok, err := rows.Next(ctx)
		if err != nil {
			return res, err
		}
		if !ok {
			res.Tag = rows.Tag()
			return res, nil
		}
		if len(res.Rows) == maxRows {
			res.Cut = true
			return res, nil
		}
		text, null := make([]string, len(row)), make([]bool, len(row))
		for i, v := range row {
			if v == nil || i >= len(cols) {
				null[i] = v == nil
				continue
			}
			b, err := m.Encode(cols[i].Type, pgtype.TextFormatCode, v, nil)
			if err != nil {
				return res, fmt.Errorf("encoding column %q: %w", cols[i].Name, err)
			}
			if len(b) > maxConsoleValueBytes {
				b = append(b[:maxConsoleValueBytes:maxConsoleValueBytes], "…"...)
			}
			text[i] = string(b)
		}
		res.Rows, res.Null = append(res.Rows, text), append(res.Null, null)
	}
}

// sqlError is err as the page shows it: PostgreSQL's SQLSTATE, message,
// detail and hint, as psql would print them.
func sqlError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &console.SQLError{Code: pgwire.CodeQueryCanceled, Message: "canceling statement due to statement timeout (the console's limit)"}
	}
	e := pgwire.ErrorOf(err)
	return &console.SQLError{Code: e.Code, Message: e.Message, Detail: e.Detail, Hint: e.Hint}
}

// consoleSQL is the console's SQL, nil when the endpoint is off.
func (a *Agent) consoleSQL() console.SQL {
	if a.sqlCatalog == nil {
		return nil
	}
	return consoleSQL{a}
}
