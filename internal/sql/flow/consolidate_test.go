package flow

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

// naiveConsolidate is consolidate by a map from key encoding to output
// position: the rows' diffs summed, zeros dropped, first appearance
// order.
func naiveConsolidate(changes []types.Change) []types.Change {
	var out []types.Change
	at := map[string]int{}
	for _, c := range changes {
		k := string(appendRowKey(nil, c.Row))
		if i, ok := at[k]; ok {
			out[i].Diff += c.Diff
			continue
		}
		at[k] = len(out)
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
	// Long rows: an epoch of many makes more key bytes than the
	// consolidator keeps from one call to the next.
	pool := make([]types.Row, 40)
	for i := range pool {
		pool[i] = types.Row{int64(i % 7), fmt.Sprint("r", i/7, strings.Repeat("x", 100)), nil}
	}
	var k consolidator
	for epoch := range 60 {
		n := rng.IntN(60)
		switch epoch % 10 {
		case 0:
			n = rng.IntN(2)
		case 1:
			n = 3*maxKeptScratch + rng.IntN(100)
		case 2:
			n = 2*maxKeptKeyBytes/100 + rng.IntN(100)
		}
		changes := make([]types.Change, n)
		for i := range changes {
			row := pool[rng.IntN(len(pool))]
			if epoch%10 == 2 && i%2 == 0 {
				// Distinct rows, more key bytes than are kept.
				row = types.Row{int64(i), row[1], nil}
			}
			changes[i] = types.Change{Row: row, Diff: int64(rng.IntN(5) - 2)}
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
