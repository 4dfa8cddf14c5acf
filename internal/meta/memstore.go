package meta

import (
	"bytes"
	"slices"
)

// MemStore is an in-memory Batch whose writes apply at once, and whose
// Snapshots are consistent copies. It is the reference implementation of
// the key-value interface, for tests: the state machine's own tests and
// scenarios run on it, and package replica checks that Pebble, behind its
// adapters, reaches the same state. A MemStore is one goroutine's; its
// Snapshots may be read concurrently.
//
// The keys are one sorted slice, shared copy-on-write with the iterators
// and snapshots made from it, so those see the state as of their creation
// without a copy each: the next write after one is made copies instead.
// Writes cost O(n); that is fine at test sizes.
type MemStore struct {
	kvs []memKV
	// shared: an iterator or snapshot holds kvs, so the next write
	// copies it first.
	shared bool
}

type memKV struct{ k, v []byte }

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{} }

func (m *MemStore) find(key []byte) (int, bool) {
	return slices.BinarySearchFunc(m.kvs, key, func(e memKV, k []byte) int { return bytes.Compare(e.k, k) })
}

// own makes kvs safe to write.
func (m *MemStore) own() {
	if m.shared {
		m.kvs = slices.Clone(m.kvs)
		m.shared = false
	}
}

// Get implements Reader.
func (m *MemStore) Get(key []byte) ([]byte, bool, error) { return memGet(m.kvs, key) }

// NewIter implements Reader.
func (m *MemStore) NewIter(lower, upper []byte) (Iterator, error) {
	m.shared = true
	return newMemIter(m.kvs, lower, upper), nil
}

// Set implements Batch.
func (m *MemStore) Set(key, value []byte) error {
	i, found := m.find(key)
	m.own()
	kv := memKV{bytes.Clone(key), bytes.Clone(value)}
	if kv.v == nil {
		kv.v = []byte{}
	}
	if found {
		m.kvs[i] = kv
	} else {
		m.kvs = slices.Insert(m.kvs, i, kv)
	}
	return nil
}

// Delete implements Batch.
func (m *MemStore) Delete(key []byte) error {
	if i, found := m.find(key); found {
		m.own()
		m.kvs = slices.Delete(m.kvs, i, i+1)
	}
	return nil
}

// DeleteRange implements Batch.
func (m *MemStore) DeleteRange(start, end []byte) error {
	i, _ := m.find(start)
	j, _ := m.find(end)
	if i < j {
		m.own()
		m.kvs = slices.Delete(m.kvs, i, j)
	}
	return nil
}

// Snapshot returns the current state, unchanged by later writes.
func (m *MemStore) Snapshot() Snapshot {
	m.shared = true
	return memSnapshot{kvs: m.kvs}
}

// Len is the number of keys stored.
func (m *MemStore) Len() int { return len(m.kvs) }

type memSnapshot struct{ kvs []memKV }

func (s memSnapshot) Get(key []byte) ([]byte, bool, error) { return memGet(s.kvs, key) }

func (s memSnapshot) NewIter(lower, upper []byte) (Iterator, error) {
	return newMemIter(s.kvs, lower, upper), nil
}

func (memSnapshot) Close() error { return nil }

func memGet(kvs []memKV, key []byte) ([]byte, bool, error) {
	i, found := slices.BinarySearchFunc(kvs, key, func(e memKV, k []byte) int { return bytes.Compare(e.k, k) })
	if !found {
		return nil, false, nil
	}
	return bytes.Clone(kvs[i].v), true, nil
}

// memIter iterates kvs[lo:hi], the keys within its bounds.
type memIter struct {
	kvs []memKV
	pos int // -1 or len(kvs): unpositioned or exhausted
}

func newMemIter(kvs []memKV, lower, upper []byte) *memIter {
	cmp := func(e memKV, k []byte) int { return bytes.Compare(e.k, k) }
	lo, hi := 0, len(kvs)
	if lower != nil {
		lo, _ = slices.BinarySearchFunc(kvs, lower, cmp)
	}
	if upper != nil {
		hi, _ = slices.BinarySearchFunc(kvs, upper, cmp)
	}
	hi = max(hi, lo)
	return &memIter{kvs: kvs[lo:hi:hi], pos: -1}
}

func (it *memIter) valid() bool { return it.pos >= 0 && it.pos < len(it.kvs) }

func (it *memIter) First() bool { it.pos = 0; return it.valid() }

func (it *memIter) Last() bool { it.pos = len(it.kvs) - 1; return it.valid() }

func (it *memIter) Next() bool {
	if it.pos < len(it.kvs) {
		it.pos++
	}
	return it.valid()
}

func (it *memIter) Prev() bool {
	if it.pos >= 0 {
		it.pos--
	}
	return it.valid()
}

func (it *memIter) SeekGE(key []byte) bool {
	it.pos, _ = slices.BinarySearchFunc(it.kvs, key, func(e memKV, k []byte) int { return bytes.Compare(e.k, k) })
	return it.valid()
}

func (it *memIter) SeekLT(key []byte) bool {
	i, _ := slices.BinarySearchFunc(it.kvs, key, func(e memKV, k []byte) int { return bytes.Compare(e.k, k) })
	it.pos = i - 1
	return it.valid()
}

func (it *memIter) Key() []byte {
	if !it.valid() {
		return nil
	}
	return it.kvs[it.pos].k
}

func (it *memIter) Value() []byte {
	if !it.valid() {
		return nil
	}
	return it.kvs[it.pos].v
}

func (it *memIter) Error() error { return nil }

func (it *memIter) Close() error {
	it.kvs = nil
	return nil
}
