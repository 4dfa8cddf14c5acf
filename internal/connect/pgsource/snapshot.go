package pgsource

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// colDef is a column as the catalog or a Relation message names it.
type colDef struct {
	name   string
	oid    uint32
	typmod int32
}

// catalogInfo reads what a Relation message lacks: which columns are
// NOT NULL, and the primary key's columns in key order.
func catalogInfo(ctx context.Context, q pgxQuerier, relid uint32) (notNull map[string]bool, pk []string, err error) {
	notNull = map[string]bool{}
	rows, err := q.Query(ctx, `SELECT attname, attnotnull FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped`, relid)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var n string
		var nn bool
		if err := rows.Scan(&n, &nn); err != nil {
			rows.Close()
			return nil, nil, err
		}
		notNull[n] = nn
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = q.Query(ctx, `SELECT a.attname FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.ord`, relid)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, nil, err
		}
		pk = append(pk, n)
	}
	rows.Close()
	return notNull, pk, rows.Err()
}

type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// buildTable makes a captured table's description.
func (r *run) buildTable(schema, name string, defs []colDef, notNull map[string]bool, pk []string, full bool) (*table, error) {
	cols := make([]column, len(defs))
	idx := map[string]int{}
	for i, d := range defs {
		k, scale, prec := kindOf(d.oid, d.typmod, r.cfg.DecimalMode)
		cols[i] = column{name: d.name, oid: d.oid, typmod: d.typmod, optional: !notNull[d.name], kind: k, scale: scale, precision: prec}
		idx[d.name] = i
	}
	var key []int
	for _, n := range pk {
		i, ok := idx[n]
		if !ok {
			// The catalog moved on past this Relation message (the key
			// changed since): key by what the message has.
			key = nil
			break
		}
		key = append(key, i)
	}
	return newTable(schema, name, r.cfg.Topic(schema, name), cols, key, full), nil
}

// snapshot creates the slot with an exported snapshot, writes every
// captured row of the published tables as it stands in that snapshot
// (op "r"), and returns the slot's consistent point, where streaming
// starts: a transaction committed before it is in the snapshot, one
// committed after it is streamed, none is both.
func (r *run) snapshot(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn) (uint64, error) {
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, r.cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return 0, fmt.Errorf("creating replication slot %q: %w", r.cfg.Slot, err)
	}
	cpLSN, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, err
	}
	cp := uint64(cpLSN)
	r.log.Info("snapshot starting", "slot", r.cfg.Slot, "consistent_point", res.ConsistentPoint)
	// The exported snapshot lives until the replication connection's
	// next command: import it first.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(res.SnapshotName, "'", "''")+"'"); err != nil {
		return 0, fmt.Errorf("importing the slot's snapshot: %w", err)
	}
	type tref struct {
		schema, name string
		oid          uint32
		full         bool
	}
	var tables []tref
	rows, err := tx.Query(ctx, `SELECT pt.schemaname, pt.tablename, c.oid, c.relreplident = 'f'
		FROM pg_publication_tables pt JOIN pg_namespace n ON n.nspname = pt.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
		WHERE pt.pubname = $1 ORDER BY 1, 2`, r.cfg.Publication)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var t tref
		if err := rows.Scan(&t.schema, &t.name, &t.oid, &t.full); err != nil {
			rows.Close()
			return 0, err
		}
		if r.cfg.Captured(t.schema, t.name) {
			tables = append(tables, t)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	began := r.clk.Now().UnixMicro()
	s := &snapWriter{r: r, cp: cp, began: began}
	for _, tr := range tables {
		var defs []colDef
		crows, err := tx.Query(ctx, `SELECT attname, atttypid, atttypmod FROM pg_attribute
			WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, tr.oid)
		if err != nil {
			return 0, err
		}
		for crows.Next() {
			var d colDef
			if err := crows.Scan(&d.name, &d.oid, &d.typmod); err != nil {
				crows.Close()
				return 0, err
			}
			defs = append(defs, d)
		}
		crows.Close()
		if err := crows.Err(); err != nil {
			return 0, err
		}
		notNull, pk, err := catalogInfo(ctx, tx, tr.oid)
		if err != nil {
			return 0, err
		}
		t, err := r.buildTable(tr.schema, tr.name, defs, notNull, pk, tr.full)
		if err != nil {
			return 0, err
		}
		if err := r.ensureTopic(ctx, t.topic); err != nil {
			return 0, err
		}
		names := make([]string, len(defs))
		for i, d := range defs {
			names[i] = quoteIdent(d.name)
		}
		// Simple protocol: every value as text, the format pgoutput
		// sends, so one reader serves both; rows stream, none held.
		q := "SELECT " + strings.Join(names, ", ") + " FROM ONLY " + quoteIdent(tr.schema) + "." + quoteIdent(tr.name)
		mrr := conn.PgConn().Exec(ctx, q)
		for mrr.NextResult() {
			rr := mrr.ResultReader()
			for rr.NextRow() {
				if err := s.row(ctx, t, rr.Values()); err != nil {
					rr.Close()
					mrr.Close()
					return 0, err
				}
			}
			if _, err := rr.Close(); err != nil {
				mrr.Close()
				return 0, fmt.Errorf("snapshot of %s.%s: %w", tr.schema, tr.name, err)
			}
		}
		if err := mrr.Close(); err != nil {
			return 0, fmt.Errorf("snapshot of %s.%s: %w", tr.schema, tr.name, err)
		}
	}
	if err := s.finish(ctx); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	r.log.Info("snapshot completed", "tables", len(tables), "rows", s.total, "consistent_point", res.ConsistentPoint)
	return cp, nil
}

// snapWriter writes snapshot rows in Kafka transactions of
// snapshotTxnRecords, holding one row back so the last can say
// snapshot "last", as Debezium's does.
type snapWriter struct {
	r       *run
	cp      uint64
	began   int64
	pending *table
	held    tuple
	has     bool
	open    bool
	inTxn   int64
	total   int
}

// Test seams (export_test.go): the rows per snapshot transaction, and
// a function called after each committed part of a snapshot.
var (
	snapshotTxnRecords atomic.Int64
	snapshotCommitted  atomic.Pointer[func(ctx context.Context, rows int)]
)

func init() { snapshotTxnRecords.Store(defaultSnapshotTxnRecords) }

func (s *snapWriter) row(ctx context.Context, t *table, vals [][]byte) error {
	if s.has {
		if err := s.emit(ctx, "true"); err != nil {
			return err
		}
	}
	// The reader reuses vals' memory for the next row.
	s.held.vals = s.held.vals[:0]
	for _, v := range vals {
		if v == nil {
			s.held.vals = append(s.held.vals, nil)
		} else {
			s.held.vals = append(s.held.vals, append([]byte{}, v...))
		}
	}
	s.pending, s.has = t, true
	return nil
}

func (s *snapWriter) emit(ctx context.Context, snap string) error {
	r := s.r
	if !s.open {
		if err := r.prod.BeginTransaction(); err != nil {
			return err
		}
		s.open = true
	}
	ev := event{op: 'r', after: &s.held, snapshot: snap, tsMicros: s.began, lsn: s.cp}
	key, err := r.enc.key(ctx, s.pending, &s.held)
	if err != nil {
		return fmt.Errorf("snapshot of %s.%s: %w", s.pending.schema, s.pending.name, err)
	}
	val, err := r.enc.value(ctx, s.pending, &ev, r.clk.Now().UnixMicro())
	if err != nil {
		return fmt.Errorf("snapshot of %s.%s: %w", s.pending.schema, s.pending.name, err)
	}
	r.prod.Produce(ctx, &kgo.Record{Topic: s.pending.topic, Key: key, Value: val}, r.promise)
	s.has = false
	s.inTxn++
	s.total++
	if s.inTxn >= snapshotTxnRecords.Load() {
		if err := r.commit(ctx, Offset{Snapshot: true}); err != nil {
			return err
		}
		s.counted()
		if h := snapshotCommitted.Load(); h != nil {
			(*h)(ctx, s.total)
		}
	}
	return nil
}

func (s *snapWriter) counted() {
	s.r.m.snapshotRows.WithLabelValues(s.r.name).Add(float64(s.inTxn))
	s.r.m.records.WithLabelValues(s.r.name, "r").Add(float64(s.inTxn))
	s.open, s.inTxn = false, 0
}

// finish writes the held row as the last and commits the snapshot's
// end: from here a restart streams from the consistent point.
func (s *snapWriter) finish(ctx context.Context) error {
	if s.has {
		if err := s.emit(ctx, "last"); err != nil {
			return err
		}
	}
	if !s.open {
		if err := s.r.prod.BeginTransaction(); err != nil {
			return err
		}
	}
	if err := s.r.commit(ctx, Offset{LSN: s.cp, SnapshotCompleted: true}); err != nil {
		return err
	}
	s.counted()
	return nil
}
