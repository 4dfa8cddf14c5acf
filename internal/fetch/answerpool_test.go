package fetch

import "testing"

func TestAnswerPool(t *testing.T) {
	p := newAnswerPool()
	if b := p.get(1 << 20); b != nil {
		t.Fatalf("empty pool gave a buffer of cap %d", cap(b))
	}
	// Too small or too large to keep.
	p.put(make([]byte, minPooledBytes-1))
	p.put(make([]byte, minPooledBytes<<pooledClasses))
	for _, n := range []int{1, minPooledBytes, 1 << 20} {
		if b := p.get(n); b != nil {
			t.Fatalf("get(%d) gave a buffer of cap %d no put should have kept", n, cap(b))
		}
	}
	// A buffer of 1.5 MiB is in the class of 1 MiB: it serves 1 MiB, and
	// 1.5 MiB. Asked for more than it holds, the class drops it.
	p.put(make([]byte, 3<<19))
	b := p.get(1 << 20)
	if len(b) != 1<<20 || cap(b) != 3<<19 {
		t.Fatalf("get(1 MiB) = len %d cap %d, want len %d cap %d", len(b), cap(b), 1<<20, 3<<19)
	}
	if b := p.get(1 << 20); b != nil {
		t.Fatal("the pool gave the same buffer twice")
	}
	p.put(b)
	if b := p.get(3 << 19); len(b) != 3<<19 {
		t.Fatalf("get(1.5 MiB) = len %d, want the 1.5 MiB buffer", len(b))
	}
	p.put(b)
	if b := p.get(3<<19 + 1); b != nil {
		t.Fatalf("get(1.5 MiB + 1) gave a buffer of cap %d", cap(b))
	}
	if n := len(p.classes[4]); n != 0 {
		t.Fatalf("the 1 MiB class kept %d buffers too small for what was asked, want 0", n)
	}
	// Bounded: the pool keeps pooledIdleBytes of capacity, in any
	// classes.
	for range 10 {
		p.put(make([]byte, 8<<20-1))
	}
	if n := len(p.classes[pooledClasses-1]); n != 2 {
		t.Fatalf("the largest class keeps %d buffers of 8 MiB - 1, want 2", n)
	}
	p.put(make([]byte, minPooledBytes))
	if n := len(p.classes[0]); n != 0 {
		t.Fatalf("the smallest class keeps %d buffers past the bound, want 0", n)
	}
	p.get(8<<20 - 1)
	for range 200 {
		p.put(make([]byte, minPooledBytes))
	}
	if n, want := len(p.classes[0]), (8<<20+1)/minPooledBytes; n != want {
		t.Fatalf("the smallest class keeps %d buffers, want %d (what the bound leaves)", n, want)
	}
	if got := p.idle.Load(); got > pooledIdleBytes {
		t.Fatalf("idle %d bytes, past the bound %d", got, pooledIdleBytes)
	}
}
