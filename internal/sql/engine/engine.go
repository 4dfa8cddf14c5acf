// Package engine is the SQL engine behind the PostgreSQL endpoint: the
// session (settings, transaction status) and the statements that are
// not queries. It serves SELECT through the planner and executor
// (package exec, expressions from package expr) over the catalog it is
// given, with version(), current_setting() and pg_sleep() of its own;
// SHOW and SHOW ALL, SET/RESET of session settings (with
// ParameterStatus for the reported ones), BEGIN/COMMIT/ROLLBACK (the
// transaction status only: there is no data yet for a transaction to
// isolate) and DISCARD ALL. Every other statement is refused with
// 0A000 feature_not_supported naming it; no catalog query is faked.
//
// It implements pgwire.Engine, the interface the planner will implement
// next.
package engine

import (
	"context"
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Engine is the minimal engine. The zero value is not usable; use New.
type Engine struct {
	clock clock.Clock
	// version is the text of SELECT version().
	version string
	// catalogFor makes what FROM reads, per statement, from the
	// session planning it.
	catalogFor func(State) exec.Catalog
}

// State is what a catalog may read of the session planning a
// statement: who it is and its settings (a source scan's limits).
type State interface {
	// User is the session's user; Host the client's address ("" when
	// not an IP connection).
	User() string
	Host() string
	// Setting is a setting's current value, as SHOW gives it.
	Setting(name string) (string, error)
}

// New returns an engine; clk times pg_sleep (nil: the wall clock), and
// build names Strand's build in version().
func New(clk clock.Clock, build string) *Engine {
	v := "PostgreSQL " + ServerVersion
	if build != "" {
		v = "PostgreSQL 16.0 (Strand " + build + ")"
	}
	return &Engine{clock: clock.OrReal(clk), version: v, catalogFor: func(State) exec.Catalog { return systemCatalog{} }}
}

// SetCatalog sets the relations SELECT reads, the same for every
// session (for tests an exec.MemCatalog). Call it before the first
// session.
func (e *Engine) SetCatalog(c exec.Catalog) {
	e.SetCatalogFor(func(State) exec.Catalog { return c })
}

// SetCatalogFor sets how a statement's relations are found: f is called
// as each SELECT is planned, with the planning session, so relations
// may depend on the user (what pg_class shows) and on settings (a
// scan's limits). Call it before the first session.
func (e *Engine) SetCatalogFor(f func(State) exec.Catalog) {
	e.catalogFor = func(s State) exec.Catalog { return systemCatalog{inner: f(s)} }
}

// NewSession implements pgwire.Engine.
func (e *Engine) NewSession(_ context.Context, info pgwire.SessionInfo) (pgwire.Session, error) {
	s := &session{eng: e, vals: newValues(info.User, info.Client), status: 'I', user: info.User, host: info.Host}
	for name, value := range info.Options {
		if err := s.vals.set(name, value, false); err != nil {
			return nil, err
		}
	}
	s.vals.reportAll()
	return s, nil
}

type session struct {
	eng  *Engine
	vals *values
	// status is the transaction status: 'I', 'T' or 'E'.
	status byte
	// user and host are the session's, for State.
	user, host string
}

func (s *session) User() string { return s.user }
func (s *session) Host() string { return s.host }
func (s *session) Setting(name string) (string, error) {
	v, _, err := s.vals.get(name)
	return v, err
}

func (s *session) TxStatus() byte { return s.status }

func (s *session) Fail() {
	if s.status == 'T' {
		s.status = 'E'
	}
}

func (s *session) Close() {}

// Prepare implements pgwire.Session.
func (s *session) Prepare(_ context.Context, sql string, paramTypes []uint32) ([]pgwire.Statement, error) {
	parsed, err := parse.Shared.Parse(sql)
	if err != nil {
		return nil, err
	}
	out := make([]pgwire.Statement, 0, len(parsed))
	for _, p := range parsed {
		st, err := s.prepare(p.Node, paramTypes)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *session) prepare(n *pg.Node, paramTypes []uint32) (pgwire.Statement, error) {
	switch n := n.Node.(type) {
	case *pg.Node_SelectStmt:
		return s.prepareSelect(n.SelectStmt, paramTypes)
	case *pg.Node_ExplainStmt:
		return s.prepareExplain(n.ExplainStmt, paramTypes)
	case *pg.Node_VariableShowStmt:
		return s.prepareShow(n.VariableShowStmt.Name)
	case *pg.Node_VariableSetStmt:
		return s.prepareSet(n.VariableSetStmt)
	case *pg.Node_TransactionStmt:
		return s.prepareTransaction(n.TransactionStmt)
	case *pg.Node_DiscardStmt:
		if n.DiscardStmt.Target != pg.DiscardMode_DISCARD_ALL {
			return nil, pgwire.NotSupported("only DISCARD ALL is supported")
		}
		return &command{sess: s, tag: "DISCARD ALL", run: func() (string, error) {
			if s.status != 'I' {
				return "", pgwire.Errorf(pgwire.CodeActiveSQLTransaction, "DISCARD ALL cannot run inside a transaction block")
			}
			s.vals.resetAll()
			return "", nil
		}}, nil
	}
	return nil, pgwire.NotSupported("%s is not supported yet: this endpoint serves SELECT of constant expressions, SHOW, SET, RESET, BEGIN, COMMIT, ROLLBACK and DISCARD ALL until sources and views arrive", statementName(n))
}

// statementName is how PostgreSQL's command tags name a statement kind,
// for the message refusing it.
func statementName(n *pg.Node) string {
	name := string(n.ProtoReflect().WhichOneof(n.ProtoReflect().Descriptor().Oneofs().Get(0)).Message().Name())
	switch name {
	case "CreateStmt":
		return "CREATE TABLE"
	case "CreateTableAsStmt":
		if n.GetCreateTableAsStmt().GetObjtype() == pg.ObjectType_OBJECT_MATVIEW {
			return "CREATE MATERIALIZED VIEW"
		}
		return "CREATE TABLE AS"
	case "ViewStmt":
		return "CREATE VIEW"
	case "InsertStmt":
		return "INSERT"
	case "UpdateStmt":
		return "UPDATE"
	case "DeleteStmt":
		return "DELETE"
	case "DropStmt":
		return "DROP"
	case "CopyStmt":
		return "COPY"
	case "ExplainStmt":
		return "EXPLAIN"
	case "PrepareStmt":
		return "PREPARE"
	case "ExecuteStmt":
		return "EXECUTE"
	case "DeallocateStmt":
		return "DEALLOCATE"
	}
	return strings.TrimSuffix(name, "Stmt")
}

// command is a statement that returns no rows.
type command struct {
	sess *session
	tag  string
	// allowedInFailed says the statement ends a failed transaction.
	allowedInFailed bool
	// run runs it, returning its tag when not tag.
	run func() (string, error)
}

func (c *command) Params() []uint32         { return nil }
func (c *command) Columns() []pgwire.Column { return nil }

func (c *command) Start(context.Context, []any) (pgwire.Rows, error) {
	if err := c.sess.checkNotFailed(c.allowedInFailed); err != nil {
		return nil, err
	}
	tag, err := c.run()
	if err != nil {
		return nil, err
	}
	if tag == "" {
		tag = c.tag
	}
	return &rows{tag: tag}, nil
}

func (s *session) checkNotFailed(allowed bool) error {
	if s.status == 'E' && !allowed {
		return pgwire.Errorf(pgwire.CodeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	}
	return nil
}

// rows is a result computed when first read; tag is final once read.
type rows struct {
	compute func(ctx context.Context) ([][]any, error)
	data    [][]any
	next    int
	tag     string
	// tagFor makes the tag from the row count, for SELECT and SHOW.
	tagFor func(n int) string
}

func (r *rows) Next(ctx context.Context) ([]any, bool, error) {
	if r.compute != nil {
		data, err := r.compute(ctx)
		if err != nil {
			return nil, false, err
		}
		r.data, r.compute = data, nil
	}
	if r.next < len(r.data) {
		r.next++
		return r.data[r.next-1], true, nil
	}
	if r.tagFor != nil {
		r.tag = r.tagFor(len(r.data))
	}
	return nil, false, nil
}

func (r *rows) Tag() string { return r.tag }
func (r *rows) Close()      {}

func selectTag(n int) string { return fmt.Sprintf("SELECT %d", n) }

// textColumn describes a text column.
func textColumn(name string) pgwire.Column {
	return pgwire.Column{Name: name, Type: types.OIDText, TypeSize: -1, TypeMod: -1}
}

func (s *session) prepareShow(name string) (pgwire.Statement, error) {
	if strings.EqualFold(name, "all") {
		return &query{sess: s, tag: "SHOW", cols: []pgwire.Column{textColumn("name"), textColumn("setting"), textColumn("description")},
			run: func(context.Context, []any) ([][]any, error) { return s.vals.all(), nil }}, nil
	}
	_, canonical, err := s.vals.get(name)
	if err != nil {
		return nil, err
	}
	return &query{sess: s, tag: "SHOW", cols: []pgwire.Column{textColumn(canonical)}, run: func(context.Context, []any) ([][]any, error) {
		v, _, err := s.vals.get(name)
		return [][]any{{v}}, err
	}}, nil
}

func (s *session) prepareSet(st *pg.VariableSetStmt) (pgwire.Statement, error) {
	if st.IsLocal {
		return nil, pgwire.NotSupported("SET LOCAL is not supported yet")
	}
	switch st.Kind {
	case pg.VariableSetKind_VAR_SET_VALUE:
		value, err := setValue(st.Args)
		if err != nil {
			return nil, err
		}
		return &command{sess: s, tag: "SET", run: func() (string, error) { return "", s.vals.set(st.Name, value, false) }}, nil
	case pg.VariableSetKind_VAR_SET_DEFAULT:
		return &command{sess: s, tag: "SET", run: func() (string, error) { return "", s.vals.set(st.Name, "", true) }}, nil
	case pg.VariableSetKind_VAR_RESET:
		return &command{sess: s, tag: "RESET", run: func() (string, error) { return "", s.vals.set(st.Name, "", true) }}, nil
	case pg.VariableSetKind_VAR_RESET_ALL:
		return &command{sess: s, tag: "RESET", run: func() (string, error) { s.vals.resetAll(); return "", nil }}, nil
	}
	return nil, pgwire.NotSupported("this form of SET (%s) is not supported yet", st.Name)
}

// setValue is the text of SET's arguments, a list joined with ", ".
func setValue(args []*pg.Node) (string, error) {
	var parts []string
	for _, a := range args {
		c := a.GetAConst()
		switch {
		case c == nil:
			return "", pgwire.NotSupported("SET takes constants only")
		case c.GetSval() != nil:
			parts = append(parts, c.GetSval().Sval)
		case c.GetIval() != nil:
			parts = append(parts, fmt.Sprint(c.GetIval().Ival))
		case c.GetFval() != nil:
			parts = append(parts, c.GetFval().Fval)
		case c.GetBoolval() != nil:
			parts = append(parts, map[bool]string{true: "on", false: "off"}[c.GetBoolval().Boolval])
		default:
			return "", pgwire.NotSupported("SET takes constants only")
		}
	}
	return strings.Join(parts, ", "), nil
}

func (s *session) prepareTransaction(st *pg.TransactionStmt) (pgwire.Statement, error) {
	switch st.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_BEGIN, pg.TransactionStmtKind_TRANS_STMT_START:
		return &command{sess: s, tag: "BEGIN", run: func() (string, error) {
			if s.status != 'I' {
				s.vals.client.Notice("WARNING", pgwire.CodeActiveSQLTransaction, "there is already a transaction in progress")
				return "", nil
			}
			s.status = 'T'
			return "", nil
		}}, nil
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT, pg.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		c := &command{sess: s, tag: "COMMIT", allowedInFailed: true}
		if st.Kind == pg.TransactionStmtKind_TRANS_STMT_ROLLBACK {
			c.tag = "ROLLBACK"
		}
		c.run = func() (string, error) {
			tag := ""
			switch s.status {
			case 'I':
				s.vals.client.Notice("WARNING", pgwire.CodeNoActiveSQLTransaction, "there is no transaction in progress")
			case 'E':
				// A failed block cannot commit: PostgreSQL rolls it
				// back and says so in the tag.
				tag = "ROLLBACK"
			}
			s.status = 'I'
			return tag, nil
		}
		return c, nil
	}
	return nil, pgwire.NotSupported("%s is not supported yet", strings.ToUpper(strings.TrimPrefix(st.Kind.String(), "TRANS_STMT_")))
}
