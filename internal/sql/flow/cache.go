package flow

// valueCache is a PebbleStore's bounded cache of current values: the
// value of a key, or that it has none. It keeps two generations, as a
// cheap approximation of LRU: entries go into the young one; when the
// young one holds half the budget it becomes the old one and the old
// one is dropped; a hit in the old generation moves the entry back to
// the young. So it holds at most maxBytes (counting keys, values and a
// per-entry overhead), and what an epoch reads and writes again stays.
type valueCache struct {
	young, old   map[string]cached
	youngBytes   int
	maxBytes     int
	hits, misses int64
}

type cached struct {
	v  []byte // never written after it is cached: Get returns it as is
	ok bool
}

// cacheEntryOverhead approximates a map entry's own bytes (the string
// header, the slice header and flag, the bucket's share).
const cacheEntryOverhead = 64

func (c *valueCache) init(maxBytes int) {
	*c = valueCache{maxBytes: max(maxBytes, 0)}
	c.clear()
}

func (c *valueCache) clear() {
	c.young, c.old, c.youngBytes = map[string]cached{}, map[string]cached{}, 0
}

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

// put records key's current value (ok false: it has none); v must not
// be written afterwards.
func (c *valueCache) put(key, v []byte, ok bool) {
	if c.maxBytes == 0 {
		return
	}
	k := string(key)
	if e, found := c.young[k]; found {
		c.youngBytes -= len(k) + len(e.v) + cacheEntryOverhead
		delete(c.young, k)
	} else {
		delete(c.old, k)
	}
	c.add(k, cached{v: v, ok: ok})
}

func (c *valueCache) add(k string, e cached) {
	n := len(k) + len(e.v) + cacheEntryOverhead
	if n > c.maxBytes/2 {
		return // too large to keep: never cached, so never stale
	}
	if c.youngBytes+n > c.maxBytes/2 {
		c.old, c.young, c.youngBytes = c.young, make(map[string]cached, len(c.young)), 0
	}
	c.young[k] = e
	c.youngBytes += n
}
