package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/objstore/storetest"
)

// brokenEnv names the broken store a child process runs the suite on.
const brokenEnv = "STORETEST_BROKEN_STORE"

// broken is memobj with one contract violation switched on.
type broken struct {
	*memobj.Store
	flaw string
	// retained backs the "retains-buffer" flaw: the caller's slice itself.
	mu struct {
		sync.Mutex
		retained map[string][]byte
	}
}

func (b *broken) Put(ctx context.Context, key string, data []byte) error {
	if b.flaw == "retains-buffer" {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.mu.Lock()
		b.mu.retained[key] = data
		b.mu.Unlock()
	}
	return b.Store.Put(ctx, key, data)
}

func (b *broken) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if b.flaw == "put-if-absent-overwrites" {
		return b.Store.Put(ctx, key, data)
	}
	return b.Store.PutIfAbsent(ctx, key, data)
}

func (b *broken) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	switch b.flaw {
	case "retains-buffer":
		b.mu.Lock()
		d, ok := b.mu.retained[key]
		b.mu.Unlock()
		if ok && offset == 0 && length < 0 {
			return slices.Clone(d), nil
		}
	case "ignores-offset":
		return b.Store.Get(ctx, key, 0, length)
	case "offset-at-size-is-error":
		whole, err := b.Store.Get(ctx, key, 0, -1)
		if err == nil && offset == int64(len(whole)) {
			return nil, objstore.ErrInvalidRange
		}
	case "ignores-context":
		ctx = context.Background()
	}
	return b.Store.Get(ctx, key, offset, length)
}

func (b *broken) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	out, err := b.Store.List(ctx, prefix)
	if b.flaw == "unsorted-list" {
		slices.Reverse(out)
	}
	return out, err
}

// TestBrokenStoreChild runs the suite on a broken store; it does anything
// only when TestSuiteCatchesBrokenStores re-executes the test binary.
func TestBrokenStoreChild(t *testing.T) {
	flaw := os.Getenv(brokenEnv)
	if flaw == "" {
		t.Skip("only runs as a child of TestSuiteCatchesBrokenStores")
	}
	storetest.Run(t, func(t *testing.T) objstore.Store {
		b := &broken{Store: memobj.New(), flaw: flaw}
		b.mu.retained = map[string][]byte{}
		return b
	})
}

// TestSuiteCatchesBrokenStores shows the suite can fail: each flaw must
// fail the subtest that guards against it, and the flawless control must
// pass.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	tests := []struct {
		flaw       string
		wantFailed string // subtest that must fail; empty: the run passes
	}{
		{"none", ""},
		{"retains-buffer", "BufferOwnership"},
		{"put-if-absent-overwrites", "PutIfAbsent"},
		{"ignores-offset", "GetRanges"},
		{"offset-at-size-is-error", "GetRanges"},
		{"ignores-context", "ContextCanceled"},
		{"unsorted-list", "List"},
	}
	for _, tc := range tests {
		t.Run(tc.flaw, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStoreChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tc.flaw)
			out, err := cmd.CombinedOutput()
			if tc.wantFailed == "" {
				if err != nil {
					t.Fatalf("suite failed on a correct store: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("suite passed a store with flaw %q\n%s", tc.flaw, out)
			}
			if want := "--- FAIL: TestBrokenStoreChild/" + tc.wantFailed + " "; !strings.Contains(string(out), want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		})
	}
}
