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
