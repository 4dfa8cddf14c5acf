package views

import (
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestOpenStateMerger: a new state database merges counted rows, and so
// does it reopened; one made with Pebble's default merger (before views
// merged) still opens, without merges.
func TestOpenStateMerger(t *testing.T) {
	cache := pebble.NewCache(1 << 20)
	defer cache.Unref()
	open := func(dir string) bool {
		t.Helper()
		db, merges, err := openState(dir, cache)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return merges
	}
	fresh := filepath.Join(t.TempDir(), "state")
	if !open(fresh) || !open(fresh) {
		t.Fatal("a state database made with flow's merger does not merge")
	}
	old := filepath.Join(t.TempDir(), "state")
	db, err := pebble.Open(old, &pebble.Options{Cache: cache, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if open(old) {
		t.Fatal("a state database made with Pebble's default merger was told to merge counted rows")
	}
}

// TestStateCacheKeepsBlocks: Pebble charges a database's memtables to
// its cache, so the cache a view's state is given must hold its
// memtables at their most and still leave stateCacheBytes for blocks
// (it did not: a 16 MB cache under 32 MB memtables cached nothing).
func TestStateCacheKeepsBlocks(t *testing.T) {
	opts := stateOptions(nil)
	reserved := int64(opts.MemTableStopWritesThreshold) * int64(opts.MemTableSize)
	if opts.MemTableStopWritesThreshold <= 0 {
		t.Fatal("MemTableStopWritesThreshold left to Pebble's default: the reservation is not known here")
	}
	if left := int64(stateCacheSize) - reserved; left < stateCacheBytes {
		t.Fatalf("cache %d bytes, memtables reserve %d of it: %d left for blocks, want at least %d",
			stateCacheSize, reserved, left, stateCacheBytes)
	}
}
