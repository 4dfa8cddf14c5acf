package flow

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/RaduBerinde/btreemap"
)

// Reader reads an ordered key-value state. Keys order as bytes.Compare.
type Reader interface {
	// Get returns key's value. The caller must not modify the returned
	// slice; it stays valid (a store never writes into a slice it
	// returned), so stores can return cached values without a copy.
	Get(key []byte) (value []byte, ok bool, err error)
	// Scan calls fn for each key in [lower, upper) in ascending order,
	// or descending when reverse; a nil upper is no bound. key and value
	// are valid only during the call, and fn must not write to the
	// store: collect what to change, then change it. fn returns false
	// to stop.
	Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error
}

// Store is the state of one dataflow (its operators' state and its
// view's index), written by one goroutine, the Driver. Writes since the
// last Commit form the current epoch: reads through the Store see them,
// Commit makes them durable together, Rollback discards them, so a
// crash or an error leaves the state at an epoch boundary.
type Store interface {
	Reader
	// Set and Delete write to the current epoch; the store copies key
	// and value.
	Set(key, value []byte) error
	Delete(key []byte) error
	// Commit makes the epoch's writes durable, atomically.
	Commit() error
	// Rollback discards the epoch's writes.
	Rollback() error
	// Committed reads the state as of the last Commit. It is safe to use
	// concurrently with the writer (pull queries read it while the
	// driver runs the next epoch).
	Committed() Reader
}

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("flow: store closed")

// prefixEnd is the smallest key greater than every key with prefix p,
// or nil (no bound) when p is all 0xff.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// scanPrefix scans the keys with prefix p.
func scanPrefix(r Reader, p []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	return r.Scan(p, prefixEnd(p), reverse, fn)
}

// MemStore is a Store in memory, for tests and for views small enough
// to rebuild: a B-tree whose committed version is a copy-on-write clone
// (github.com/RaduBerinde/btreemap, Pebble's), so Commit and Rollback
// are O(1) and committed reads never see the current epoch.
type MemStore struct {
	cur       *btreemap.BTreeMap[[]byte, []byte]
	committed atomic.Pointer[memReader]
	// cloneMu orders Clone calls: btreemap's Clone mutates the tree's
	// copy-on-write context.
	cloneMu sync.Mutex
}

const memDegree = 32

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	s := &MemStore{cur: btreemap.New[[]byte, []byte](memDegree, bytes.Compare)}
	s.committed.Store(&memReader{t: s.cur.Clone()})
	return s
}

func (s *MemStore) Get(key []byte) ([]byte, bool, error) { return memGet(s.cur, key) }

func (s *MemStore) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	return memScan(s.cur, lower, upper, reverse, fn)
}

func (s *MemStore) Set(key, value []byte) error {
	s.cur.ReplaceOrInsert(bytes.Clone(key), bytes.Clone(value))
	return nil
}

func (s *MemStore) Delete(key []byte) error {
	s.cur.Delete(key)
	return nil
}

func (s *MemStore) Commit() error {
	s.cloneMu.Lock()
	defer s.cloneMu.Unlock()
	s.committed.Store(&memReader{t: s.cur.Clone()})
	return nil
}

func (s *MemStore) Rollback() error {
	s.cloneMu.Lock()
	defer s.cloneMu.Unlock()
	s.cur = s.committed.Load().t.Clone()
	return nil
}

func (s *MemStore) Committed() Reader { return memCommitted{s} }

// Len is the number of keys in the current epoch's state.
func (s *MemStore) Len() int { return s.cur.Len() }

type memCommitted struct{ s *MemStore }

func (c memCommitted) Get(key []byte) ([]byte, bool, error) { return c.s.committed.Load().Get(key) }
func (c memCommitted) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	return c.s.committed.Load().Scan(lower, upper, reverse, fn)
}

// memReader is one committed version: never written after it is made.
type memReader struct {
	t *btreemap.BTreeMap[[]byte, []byte]
}

func (r *memReader) Get(key []byte) ([]byte, bool, error) { return memGet(r.t, key) }
func (r *memReader) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	return memScan(r.t, lower, upper, reverse, fn)
}

func memGet(t *btreemap.BTreeMap[[]byte, []byte], key []byte) ([]byte, bool, error) {
	// Set stores a copy and replaces it whole, never writing into a
	// stored value, so it can be returned as is.
	_, v, ok := t.Get(key)
	return v, ok, nil
}

func memScan(t *btreemap.BTreeMap[[]byte, []byte], lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	lo := btreemap.Min[[]byte]()
	if lower != nil {
		lo = btreemap.GE(lower)
	}
	hi := btreemap.Max[[]byte]()
	if upper != nil {
		hi = btreemap.LT(upper)
	}
	var err error
	visit := func(k, v []byte) bool {
		var more bool
		more, err = fn(k, v)
		return more && err == nil
	}
	if reverse {
		for k, v := range t.Descend(hi, lo) {
			if !visit(k, v) {
				break
			}
		}
	} else {
		for k, v := range t.Ascend(lo, hi) {
			if !visit(k, v) {
				break
			}
		}
	}
	return err
}

// prefixed is a Store seen under a key prefix: an operator's namespace.
type prefixed struct {
	s      Store
	prefix []byte
	buf    []byte
}

func (p *prefixed) key(k []byte) []byte {
	p.buf = append(append(p.buf[:0], p.prefix...), k...)
	return p.buf
}

func (p *prefixed) Get(key []byte) ([]byte, bool, error) { return p.s.Get(p.key(key)) }
func (p *prefixed) Set(key, value []byte) error          { return p.s.Set(p.key(key), value) }
func (p *prefixed) Delete(key []byte) error              { return p.s.Delete(p.key(key)) }

func (p *prefixed) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	lo := append(bytes.Clone(p.prefix), lower...)
	var hi []byte
	if upper != nil {
		hi = append(bytes.Clone(p.prefix), upper...)
	} else {
		hi = prefixEnd(p.prefix)
	}
	n := len(p.prefix)
	return p.s.Scan(lo, hi, reverse, func(k, v []byte) (bool, error) { return fn(k[n:], v) })
}

// Commit, Rollback and Committed belong to the whole store: the driver
// calls them, never an operator.
func (p *prefixed) Commit() error     { return errors.New("flow: an operator cannot commit") }
func (p *prefixed) Rollback() error   { return errors.New("flow: an operator cannot roll back") }
func (p *prefixed) Committed() Reader { return prefixedReader{p.s.Committed(), p.prefix} }

type prefixedReader struct {
	r      Reader
	prefix []byte
}

func (p prefixedReader) Get(key []byte) ([]byte, bool, error) {
	return p.r.Get(append(bytes.Clone(p.prefix), key...))
}

func (p prefixedReader) Scan(lower, upper []byte, reverse bool, fn func(key, value []byte) (bool, error)) error {
	lo := append(bytes.Clone(p.prefix), lower...)
	hi := prefixEnd(p.prefix)
	if upper != nil {
		hi = append(bytes.Clone(p.prefix), upper...)
	}
	n := len(p.prefix)
	return p.r.Scan(lo, hi, reverse, func(k, v []byte) (bool, error) { return fn(k[n:], v) })
}
