package source

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/sql/types"
)

// The upsert store keeps each key's current row, so a new value can
// retract the row it replaces. A compacted topic can hold more keys than
// memory, so it is a Pebble database in a directory the caller gives:
//
//	'r' | partition (4, BE) | key bytes  ->  types.AppendRow(row)
//	'o' | partition (4, BE)              ->  next offset (8, BE)
//
// Keys are per partition: a task reads one partition, and a key's
// records are ordered only within one. A poll's updates and the offsets
// they reach are one batch, committed atomically (not synced: what a
// crash loses is a suffix, and the offsets say which), so the rows
// always match the offset stored beside them.
type upsertStore struct {
	db *pebble.DB
}

// upsertCacheBytes bounds the block cache: the store is read a key at a
// time, and the OS page cache does the rest.
const upsertCacheBytes = 8 << 20

func openUpsertStore(dir string) (*upsertStore, error) {
	if dir == "" {
		return nil, errors.New("source: an upsert source needs a state directory")
	}
	cache := pebble.NewCache(upsertCacheBytes)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, MemTableSize: 16 << 20, Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("source: upsert state: %w", err)
	}
	return &upsertStore{db: db}, nil
}

// quietLogger keeps Pebble's routine messages (WAL replays) out of the
// agent's log; what fails reaches the Reader as an error.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("source: upsert state: "+format, args...))
}

func (s *upsertStore) close() error { return s.db.Close() }

func rowKey(p int32, key []byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'r'}, uint32(p))
	return append(b, key...)
}

func offsetKey(p int32) []byte { return binary.BigEndian.AppendUint32([]byte{'o'}, uint32(p)) }

// offset is the next offset the stored rows of p reflect; false if none
// was stored.
func (s *upsertStore) offset(p int32) (int64, bool, error) {
	v, closer, err := s.db.Get(offsetKey(p))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, false, errors.New("source: upsert state: corrupt offset")
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

// wipe forgets p's rows and offset.
func (s *upsertStore) wipe(p int32) error {
	b := s.db.NewBatch()
	if err := b.DeleteRange(rowKey(p, nil), rowKey(p+1, nil), nil); err != nil {
		return err
	}
	if err := b.Delete(offsetKey(p), nil); err != nil {
		return err
	}
	return b.Commit(pebble.NoSync)
}

// upsertBatch is one poll's updates, read through by later records of
// the same poll.
type upsertBatch struct {
	b *pebble.Batch
}

func (s *upsertStore) batch() *upsertBatch { return &upsertBatch{b: s.db.NewIndexedBatch()} }

// get is key's current row in p.
func (u *upsertBatch) get(p int32, key []byte) (types.Row, bool, error) {
	v, closer, err := u.b.Get(rowKey(p, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	row, rest, err := types.DecodeRow(v)
	if err == nil && len(rest) > 0 {
		err = errors.New("trailing bytes")
	}
	if err != nil {
		return nil, false, fmt.Errorf("source: upsert state: corrupt row: %w", err)
	}
	return row, true, nil
}

func (u *upsertBatch) put(p int32, key []byte, row types.Row) error {
	return u.b.Set(rowKey(p, key), types.AppendRow(nil, row), nil)
}

func (u *upsertBatch) del(p int32, key []byte) error { return u.b.Delete(rowKey(p, key), nil) }

func (u *upsertBatch) setOffset(p int32, next int64) error {
	return u.b.Set(offsetKey(p), binary.BigEndian.AppendUint64(nil, uint64(next)), nil)
}

func (u *upsertBatch) commit() error { return u.b.Commit(pebble.NoSync) }
func (u *upsertBatch) close()        { _ = u.b.Close() }
