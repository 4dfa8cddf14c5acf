package faultfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog/faultfs"
)

// TestFault: a set Fault fails exactly the operations and paths it names,
// a failing write leaves the first half of its bytes, and Clear lets
// everything through again.
func TestFault(t *testing.T) {
	dir := t.TempDir()
	fsys := faultfs.Wrap(filelog.OS)
	f, err := fsys.OpenFile(filepath.Join(dir, "a.seg"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	n, hit := fsys.Injected()
	fsys.Set(faultfs.Fault{Ops: faultfs.OpWrite | faultfs.OpCreate, Match: func(p string) bool { return strings.HasSuffix(p, ".seg") }})
	if k, err := f.WriteAt([]byte("0123456789"), 0); !errors.Is(err, faultfs.ErrNoSpace) || k != 5 {
		t.Fatalf("WriteAt under the fault = (%d, %v), want 5 bytes and ENOSPC", k, err)
	}
	<-hit
	if got, _ := fsys.Injected(); got != n+1 {
		t.Fatalf("Injected = %d after one failure, want %d", got, n+1)
	}
	if _, err := fsys.OpenFile(filepath.Join(dir, "b.seg"), os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, faultfs.ErrNoSpace) {
		t.Fatalf("creating a matching file under the fault: %v, want ENOSPC", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync is not in the fault, yet: %v", err)
	}
	other, err := fsys.OpenFile(filepath.Join(dir, "STATE"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("creating a file the fault does not match: %v", err)
	}
	other.Close()

	fsys.Clear()
	if _, err := f.WriteAt([]byte("abcdefghij"), 0); err != nil {
		t.Fatalf("WriteAt after Clear: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "a.seg"))
	if err != nil || string(b) != "abcdefghij" {
		t.Fatalf("file holds %q, %v", b, err)
	}
}
