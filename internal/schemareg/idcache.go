package schemareg

import (
	"container/list"
	"sync"
)

// IDCache holds what its user made of schemas (a parsed schema, a
// checker) by schema id, bounded by a count and by a weight (the
// schema's text length, say), least recently used out. A schema never
// changes under its id, so an entry is never stale: eviction is the
// only way out. Validation on produce and the SQL sources each keep
// one. Safe for concurrent use.
type IDCache[T any] struct {
	maxEntries int
	maxWeight  int64

	mu struct {
		sync.Mutex
		lru    list.List // of *idEntry[T], most recent first
		byID   map[int32]*list.Element
		weight int64
	}
}

type idEntry[T any] struct {
	id     int32
	v      T
	weight int64
}

// NewIDCache returns a cache of at most maxEntries values of at most
// maxWeight together.
func NewIDCache[T any](maxEntries int, maxWeight int64) *IDCache[T] {
	c := &IDCache[T]{maxEntries: maxEntries, maxWeight: maxWeight}
	c.mu.byID = map[int32]*list.Element{}
	return c
}

// Get returns id's value, making it the most recently used.
func (c *IDCache[T]) Get(id int32) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.byID[id]
	if !ok {
		var zero T
		return zero, false
	}
	c.mu.lru.MoveToFront(e)
	return e.Value.(*idEntry[T]).v, true
}

// Put adds id's value of weight, evicting the least recently used past
// the bounds; a value heavier than the whole bound is not kept, and an
// id held already keeps its value.
func (c *IDCache[T]) Put(id int32, v T, weight int64) {
	if weight > c.maxWeight {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.byID[id]; ok {
		return
	}
	c.mu.byID[id] = c.mu.lru.PushFront(&idEntry[T]{id: id, v: v, weight: weight})
	c.mu.weight += weight
	for c.mu.lru.Len() > c.maxEntries || c.mu.weight > c.maxWeight {
		last := c.mu.lru.Back()
		e := last.Value.(*idEntry[T])
		c.mu.lru.Remove(last)
		delete(c.mu.byID, e.id)
		c.mu.weight -= e.weight
	}
}

// Len is how many values are held.
func (c *IDCache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.lru.Len()
}

// Weight is the held values' weight together.
func (c *IDCache[T]) Weight() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.weight
}
