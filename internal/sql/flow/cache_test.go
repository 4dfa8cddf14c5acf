package flow

import (
	"fmt"
	"testing"
)

func TestValueCache(t *testing.T) {
	var c valueCache
	const budget = 100 * (cacheEntryOverhead + 8)
	c.init(budget)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%07d", i) }
	for i := range 1000 {
		c.put(key(i), []byte{byte(i)}, i%3 != 0, false)
		if got := c.bytes(); got > budget {
			t.Fatalf("after %d puts the cache holds %d bytes, more than its %d", i+1, got, budget)
		}
	}
	// The latest entries are kept, with their values and absences.
	for i := 990; i < 1000; i++ {
		v, ok, hit := c.get(key(i))
		if !hit || ok != (i%3 != 0) || (ok && (len(v) != 1 || v[0] != byte(i))) {
			t.Fatalf("key %d: got %v %v %v", i, v, ok, hit)
		}
	}
	// The earliest are gone: a miss, not a wrong answer.
	if _, _, hit := c.get(key(0)); hit {
		t.Fatal("key 0 still cached after 1000 puts into room for 100")
	}
	// A hit in the old generation survives the next rotation.
	c.clear()
	c.put(key(0), []byte{1}, true, false)
	for i := 1; ; i++ {
		c.put(key(i), []byte{1}, true, false)
		if _, found := c.old[string(key(0))]; found {
			break
		}
	}
	if _, _, hit := c.get(key(0)); !hit {
		t.Fatal("key 0 missed in the old generation")
	}
	if _, found := c.young[string(key(0))]; !found {
		t.Fatal("a hit in the old generation did not move to the young one")
	}
	c.init(0)
	c.put(key(1), []byte{1}, true, false)
	if _, _, hit := c.get(key(1)); hit {
		t.Fatal("a cache of 0 bytes kept an entry")
	}
}

// bytes counts what both generations hold.
func (c *valueCache) bytes() int {
	n := 0
	for _, m := range []map[string]cached{c.young, c.old} {
		for k, e := range m {
			n += len(k) + len(e.v) + cacheEntryOverhead
		}
	}
	return n
}

// TestValueCacheComplete: the cache says it holds every key of the
// epoch's writes only while none of them was dropped.
func TestValueCacheComplete(t *testing.T) {
	var c valueCache
	const budget = 100 * (cacheEntryOverhead + 8)
	c.init(budget)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%07d", i) }
	// Reads dropped by rotations lose no write.
	for i := range 1000 {
		c.put(key(i), []byte{1}, true, false)
	}
	if !c.complete() {
		t.Fatal("incomplete after reads only")
	}
	// A write, then enough reads to rotate it out: incomplete.
	c.put(key(5000), []byte{1}, true, true)
	for i := range 200 {
		c.put(key(i), []byte{1}, true, false)
	}
	if _, _, hit := c.get(key(5000)); hit {
		t.Fatal("the write is still cached: the test rotated too little")
	}
	if c.complete() {
		t.Fatal("complete although a write of the epoch was dropped")
	}
	// The next epoch starts complete; last epoch's writes rotating out
	// do not matter.
	c.nextEpoch()
	for i := range 200 {
		c.put(key(i), []byte{1}, true, false)
	}
	if !c.complete() {
		t.Fatal("incomplete although only reads and an earlier epoch's writes were dropped")
	}
	// A write moved back to the young generation by a hit keeps its
	// epoch: dropped later, it still counts.
	c.put(key(6000), []byte{1}, true, true)
	for i := 1; ; i++ {
		c.put(key(i), []byte{1}, true, false)
		if _, found := c.old[string(key(6000))]; found {
			break
		}
	}
	c.get(key(6000))
	if e := c.young[string(key(6000))]; e.wrote != c.epoch {
		t.Fatalf("a write moved to the young generation carries epoch %d, want %d", e.wrote, c.epoch)
	}
	// A write too large to keep.
	c.nextEpoch()
	c.put(key(7000), make([]byte, budget), true, true)
	if c.complete() {
		t.Fatal("complete although a write was too large to cache")
	}
	c.init(0)
	if c.complete() {
		t.Fatal("a cache of 0 bytes claims to hold the epoch's writes")
	}
}
