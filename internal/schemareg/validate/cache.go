package validate

import (
	"container/list"
	"sync"

	"github.com/strandkafka/strand/internal/schemareg"
)

// checker is what a schema id is checked with: its type and its
// PayloadChecker, or why it cannot check anything.
type checker struct {
	typ     schemareg.Type
	payload schemareg.PayloadChecker
	// weight is the schema text's length, what the cache bounds.
	weight int64
}

// cache holds checkers by schema id, least recently used first out.
// A schema never changes under its id, so an entry is never stale;
// eviction is the only way out. Safe for concurrent use.
type cache struct {
	maxEntries int
	maxWeight  int64

	mu struct {
		sync.Mutex
		lru    list.List // of *cacheEntry, most recent first
		byID   map[int32]*list.Element
		weight int64
	}
}

type cacheEntry struct {
	id int32
	c  *checker
}

func newCache(maxEntries int, maxWeight int64) *cache {
	c := &cache{maxEntries: maxEntries, maxWeight: maxWeight}
	c.mu.byID = map[int32]*list.Element{}
	return c
}

func (c *cache) get(id int32) (*checker, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.byID[id]
	if !ok {
		return nil, false
	}
	c.mu.lru.MoveToFront(e)
	return e.Value.(*cacheEntry).c, true
}

// put adds id's checker, evicting the least recently used past the
// bounds. A checker heavier than the whole bound is not kept.
func (c *cache) put(id int32, ch *checker) {
	if ch.weight > c.maxWeight {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.byID[id]; ok {
		return
	}
	c.mu.byID[id] = c.mu.lru.PushFront(&cacheEntry{id: id, c: ch})
	c.mu.weight += ch.weight
	for c.mu.lru.Len() > c.maxEntries || c.mu.weight > c.maxWeight {
		last := c.mu.lru.Back()
		e := last.Value.(*cacheEntry)
		c.mu.lru.Remove(last)
		delete(c.mu.byID, e.id)
		c.mu.weight -= e.c.weight
	}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.lru.Len()
}
