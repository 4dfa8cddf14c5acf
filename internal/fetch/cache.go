package fetch

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
)

// readTimeout bounds one GET a cache miss makes. The GET runs detached
// from the caller that missed, so callers that joined it are not failed
// by the first one giving up.
const readTimeout = 30 * time.Second

// Cache is a bounded, least-recently-used cache of data object bytes,
// keyed by object key: whole objects (the produce path inserts each object
// it uploads) and byte ranges read from the store. Concurrent misses for
// the same range share one GET. Safe for concurrent use.
//
// The cache holds only bytes that were checked: a range read from the
// store enters it only after Get's check accepted all of it (the Reader
// checks every batch's framing and CRC-32C), and a whole object enters
// through PutObject only from the produce path, whose batches were
// validated, CRC included, before the object was built from them in
// memory. A hit serves a sub-range of one entry, so it never
// returns bytes that were not checked, and bytes that fail the check are
// neither cached nor returned: a repaired object is read afresh.
//
// Cached bytes are shared and read-only: Get's callers must not modify
// what it returns.
type Cache struct {
	maxBytes int64

	hits, misses, coalesced, evictions, readAheads atomic.Int64

	mu struct {
		sync.Mutex
		// lru holds *entry, most recently used first.
		lru   list.List
		byKey map[string][]*list.Element
		bytes int64
		// reserved is bytes being read ahead (Reserve): not cached
		// yet, but counted against maxBytes so that the cache and
		// the reads in flight for it stay within the one bound.
		reserved int64
		// flights are the GETs in progress, by object key.
		flights map[string][]*flight
	}
}

// entry is bytes [start, start+len(data)) of one object.
type entry struct {
	key   string
	start int64
	data  []byte
}

func (e *entry) covers(pos, length int64) bool {
	return e.start <= pos && pos+length <= e.start+int64(len(e.data))
}

type rangeKey struct {
	key         string
	pos, length int64
}

type flight struct {
	rangeKey
	done chan struct{}
	data []byte
	err  error
}

func (f *flight) covers(pos, length int64) bool {
	return f.pos <= pos && pos+length <= f.pos+f.length
}

// Check accepts or refuses bytes read from the store before Get caches or
// returns them. It must not keep or modify data.
type Check func(data []byte) error

// NewCache returns a cache holding at most maxBytes of object bytes. A
// cache of 0 bytes keeps nothing but still coalesces concurrent misses.
func NewCache(maxBytes int64) *Cache {
	c := &Cache{maxBytes: max(maxBytes, 0)}
	c.mu.byKey = make(map[string][]*list.Element)
	c.mu.flights = make(map[string][]*flight)
	return c
}

// CacheStats counts the cache's work since it was made.
type CacheStats struct {
	// Hits were served from cached bytes; Misses each made one GET;
	// Coalesced joined another caller's GET. ReadAheads are the
	// Misses that read ahead of a reader (readahead.go).
	Hits, Misses, Coalesced int64
	ReadAheads              int64
	Evictions               int64
	Bytes                   int64
	Entries                 int
}

// Stats returns the counters and the cache's size now.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	bytes, entries := c.mu.bytes, c.mu.lru.Len()
	c.mu.Unlock()
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Coalesced: c.coalesced.Load(), ReadAheads: c.readAheads.Load(),
		Evictions: c.evictions.Load(), Bytes: bytes, Entries: entries,
	}
}

// PutObject caches a whole object, taking ownership of data: the caller
// must not modify it afterwards. It implements produce.ObjectCache. The
// bytes are not checked again: every batch in them was validated before
// it was submitted (the Produce handler's recordbatch.ValidateProduce,
// CRC-32C included; SetLogAppendTime recomputes the CRC it changes), and
// the object never left the agent's memory since.
func (c *Cache) PutObject(key string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.insertLocked(key, 0, data)
}

// Get returns bytes [pos, pos+length) of object key, from the cache or
// from store. Bytes from the store are returned and cached only if check
// accepts them (nil accepts anything); otherwise Get returns check's
// error and caches nothing. Concurrent misses of one range share the
// first caller's GET and check, so every caller of a range must pass the
// same check; a miss inside a larger range being read (read-ahead) waits
// for it, and makes a GET of its own only if that one fails, since the
// failure may lie outside the range it wants. The result is shared: do
// not modify it.
func (c *Cache) Get(ctx context.Context, store objstore.Store, key string, pos, length int64, check Check) ([]byte, error) {
	if pos < 0 || length <= 0 {
		return nil, fmt.Errorf("%w: range %d+%d of %s", objstore.ErrInvalidRange, pos, length, key)
	}
	rk := rangeKey{key, pos, length}
	for joinCover := true; ; joinCover = false {
		c.mu.Lock()
		if data, ok := c.lookupLocked(key, pos, length); ok {
			c.mu.Unlock()
			c.hits.Add(1)
			return data, nil
		}
		fl, joined := c.flightLocked(rk, joinCover)
		if !joined {
			fl = c.startLocked(rk)
		}
		c.mu.Unlock()

		if joined {
			c.coalesced.Add(1)
		} else {
			c.misses.Add(1)
			go c.load(context.WithoutCancel(ctx), store, fl, check, 0)
		}
		select {
		case <-fl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fl.rangeKey == rk || fl.err == nil {
			off := pos - fl.pos
			if fl.err != nil {
				return nil, fl.err
			}
			return fl.data[off : off+length : off+length], nil
		}
		// The larger range failed: read ours alone.
	}
}

// flightLocked finds a GET in progress of exactly rk or, with cover, of
// a range holding it.
func (c *Cache) flightLocked(rk rangeKey, cover bool) (*flight, bool) {
	var found *flight
	for _, fl := range c.mu.flights[rk.key] {
		if fl.rangeKey == rk {
			return fl, true
		}
		if cover && found == nil && fl.covers(rk.pos, rk.length) {
			found = fl
		}
	}
	return found, found != nil
}

// coveredLocked reports whether bytes [pos, pos+length) of key are
// cached or being read.
func (c *Cache) coveredLocked(key string, pos, length int64) bool {
	for _, el := range c.mu.byKey[key] {
		if el.Value.(*entry).covers(pos, length) {
			return true
		}
	}
	_, ok := c.flightLocked(rangeKey{key, pos, length}, true)
	return ok
}

// Covered reports whether bytes [pos, pos+length) of key are cached or
// being read, without touching the recency of what holds them.
func (c *Cache) Covered(key string, pos, length int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coveredLocked(key, pos, length)
}

func (c *Cache) startLocked(rk rangeKey) *flight {
	fl := &flight{rangeKey: rk, done: make(chan struct{})}
	c.mu.flights[rk.key] = append(c.mu.flights[rk.key], fl)
	return fl
}

// readAhead starts a GET of bytes [pos, pos+length) of key, checked and
// cached as Get's are, unless they are cached or being read already; it
// reports whether it started one. Until the GET's bytes are cached or
// dropped, length bytes are counted against the cache's bound, evicting
// what must go to make room: the caller bounds how much it reads ahead,
// and the cache and those reads stay within one bound. done, if not nil,
// is called when the GET has ended, or at once if none was started.
func (c *Cache) readAhead(ctx context.Context, store objstore.Store, key string, pos, length int64, check Check, done func()) bool {
	c.mu.Lock()
	if c.coveredLocked(key, pos, length) {
		c.mu.Unlock()
		if done != nil {
			done()
		}
		return false
	}
	fl := c.startLocked(rangeKey{key, pos, length})
	c.mu.reserved += length
	c.evictLocked()
	c.mu.Unlock()
	c.misses.Add(1)
	c.readAheads.Add(1)
	go func() {
		c.load(context.WithoutCancel(ctx), store, fl, check, length)
		if done != nil {
			done()
		}
	}()
	return true
}

// load performs one flight's GET, checks its bytes and caches them,
// releasing reserved bytes (a read-ahead's reservation) as it does.
func (c *Cache) load(ctx context.Context, store objstore.Store, fl *flight, check Check, reserved int64) {
	rk := fl.rangeKey
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	data, err := store.Get(ctx, rk.key, rk.pos, rk.length)
	cancel()
	switch {
	case err != nil:
	case int64(len(data)) != rk.length:
		// The index says the range exists; a short object is damage.
		err = fmt.Errorf("%w: %s holds %d bytes at %d, index says %d", ErrCorrupt, rk.key, len(data), rk.pos, rk.length)
	case check != nil:
		err = check(data)
	}
	if err != nil {
		data = nil
	}
	c.mu.Lock()
	removeFrom(c.mu.flights, rk.key, fl)
	c.mu.reserved -= reserved
	if err == nil {
		c.insertLocked(rk.key, rk.pos, data)
	}
	c.mu.Unlock()
	fl.data, fl.err = data, err
	close(fl.done)
}

func (c *Cache) lookupLocked(key string, pos, length int64) ([]byte, bool) {
	for _, el := range c.mu.byKey[key] {
		e := el.Value.(*entry)
		if e.covers(pos, length) {
			c.mu.lru.MoveToFront(el)
			off := pos - e.start
			return e.data[off : off+length : off+length], true
		}
	}
	return nil, false
}

// insertLocked caches data as bytes [start, ...) of key, unless it is
// larger than the whole cache or already covered, and drops the entries
// of key it covers. Then it evicts least recently used entries down to
// the bound.
func (c *Cache) insertLocked(key string, start int64, data []byte) {
	size := int64(len(data))
	if size == 0 || size > c.maxBytes {
		return
	}
	els := c.mu.byKey[key]
	kept := els[:0]
	for _, el := range els {
		e := el.Value.(*entry)
		if e.covers(start, size) {
			c.mu.lru.MoveToFront(el)
			return
		}
		if start <= e.start && e.start+int64(len(e.data)) <= start+size {
			c.mu.lru.Remove(el)
			c.mu.bytes -= int64(len(e.data))
			continue
		}
		kept = append(kept, el)
	}
	c.mu.byKey[key] = append(kept, c.mu.lru.PushFront(&entry{key: key, start: start, data: data}))
	c.mu.bytes += size
	c.evictLocked()
}

// evictLocked drops least recently used entries until the cache and
// its reservations fit the bound.
func (c *Cache) evictLocked() {
	for c.mu.bytes+c.mu.reserved > c.maxBytes && c.mu.lru.Len() > 0 {
		c.removeLocked(c.mu.lru.Back())
		c.evictions.Add(1)
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	e := c.mu.lru.Remove(el).(*entry)
	c.mu.bytes -= int64(len(e.data))
	removeFrom(c.mu.byKey, e.key, el)
}

// removeFrom removes x from m[key], and key from m if nothing is left.
func removeFrom[T comparable](m map[string][]T, key string, x T) {
	xs := m[key]
	if i := slices.Index(xs, x); i >= 0 {
		xs = slices.Delete(xs, i, i+1)
	}
	if len(xs) == 0 {
		delete(m, key)
	} else {
		m[key] = xs
	}
}
