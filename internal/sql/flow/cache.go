package flow

// valueCache is a PebbleStore's bounded cache of current values: the
// value of a key, or that it has none. It keeps two generations, as a
// cheap approximation of LRU: entries go into the young one; when the
// young one holds half the budget it becomes the old one and the old
// one is dropped; a hit in the old generation moves the entry back to
// the young. So it holds at most maxBytes (counting keys, values and a
// per-entry overhead), and what an epoch reads and writes again stays.
//
// It also knows whether it holds every key written in the current epoch
// (complete): then a miss is a key the epoch did not write, which the
// store reads from the database without searching the epoch's batch.
// An entry carries the epoch of its last write; a generation remembers
// the newest, so dropping one that holds a write of the current epoch
// (or refusing one too large) makes the cache incomplete until the next
// epoch.
type valueCache struct {
	young, old   map[string]cached
	youngBytes   int
	maxBytes     int
	hits, misses int64
	// epoch is the current epoch's number (from 1; entries read, not
	// written, carry 0); youngWrote and oldWrote are the newest epoch
	// written into each generation.
	epoch                uint64
	youngWrote, oldWrote uint64
	incomplete           bool
	// leads has a bit for the first byte of every key added since the
	// last clear: forget of a key whose first byte has none finds
	// nothing without hashing the key (a view's index rows, merged
	// unread, begin with a byte its operators' keys do not).
	leads [4]uint64
}

type cached struct {
	v     []byte // never written after it is cached: Get returns it as is
	ok    bool
	wrote uint64 // the epoch of the write that put it, 0 for a read
}

// cacheEntryOverhead approximates a map entry's own bytes (the string
// header, the slice header and flag, the bucket's share).
const cacheEntryOverhead = 64

func (c *valueCache) init(maxBytes int) {
	*c = valueCache{maxBytes: max(maxBytes, 0), epoch: 1}
	c.clear()
}

func (c *valueCache) clear() {
	c.young, c.old, c.youngBytes = map[string]cached{}, map[string]cached{}, 0
	c.youngWrote, c.oldWrote = 0, 0
	c.incomplete = false
	c.leads = [4]uint64{}
}

// nextEpoch starts an epoch: no key is written in it yet.
func (c *valueCache) nextEpoch() {
	c.epoch++
	c.incomplete = false
}

// complete says whether every key written in the current epoch is in
// the cache, so a miss was not written in it.
func (c *valueCache) complete() bool { return c.maxBytes > 0 && !c.incomplete }

// get returns key's value and whether it has one, when the cache knows
// (hit).
func (c *valueCache) get(key []byte) (v []byte, ok, hit bool) {
	if e, found := c.young[string(key)]; found {
		c.hits++
		return e.v, e.ok, true
	}
	if e, found := c.old[string(key)]; found {
		c.hits++
		delete(c.old, string(key))
		c.add(string(key), e)
		return e.v, e.ok, true
	}
	c.misses++
	return nil, false, false
}

// forget drops key's entry: the store wrote key as a merge operand, so
// its value is no longer known here. The store, not the cache, keeps
// that the epoch wrote it (PebbleStore.mergedLead).
func (c *valueCache) forget(key []byte) {
	if len(key) == 0 || c.leads[key[0]>>6]&(1<<(key[0]&63)) == 0 {
		return
	}
	if old, found := c.young[string(key)]; found {
		c.youngBytes -= len(key) + len(old.v) + cacheEntryOverhead
		delete(c.young, string(key))
	}
	delete(c.old, string(key))
}

// put records key's current value (ok false: it has none), written in
// the current epoch when write, else read; v must not be written
// afterwards.
func (c *valueCache) put(key, v []byte, ok, write bool) {
	c.putEntry(key, cached{v: v, ok: ok}, write)
}

// putEntry is put of an entry, in one pass over the maps.
func (c *valueCache) putEntry(key []byte, e cached, write bool) {
	if c.maxBytes == 0 {
		return
	}
	k := string(key)
	if write {
		e.wrote = c.epoch
	}
	if old, found := c.young[k]; found {
		c.youngBytes -= len(k) + len(old.v) + cacheEntryOverhead
		delete(c.young, k)
		if !write {
			e.wrote = old.wrote
		}
	} else if old, found := c.old[k]; found {
		delete(c.old, k)
		if !write {
			e.wrote = old.wrote
		}
	}
	c.add(k, e)
}

func (c *valueCache) add(k string, e cached) {
	n := len(k) + len(e.v) + cacheEntryOverhead
	if n > c.maxBytes/2 {
		// Too large to keep: never cached, so never stale, but a
		// write of it is one the cache does not know.
		if e.wrote == c.epoch {
			c.incomplete = true
		}
		return
	}
	if c.youngBytes+n > c.maxBytes/2 {
		if c.oldWrote == c.epoch && len(c.old) > 0 {
			c.incomplete = true
		}
		c.old, c.young, c.youngBytes = c.young, make(map[string]cached, len(c.young)), 0
		c.oldWrote, c.youngWrote = c.youngWrote, 0
	}
	c.young[k] = e
	c.youngBytes += n
	if len(k) > 0 {
		c.leads[k[0]>>6] |= 1 << (k[0] & 63)
	}
	c.youngWrote = max(c.youngWrote, e.wrote)
}
