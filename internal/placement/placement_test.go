package placement

import (
	"fmt"
	"testing"
)

// Keys spread over the nodes, whatever order the nodes come in.
func TestOwnerOf(t *testing.T) {
	nodes := []int32{3, 1, 2}
	counts := make(map[int32]int)
	for i := range 300 {
		key := fmt.Sprintf("group-%d", i)
		owner := OwnerOf(key, nodes)
		if owner != OwnerOf(key, []int32{1, 2, 3, 3}) {
			t.Fatalf("owner of %s depends on the order of the nodes or repeats", key)
		}
		counts[owner]++
	}
	for _, n := range nodes {
		if counts[n] < 50 {
			t.Fatalf("spread %v", counts)
		}
	}
	if OwnerOf("x", nil) != -1 {
		t.Fatal("owner with no nodes")
	}
}

func TestRing(t *testing.T) {
	alone := Ring{Self: 7}
	if alone.Owner("x") != 7 || !alone.Owns("x") {
		t.Fatal("an agent alone does not own every key")
	}
	nodes := []int32{7, 8}
	r := Ring{Self: 7, Live: func() []int32 { return nodes }}
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		if r.Owner(key) != OwnerOf(key, nodes) || r.Owns(key) != (OwnerOf(key, nodes) == 7) {
			t.Fatalf("%s: Ring disagrees with OwnerOf", key)
		}
	}
}

// A held ring owns nothing, and places keys as before: the others keep
// naming it, so its work waits instead of moving.
func TestRingHold(t *testing.T) {
	held := false
	r := Ring{Self: 1, Live: func() []int32 { return []int32{1} }, Hold: func() bool { return held }}
	if !r.Owns("k") {
		t.Fatal("a lone agent does not own its key")
	}
	held = true
	if r.Owns("k") || r.Owner("k") != 1 {
		t.Fatalf("held: Owns %v, Owner %d; want false, 1", r.Owns("k"), r.Owner("k"))
	}
}
