package pglog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// MetaStore is a sharedlog.MetaStore in one row of the chains table:
// (name, version, chain). CAS is an UPDATE ... WHERE version = expect (an
// INSERT ... ON CONFLICT DO NOTHING for the first chain), so the database
// picks exactly one winner per version. Safe for concurrent use.
type MetaStore struct {
	name string
	t    *tables
	// acquire returns a connection (or the pool) for one operation.
	acquire func(ctx context.Context) (execer, func(), error)

	mu struct {
		sync.Mutex
		ensured bool // the tables exist
	}
}

var _ sharedlog.MetaStore = (*MetaStore)(nil)

// execer is what the MetaStore needs of a pool or a connection.
type execer interface {
	querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// NewMetaStore returns the register name in the chains table that opts
// names, reached through pool, which the caller keeps and closes.
func NewMetaStore(pool *pgxpool.Pool, name string, opts Options) (*MetaStore, error) {
	ms, err := newMetaStore(name, opts)
	if err != nil {
		return nil, err
	}
	ms.acquire = func(context.Context) (execer, func(), error) { return pool, func() {}, nil }
	return ms, nil
}

// OpenMetaStoreURL returns the register of the VirtualLog a postgres://
// URL names (its log parameter). It holds no connection between calls:
// each Get or CAS connects and disconnects, so the store needs no Close
// (a VirtualLog touches its MetaStore only when reconfiguring or
// trimming).
func OpenMetaStoreURL(rawURL string) (*MetaStore, error) {
	tg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(tg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	ms, err := newMetaStore(tg.LogID, tg.Options)
	if err != nil {
		return nil, err
	}
	ms.acquire = func(ctx context.Context) (execer, func(), error) {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("pglog: MetaStore connect: %w", err)
		}
		return c, func() { c.Close(context.Background()) }, nil
	}
	return ms, nil
}

func newMetaStore(name string, opts Options) (*MetaStore, error) {
	if name == "" || len(name) > maxLogIDBytes {
		return nil, fmt.Errorf("%w: MetaStore name of %d bytes, want 1 to %d", ErrBadOptions, len(name), maxLogIDBytes)
	}
	t, err := newTables(opts.Schema, opts.TablePrefix)
	if err != nil {
		return nil, err
	}
	return &MetaStore{name: name, t: t}, nil
}

// conn returns a connection with the tables in place.
func (m *MetaStore) conn(ctx context.Context) (execer, func(), error) {
	q, release, err := m.acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	ensured := m.mu.ensured
	m.mu.Unlock()
	if !ensured {
		if err := m.t.ensure(ctx, q); err != nil {
			release()
			return nil, nil, err
		}
		m.mu.Lock()
		m.mu.ensured = true
		m.mu.Unlock()
	}
	return q, release, nil
}

func (m *MetaStore) Get(ctx context.Context) (sharedlog.Chain, error) {
	if err := ctx.Err(); err != nil {
		return sharedlog.Chain{}, err
	}
	q, release, err := m.conn(ctx)
	if err != nil {
		return sharedlog.Chain{}, err
	}
	defer release()
	return m.get(ctx, q)
}

func (m *MetaStore) get(ctx context.Context, q execer) (sharedlog.Chain, error) {
	var version int64
	var enc string
	err := q.QueryRow(ctx, `SELECT version, chain FROM `+m.t.chains+` WHERE name = $1`, m.name).Scan(&version, &enc)
	if errors.Is(err, pgx.ErrNoRows) {
		return sharedlog.Chain{}, nil
	}
	if err != nil {
		return sharedlog.Chain{}, fmt.Errorf("pglog: MetaStore %q get: %w", m.name, err)
	}
	c, err := sharedlog.DecodeChain([]byte(enc))
	if err != nil {
		return sharedlog.Chain{}, fmt.Errorf("pglog: MetaStore %q: %w", m.name, err)
	}
	if c.Version != uint64(version) {
		return sharedlog.Chain{}, fmt.Errorf("%w: MetaStore %q row has version %d but holds chain version %d",
			sharedlog.ErrInvalidChain, m.name, version, c.Version)
	}
	return c, nil
}

func (m *MetaStore) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sharedlog.CheckCAS(expect, next); err != nil {
		return err
	}
	enc, err := sharedlog.EncodeChain(next)
	if err != nil {
		return err
	}
	q, release, err := m.conn(ctx)
	if err != nil {
		return err
	}
	defer release()
	var tag pgconn.CommandTag
	if expect == 0 {
		tag, err = q.Exec(ctx, `INSERT INTO `+m.t.chains+` (name, version, chain) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
			m.name, int64(next.Version), string(enc))
	} else {
		tag, err = q.Exec(ctx, `UPDATE `+m.t.chains+` SET version = $2, chain = $3 WHERE name = $1 AND version = $4`,
			m.name, int64(next.Version), string(enc), int64(expect))
	}
	if err != nil {
		return fmt.Errorf("pglog: MetaStore %q CAS: %w", m.name, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// Lost: report what is stored, best effort.
	cur, gerr := m.get(ctx, q)
	if gerr != nil {
		return fmt.Errorf("CAS expecting version %d: %w", expect, sharedlog.ErrConflict)
	}
	return fmt.Errorf("CAS expecting version %d, stored %d: %w", expect, cur.Version, sharedlog.ErrConflict)
}
