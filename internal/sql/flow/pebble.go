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
// cache and memtables (the caller's pebble.Options), one epoch's batch,
// and the store's own cache of hot values (CacheBytes): state larger
// than memory stays on disk.
//
// The cache holds the current values of recently read or written keys,
// and the absence of recently missed ones, so an operator's state read
// every epoch (a group's accumulators, a join key's count) costs a map
// lookup instead of a Pebble read through the batch, memtables and
// levels. It is write-through: a write goes to the batch and the cache
// at once, so Commit has nothing more to write, and a Rollback, which
// discards the batch, drops the cache.
type PebbleStore struct {
	db     *pebble.DB
	prefix []byte
	sync   bool
	batch  *pebble.Batch
	buf    []byte
	cache  valueCache
	// iter is the epoch's iterator over the batch, made at the first
	// scan and repositioned (its view of the batch refreshed) for each
	// later one, since making an iterator is most of a short scan's
	// cost; closed at the epoch's end, so it pins no memtable for long.
	iter     *pebble.Iterator
	scanning bool
	bounds   [2][]byte // alternate bound buffers: Pebble keeps the last bounds until the next are set
	boundsI  int
	// merges: the database merges with CountedMerger, so a view's new
	// index rows are written blindly (SetCountedMerges).
	merges bool
	// blind holds the epoch's merge operands apart from the indexed
	// batch: indexing them (a skiplist insert, comparing long keys) was
	// most of an append-only view's write, and nothing reads them back
	// within the epoch but through flushBlind. commit is the batch the
	// two are committed in, reused.
	blind, commit *pebble.Batch
	// mergedLead has a bit for the first byte of every key the epoch
	// wrote as a merge operand. Such keys are not in the cache, so a
	// key whose first byte is marked is read through the batch (after
	// flushBlind), never from the database alone. A bit per first byte,
	// not a set of keys: a view's index keys, the only ones merged,
	// begin with their own byte, and tracking each row was most of an
	// append-only view's write (a map entry per row).
	mergedLead [4]uint64
	// wroteLead is mergedLead of the keys written to the indexed batch
	// (flushBlind's included): where no byte is in both, the two
	// batches' keys differ and their order does not matter at commit.
	wroteLead [4]uint64
}

// DefaultCacheBytes is the cache of hot values a PebbleStore keeps by
// default: the working set of a view's groups and join keys.
const DefaultCacheBytes = 32 << 20

// NewPebbleStore returns a Store over db's keys beginning with prefix.
// sync makes each Commit wait for the write-ahead log's fsync; a
// dataflow whose input offsets commit elsewhere first may go without.
// It caches DefaultCacheBytes of hot values (see SetCacheBytes).
func NewPebbleStore(db *pebble.DB, prefix []byte, sync bool) *PebbleStore {
	s := &PebbleStore{db: db, prefix: bytes.Clone(prefix), sync: sync, batch: db.NewIndexedBatch()}
	s.cache.init(DefaultCacheBytes)
	return s
}

// SetCountedMerges says the database was opened with CountedMerger as
// its Options.Merger, so the store may write merge operands of counted
// rows. Merging into a database with another merger corrupts it.
func (s *PebbleStore) SetCountedMerges(on bool) { s.merges = on }

func (s *PebbleStore) addBlind(key, value []byte) (bool, error) {
	if !s.merges {
		return false, nil
	}
	if s.blind == nil {
		s.blind = s.db.NewBatch()
	}
	if err := s.blind.Merge(s.key(key), value, nil); err != nil {
		return false, err
	}
	// The cache cannot know the merged value: it drops the key, and
	// mergedLead sends reads of it through the batch.
	s.cache.forget(key)
	markLead(&s.mergedLead, key)
	return true, nil
}

// SetCacheBytes bounds the store's cache of hot values (0: no cache).
func (s *PebbleStore) SetCacheBytes(n int) { s.cache.init(n) }

func (s *PebbleStore) key(k []byte) []byte {
	s.buf = append(append(s.buf[:0], s.prefix...), k...)
	return s.buf
}

// flushBlind moves the merge operands into the indexed batch, in order,
// before anything reads or writes a key they may hold.
func (s *PebbleStore) flushBlind() error {
	if s.blind == nil || s.blind.Empty() {
		return nil
	}
	err := s.batch.Apply(s.blind, nil)
	s.blind.Reset()
	for i := range s.wroteLead {
		s.wroteLead[i] |= s.mergedLead[i]
	}
	return err
}

// markLead sets key's first byte in leads.
func markLead(leads *[4]uint64, key []byte) {
	if len(key) > 0 {
		leads[key[0]>>6] |= 1 << (key[0] & 63)
	}
}

// mayBeMerged says whether the epoch may have written key as a merge
// operand: it merged a key with key's first byte.
func (s *PebbleStore) mayBeMerged(key []byte) bool {
	if len(key) == 0 {
		return s.mergedLead != [4]uint64{}
	}
	return s.mergedLead[key[0]>>6]&(1<<(key[0]&63)) != 0
}

// touch flushes the merge operands before key is read or written,
// unless none can be key's.
func (s *PebbleStore) touch(key []byte) error {
	if s.blind == nil || s.blind.Empty() || !s.mayBeMerged(key) {
		return nil
	}
	return s.flushBlind()
}

func (s *PebbleStore) Get(key []byte) ([]byte, bool, error) {
	// The cache never holds a key merged in the epoch (addBlind drops
	// it), so a hit is the key's value.
	v, ok, hit := s.cache.get(key)
	if hit {
		return v, ok, nil
	}
	if err := s.touch(key); err != nil {
		return nil, false, err
	}
	var err error
	if s.cache.complete() && !s.mayBeMerged(key) {
		// The epoch did not write key (the cache holds every key it
		// wrote), so the batch has nothing to add: searching its
		// skiplist of the epoch's writes (long keys sharing prefixes)
		// was most of a new key's read.
		v, ok, err = pebbleGet(s.db.Get(s.key(key)))
	} else {
		v, ok, err = pebbleGet(s.batch.Get(s.key(key)))
	}
	if err == nil {
		s.cache.put(key, v, ok, false)
	}
	return v, ok, err
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
	if s.scanning {
		// A scan inside a scan's callback: the shared iterator is busy.
		return pebbleScan(s.batch.NewIter, s.prefix, lower, upper, reverse, fn)
	}
	if err := s.flushBlind(); err != nil {
		return err
	}
	s.scanning = true
	defer func() { s.scanning = false }()
	b := append(append(s.bounds[s.boundsI][:0], s.prefix...), lower...)
	lo := len(b)
	unbounded := false
	if upper != nil {
		b = append(append(b, s.prefix...), upper...)
	} else if end := prefixEnd(s.prefix); end != nil {
		b = append(b, end...)
	} else {
		unbounded = true
	}
	s.bounds[s.boundsI] = b
	s.boundsI ^= 1
	opts := pebble.IterOptions{LowerBound: b[:lo:lo], UpperBound: b[lo:]}
	if unbounded {
		opts.UpperBound = nil
	}
	if s.iter == nil {
		it, err := s.batch.NewIter(&opts)
		if err != nil {
			return err
		}
		s.iter = it
	} else {
		s.iter.SetOptions(&opts)
	}
	return iterate(s.iter, len(s.prefix), reverse, fn)
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
	return iterate(it, len(prefix), reverse, fn)
}

// iterate runs fn over it's keys (without their first n bytes, the
// store's prefix) from its first or last.
func iterate(it *pebble.Iterator, n int, reverse bool, fn func(key, value []byte) (bool, error)) error {
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

func (s *PebbleStore) Set(key, value []byte) error {
	if err := s.touch(key); err != nil {
		return err
	}
	if err := s.batch.Set(s.key(key), value, nil); err != nil {
		return err
	}
	markLead(&s.wroteLead, key)
	s.cache.put(key, bytes.Clone(value), true, true)
	return nil
}

func (s *PebbleStore) Delete(key []byte) error {
	if err := s.touch(key); err != nil {
		return err
	}
	if err := s.batch.Delete(s.key(key), nil); err != nil {
		return err
	}
	markLead(&s.wroteLead, key)
	s.cache.put(key, nil, false, true)
	return nil
}

// endEpoch closes the epoch's iterator and batch and starts the next.
func (s *PebbleStore) endEpoch(commit bool) error {
	var err error
	if s.iter != nil {
		err = s.iter.Close()
		s.iter = nil
	}
	if commit && err == nil {
		opts := pebble.NoSync
		if s.sync {
			opts = pebble.Sync
		}
		err = s.commitEpoch(opts)
	}
	if s.blind != nil {
		s.blind.Reset()
	}
	s.mergedLead, s.wroteLead = [4]uint64{}, [4]uint64{}
	if !commit || err != nil {
		// The batch's writes are gone, and the cache has them.
		s.cache.clear()
	}
	s.cache.nextEpoch()
	if cerr := s.batch.Close(); err == nil {
		err = cerr
	}
	s.batch = s.db.NewIndexedBatch()
	return err
}

// commitEpoch commits the indexed batch and, after it, the merge
// operands held apart, as one batch: copying both into an unindexed
// batch costs a copy of their bytes, where applying the operands to the
// indexed one would index each. Where no key can be in both (no first
// byte is), the order does not matter, and the indexed batch (an
// append-only view's: the epoch's metadata) is copied after the
// operands instead, which are most of the bytes.
func (s *PebbleStore) commitEpoch(opts *pebble.WriteOptions) error {
	if s.blind == nil || s.blind.Empty() {
		return s.batch.Commit(opts)
	}
	disjoint := true
	for i := range s.wroteLead {
		if s.wroteLead[i]&s.mergedLead[i] != 0 {
			disjoint = false
		}
	}
	if disjoint {
		if err := s.blind.Apply(s.batch, nil); err != nil {
			return err
		}
		return s.blind.Commit(opts)
	}
	if s.commit == nil {
		s.commit = s.db.NewBatch()
	}
	defer s.commit.Reset()
	if err := s.commit.Apply(s.batch, nil); err != nil {
		return err
	}
	if err := s.commit.Apply(s.blind, nil); err != nil {
		return err
	}
	return s.commit.Commit(opts)
}

func (s *PebbleStore) Commit() error   { return s.endEpoch(true) }
func (s *PebbleStore) Rollback() error { return s.endEpoch(false) }

// Close discards an uncommitted epoch; the database stays open (it is
// the caller's).
func (s *PebbleStore) Close() error {
	var err error
	if s.iter != nil {
		err = s.iter.Close()
		s.iter = nil
	}
	s.cache.clear()
	if cerr := s.batch.Close(); err == nil {
		err = cerr
	}
	for _, b := range []*pebble.Batch{s.blind, s.commit} {
		if b != nil {
			b.Close()
		}
	}
	s.blind, s.commit = nil, nil
	return err
}

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
