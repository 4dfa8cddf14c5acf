package fileobj

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/storetest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return openTemp(t) })
}

func TestKeyPath(t *testing.T) {
	tests := []struct {
		key       string
		dir, name string
		bad       bool
	}{
		{key: "a", dir: "", name: "a"},
		{key: "a/b/c", dir: "a%2F/b%2F", name: "c"},
		{key: "data/0001.obj", dir: "data%2F", name: "0001.obj"},
		{key: "100%/x%2F", dir: "100%25%2F", name: "x%252F"},
		{key: "%tmp-x", dir: "", name: "%25tmp-x"},
		{key: ".hidden/..x", dir: ".hidden%2F", name: "..x"},
		{key: "", bad: true},
		{key: "/abs", bad: true},
		{key: "a//b", bad: true},
		{key: "a/", bad: true},
		{key: "../x", bad: true},
		{key: "a/../../x", bad: true},
		{key: "a/./b", bad: true},
		{key: "..", bad: true},
		{key: ".", bad: true},
		{key: "nul\x00byte", bad: true},
		{key: strings.Repeat("x", 256), bad: true},
		{key: strings.Repeat("x", 253) + "/y", bad: true}, // 253 + len("%2F") > 255
		{key: strings.Repeat("x", 255), dir: "", name: strings.Repeat("x", 255)},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			dir, name, err := keyPath(tc.key)
			if tc.bad {
				if !errors.Is(err, ErrInvalidKey) {
					t.Fatalf("keyPath(%q) = %q, %q, %v; want ErrInvalidKey", tc.key, dir, name, err)
				}
				return
			}
			if err != nil || dir != tc.dir || name != tc.name {
				t.Fatalf("keyPath(%q) = %q, %q, %v; want %q, %q", tc.key, dir, name, err, tc.dir, tc.name)
			}
		})
	}
}

func TestInvalidKeysRejected(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	for _, key := range []string{"../escape", "/etc/passwd", "a//b", "a/..", ""} {
		t.Run(key, func(t *testing.T) {
			if err := s.Put(ctx, key, []byte("x")); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Put: %v, want ErrInvalidKey", err)
			}
			if err := s.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("PutIfAbsent: %v, want ErrInvalidKey", err)
			}
			if _, err := s.Get(ctx, key, 0, -1); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Get: %v, want ErrInvalidKey", err)
			}
			if err := s.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Delete: %v, want ErrInvalidKey", err)
			}
		})
	}
	// Nothing was written anywhere, inside the root or next to it.
	parent := filepath.Dir(s.Dir())
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holding the root has %d entries, want only the root", len(entries))
	}
	if got := onDisk(t, s.Dir()); len(got) != 0 {
		t.Fatalf("root holds %q after rejected writes", got)
	}
}

// onDisk lists every file and directory under root, relative to it.
func onDisk(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != root {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestTempFilesHiddenAndCleanedOnOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "a/b", []byte("real")); err != nil {
		t.Fatal(err)
	}
	// What a writer killed mid-Put leaves: temp files next to objects.
	for _, p := range []string{"%tmp-123", "a%2F/%tmp-456", "a%2F/%tmp-b"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []objstore.ObjectInfo{{Key: "a/b", Size: 4}}; !slices.Equal(infos, want) {
		t.Fatalf("List with temp files present = %v, want %v", infos, want)
	}
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := onDisk(t, dir), []string{"a%2F", "a%2F/b"}; !slices.Equal(got, want) {
		t.Fatalf("after Open the root holds %q, want %q", got, want)
	}
}

func TestDeletePrunesEmptyDirs(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	for _, k := range []string{"x/y/z/1", "x/y/z/2", "x/keep"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"x/y/z/1", "x/y/z/2"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := onDisk(t, s.Dir()), []string{"x%2F", "x%2F/keep"}; !slices.Equal(got, want) {
		t.Fatalf("after deletes the root holds %q, want %q", got, want)
	}
}

func TestForeignFilesIgnored(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// Names the escaping never produces: a stray '%', a directory without
	// the suffix. List must not invent keys for them.
	for _, p := range []string{"bad%name", "plain-dir/file"} {
		full := filepath.Join(s.Dir(), p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []objstore.ObjectInfo{{Key: "k", Size: 1}}; !slices.Equal(infos, want) {
		t.Fatalf("List = %v, want %v", infos, want)
	}
}

func TestOpenRejectsFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(f); err == nil {
		t.Fatalf("Open of a regular file succeeded")
	}
}

// TestConcurrentPutDeleteSameDir races writers against deletes that empty
// and remove the writers' directory: no write may fail or be lost.
func TestConcurrentPutDeleteSameDir(t *testing.T) {
	const (
		workers = 4
		rounds  = 60
	)
	s := openTemp(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				key := fmt.Sprintf("shared/dir/w%d-%d", w, i)
				var err error
				if i%2 == 0 {
					err = s.Put(ctx, key, []byte(key))
				} else {
					err = s.PutIfAbsent(ctx, key, []byte(key))
				}
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", key, err)
					return
				}
				if got, err := s.Get(ctx, key, 0, -1); err != nil || string(got) != key {
					errs <- fmt.Errorf("Get %s = %q, %v", key, got, err)
					return
				}
				if i < rounds-1 {
					if err := s.Delete(ctx, key); err != nil {
						errs <- fmt.Errorf("Delete %s: %w", key, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	infos, err := s.List(ctx, "shared/")
	if err != nil {
		t.Fatal(err)
	}
	var want []objstore.ObjectInfo
	for w := range workers {
		key := fmt.Sprintf("shared/dir/w%d-%d", w, rounds-1)
		want = append(want, objstore.ObjectInfo{Key: key, Size: int64(len(key))})
	}
	if !slices.Equal(infos, want) {
		t.Fatalf("List = %v, want %v", infos, want)
	}
}

// TestDirSyncsShared: writes whose renames end while a directory fsync
// runs share the next one, and none returns on an fsync that started
// before it asked.
func TestDirSyncsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openTemp(t)
		var mu sync.Mutex
		started, finished := 0, 0 // fsyncs started; highest index finished
		release := make(chan struct{})
		s.syncDir = func(string) error {
			mu.Lock()
			started++
			n := started
			mu.Unlock()
			if n == 1 {
				<-release // hold the first, so the others arrive during it
			}
			mu.Lock()
			finished = max(finished, n)
			mu.Unlock()
			return nil
		}
		// call reports whether the fsync it returned on started after
		// the call did.
		call := func() bool {
			mu.Lock()
			before := started
			mu.Unlock()
			if err := s.syncDirShared("d"); err != nil {
				t.Errorf("syncDirShared: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			return finished > before
		}
		const joiners = 16
		var wg sync.WaitGroup
		var covered atomic.Int32
		wg.Go(func() {
			if call() {
				covered.Add(1)
			}
		})
		synctest.Wait() // the first fsync is running and held
		for range joiners {
			wg.Go(func() {
				if call() {
					covered.Add(1)
				}
			})
		}
		synctest.Wait() // every joiner waits
		close(release)
		wg.Wait()
		if got := covered.Load(); got != joiners+1 {
			t.Errorf("%d of %d calls returned on an fsync that started after them", got, joiners+1)
		}
		if started != 2 {
			t.Errorf("%d directory fsyncs for %d calls arriving during one, want 2", started, joiners+1)
		}
		if len(s.dirs.m) != 0 {
			t.Errorf("%d directories left in the map, want 0", len(s.dirs.m))
		}
	})
}
