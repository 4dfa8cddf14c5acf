package jdbcsink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// OffsetsTable is the sink's own table in the target database: per
// connector and partition consumed, the offset of the next record to
// write. It changes only in the transaction that writes the rows of
// the records before that offset.
const OffsetsTable = "strand_connect_offsets"

// errFenced: the offsets table is not what this task last wrote or
// read, so another task of the same connector (a placement move in
// progress) wrote in between. The transaction rolled back; the task
// starts again from the table.
var errFenced = errors.New("jdbcsink: the offsets in the target moved under this task (another task of the connector wrote)")

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// absent is the expected offset of a partition with no row in the
// offsets table yet.
const absent = -1

// target is the database a sink writes to.
type target struct {
	cfg       *Config
	d         dialect
	db        *sql.DB
	connector string
	// tables caches the columns of the tables written to, read from
	// information_schema: column name to family. A table known not to
	// exist is absent. Refreshed after DDL and on every new session.
	tables map[string]map[string]family
}

func openTarget(ctx context.Context, cfg *Config, connector string) (*target, error) {
	d := dialectOf(cfg.Dialect)
	db, err := sql.Open(d.driver(), d.dsn(cfg))
	if err != nil {
		return nil, err
	}
	// One connection writes; a second serves the schema queries made
	// while none is open. Bounded, as every pool here is.
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(connMaxIdle)
	t := &target{cfg: cfg, d: d, db: db, connector: connector, tables: map[string]map[string]family{}}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("jdbcsink: connect to %s://%s:%d/%s: %w", cfg.Dialect, cfg.Host, cfg.Port, cfg.Database, err)
	}
	return t, nil
}

func (t *target) close() { t.db.Close() }

func (t *target) ensureOffsetsTable(ctx context.Context) error {
	q := t.d.quote
	text := "VARCHAR(255)"
	ddl := "CREATE TABLE IF NOT EXISTS " + q(OffsetsTable) + " (" +
		q("connector") + " " + text + " NOT NULL, " +
		q("topic") + " " + text + " NOT NULL, " +
		q("kafka_partition") + " INTEGER NOT NULL, " +
		q("next_offset") + " BIGINT NOT NULL, " +
		"PRIMARY KEY (" + q("connector") + ", " + q("topic") + ", " + q("kafka_partition") + "))"
	if err := t.ddl(ctx, ddl); err != nil {
		return fmt.Errorf("jdbcsink: create %s: %w", OffsetsTable, err)
	}
	return nil
}

// ddl runs an idempotent statement (IF NOT EXISTS). PostgreSQL's IF
// NOT EXISTS is checked before the catalog insert, so two sessions
// creating the same table at once (two tasks of a connector during a
// move) can still collide on the catalog's unique index: that error
// means the object now exists, which is all the statement asked.
func (t *target) ddl(ctx context.Context, stmt string) error {
	_, err := t.db.ExecContext(ctx, stmt)
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pe.Code {
		case "23505", "42P07", "42701": // unique_violation, duplicate_table, duplicate_column
			return nil
		}
	}
	return err
}

// readOffsets reads the connector's committed offsets.
func (t *target) readOffsets(ctx context.Context) (map[tp]int64, error) {
	rows, err := t.db.QueryContext(ctx, t.offsetsSelect(false), t.connector)
	if err != nil {
		return nil, fmt.Errorf("jdbcsink: read %s: %w", OffsetsTable, err)
	}
	return scanOffsets(rows)
}

func (t *target) offsetsSelect(forUpdate bool) string {
	q := t.d.quote
	s := "SELECT " + q("topic") + ", " + q("kafka_partition") + ", " + q("next_offset") +
		" FROM " + q(OffsetsTable) + " WHERE " + q("connector") + " = " + t.d.placeholder(1)
	if forUpdate {
		s += " FOR UPDATE"
	}
	return s
}

func scanOffsets(rows *sql.Rows) (map[tp]int64, error) {
	defer rows.Close()
	m := map[tp]int64{}
	for rows.Next() {
		var p tp
		var off int64
		if err := rows.Scan(&p.topic, &p.partition, &off); err != nil {
			return nil, err
		}
		if off < 0 {
			return nil, fmt.Errorf("jdbcsink: %s holds offset %d for %s/%d", OffsetsTable, off, p.topic, p.partition)
		}
		m[p] = off
	}
	return m, rows.Err()
}

// describe reads a table's columns, or nil if there is no such table.
func (t *target) describe(ctx context.Context, table string) (map[string]family, error) {
	if cols, ok := t.tables[table]; ok {
		return cols, nil
	}
	rows, err := t.db.QueryContext(ctx, t.d.columnsQuery(), table)
	if err != nil {
		return nil, fmt.Errorf("jdbcsink: read the columns of %q: %w", table, err)
	}
	defer rows.Close()
	var cols map[string]family
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		if cols == nil {
			cols = map[string]family{}
		}
		cols[name] = t.d.family(strings.ToLower(typ))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if cols != nil {
		t.tables[table] = cols
	}
	return cols, nil
}

// tableShape is what a batch needs of one table: every column its
// rows name, with the kind they say, and the key.
type tableShape struct {
	cols    []column
	index   map[string]int
	keyCols []column
	rows    bool // some change writes a row (not only deletes)
}

func (s *tableShape) add(c column) {
	if i, ok := s.index[c.name]; ok {
		// A kind known beats null; an integer column that also saw
		// fractions is a float one.
		switch old := s.cols[i].kind; {
		case old == kNull:
			s.cols[i] = c
		case old == kInt64 && c.kind == kFloat64:
			s.cols[i].kind = kFloat64
		}
		return
	}
	s.index[c.name] = len(s.cols)
	s.cols = append(s.cols, c)
}

// prepare makes the tables fit the batch, outside the batch's
// transaction (MariaDB commits a transaction at any DDL; the DDL is
// idempotent, so a batch that then rolls back leaves nothing wrong):
// creates a missing table (auto.create, schema.evolution=basic), adds
// a missing column (schema.evolution=basic), and refuses the batch
// with an error naming table and column when a table cannot take it.
func (t *target) prepare(ctx context.Context, changes []*change) error {
	shapes := map[string]*tableShape{}
	var order []string
	for _, ch := range changes {
		s := shapes[ch.table]
		if s == nil {
			s = &tableShape{index: map[string]int{}}
			shapes[ch.table] = s
			order = append(order, ch.table)
		}
		if s.keyCols == nil {
			s.keyCols = ch.keyCols
		}
		if !ch.delete {
			s.rows = true
			for _, c := range ch.cols {
				s.add(c)
			}
		}
	}
	for _, table := range order {
		if err := t.prepareTable(ctx, table, shapes[table]); err != nil {
			return err
		}
	}
	return nil
}

func (t *target) prepareTable(ctx context.Context, table string, s *tableShape) error {
	have, err := t.describe(ctx, table)
	if err != nil {
		return err
	}
	if have == nil {
		if !s.rows {
			return nil // deletes from a table that is not there: nothing to do.
		}
		if !t.cfg.CreateTables {
			return fmt.Errorf("jdbcsink: table %q does not exist; create it, or set schema.evolution=basic (or auto.create=true) to have the sink create it", table)
		}
		if err := t.createTable(ctx, table, s); err != nil {
			return err
		}
		delete(t.tables, table)
		if have, err = t.describe(ctx, table); err != nil {
			return err
		}
		if have == nil {
			return fmt.Errorf("jdbcsink: table %q created but not found in information_schema", table)
		}
	}
	added := false
	for _, c := range s.cols {
		f, ok := have[c.name]
		if !ok {
			if !t.cfg.AddColumns {
				return fmt.Errorf("jdbcsink: table %q has no column %q, which the records have; add it, or set schema.evolution=basic to have the sink add it", table, c.name)
			}
			ddl := "ALTER TABLE " + t.d.quote(table) + " " + t.d.addColumn() + " " + t.d.quote(c.name) + " " + t.d.columnType(c, false)
			if err := t.ddl(ctx, ddl); err != nil {
				return fmt.Errorf("jdbcsink: add column %q to table %q: %w", c.name, table, err)
			}
			added = true
			continue
		}
		if !fits(c.kind, f) {
			return fmt.Errorf("jdbcsink: table %q column %q cannot hold the records' %s values (its type is of another kind); change the column or the records", table, c.name, c.kind)
		}
	}
	for _, k := range s.keyCols {
		if _, ok := have[k.name]; !ok && !added {
			return fmt.Errorf("jdbcsink: table %q has no column %q, a primary key column of the records", table, k.name)
		}
	}
	if added {
		delete(t.tables, table)
		_, err = t.describe(ctx, table)
	}
	return err
}

func (t *target) createTable(ctx context.Context, table string, s *tableShape) error {
	var defs, keys []string
	for _, c := range s.cols {
		key := false
		for _, k := range s.keyCols {
			key = key || k.name == c.name
		}
		def := t.d.quote(c.name) + " " + t.d.columnType(c, key)
		if key {
			def += " NOT NULL"
			keys = append(keys, t.d.quote(c.name))
		}
		defs = append(defs, def)
	}
	if len(s.keyCols) > 0 {
		defs = append(defs, "PRIMARY KEY ("+strings.Join(keys, ", ")+")")
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + t.d.quote(table) + " (" + strings.Join(defs, ", ") + ")"
	if err := t.ddl(ctx, ddl); err != nil {
		return fmt.Errorf("jdbcsink: create table %q: %w", table, err)
	}
	return nil
}

// written counts what a commit wrote, by operation.
type written struct{ inserted, upserted, updated, deleted int }

// commit writes changes and the partitions' next offsets in one
// transaction. expected are the offsets this task believes the table
// holds for every partition it consumes (absent: no row); if the
// table, locked, says otherwise, the transaction rolls back with
// errFenced.
func (t *target) commit(ctx context.Context, changes []*change, expected, next map[tp]int64) (w written, err error) {
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return w, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
			if isConflict(err) {
				err = fmt.Errorf("%w: %v", errFenced, err)
			}
		}
	}()
	rows, err := tx.QueryContext(ctx, t.offsetsSelect(true), t.connector)
	if err != nil {
		return w, err
	}
	stored, err := scanOffsets(rows)
	if err != nil {
		return w, err
	}
	for p, want := range expected {
		got, ok := stored[p]
		if !ok {
			got = absent
		}
		if got != want {
			return w, fmt.Errorf("%w: %s/%d is at %d in %s, this task expected %d", errFenced, p.topic, p.partition, got, OffsetsTable, want)
		}
	}
	if w, err = t.apply(ctx, tx, changes); err != nil {
		return w, err
	}
	q, ph := t.d.quote, t.d.placeholder
	for p, off := range next {
		if expected[p] == absent {
			_, err = tx.ExecContext(ctx, "INSERT INTO "+q(OffsetsTable)+" ("+q("connector")+", "+q("topic")+", "+
				q("kafka_partition")+", "+q("next_offset")+") VALUES ("+ph(1)+", "+ph(2)+", "+ph(3)+", "+ph(4)+")",
				t.connector, p.topic, p.partition, off)
		} else {
			_, err = tx.ExecContext(ctx, "UPDATE "+q(OffsetsTable)+" SET "+q("next_offset")+" = "+ph(1)+
				" WHERE "+q("connector")+" = "+ph(2)+" AND "+q("topic")+" = "+ph(3)+" AND "+q("kafka_partition")+" = "+ph(4),
				off, t.connector, p.topic, p.partition)
		}
		if err != nil {
			return w, fmt.Errorf("jdbcsink: write %s: %w", OffsetsTable, err)
		}
	}
	return w, tx.Commit()
}

// isConflict reports errors that mean another transaction got there
// first: a unique violation on the offsets table (both inserted a
// partition's first row), a deadlock or serialization failure.
func isConflict(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code == "23505" || pe.Code == "40P01" || pe.Code == "40001"
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		return me.Number == 1062 || me.Number == 1213 || me.Number == 1205
	}
	return false
}

// keyState is a key's net change within a batch: whether a delete is
// among its changes, and the last row written after it (nil: the key
// ends deleted). Applying the delete then the row is the same as
// applying every change in order.
type keyState struct {
	deleted bool
	row     *change
}

// apply writes a batch's changes, table by table in first-seen order.
// Keyed changes are coalesced per key (keeping each key's order: its
// net effect); unkeyed rows are inserted in order.
func (t *target) apply(ctx context.Context, tx *sql.Tx, changes []*change) (written, error) {
	var w written
	type tableBatch struct {
		keys    []string
		states  map[string]*keyState
		unkeyed []*change
	}
	batches := map[string]*tableBatch{}
	var order []string
	for _, ch := range changes {
		b := batches[ch.table]
		if b == nil {
			b = &tableBatch{states: map[string]*keyState{}}
			batches[ch.table] = b
			order = append(order, ch.table)
		}
		if ch.keyCols == nil {
			b.unkeyed = append(b.unkeyed, ch)
			continue
		}
		k := ch.keyString()
		st := b.states[k]
		if st == nil {
			st = &keyState{}
			b.states[k] = st
			b.keys = append(b.keys, k)
		}
		if ch.delete {
			st.deleted, st.row = true, nil
		} else {
			st.row = ch
		}
	}
	for _, table := range order {
		b := batches[table]
		if _, err := t.describe(ctx, table); err != nil {
			return w, err
		}
		var dels, rows []*change
		for _, k := range b.keys {
			st := b.states[k]
			if st.deleted {
				dels = append(dels, t.deleteOf(st, k, changes))
			}
			if st.row != nil {
				rows = append(rows, st.row)
			}
		}
		if len(dels) > 0 && t.tables[table] != nil {
			if err := t.deleteRows(ctx, tx, table, dels); err != nil {
				return w, err
			}
			w.deleted += len(dels)
		}
		rows = append(rows, b.unkeyed...)
		n, err := t.writeRows(ctx, tx, table, rows)
		if err != nil {
			return w, err
		}
		switch t.cfg.InsertMode {
		case ModeInsert:
			w.inserted += n
		case ModeUpsert:
			w.upserted += n
		case ModeUpdate:
			w.updated += n
		}
	}
	return w, nil
}

// deleteOf finds a change carrying the key k (its columns and values).
func (t *target) deleteOf(st *keyState, k string, changes []*change) *change {
	if st.row != nil {
		return st.row
	}
	for i := len(changes) - 1; i >= 0; i-- {
		if changes[i].keyCols != nil && changes[i].keyString() == k {
			return changes[i]
		}
	}
	panic("jdbcsink: a coalesced key with no change")
}

// deleteRows deletes by key: WHERE (k1, k2) IN ((...), (...)), as many
// keys per statement as the parameter limit allows.
func (t *target) deleteRows(ctx context.Context, tx *sql.Tx, table string, dels []*change) error {
	keyCols := dels[0].keyCols
	var names []string
	for _, c := range keyCols {
		names = append(names, t.d.quote(c.name))
	}
	per := max(1, t.d.maxParams()/len(keyCols))
	for start := 0; start < len(dels); start += per {
		chunk := dels[start:min(len(dels), start+per)]
		var b strings.Builder
		b.WriteString("DELETE FROM " + t.d.quote(table) + " WHERE (" + strings.Join(names, ", ") + ") IN (")
		args := make([]any, 0, len(chunk)*len(keyCols))
		for i, ch := range chunk {
			if len(ch.key) != len(keyCols) {
				return fmt.Errorf("jdbcsink: table %q: a key with %d columns among keys of %d", table, len(ch.key), len(keyCols))
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(")
			for j, v := range ch.key {
				if j > 0 {
					b.WriteString(", ")
				}
				args = append(args, v)
				b.WriteString(t.d.placeholder(len(args)))
			}
			b.WriteString(")")
		}
		b.WriteString(")")
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("jdbcsink: delete from %q: %w", table, err)
		}
	}
	return nil
}

// maxStatementBytes bounds the values of one multi-row statement, so
// that it stays well below the servers' packet limits (MariaDB's
// max_allowed_packet is 16 MiB by default).
const maxStatementBytes = 4 << 20

// writeRows inserts (or upserts, or updates) rows, consecutive rows
// with the same columns in one multi-row statement.
func (t *target) writeRows(ctx context.Context, tx *sql.Tx, table string, rows []*change) (int, error) {
	n := 0
	for start := 0; start < len(rows); {
		sig := signature(rows[start])
		end, params, size := start, 0, 0
		for end < len(rows) && signature(rows[end]) == sig &&
			params+len(rows[end].vals) <= t.d.maxParams() && (end == start || size < maxStatementBytes) {
			params += len(rows[end].vals)
			size += rowSize(rows[end])
			end++
		}
		if t.cfg.InsertMode == ModeUpdate {
			for _, r := range rows[start:end] {
				if err := t.update(ctx, tx, table, r); err != nil {
					return n, err
				}
			}
		} else if err := t.insert(ctx, tx, table, rows[start:end]); err != nil {
			return n, err
		}
		n += end - start
		start = end
	}
	return n, nil
}

func signature(ch *change) string {
	var b strings.Builder
	for _, c := range ch.cols {
		b.WriteString(c.name)
		b.WriteByte(0)
	}
	return b.String()
}

func rowSize(ch *change) int {
	n := 0
	for _, v := range ch.vals {
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += 2 * len(v)
		default:
			n += 16
		}
	}
	return n
}

func (t *target) insert(ctx context.Context, tx *sql.Tx, table string, rows []*change) error {
	var names []string
	for _, c := range rows[0].cols {
		names = append(names, t.d.quote(c.name))
	}
	var b strings.Builder
	b.WriteString("INSERT INTO " + t.d.quote(table) + " (" + strings.Join(names, ", ") + ") VALUES ")
	args := make([]any, 0, len(rows)*len(names))
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j, v := range r.vals {
			if j > 0 {
				b.WriteString(", ")
			}
			args = append(args, v)
			b.WriteString(t.d.placeholder(len(args)))
		}
		b.WriteString(")")
	}
	if t.cfg.InsertMode == ModeUpsert {
		var cols, keys []string
		for _, c := range rows[0].cols {
			cols = append(cols, c.name)
		}
		for _, c := range rows[0].keyCols {
			keys = append(keys, c.name)
		}
		b.WriteString(t.d.upsert(table, keys, cols))
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("jdbcsink: write %d rows into %q: %w", len(rows), table, err)
	}
	return nil
}

// update is insert.mode=update: the row's non-key columns set where the
// key matches; no row, no change (as Debezium's update mode).
func (t *target) update(ctx context.Context, tx *sql.Tx, table string, r *change) error {
	var set, where []string
	var args []any
	for i, c := range r.cols {
		if slicesContainsCol(r.keyCols, c.name) {
			continue
		}
		args = append(args, r.vals[i])
		set = append(set, t.d.quote(c.name)+" = "+t.d.placeholder(len(args)))
	}
	if len(set) == 0 {
		return nil
	}
	for i, c := range r.keyCols {
		args = append(args, r.key[i])
		where = append(where, t.d.quote(c.name)+" = "+t.d.placeholder(len(args)))
	}
	q := "UPDATE " + t.d.quote(table) + " SET " + strings.Join(set, ", ") + " WHERE " + strings.Join(where, " AND ")
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("jdbcsink: update %q: %w", table, err)
	}
	return nil
}

func slicesContainsCol(cols []column, name string) bool {
	for _, c := range cols {
		if c.name == name {
			return true
		}
	}
	return false
}
