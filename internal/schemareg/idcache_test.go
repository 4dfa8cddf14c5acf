package schemareg

import "testing"

func TestIDCacheBounds(t *testing.T) {
	c := NewIDCache[string](3, 100)
	for id := range int32(5) {
		c.Put(id, "schema", 10)
	}
	if c.Len() != 3 {
		t.Fatalf("%d entries, want the bound 3", c.Len())
	}
	for id := range int32(2) {
		if _, ok := c.Get(id); ok {
			t.Errorf("id %d kept: the oldest go first", id)
		}
	}
	c.Get(2) // 2 is now the most recent: 3 goes next
	c.Put(5, "heavy", 75)
	if _, ok := c.Get(3); ok {
		t.Error("id 3 kept past the weight bound")
	}
	if v, ok := c.Get(2); !ok || v != "schema" {
		t.Errorf("id 2, used last: %q, %v", v, ok)
	}
	c.Put(6, "too heavy", 101)
	if _, ok := c.Get(6); ok {
		t.Error("a value heavier than the bound was kept")
	}
	c.Put(5, "other", 1)
	if v, _ := c.Get(5); v != "heavy" {
		t.Errorf("id 5 holds %q: an id keeps its first value", v)
	}
	if w := c.Weight(); w > 100 {
		t.Errorf("weight %d over the bound 100", w)
	}
}
