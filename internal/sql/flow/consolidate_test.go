package flow

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

// naiveConsolidate is consolidate by a quadratic search: the rows'
// diffs summed by key encoding, zeros dropped, first appearance order.
func naiveConsolidate(changes []types.Change) []types.Change {
	var out []types.Change
	var keys [][]byte
next:
	for _, c := range changes {
		k := appendRowKey(nil, c.Row)
		for i := range keys {
			if bytes.Equal(keys[i], k) {
				out[i].Diff += c.Diff
				continue next
			}
		}
		keys = append(keys, k)
		out = append(out, c)
	}
	var kept []types.Change
	for _, c := range out {
		if c.Diff != 0 {
			kept = append(kept, c)
		}
	}
	return kept
}

// TestConsolidator: one consolidator over epochs of random sizes (0, 1,
// a few, more than a kept table) of rows from a small pool, so rows
// repeat and cancel, agrees with the naive sum, and each output row's
// rowKey is its key encoding.
func TestConsolidator(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := make([]types.Row, 40)
	for i := range pool {
		pool[i] = types.Row{int64(i % 7), fmt.Sprint("r", i/7), nil}
	}
	var k consolidator
	for epoch := range 300 {
		n := rng.IntN(60)
		switch epoch % 10 {
		case 0:
			n = rng.IntN(2)
		case 1:
			n = 3*maxKeptScratch + rng.IntN(100)
		}
		changes := make([]types.Change, n)
		for i := range changes {
			changes[i] = types.Change{Row: pool[rng.IntN(len(pool))], Diff: int64(rng.IntN(5) - 2)}
		}
		want := naiveConsolidate(changes)
		got := k.consolidate(changes)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("epoch %d (%d changes): got %v, want %v", epoch, n, got, want)
		}
		for i, c := range got {
			key, ok := k.rowKey(i)
			if !ok {
				if n > 1 {
					t.Fatalf("epoch %d: no key for output %d of %d changes", epoch, i, n)
				}
				continue
			}
			if want := appendRowKey(nil, c.Row); !bytes.Equal(key, want) {
				t.Fatalf("epoch %d: rowKey(%d) = %x, want %x", epoch, i, key, want)
			}
		}
		if _, ok := k.rowKey(len(got)); ok {
			t.Fatalf("epoch %d: a key past the output", epoch)
		}
	}
}
