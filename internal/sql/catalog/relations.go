package catalog

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/pgcatalog"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Settings naming a source scan's limits (the engine's session
// settings; package source has their defaults).
const (
	SettingScanMaxRows  = "strand.scan_max_rows"
	SettingScanMaxBytes = "strand.scan_max_bytes"
	// SettingViewConsistency is "prefix" or "caught_up" (see package
	// views, WaitCaughtUp), SettingViewWaitTimeout the wait's bound.
	SettingViewConsistency = "strand.view_consistency"
	SettingViewWaitTimeout = "strand.view_wait_timeout_ms"
)

// Relations is what the SELECTs of the session st plan over, an
// exec.Catalog (for engine.SetCatalogFor): the catalog's sources, each
// read when the query runs by a bounded scan (package source's Scan,
// read_committed, through Config.Kafka, with the session's
// strand.scan_max_rows and strand.scan_max_bytes), and the system
// catalog (package pgcatalog) of the relations the session may
// DESCRIBE. Materialized views are read from this agent's copy
// (Config.Views; 0A000 without one, 55000 while one starts or after it
// failed), sinks answer 42809. Names without a schema find pg_catalog's relations first, as
// PostgreSQL's search path does, then the catalog's (schema public).
func (e *Engine) Relations(st engine.State) exec.Catalog {
	return &relations{e: e, st: st, who: acl.Request{Principal: auth.User(st.User()), Host: st.Host()}}
}

type relations struct {
	e   *Engine
	st  engine.State
	who acl.Request
	sys *pgcatalog.Catalog
	// sysErr is what building sys failed with.
	sysErr error
}

func (r *relations) Relation(schema, name string) (exec.Relation, bool, error) {
	switch schema {
	case "pg_catalog", "information_schema", "":
		if !pgcatalog.Has(schema, name) {
			if schema != "" {
				return nil, false, nil
			}
			break
		}
		sys, err := r.system()
		if err != nil {
			return nil, false, err
		}
		return sys.Relation(schema, name)
	case "public":
	default:
		return nil, false, nil
	}
	v := r.e.cfg.Store.View()
	rel, ok, err := v.Relation(name)
	v.Close()
	if err != nil || !ok {
		return nil, false, err
	}
	// The statement's front (prepareRead) checked READ already; a
	// subquery's or a prepared statement's relation is checked here too.
	s := &session{e: r.e, who: r.who}
	if err := s.require(kmsg.ACLOperationRead, acl.ResourceTypeRelation, rel.Name, fmt.Sprintf("%s %s", rel.Kind, rel.Name)); err != nil {
		return nil, false, err
	}
	switch rel.Kind {
	case meta.RelationSink:
		return nil, false, sqlerr.Errorf(sqlerr.WrongObjectType, "%q is a sink: a sink writes to a topic and cannot be read", rel.Name)
	case meta.RelationView:
		if r.e.cfg.Views == nil {
			return nil, false, notMaintained(rel)
		}
		cols, err := r.e.cfg.Views.Columns(rel.ID)
		if err != nil {
			return nil, false, err
		}
		return &viewRelation{views: r.e.cfg.Views, id: rel.ID, cols: cols, rels: r}, true, nil
	}
	def, err := source.DefOf(rel)
	if err != nil {
		return nil, false, err
	}
	maxRows, err := r.intSetting(SettingScanMaxRows)
	if err != nil {
		return nil, false, err
	}
	maxBytes, err := r.intSetting(SettingScanMaxBytes)
	if err != nil {
		return nil, false, err
	}
	return &sourceRelation{e: r.e, def: def, maxRows: int(maxRows), maxBytes: maxBytes}, true, nil
}

// notMaintained is the answer for reading a materialized view.
func notMaintained(rel meta.Relation) error {
	return sqlerr.NotSupported("%s %q is defined but not maintained yet: reading it waits for the dataflow (SELECT over sources is served now)", rel.Kind, rel.Name)
}

func (r *relations) intSetting(name string) (int64, error) {
	v, err := r.st.Setting(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, sqlerr.Errorf(sqlerr.InvalidParameterValue, "%s: %v", name, err)
	}
	return n, nil
}

// Functions implements engine.Functions: pg_catalog's functions, over
// the system catalog built when a query first calls one.
func (r *relations) Functions() expr.Hook {
	return func(c *expr.Compiler, n *pg.Node) (*expr.Expr, bool, error) {
		if !pgcatalog.Handles(n) {
			return nil, false, nil
		}
		sys, err := r.system()
		if err != nil {
			return nil, true, err
		}
		return sys.Hook(c, n)
	}
}

// system builds the system catalog of the relations the session may
// DESCRIBE (what SHOW lists; READ is has_table_privilege's SELECT).
func (r *relations) system() (*pgcatalog.Catalog, error) {
	if r.sys != nil || r.sysErr != nil {
		return r.sys, r.sysErr
	}
	r.sys, r.sysErr = r.buildSystem()
	return r.sys, r.sysErr
}

func (r *relations) buildSystem() (*pgcatalog.Catalog, error) {
	v := r.e.cfg.Store.View()
	defer v.Close()
	rels, err := v.Relations()
	if err != nil {
		return nil, err
	}
	creds, err := v.ScramCredentials("")
	if err != nil {
		return nil, err
	}
	snap := pgcatalog.Snapshot{User: r.st.User(), Database: "strand"}
	for _, c := range creds {
		snap.Roles = append(snap.Roles, c.User)
	}
	s := &session{e: r.e, who: r.who}
	for _, rel := range rels {
		ok, err := s.may(kmsg.ACLOperationDescribe, acl.ResourceTypeRelation, rel.Name)
		if err != nil {
			return nil, sqlerr.Errorf(sqlerr.InsufficientPrivilege, "cannot authorize: %v", err)
		}
		if !ok {
			continue
		}
		readable, err := s.may(kmsg.ACLOperationRead, acl.ResourceTypeRelation, rel.Name)
		if err != nil {
			return nil, sqlerr.Errorf(sqlerr.InsufficientPrivilege, "cannot authorize: %v", err)
		}
		sr := pgcatalog.Relation{ID: rel.ID, Name: rel.Name, Owner: ownerRole(rel.Owner), Readable: readable}
		switch rel.Kind {
		case meta.RelationSource:
			sr.Kind = pgcatalog.KindTable
		case meta.RelationView:
			sr.Kind = pgcatalog.KindMaterializedView
		default:
			sr.Kind = pgcatalog.KindView
		}
		for _, c := range rel.Columns {
			sr.Columns = append(sr.Columns, exec.Column{Name: c.Name, Type: types.Type{OID: c.Type, Mod: c.TypeMod}})
		}
		if rel.Kind != meta.RelationSource {
			sr.Query = rel.Query
			if sr.Query == "" {
				sr.Query = rel.SQL
			}
		}
		if rel.Kind == meta.RelationView {
			sr.Bytes = -1
			if sz, ok := r.e.cfg.Views.(StateSizer); ok {
				sr.Bytes = sz.StateBytes(rel.ID)
			}
		}
		if rel.Kind == meta.RelationView && len(sr.Columns) == 0 && r.e.cfg.Views != nil {
			// The catalog keeps a view's query, not its columns: they
			// are its dataflow's, once its task has compiled it here (a
			// view still starting, or failed, shows none).
			if cols, err := r.e.cfg.Views.Columns(rel.ID); err == nil {
				sr.Columns = cols
			}
		}
		snap.Relations = append(snap.Relations, sr)
	}
	return pgcatalog.New(snap), nil
}

// ownerRole is the role a relation's owner (a principal, "User:alice")
// is in PostgreSQL's terms: the user's name.
func ownerRole(owner string) string {
	if p, err := auth.ParsePrincipal(owner); err == nil && p.Type == auth.PrincipalTypeUser {
		return p.Name
	}
	return owner
}

// StateSizer is an optional power of Config.Views: a view's state on
// this agent's disk (-1 when not known), for pg_table_size.
type StateSizer interface {
	StateBytes(id uint64) int64
}

// sourceRelation is a source as FROM reads it.
type sourceRelation struct {
	e        *Engine
	def      *source.Def
	maxRows  int
	maxBytes int64
}

func (s *sourceRelation) Columns() []exec.Column {
	cols := make([]exec.Column, len(s.def.Columns))
	for i, c := range s.def.Columns {
		cols[i] = exec.Column{Name: c.Name, Type: c.Type}
	}
	return cols
}

func (s *sourceRelation) Scan(ctx context.Context) (exec.RowIter, error) {
	if s.e.cfg.Kafka == nil {
		return nil, sqlerr.NotSupported("reading sources is not configured on this endpoint")
	}
	var schemas *source.Schemas
	if s.e.cfg.Schemas != nil {
		schemas = s.e.cfg.Schemas()
	}
	dec, err := source.NewDecoder(s.def, schemas)
	if err != nil {
		return nil, err
	}
	sc, err := source.NewScan(ctx, source.ScanConfig{Def: s.def, Decoder: dec, Kafka: s.e.cfg.Kafka(),
		MaxRows: s.maxRows, MaxBytes: s.maxBytes, Metrics: s.e.cfg.SourceMetrics})
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", s.def.Name, err)
	}
	return &scanIter{s: sc}, nil
}

type scanIter struct{ s *source.Scan }

func (it *scanIter) Next(ctx context.Context) (types.Row, bool, error) {
	row, ok := it.s.Next(ctx)
	if !ok {
		err := it.s.Err()
		if err != nil && !errors.Is(err, context.Canceled) && sqlerr.Code(err) == "" {
			err = fmt.Errorf("scan: %w", err)
		}
		return nil, false, err
	}
	return row, true, nil
}

func (it *scanIter) Close() { it.s.Close() }

// viewRelation is a materialized view as FROM reads it: its committed
// contents on this agent (package views), read from local state. Each
// read reflects a prefix of the view's inputs; the scan reads one
// Pebble iterator, so it sees one epoch (see flow.View).
type viewRelation struct {
	views Views
	id    uint64
	cols  []exec.Column
	// rels is the session's, whose settings decide at each read
	// (a prepared statement's plan outlives a SET) whether it first
	// waits for the view to catch up.
	rels *relations
}

func (v *viewRelation) Columns() []exec.Column { return v.cols }

func (v *viewRelation) Scan(ctx context.Context) (exec.RowIter, error) {
	return v.ScanEqual(ctx, nil, nil)
}

// ScanEqual reads the rows whose first key columns (the view index's,
// flow.View.KeyColumns) equal the values given for them: a point
// lookup or a prefix scan of the index instead of a scan of it all.
// Values for other columns are not used (the caller filters by them).
func (v *viewRelation) ScanEqual(ctx context.Context, cols []int, vals types.Row) (exec.RowIter, error) {
	if c, err := v.rels.st.Setting(SettingViewConsistency); err == nil && c == "caught_up" {
		ms, err := v.rels.intSetting(SettingViewWaitTimeout)
		if err != nil {
			return nil, err
		}
		if err := v.views.WaitCaughtUp(ctx, v.id, time.Duration(ms)*time.Millisecond); err != nil {
			return nil, err
		}
	}
	view, release, err := v.views.Open(v.id)
	if err != nil {
		return nil, err
	}
	prefix := keyPrefix(view.KeyColumns(), len(v.cols), cols, vals)
	var scanErr error
	next, stop := iter.Pull2(func(yield func(types.Row, int64) bool) {
		scanErr = view.Scan(prefix, func(row types.Row, n int64) bool { return yield(row, n) })
	})
	return &viewIter{next: next, stop: func() { stop(); release() }, err: &scanErr}, nil
}

// keyPrefix is the values of the longest run of key columns, from the
// first, that cols give values for (no key: the row's width columns in
// order).
func keyPrefix(key []int, width int, cols []int, vals types.Row) types.Row {
	var prefix types.Row
	for i := 0; ; i++ {
		k := i
		if len(key) > 0 {
			if i >= len(key) {
				return prefix
			}
			k = key[i]
		} else if i >= width {
			return prefix
		}
		j := slices.Index(cols, k)
		if j < 0 {
			return prefix
		}
		prefix = append(prefix, vals[j])
	}
}

// viewIter repeats each row of the view's index by its count.
type viewIter struct {
	next func() (types.Row, int64, bool)
	stop func()
	err  *error
	row  types.Row
	left int64
}

func (it *viewIter) Next(ctx context.Context) (types.Row, bool, error) {
	for it.left == 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		row, n, ok := it.next()
		if !ok {
			return nil, false, *it.err
		}
		it.row, it.left = row, n
	}
	it.left--
	// The caller owns the rows it gets: a repeated row is copied.
	if it.left > 0 {
		return slices.Clone(it.row), true, nil
	}
	return it.row, true, nil
}

func (it *viewIter) Close() { it.stop() }
