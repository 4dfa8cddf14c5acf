package flow

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPebbleStoreAgreesWithMem: random writes, reads, commits and
// rollbacks on PebbleStores with caches from none to roomy agree with a
// MemStore at every read. A small cache drops an epoch's writes
// mid-epoch, so reads alternate between skipping the epoch's batch (the
// cache holds every write) and searching it.
func TestPebbleStoreAgreesWithMem(t *testing.T) {
	for _, cacheBytes := range []int{0, 4 * cacheEntryOverhead, 64 * cacheEntryOverhead, DefaultCacheBytes} {
		t.Run(fmt.Sprint(cacheBytes), func(t *testing.T) {
			seed := uint64(cacheBytes) + 1
			rng := rand.New(rand.NewPCG(seed, 7))
			ps := NewPebbleStore(openPebble(t, vfs.NewMem(), ""), []byte("p/"), false)
			ps.SetCacheBytes(cacheBytes)
			ms := NewMemStore()
			key := func() []byte { return fmt.Appendf(nil, "key%03d", rng.IntN(200)) }
			for op := range 20000 {
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
		})
	}
}
