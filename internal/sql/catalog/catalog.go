// Package catalog owns the SQL endpoint's catalog statements: the DDL of
// Strand's relations (CREATE/DROP SOURCE, MATERIALIZED VIEW and SINK),
// SHOW SOURCES|MATERIALIZED VIEWS|SINKS, and who may do what with a
// relation; and the connector statements (CREATE/ALTER/DROP CONNECTOR,
// SHOW CONNECTORS: connectors.go), which it hands to package connect's
// Manager, as the Connect REST API does. It checks a definition against the agent's copy of the
// metadata when the statement runs (the topic exists, the format and the
// column types are known, the reserved metadata columns are typed right,
// the SELECT parses and names relations that exist, the caller holds the
// ACLs package acl's doc lists), proposes it (meta.CreateRelation,
// meta.DropRelation: the catalog lives in the replicated metadata, so
// every agent knows every relation) and answers as PostgreSQL does.
//
// It is a pgwire.Engine in front of another one: each session parses
// the statements in Strand's dialect (parse.ParseStrand), runs those
// that are its own, and hands every other statement, by its text, to
// the next engine's session, which keeps the session's settings and
// transaction status. Typing a view's SELECT is the planner's: the
// catalog records what the SELECT reads (its RangeVars) and the
// SELECT's normalized text, not its columns. A SELECT naming relations
// is checked for READ on each, then planned by the next engine over
// Relations (sources are scanned; materialized views answer 0A000 until
// the dataflow maintains them); SUBSCRIBE is checked for READ and
// streams the view's changes (Config.Views as a Subscriber).
package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/source"
)

// Store is the agent's copy of the metadata: replica.Replica, or
// metatest.DB in tests.
type Store interface {
	// View (meta.Viewer) is a snapshot of the local copy.
	meta.Viewer
	// Propose appends a command to the log and returns its result once
	// applied locally.
	Propose(ctx context.Context, c meta.Command) (meta.Result, error)
	// Sync returns once the local copy holds everything appended before
	// the call, so a listing sees DDL that ran on another agent.
	Sync(ctx context.Context) error
}

// Authorize decides whether r may do op on the resource (typ, name). An
// error (the authorizer is not up yet) refuses the statement.
type Authorize func(r acl.Request, op acl.Operation, typ acl.ResourceType, name string) (bool, error)

// Config configures the catalog engine.
type Config struct {
	Store Store
	// Authorize decides ACLs; nil allows everything, as an agent with
	// authorization off does.
	Authorize Authorize
	// Denied, when set, is told of every statement Authorize refused
	// (not of the checks that only filter a listing), for the
	// authorization log.
	Denied func(r acl.Request, op acl.Operation, typ acl.ResourceType, name string)
	// Next runs every statement that is not the catalog's.
	Next pgwire.Engine
	// Kafka gives the options of a client reading a source's topic
	// (Relations' scans): in process, as a principal that may read
	// every topic, since the SQL user's READ on the source is what is
	// checked. Nil: sources cannot be read.
	Kafka func() []kgo.Opt
	// Schemas are the registry's schemas, for Avro and Protobuf
	// sources; nil (or returning nil) leaves those unreadable.
	Schemas func() *source.Schemas
	// SourceMetrics count what scans read; may be nil.
	SourceMetrics *source.Metrics
	// Views are the materialized views this agent maintains (package
	// views' Runner); nil: reading a view answers 0A000.
	Views Views
	// Sinks say where each sink runs and how (package sinks' Runner);
	// nil: SHOW SINKS' status says "not run".
	Sinks Sinks
	// Connectors runs CREATE/ALTER/DROP CONNECTOR and SHOW CONNECTORS
	// as Kafka Connect's REST API does (connectors.go); nil: they
	// answer 0A000.
	Connectors *connect.Manager
}

// Sinks reports the sinks' state.
type Sinks interface {
	// Status is the sink's state as this agent knows it (its owner's
	// node id, and on the owner starting, catching up, running or
	// failed) and its last error, "" for none.
	Status(id uint64) (state, err string)
}

// Views reads the materialized views maintained locally.
type Views interface {
	// Columns returns the view's columns, or an error with a SQLSTATE
	// (the view is starting or failed).
	Columns(id uint64) ([]exec.Column, error)
	// Open returns the view's committed contents for one read; the
	// caller calls release when done reading (the state stays open
	// until then).
	Open(id uint64) (view *flow.View, release func(), err error)
	// Status is the view's state on this agent (starting, running,
	// failed) and its last error, "" for none.
	Status(id uint64) (state, err string)
	// WaitCaughtUp returns once this agent's copy of the view has
	// consumed its inputs up to their last stable offsets as they were
	// when it was called, or fails after timeout (57014).
	WaitCaughtUp(ctx context.Context, id uint64, timeout time.Duration) error
}

// Engine is the catalog in front of Config.Next.
type Engine struct {
	cfg Config
}

// New returns the engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Next == nil {
		return nil, errors.New("catalog: Store and Next are required")
	}
	return &Engine{cfg: cfg}, nil
}

// NewSession implements pgwire.Engine.
func (e *Engine) NewSession(ctx context.Context, info pgwire.SessionInfo) (pgwire.Session, error) {
	next, err := e.cfg.Next.NewSession(ctx, info)
	if err != nil {
		return nil, err
	}
	return &session{e: e, next: next, client: info.Client,
		who: acl.Request{Principal: auth.User(info.User), Host: info.Host}}, nil
}

type session struct {
	e      *Engine
	next   pgwire.Session
	client pgwire.Client
	who    acl.Request
}

func (s *session) TxStatus() byte { return s.next.TxStatus() }
func (s *session) Fail()          { s.next.Fail() }
func (s *session) Close()         { s.next.Close() }

// Prepare implements pgwire.Session: the catalog's statements are its
// own; a text holding none goes to the next engine whole, and the other
// statements of a mixed text one by one, their error positions moved to
// positions in the whole text.
func (s *session) Prepare(ctx context.Context, sql string, paramTypes []uint32) ([]pgwire.Statement, error) {
	stmts, err := parse.Shared.ParseStrand(sql)
	if err != nil {
		return nil, err
	}
	ours := make([]bool, len(stmts))
	any := false
	for i, st := range stmts {
		ours[i] = s.isOurs(st)
		any = any || ours[i]
	}
	if !any {
		return s.next.Prepare(ctx, sql, paramTypes)
	}
	out := make([]pgwire.Statement, 0, len(stmts))
	for i, st := range stmts {
		if ours[i] && st.Kind == parse.KindOther && (st.Node.GetSelectStmt() != nil || st.Node.GetExplainStmt() != nil) {
			// A SELECT (or EXPLAIN of one) over the catalog's
			// relations: checked here, planned and run by the next
			// engine over Relations.
			if err := s.checkRead(st); err != nil {
				return nil, atOffset(err, st.Offset)
			}
			ps, err := s.next.Prepare(ctx, st.Text, paramTypes)
			if err != nil {
				return nil, atOffset(err, st.Offset)
			}
			out = append(out, ps...)
			continue
		}
		if ours[i] {
			p, err := s.prepare(st)
			if err != nil {
				return nil, atOffset(err, st.Offset)
			}
			out = append(out, p)
			continue
		}
		ps, err := s.next.Prepare(ctx, st.Text, paramTypes)
		if err != nil {
			return nil, atOffset(err, st.Offset)
		}
		out = append(out, ps...)
	}
	return out, nil
}

// isOurs reports whether st is a catalog statement, or reads a relation
// of the catalog (which the next engine knows nothing of).
func (s *session) isOurs(st parse.Statement) bool {
	if st.Kind != parse.KindOther {
		return true
	}
	switch {
	case st.Node.GetCreateStmt() != nil, st.Node.GetViewStmt() != nil:
		// PostgreSQL's tables and plain views: refused with what to
		// write instead.
		return true
	case st.Node.GetSelectStmt() != nil, st.Node.GetExplainStmt() != nil:
		return len(s.relationsRead(st)) > 0
	}
	return false
}

// relationsRead are the catalog's relations that st's SELECT names.
func (s *session) relationsRead(st parse.Statement) []meta.Relation {
	v := s.e.cfg.Store.View()
	defer v.Close()
	var out []meta.Relation
	for _, rv := range rangeVars(st.Node) {
		if name, ok := relationName(rv); ok {
			if rel, found, err := v.Relation(name); err == nil && found {
				out = append(out, rel)
			}
		}
	}
	return out
}

// atOffset moves a statement's error position by the statement's offset
// in the text the client sent.
func atOffset(err error, offset int) error {
	var pe *pgwire.Error
	var se *parse.Error
	switch {
	case offset == 0:
	case errors.As(err, &pe) && pe.Position > 0:
		moved := *pe
		moved.Position += int32(offset)
		return &moved
	case errors.As(err, &se) && se.Position > 0:
		moved := *se
		moved.Position += offset
		return &moved
	}
	return err
}

// may reports whether the session's principal may do op on the
// resource; an authorizer that cannot answer refuses.
func (s *session) may(op acl.Operation, typ acl.ResourceType, name string) (bool, error) {
	if s.e.cfg.Authorize == nil {
		return true, nil
	}
	return s.e.cfg.Authorize(s.who, op, typ, name)
}

// require is may as the error PostgreSQL answers a refusal with.
func (s *session) require(op acl.Operation, typ acl.ResourceType, name, what string) error {
	ok, err := s.may(op, typ, name)
	if err != nil {
		return pgwire.Errorf(pgwire.CodeInsufficientPrivilege, "cannot authorize: %v", err)
	}
	if !ok {
		if s.e.cfg.Denied != nil {
			s.e.cfg.Denied(s.who, op, typ, name)
		}
		return &pgwire.Error{Code: pgwire.CodeInsufficientPrivilege, Message: "permission denied for " + what,
			Hint: fmt.Sprintf("%v needs %v on %s %q (strand acl create)", s.who.Principal, op, acl.ResourceTypeName(typ), name)}
	}
	return nil
}

// mayCreate is CREATE on the cluster or on the relation's name, either
// enough, as Kafka's CreateTopics asks.
func (s *session) mayCreate(kind meta.RelationKind, name string) error {
	if ok, err := s.may(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, acl.ClusterName); err == nil && ok {
		return nil
	}
	return s.require(kmsg.ACLOperationCreate, acl.ResourceTypeRelation, name, fmt.Sprintf("creating %s %q", kind, name))
}

// outsideBlock refuses a catalog change inside a transaction block: it
// is proposed at once and cannot be rolled back.
func (s *session) outsideBlock(tag string) error {
	switch s.next.TxStatus() {
	case 'E':
		return pgwire.Errorf(pgwire.CodeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	case 'T':
		return pgwire.Errorf(pgwire.CodeActiveSQLTransaction, "%s cannot run inside a transaction block", tag)
	}
	return nil
}

// propose proposes c and turns a refusal into PostgreSQL's error, a
// skip into its notice.
func (s *session) propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	res, err := s.e.cfg.Store.Propose(ctx, c)
	switch {
	case errors.Is(err, meta.ErrNotAtLevel):
		return res, &pgwire.Error{Code: pgwire.CodeObjectNotInPrerequisiteState,
			Message: fmt.Sprintf("the SQL catalog needs %s %d", meta.FeatureMetadata, meta.MetadataLevel7),
			Hint:    fmt.Sprintf("strand features upgrade --feature %s=%d", meta.FeatureMetadata, meta.MetadataLevel7)}
	case err != nil:
		return res, err
	case res.Code != 0:
		code := res.SQLState
		if code == "" {
			code = pgwire.CodeInternalError
		}
		return res, &pgwire.Error{Code: code, Message: res.Message}
	case res.SQLState != "":
		s.client.Notice("NOTICE", res.SQLState, res.Message)
	}
	return res, nil
}
