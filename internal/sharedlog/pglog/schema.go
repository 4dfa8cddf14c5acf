package pglog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"regexp"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// identPattern is what a schema or table prefix may be: a plain lower-case
// identifier, so it needs no quoting rules of its own and fits in
// PostgreSQL's 63-byte names with the suffixes added.
var identPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// tables holds the quoted, schema-qualified names of the three tables and
// the SQL built from them.
type tables struct {
	tails, entries, chains string
	// lockKey is the advisory lock that serializes schema creation, so
	// processes creating the tables at once don't trip over each other
	// (CREATE TABLE IF NOT EXISTS is not safe under concurrency).
	lockKey int64
	schema  string // quoted, "" for the search path
	// name is schema.prefix unquoted (prefix alone for the search
	// path): what the loglets' NOTIFY channels start with.
	name string

	appendSQL, stateSQL, tailSQL, readSQL string
	fenceSQL, findBatchSQL                string
	sealSQL, trimSQL, deleteSQL           string
	createTailSQL                         string
}

func newTables(schema, prefix string) (*tables, error) {
	if prefix == "" {
		prefix = DefaultTablePrefix
	}
	if !identPattern.MatchString(prefix) {
		return nil, fmt.Errorf("%w: table prefix %q: want %s", ErrBadOptions, prefix, identPattern)
	}
	if schema != "" && !identPattern.MatchString(schema) {
		return nil, fmt.Errorf("%w: schema %q: want %s", ErrBadOptions, schema, identPattern)
	}
	name := func(suffix string) string {
		if schema == "" {
			return pgx.Identifier{prefix + suffix}.Sanitize()
		}
		return pgx.Identifier{schema, prefix + suffix}.Sanitize()
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "strand pglog schema %s.%s", schema, prefix)
	t := &tables{
		tails:   name("_tails"),
		entries: name("_entries"),
		chains:  name("_chains"),
		lockKey: int64(h.Sum64()),
	}
	t.name = prefix
	if schema != "" {
		t.schema = pgx.Identifier{schema}.Sanitize()
		t.name = schema + "." + prefix
	}
	t.buildSQL()
	return t, nil
}

// The tables:
//
//	tails    one row per loglet: next (its tail), trimmed, sealed, epoch.
//	         Every append updates this row, so its lock orders appends.
//	entries  (log_id, pos) -> data, and the random id of the batch that
//	         wrote the entry, which resolves an append whose commit
//	         reply was lost.
//	chains   one row per VirtualLog: its MetaStore register.
func (t *tables) createSQL() []string {
	var out []string
	if t.schema != "" {
		out = append(out, `CREATE SCHEMA IF NOT EXISTS `+t.schema)
	}
	return append(out,
		`CREATE TABLE IF NOT EXISTS `+t.tails+` (
			log_id  text    PRIMARY KEY,
			next    bigint  NOT NULL DEFAULT 0 CHECK (next >= 0),
			trimmed bigint  NOT NULL DEFAULT 0 CHECK (trimmed >= 0 AND trimmed <= next),
			sealed  boolean NOT NULL DEFAULT false,
			epoch   bigint  NOT NULL DEFAULT 0
		)`,
		`CREATE TABLE IF NOT EXISTS `+t.entries+` (
			log_id text   NOT NULL,
			pos    bigint NOT NULL,
			batch  bytea  NOT NULL,
			data   bytea  NOT NULL,
			PRIMARY KEY (log_id, pos)
		)`,
		`CREATE TABLE IF NOT EXISTS `+t.chains+` (
			name    text   PRIMARY KEY,
			version bigint NOT NULL CHECK (version > 0),
			chain   text   NOT NULL
		)`,
	)
}

func (t *tables) buildSQL() {
	// One statement, so one round trip and one implicit transaction: the
	// UPDATE takes the tails row lock and holds it to commit, so appends
	// to one log commit in position order, and a snapshot that sees the
	// tail at n sees every entry below n. When the UPDATE waits for that
	// lock, READ COMMITTED re-reads the row it waited for, so it numbers
	// from the newest next and re-checks sealed and epoch. Zero rows back
	// means the row is sealed or the epoch moved on (a fence, see
	// fenceSQL): nothing was written, and nobody is notified. The
	// notification (the second column, void) goes out when the
	// transaction commits, once per batch.
	t.appendSQL = `WITH t AS (
			UPDATE ` + t.tails + ` SET next = next + $2
			WHERE log_id = $1 AND NOT sealed AND epoch = $3
			RETURNING next - $2 AS first
		), ins AS (
			INSERT INTO ` + t.entries + ` (log_id, pos, batch, data)
			SELECT $1, t.first + e.ord - 1, $4, e.data
			FROM t, unnest($5::bytea[]) WITH ORDINALITY AS e(data, ord)
		)
		SELECT first, pg_notify($6, (first + $2)::text) FROM t`
	t.stateSQL = `SELECT next, trimmed, sealed, epoch FROM ` + t.tails + ` WHERE log_id = $1`
	t.tailSQL = `SELECT next, sealed FROM ` + t.tails + ` WHERE log_id = $1`
	// One statement, so one snapshot: the tail and the entries agree.
	// The innermost query takes at most $4 entries; the window then
	// keeps those that start below $5 bytes, so a read is bounded in
	// bytes yet returns at least one entry. octet_length does not
	// detoast, so the dropped entries are never fetched.
	t.readSQL = `SELECT t.next, t.trimmed, w.pos, w.data
		FROM ` + t.tails + ` t
		LEFT JOIN LATERAL (
			SELECT s.pos, s.data FROM (
				SELECT l.pos, l.data,
					sum(octet_length(l.data)) OVER (ORDER BY l.pos) - octet_length(l.data) AS before
				FROM (
					SELECT pos, data FROM ` + t.entries + `
					WHERE log_id = t.log_id AND pos >= $2 AND pos < LEAST($3::bigint, t.next) AND $2 >= t.trimmed
					ORDER BY pos LIMIT $4
				) l
			) s
			WHERE s.before < $5
		) w ON true
		WHERE t.log_id = $1
		ORDER BY w.pos`
	// The fence of an ambiguous append: bumping the epoch takes the row
	// lock, so it waits for the lost append if that is still running,
	// and every append statement still on its way (a "zombie" the server
	// has yet to read) now matches no row. After it commits, findBatch
	// tells for certain whether the batch landed.
	t.fenceSQL = `UPDATE ` + t.tails + ` SET epoch = epoch + 1 WHERE log_id = $1 RETURNING next, trimmed, sealed, epoch`
	t.findBatchSQL = `SELECT count(*), COALESCE(min(pos), 0) FROM ` + t.entries + ` WHERE log_id = $1 AND pos >= $2 AND batch = $3`
	t.sealSQL = `UPDATE ` + t.tails + ` SET sealed = true WHERE log_id = $1 RETURNING next, pg_notify($2, next || ' sealed')`
	t.trimSQL = `UPDATE ` + t.tails + ` SET trimmed = GREATEST(trimmed, LEAST($2::bigint, next)) WHERE log_id = $1 RETURNING trimmed`
	t.deleteSQL = `DELETE FROM ` + t.entries + ` WHERE log_id = $1 AND pos < $2`
	t.createTailSQL = `INSERT INTO ` + t.tails + ` (log_id) VALUES ($1) ON CONFLICT (log_id) DO NOTHING`
}

// maxChannelBytes is the longest NOTIFY channel: a channel is an
// identifier, at most NAMEDATALEN-1 bytes, and pg_notify refuses a
// longer one.
const maxChannelBytes = 63

// channel names a loglet's NOTIFY channel: the tables' name and the log
// id, "strand_log/agents/seg-00000001". Channels are per database, so
// the name keeps apart loglets of other tables. One over 63 bytes keeps
// its start, for people reading it, and ends in a hash of the whole. Two
// loglets whose channels collide only wake each other's waiters for
// nothing: a notification is a hint to read the tail.
func (t *tables) channel(logID string) string {
	name := t.name + "/" + logID
	if len(name) <= maxChannelBytes {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "#" + hex.EncodeToString(sum[:8])
	keep := name[:maxChannelBytes-len(suffix)]
	// Not a character cut in two: the server checks the encoding.
	for len(keep) > 0 && !utf8.ValidString(keep) {
		keep = keep[:len(keep)-1]
	}
	return keep + suffix
}

// querier is what schema setup needs of a pool or a connection.
type querier interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ensure creates the tables unless they all exist.
func (t *tables) ensure(ctx context.Context, q querier) error {
	var ok bool
	err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL`,
		t.tails, t.entries, t.chains).Scan(&ok)
	if err != nil {
		return fmt.Errorf("pglog: checking tables: %w", err)
	}
	if ok {
		return nil
	}
	tx, err := q.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pglog: creating tables: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, t.lockKey); err != nil {
		return fmt.Errorf("pglog: creating tables: %w", err)
	}
	for _, s := range t.createSQL() {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("pglog: creating tables: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglog: creating tables: %w", err)
	}
	return nil
}
