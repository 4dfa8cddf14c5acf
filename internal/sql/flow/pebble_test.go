package flow

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/sql/types"
)

// TestPebbleStoreAgreesWithMem: random writes, reads, commits and
// rollbacks on PebbleStores with caches from none to roomy agree with a
// MemStore at every read. A small cache drops an epoch's writes
// mid-epoch, so reads alternate between skipping the epoch's batch (the
// cache holds every write) and searching it.
//
// With merges, counted keys (their own key space) take additions as
// merge operands held apart from the batch, and retractions through
// addCounted, as a view's index does; scans see both.
func TestPebbleStoreAgreesWithMem(t *testing.T) {
	for _, merges := range []bool{false, true} {
		for _, cacheBytes := range []int{0, 4 * cacheEntryOverhead, 64 * cacheEntryOverhead, DefaultCacheBytes} {
			t.Run(fmt.Sprint(merges, cacheBytes), func(t *testing.T) { pebbleAgreesWithMem(t, merges, cacheBytes) })
		}
	}
}

func pebbleAgreesWithMem(t *testing.T, merges bool, cacheBytes int) {
	seed := uint64(cacheBytes) + 1
	rng := rand.New(rand.NewPCG(seed, 7))
	db := openPebble(t, vfs.NewMem(), "")
	if merges {
		db = openPebbleMerging(t)
	}
	ps := NewPebbleStore(db, []byte("p/"), false)
	ps.SetCacheBytes(cacheBytes)
	ps.SetCountedMerges(merges)
	ms := NewMemStore()
	// Half the plain keys share their first byte with the counted
	// ones, which the store marks per first byte as merged.
	key := func() []byte {
		if rng.IntN(2) == 0 {
			return fmt.Appendf(nil, "cx%03d", rng.IntN(100))
		}
		return fmt.Appendf(nil, "key%03d", rng.IntN(100))
	}
	ckey := func() ([]byte, types.Row) {
		i := rng.IntN(50)
		return fmt.Appendf(nil, "c%03d", i), types.Row{int64(i), "row"}
	}
	var buf []byte
	for op := range 20000 {
		if merges && rng.IntN(4) == 0 {
			k, row := ckey()
			switch r := rng.IntN(10); {
			case r < 5:
				d := int64(1 + rng.IntN(3))
				done, err := ps.addBlind(k, appendCounted(nil, d, row))
				if err != nil || !done {
					t.Fatalf("addBlind: %v %v", done, err)
				}
				if _, _, err := addCounted(ms, k, row, d, &buf); err != nil {
					t.Fatal(err)
				}
			case r < 7:
				// A retraction of at most what the mem store holds.
				n, _ := getCountedN(t, ms, k)
				if n == 0 {
					continue
				}
				d := -int64(1 + rng.IntN(int(n)))
				if _, _, err := addCounted(ps, k, row, d, &buf); err != nil {
					t.Fatalf("op %d: pebble retraction: %v", op, err)
				}
				if _, _, err := addCounted(ms, k, row, d, &buf); err != nil {
					t.Fatal(err)
				}
			default:
				var got, want []string
				collect := func(out *[]string) func(k, v []byte) (bool, error) {
					return func(k, v []byte) (bool, error) {
						*out = append(*out, fmt.Sprintf("%s=%x", k, v))
						return true, nil
					}
				}
				if err := ps.Scan(nil, nil, false, collect(&got)); err != nil {
					t.Fatal(err)
				}
				ms.Scan(nil, nil, false, collect(&want))
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("seed %d op %d: scans differ:\npebble %v\nmem    %v", seed, op, got, want)
				}
			}
			continue
		}
		switch r := rng.IntN(100); {
		case r < 40:
			k, v := key(), fmt.Appendf(nil, "v%d", op)
			if err := ps.Set(k, v); err != nil {
				t.Fatal(err)
			}
			ms.Set(k, v)
		case r < 50:
			k := key()
			if err := ps.Delete(k); err != nil {
				t.Fatal(err)
			}
			ms.Delete(k)
		case r < 95:
			k := key()
			pv, pok, err := ps.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			mv, mok, _ := ms.Get(k)
			if pok != mok || !bytes.Equal(pv, mv) {
				t.Fatalf("seed %d op %d: Get(%s) = %q %v, want %q %v", seed, op, k, pv, pok, mv, mok)
			}
		case r < 98:
			if err := ps.Commit(); err != nil {
				t.Fatal(err)
			}
			ms.Commit()
		default:
			if err := ps.Rollback(); err != nil {
				t.Fatal(err)
			}
			ms.Rollback()
		}
	}
}

// getCountedN is key's count in s (0: none).
func getCountedN(t *testing.T, s Store, key []byte) (int64, bool) {
	t.Helper()
	v, ok, err := s.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return 0, false
	}
	n, err := decodeCount(v)
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}
