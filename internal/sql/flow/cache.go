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
}

type cached struct {
	v     []byte // never written after it is cached: Get returns it as is
	ok    bool
	wrote uint64 // the epoch of the write that put it, 0 for a read
	// merge: written as a merge operand, the value unknown (v and ok
	// mean nothing); get misses it.
	merge bool
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
	if e, found := c.young[string(key)]; found && !e.merge {
		c.hits++
		return e.v, e.ok, true
	}
	if e, found := c.old[string(key)]; found && !e.merge {
		c.hits++
		delete(c.old, string(key))
		c.add(string(key), e)
		return e.v, e.ok, true
	}
	c.misses++
	return nil, false, false
}

// putMerged records that the current epoch wrote key as a merge
// operand: its value is unknown, but the write is known.
func (c *valueCache) putMerged(key []byte) {
	c.putEntry(key, cached{merge: true}, true)
}

// merged says whether the current epoch wrote key as a merge operand
// (an earlier epoch's merge is committed: the database has it).
func (c *valueCache) merged(key []byte) bool {
	e, found := c.young[string(key)]
	if !found {
		e, found = c.old[string(key)]
	}
	return found && e.merge && e.wrote == c.epoch
}

// put records key's current value (ok false: it has none), written in
// the current epoch when write, else read; v must not be written
// afterwards.
func (c *valueCache) put(key, v []byte, ok, write bool) {
	c.putEntry(key, cached{v: v, ok: ok}, write)
}

// putEntry is put of an entry; one pass over the maps, since a view
// that only appends puts every row it writes (a tenth of q0's CPU was
// these lookups when a merge took two passes).
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
	c.youngWrote = max(c.youngWrote, e.wrote)
}
