package catalog

import (
	"context"
	"fmt"
	"strconv"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
	"github.com/strandkafka/strand/internal/sql/views"
)

// Subscriber streams a materialized view's changes (package views'
// Runner): the optional power of a Views that SUBSCRIBE needs.
type Subscriber interface {
	// Subscribe starts a subscription: the view's snapshot (if
	// snapshot), then each later epoch's changes; maxQueued bounds the
	// changes it holds unread (<= 0: views.DefaultMaxQueuedChanges).
	Subscribe(id uint64, snapshot bool, maxQueued int) (*views.Subscription, error)
}

// prepareSubscribe is SUBSCRIBE [TO] view: its columns are Materialize's,
// mz_timestamp (int8: the view's epoch number on this agent) and
// mz_diff (int8: how many copies of the row the epoch added, negative
// for removed), then the view's. READ was checked (checkRead).
func (s *session) prepareSubscribe(st parse.Statement) (pgwire.Statement, error) {
	rv := parse.SubscribeTarget(st)
	name, _ := relationName(rv)
	v := s.e.cfg.Store.View()
	rel, ok, err := v.Relation(name)
	v.Close()
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, &pgwire.Error{Code: pgwire.CodeUndefinedTable, Message: fmt.Sprintf("relation %q does not exist", rv.Relname), Position: rv.Location + 1}
	case rel.Kind != meta.RelationView:
		return nil, &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("%s %q cannot be subscribed to: SUBSCRIBE streams a materialized view's changes", rel.Kind, rel.Name), Position: rv.Location + 1,
			Hint: "CREATE MATERIALIZED VIEW name AS SELECT ... FROM " + rel.Name + ", then SUBSCRIBE to it"}
	}
	sub, ok := s.e.cfg.Views.(Subscriber)
	if s.e.cfg.Views == nil || !ok {
		return nil, notMaintained(rel)
	}
	vcols, err := s.e.cfg.Views.Columns(rel.ID)
	if err != nil {
		return nil, err
	}
	cols := []pgwire.Column{
		{Name: "mz_timestamp", Type: types.Int8.OID, TypeSize: types.Int8.Size(), TypeMod: types.Int8.Mod},
		{Name: "mz_diff", Type: types.Int8.OID, TypeSize: types.Int8.Size(), TypeMod: types.Int8.Mod},
	}
	for _, c := range vcols {
		cols = append(cols, pgwire.Column{Name: c.Name, Type: c.Type.OID, TypeSize: c.Type.Size(), TypeMod: c.Type.Mod})
	}
	return &subscribeStmt{sub: sub, id: rel.ID, cols: cols, settings: s.next}, nil
}

type subscribeStmt struct {
	sub  Subscriber
	id   uint64
	cols []pgwire.Column
	// settings is the next engine's session, which keeps the settings
	// (SettingSubscribeMaxChanges).
	settings pgwire.Session
}

// SettingSubscribeMaxChanges bounds a subscriber's unread changes.
const SettingSubscribeMaxChanges = "strand.subscribe_max_changes"

// maxQueued is the session's SettingSubscribeMaxChanges, 0 (the
// default) for a next engine without settings.
func (q *subscribeStmt) maxQueued() (int, error) {
	st, ok := q.settings.(engine.State)
	if !ok {
		return 0, nil
	}
	v, err := st.Setting(SettingSubscribeMaxChanges)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, sqlerr.Errorf(sqlerr.InvalidParameterValue, "%s: %v", SettingSubscribeMaxChanges, err)
	}
	return n, nil
}

func (q *subscribeStmt) Params() []uint32         { return nil }
func (q *subscribeStmt) Columns() []pgwire.Column { return q.cols }
func (q *subscribeStmt) Start(ctx context.Context, args []any) (pgwire.Rows, error) {
	maxQueued, err := q.maxQueued()
	if err != nil {
		return nil, err
	}
	sub, err := q.sub.Subscribe(q.id, true, maxQueued)
	if err != nil {
		return nil, err
	}
	if len(sub.Columns())+2 != len(q.cols) {
		// The relation was dropped and created again under the same id
		// between Prepare and Start cannot happen (ids are not reused);
		// a mismatch is a bug, not a client error.
		sub.Close()
		return nil, pgwire.Errorf(pgwire.CodeInternalError, "SUBSCRIBE: the view has %d columns, %d were described", len(sub.Columns()), len(q.cols)-2)
	}
	return &subscribeRows{sub: sub}, nil
}

// subscribeRows turns updates into rows; Next blocks until the view's
// next epoch, ctx's end (a CancelRequest: 57014) or the subscription's
// end (the view dropped, the subscriber too slow).
type subscribeRows struct {
	sub   *views.Subscription
	cur   views.Update
	i     int
	ended bool
}

func (r *subscribeRows) Next(ctx context.Context) ([]any, bool, error) {
	for r.i >= len(r.cur.Changes) {
		u, err := r.sub.Next(ctx)
		if err != nil {
			return nil, false, err
		}
		r.cur, r.i = u, 0
	}
	c := r.cur.Changes[r.i]
	r.i++
	row := make([]any, 0, len(c.Row)+2)
	row = append(row, int64(r.cur.Epoch), c.Diff)
	for _, v := range c.Row {
		row = append(row, types.ToWire(v))
	}
	return row, true, nil
}

// Ready implements pgwire.StreamingRows.
func (r *subscribeRows) Ready() bool { return r.i < len(r.cur.Changes) || r.sub.Ready() }

// Tag is never reached by a running subscription: it ends with an error.
func (r *subscribeRows) Tag() string { return "SUBSCRIBE" }

func (r *subscribeRows) Close() {
	if !r.ended {
		r.ended = true
		r.sub.Close()
	}
}
