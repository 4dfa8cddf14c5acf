package validate

import "testing"

func TestCacheBounds(t *testing.T) {
	c := newCache(3, 100)
	for id := range int32(5) {
		c.put(id, &checker{weight: 10})
	}
	if c.len() != 3 {
		t.Fatalf("%d entries, want the bound 3", c.len())
	}
	for id := range int32(2) {
		if _, ok := c.get(id); ok {
			t.Errorf("id %d kept: the oldest go first", id)
		}
	}
	c.get(2) // 2 is now the most recent: 3 goes next
	c.put(5, &checker{weight: 75})
	if _, ok := c.get(3); ok {
		t.Error("id 3 kept past the weight bound")
	}
	if _, ok := c.get(2); !ok {
		t.Error("id 2, used last, evicted")
	}
	c.put(6, &checker{weight: 101})
	if _, ok := c.get(6); ok {
		t.Error("a checker heavier than the bound was kept")
	}
	if c.mu.weight > c.maxWeight {
		t.Errorf("weight %d over the bound %d", c.mu.weight, c.maxWeight)
	}
}
