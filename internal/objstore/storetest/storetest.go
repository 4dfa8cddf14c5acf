// Package storetest owns the conformance suite for objstore.Store: the
// behaviour every backend and wrapper must show, written once. A backend's
// test calls Run with a constructor for a fresh, empty store.
//
// The suite checks the contract in objstore.go and nothing a particular
// backend adds, plus two rules every Strand store keeps: a call whose
// context was canceled before it started fails with an error matching
// the context's error and changes nothing, and the caller may reuse its
// Put buffer and the slice Get returned. Keys it uses are plain (no "..",
// no empty segments, no leading slash) so every backend can accept them,
// but include '%', '+', spaces and non-ASCII, which escaping gets wrong.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
)

// deadlockGuard bounds waits in concurrent subtests. It is not a speed
// check: a healthy store finishes far sooner, and the guard only turns a
// hang into a failure.
const deadlockGuard = 2 * time.Minute

// Run runs the conformance suite. newStore must return a new, empty store
// each time it is called; it may register cleanups on t.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"EmptyObject", testEmptyObject},
		{"LargeObject", testLargeObject},
		{"GetRanges", testGetRanges},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"List", testList},
		{"OddKeys", testOddKeys},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"ConcurrentPutGet", testConcurrentPutGet},
		{"ContextCanceled", testContextCanceled},
		{"BufferOwnership", testBufferOwnership},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// pattern returns n bytes that depend on seed and on position, so a
// misplaced range or a mix of two objects shows up as a mismatch.
func pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, data); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(data), err)
	}
}

func get(t *testing.T, s objstore.Store, key string, offset, length int64) []byte {
	t.Helper()
	got, err := s.Get(context.Background(), key, offset, length)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, offset, length, err)
	}
	return got
}

func mustEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes %s, want %d bytes %s", what, len(got), preview(got), len(want), preview(want))
	}
}

func preview(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%x...", b[:16])
	}
	return fmt.Sprintf("%x", b)
}

func list(t *testing.T, s objstore.Store, prefix string) []objstore.ObjectInfo {
	t.Helper()
	got, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	data := pattern(1, 1000)
	put(t, s, "round/trip", data)
	mustEqual(t, "Get whole", get(t, s, "round/trip", 0, -1), data)
	mustEqual(t, "Get exact length", get(t, s, "round/trip", 0, int64(len(data))), data)
}

func testOverwrite(t *testing.T, s objstore.Store) {
	// Long, then short, then long again: a backend that writes in place
	// without truncating would leave a tail behind.
	for i, n := range []int{5000, 10, 3000} {
		data := pattern(uint64(100+i), n)
		put(t, s, "over/write", data)
		mustEqual(t, fmt.Sprintf("Get after write %d", i), get(t, s, "over/write", 0, -1), data)
		infos := list(t, s, "over/")
		want := []objstore.ObjectInfo{{Key: "over/write", Size: int64(n)}}
		if !slices.Equal(infos, want) {
			t.Fatalf("List after write %d = %v, want %v", i, infos, want)
		}
	}
}

func testEmptyObject(t *testing.T, s objstore.Store) {
	put(t, s, "empty", nil)
	for _, r := range []struct{ off, n int64 }{{0, -1}, {0, 0}, {0, 10}} {
		got := get(t, s, "empty", r.off, r.n)
		if len(got) != 0 {
			t.Fatalf("Get(empty, %d, %d) = %d bytes, want 0", r.off, r.n, len(got))
		}
	}
	if _, err := s.Get(context.Background(), "empty", 1, -1); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Fatalf("Get(empty, 1, -1) error = %v, want ErrInvalidRange", err)
	}
	want := []objstore.ObjectInfo{{Key: "empty", Size: 0}}
	if got := list(t, s, ""); !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if err := s.PutIfAbsent(context.Background(), "empty", []byte("x")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent over an empty object: %v, want ErrExists", err)
	}
}

func testLargeObject(t *testing.T, s objstore.Store) {
	const size = 4<<20 + 123 // not a power of two: catches chunking bugs
	data := pattern(7, size)
	put(t, s, "large/object", data)
	mustEqual(t, "Get whole", get(t, s, "large/object", 0, -1), data)
	mustEqual(t, "Get middle", get(t, s, "large/object", 1<<20+5, 2<<20), data[1<<20+5:3<<20+5])
	mustEqual(t, "Get tail", get(t, s, "large/object", size-10, -1), data[size-10:])
	want := []objstore.ObjectInfo{{Key: "large/object", Size: size}}
	if got := list(t, s, "large"); !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
}

func testGetRanges(t *testing.T, s objstore.Store) {
	data := pattern(3, 100)
	put(t, s, "ranges", data)
	tests := []struct {
		name           string
		offset, length int64
		want           []byte
		wantErr        error
	}{
		{"whole", 0, -1, data, nil},
		{"prefix", 0, 10, data[:10], nil},
		{"middle", 10, 20, data[10:30], nil},
		{"to end", 40, -1, data[40:], nil},
		{"to end, other negative", 40, -7, data[40:], nil},
		{"exact end", 90, 10, data[90:], nil},
		{"cut at end", 90, 50, data[90:], nil},
		{"huge length", 5, 1 << 62, data[5:], nil},
		{"zero length", 50, 0, []byte{}, nil},
		{"last byte", 99, 1, data[99:], nil},
		{"offset at size", 100, -1, []byte{}, nil},
		{"offset at size with length", 100, 10, []byte{}, nil},
		{"offset at size, zero length", 100, 0, []byte{}, nil},
		{"offset past size", 101, -1, nil, objstore.ErrInvalidRange},
		{"offset far past size", 1 << 40, 5, nil, objstore.ErrInvalidRange},
		{"negative offset", -1, 5, nil, objstore.ErrInvalidRange},
		{"negative offset to end", -10, -1, nil, objstore.ErrInvalidRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Get(context.Background(), "ranges", tc.offset, tc.length)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Get(%d, %d) error = %v, want %v", tc.offset, tc.length, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get(%d, %d): %v", tc.offset, tc.length, err)
			}
			mustEqual(t, fmt.Sprintf("Get(%d, %d)", tc.offset, tc.length), got, tc.want)
		})
	}
}

func testNotFound(t *testing.T, s objstore.Store) {
	put(t, s, "present/child", []byte("x"))
	tests := []struct {
		name           string
		key            string
		offset, length int64
	}{
		{"never written", "missing", 0, -1},
		{"range of missing", "missing", 5, 10},
		{"parent of a key", "present", 0, -1},
		{"prefix of a key", "present/chi", 0, -1},
		{"child of missing", "missing/child", 0, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Get(context.Background(), tc.key, tc.offset, tc.length)
			if !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Get(%q) error = %v, want ErrNotFound", tc.key, err)
			}
		})
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put(t, s, "del/a", []byte("a"))
	put(t, s, "del/b", []byte("bb"))
	put(t, s, "del/sub/c", []byte("ccc"))
	if err := s.Delete(ctx, "del/a"); err != nil {
		t.Fatalf("Delete(del/a): %v", err)
	}
	if _, err := s.Get(ctx, "del/a", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	for _, key := range []string{"del/a", "never/written", "del/sub"} {
		if err := s.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q) of a missing key: %v", key, err)
		}
	}
	// Deleting the only object under a "directory" must not disturb
	// its siblings, and the key must be writable again afterwards.
	if err := s.Delete(ctx, "del/sub/c"); err != nil {
		t.Fatalf("Delete(del/sub/c): %v", err)
	}
	want := []objstore.ObjectInfo{{Key: "del/b", Size: 2}}
	if got := list(t, s, "del/"); !slices.Equal(got, want) {
		t.Fatalf("List after deletes = %v, want %v", got, want)
	}
	put(t, s, "del/sub/c", []byte("again"))
	mustEqual(t, "Get rewritten", get(t, s, "del/sub/c", 0, -1), []byte("again"))
	if err := s.PutIfAbsent(ctx, "del/a", []byte("new")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
}

func testList(t *testing.T, s objstore.Store) {
	// Keys are written out of order; sizes are distinct so a size mixed up
	// between keys shows.
	keys := []string{
		"b/x", "a/b/c/d/e", "a/bc", "ab", "a/b", "a/b/c", "a", "a/b/c2", "a-", "b/y/z",
	}
	sizes := map[string]int64{}
	for i, k := range keys {
		sizes[k] = int64(i + 1)
		put(t, s, k, pattern(uint64(i), i+1))
	}
	infos := func(ks ...string) []objstore.ObjectInfo {
		out := []objstore.ObjectInfo{}
		for _, k := range ks {
			out = append(out, objstore.ObjectInfo{Key: k, Size: sizes[k]})
		}
		return out
	}
	tests := []struct {
		prefix string
		want   []objstore.ObjectInfo
	}{
		{"", infos("a", "a-", "a/b", "a/b/c", "a/b/c/d/e", "a/b/c2", "a/bc", "ab", "b/x", "b/y/z")},
		{"a", infos("a", "a-", "a/b", "a/b/c", "a/b/c/d/e", "a/b/c2", "a/bc", "ab")},
		{"a/", infos("a/b", "a/b/c", "a/b/c/d/e", "a/b/c2", "a/bc")},
		{"a/b", infos("a/b", "a/b/c", "a/b/c/d/e", "a/b/c2", "a/bc")},
		{"a/b/", infos("a/b/c", "a/b/c/d/e", "a/b/c2")},
		{"a/b/c", infos("a/b/c", "a/b/c/d/e", "a/b/c2")},
		{"a/b/c/", infos("a/b/c/d/e")},
		{"a/b/c/d/e", infos("a/b/c/d/e")},
		{"a/b/c/d/e/", infos()},
		{"b/", infos("b/x", "b/y/z")},
		{"b/y", infos("b/y/z")},
		{"zz", infos()},
		{"a//", infos()},
		{"c/", infos()},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("prefix=%q", tc.prefix), func(t *testing.T) {
			got := list(t, s, tc.prefix)
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("List(%q) =\n  %v\nwant\n  %v", tc.prefix, got, tc.want)
			}
		})
	}
}

func testOddKeys(t *testing.T, s objstore.Store) {
	// Characters that URL encoders, shells and file name escaping tend to
	// get wrong.
	keys := []string{
		"odd/100%",
		"odd/%25",
		"odd/a b",
		"odd/plus+sign",
		"odd/eq=amp&q?",
		"odd/ünïcödé",
		"odd/.hidden",
		"odd/trailing.",
		"odd/dir%/x",
		"odd/~tilde",
	}
	for i, k := range keys {
		put(t, s, k, pattern(uint64(1000+i), 10+i))
	}
	for i, k := range keys {
		mustEqual(t, fmt.Sprintf("Get(%q)", k), get(t, s, k, 0, -1), pattern(uint64(1000+i), 10+i))
	}
	want := make([]string, len(keys))
	copy(want, keys)
	slices.Sort(want)
	var got []string
	for _, info := range list(t, s, "odd/") {
		got = append(got, info.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(odd/) keys = %q, want %q", got, want)
	}
}

func testPutIfAbsent(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	first := pattern(11, 300)
	if err := s.PutIfAbsent(ctx, "pia/key", first); err != nil {
		t.Fatalf("PutIfAbsent on a new key: %v", err)
	}
	mustEqual(t, "Get after PutIfAbsent", get(t, s, "pia/key", 0, -1), first)
	if err := s.PutIfAbsent(ctx, "pia/key", pattern(12, 50)); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent: %v, want ErrExists", err)
	}
	// Same bytes again still loses: PutIfAbsent is about the key, not the
	// content.
	if err := s.PutIfAbsent(ctx, "pia/key", first); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent with identical bytes: %v, want ErrExists", err)
	}
	mustEqual(t, "Get after losing PutIfAbsent", get(t, s, "pia/key", 0, -1), first)
	want := []objstore.ObjectInfo{{Key: "pia/key", Size: 300}}
	if got := list(t, s, "pia/"); !slices.Equal(got, want) {
		t.Fatalf("List after losing PutIfAbsent = %v, want %v", got, want)
	}
	// Put still overwrites a key PutIfAbsent created.
	put(t, s, "pia/key", []byte("over"))
	mustEqual(t, "Get after Put", get(t, s, "pia/key", 0, -1), []byte("over"))
}

func testPutIfAbsentRace(t *testing.T, s objstore.Store) {
	const writers = 16
	ctx := context.Background()
	start := make(chan struct{})
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Each writer's bytes differ in length and content, so the
			// winner is identifiable from what Get returns.
			errs[i] = s.PutIfAbsent(ctx, "race/key", pattern(uint64(500+i), 1000+i*37))
		}()
	}
	close(start)
	waitGroup(t, &wg)
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won PutIfAbsent", winner, i)
			}
			winner = i
		case errors.Is(err, objstore.ErrExists):
		default:
			t.Fatalf("writer %d: %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer won PutIfAbsent")
	}
	mustEqual(t, "Get after race", get(t, s, "race/key", 0, -1), pattern(uint64(500+winner), 1000+winner*37))
}

func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(deadlockGuard):
		t.Fatalf("goroutines did not finish within %v", deadlockGuard)
	}
}

func testConcurrentPutGet(t *testing.T, s objstore.Store) {
	const (
		versions = 24
		size     = 64 << 10
		readers  = 3
	)
	ctx := context.Background()
	// Every version has the same size, so a torn read cannot be spotted by
	// its length alone: each must match one version byte for byte.
	vs := make([][]byte, versions)
	for i := range vs {
		vs[i] = pattern(uint64(9000+i), size)
	}
	put(t, s, "torn/key", vs[0])

	done := make(chan struct{})
	var wg sync.WaitGroup
	readErrs := make([]error, readers)
	reads := make([]int, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.Get(ctx, "torn/key", 0, -1)
				if err != nil {
					readErrs[r] = fmt.Errorf("Get: %w", err)
					return
				}
				if !slices.ContainsFunc(vs, func(v []byte) bool { return bytes.Equal(v, got) }) {
					readErrs[r] = fmt.Errorf("read %d returned %d bytes matching no version written", reads[r], len(got))
					return
				}
				reads[r]++
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	var writeErr error
	for i := 1; i < versions; i++ {
		if writeErr = s.Put(ctx, "torn/key", vs[i]); writeErr != nil {
			break
		}
	}
	close(done)
	waitGroup(t, &wg)
	if writeErr != nil {
		t.Fatalf("Put: %v", writeErr)
	}
	for r, err := range readErrs {
		if err != nil {
			t.Fatalf("reader %d: %v", r, err)
		}
	}
	mustEqual(t, "final Get", get(t, s, "torn/key", 0, -1), vs[versions-1])
}

func testContextCanceled(t *testing.T, s objstore.Store) {
	put(t, s, "ctx/existing", []byte("kept"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ops := []struct {
		name string
		fn   func() error
	}{
		{"Put", func() error { return s.Put(ctx, "ctx/new", []byte("x")) }},
		{"PutIfAbsent", func() error { return s.PutIfAbsent(ctx, "ctx/new2", []byte("x")) }},
		{"Put over existing", func() error { return s.Put(ctx, "ctx/existing", []byte("changed")) }},
		{"Get", func() error { _, err := s.Get(ctx, "ctx/existing", 0, -1); return err }},
		{"Delete", func() error { return s.Delete(ctx, "ctx/existing") }},
		{"List", func() error { _, err := s.List(ctx, "ctx/"); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			if err := op.fn(); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s with a canceled context: %v, want context.Canceled", op.name, err)
			}
		})
	}
	// A call refused for a context canceled before it started must not
	// have changed the store.
	want := []objstore.ObjectInfo{{Key: "ctx/existing", Size: 4}}
	if got := list(t, s, "ctx/"); !slices.Equal(got, want) {
		t.Fatalf("List after canceled calls = %v, want %v", got, want)
	}
	mustEqual(t, "Get after canceled calls", get(t, s, "ctx/existing", 0, -1), []byte("kept"))
}

func testBufferOwnership(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	orig := pattern(77, 4096)
	buf := slices.Clone(orig)
	put(t, s, "own/put", buf)
	for i := range buf {
		buf[i] ^= 0xff
	}
	mustEqual(t, "Get after caller changed Put buffer", get(t, s, "own/put", 0, -1), orig)

	buf = slices.Clone(orig)
	if err := s.PutIfAbsent(ctx, "own/pia", buf); err != nil {
		t.Fatalf("PutIfAbsent: %v", err)
	}
	clear(buf)
	mustEqual(t, "Get after caller changed PutIfAbsent buffer", get(t, s, "own/pia", 0, -1), orig)

	// The caller owns what Get returns: changing it changes nothing stored.
	got := get(t, s, "own/put", 0, -1)
	clear(got)
	got = get(t, s, "own/put", 10, 100)
	for i := range got {
		got[i] = 1
	}
	mustEqual(t, "Get after caller changed an earlier Get result", get(t, s, "own/put", 0, -1), orig)
}
