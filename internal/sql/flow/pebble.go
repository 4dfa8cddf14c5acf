package flow

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// PebbleStore is a Store in a Pebble database, under a key prefix so
// several dataflows (and other users) can share one database. The
// current epoch is an indexed batch: reads see its writes, Commit
// applies it atomically (synced when Sync), so after a crash the state
// is the last committed epoch's. Memory is bounded by Pebble's block
// cache and memtables (the caller's pebble.Options) plus one epoch's
// batch: state larger than memory stays on disk.
type PebbleStore struct {
	db     *pebble.DB
	prefix []byte
	sync   bool
	batch  *pebble.Batch
	buf    []byte
}

// NewPebbleStore returns a Store over db's keys beginning with prefix.
// sync makes each Commit wait for the write-ahead log's fsync; a
// dataflow whose input offsets commit elsewhere first may go without.
func NewPebbleStore(db *pebble.DB, prefix []byte, sync bool) *PebbleStore {
	return &PebbleStore{db: db, prefix: bytes.Clone(prefix), sync: sync, batch: db.NewIndexedBatch()}
}

func (s *PebbleStore) key(k []byte) []byte {
	s.buf = append(append(s.buf[:0], s.prefix...), k...)
	return s.buf
}

func (s *PebbleStore) Get(key []byte) ([]byte, bool, error) {
	return pebbleGet(s.batch.Get(s.key(key)))
}

func pebbleGet(v []byte, closer interface{ Close() error }, err error) ([]byte, bool, error) {
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := bytes.Clone(v)
	return out, true, closer.Close()
}

func (s *PebbleStore) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	return pebbleScan(s.batch.NewIter, s.prefix, lower, upper, reverse, fn)
}

func pebbleScan(newIter func(*pebble.IterOptions) (*pebble.Iterator, error), prefix, lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) (err error) {
	opts := &pebble.IterOptions{LowerBound: append(bytes.Clone(prefix), lower...)}
	if upper != nil {
		opts.UpperBound = append(bytes.Clone(prefix), upper...)
	} else {
		opts.UpperBound = prefixEnd(prefix)
	}
	it, err := newIter(opts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	n := len(prefix)
	valid := it.First()
	if reverse {
		valid = it.Last()
	}
	for ; valid; valid = advance(it, reverse) {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		more, err := fn(it.Key()[n:], v)
		if err != nil || !more {
			return err
		}
	}
	return it.Error()
}

func advance(it *pebble.Iterator, reverse bool) bool {
	if reverse {
		return it.Prev()
	}
	return it.Next()
}

func (s *PebbleStore) Set(key, value []byte) error { return s.batch.Set(s.key(key), value, nil) }
func (s *PebbleStore) Delete(key []byte) error     { return s.batch.Delete(s.key(key), nil) }

func (s *PebbleStore) Commit() error {
	opts := pebble.NoSync
	if s.sync {
		opts = pebble.Sync
	}
	if err := s.batch.Commit(opts); err != nil {
		return err
	}
	if err := s.batch.Close(); err != nil {
		return err
	}
	s.batch = s.db.NewIndexedBatch()
	return nil
}

func (s *PebbleStore) Rollback() error {
	err := s.batch.Close()
	s.batch = s.db.NewIndexedBatch()
	return err
}

// Close discards an uncommitted epoch; the database stays open (it is
// the caller's).
func (s *PebbleStore) Close() error { return s.batch.Close() }

func (s *PebbleStore) Committed() Reader { return pebbleCommitted{s.db, s.prefix} }

// pebbleCommitted reads the database itself: each read sees a committed
// epoch (a batch commits atomically), and may run concurrently with the
// writer. A read of several keys may see two epochs; a caller wanting
// one snapshot across reads takes one from the database.
type pebbleCommitted struct {
	db     *pebble.DB
	prefix []byte
}

func (r pebbleCommitted) Get(key []byte) ([]byte, bool, error) {
	return pebbleGet(r.db.Get(append(bytes.Clone(r.prefix), key...)))
}

func (r pebbleCommitted) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	return pebbleScan(r.db.NewIter, r.prefix, lower, upper, reverse, fn)
}
