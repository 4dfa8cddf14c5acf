package filelog_test

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// syncCountingFS counts the full fsyncs and the fdatasyncs of segment
// files, passing both on.
type syncCountingFS struct {
	mu              sync.Mutex
	syncs, datasync int
}

func (c *syncCountingFS) OpenFile(name string, flag int, perm fs.FileMode) (filelog.File, error) {
	f, err := filelog.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(name, ".seg") {
		return f, nil
	}
	return &countedFile{File: f, c: c}, nil
}

func (c *syncCountingFS) Rename(oldpath, newpath string) error {
	return filelog.OS.Rename(oldpath, newpath)
}
func (c *syncCountingFS) Remove(name string) error { return filelog.OS.Remove(name) }

func (c *syncCountingFS) counts() (syncs, datasyncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs, c.datasync
}

type countedFile struct {
	filelog.File
	c *syncCountingFS
}

func (f *countedFile) Sync() error {
	f.c.mu.Lock()
	f.c.syncs++
	f.c.mu.Unlock()
	return f.File.Sync()
}

func (f *countedFile) Datasync() error {
	f.c.mu.Lock()
	f.c.datasync++
	f.c.mu.Unlock()
	return f.File.(filelog.Datasyncer).Datasync()
}

// TestPreallocation: appends inside the zeroed stretch the writer keeps
// ahead of the entries need only fdatasync; the zeros survive a crash
// (a copy of the directory taken while the loglet is open) without being
// taken for a torn entry, and a clean Close cuts them.
func TestPreallocation(t *testing.T) {
	const n = 200 // entries of at most 410 bytes: well within 1 MiB
	dir := t.TempDir()
	counting := &syncCountingFS{}
	l := open(t, dir, filelog.Options{FS: counting})
	appendEntries(t, l, 0, n)
	syncs, datasyncs := counting.counts()
	// One full fsync for the first append, which grew the file; the
	// rest overwrote zeros.
	if syncs > 2 || datasyncs < n-2 {
		t.Errorf("%d appends took %d fsyncs and %d fdatasyncs, want at most 2 fsyncs", n, syncs, datasyncs)
	}
	segs := segmentFiles(t, dir)
	fi, err := os.Stat(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 1<<20 {
		t.Errorf("active segment is %d bytes, want the preallocation of 1 MiB", fi.Size())
	}

	crashed := copyDir(t, dir)
	var logs logBuffer
	l2 := open(t, crashed, filelog.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	wantLog(t, l2, 0, n)
	if strings.Contains(logs.String(), "torn tail") {
		t.Errorf("the preallocation was cut as a torn tail:\n%s", logs.String())
	}
	appendEntries(t, l2, n, n+10)
	wantLog(t, l2, 0, n+10)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Stat(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, filelog.Options{})
	defer l.Close()
	wantLog(t, l, 0, n)
	if fi.Size() >= 1<<20 {
		t.Errorf("after Close the active segment is %d bytes: the preallocation was not cut", fi.Size())
	}
}

// TestPreallocationCutAtRoll: a closed segment ends after its last entry,
// as versions before preallocation wrote and read them, even when it was
// preallocated past SegmentBytes (by a crashed run with larger segments).
func TestPreallocationCutAtRoll(t *testing.T) {
	big := t.TempDir()
	l := open(t, big, filelog.Options{})
	defer l.Close()
	appendEntries(t, l, 0, 5)
	dir := copyDir(t, big) // 1 MiB of zeros after 5 entries
	l2 := open(t, dir, filelog.Options{SegmentBytes: 4 << 10})
	defer l2.Close()
	appendEntries(t, l2, 5, 100)
	wantLog(t, l2, 0, 100)
	segs := segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	base := func(path string) int {
		b, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".seg"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, path := range segs[:len(segs)-1] {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(24) // the header, then each entry's 8 and payload
		for e := base(path); e < base(segs[i+1]); e++ {
			want += 8 + int64(len(entry(e)))
		}
		if fi.Size() != want {
			t.Errorf("closed segment %s is %d bytes, its entries end at %d", filepath.Base(path), fi.Size(), want)
		}
	}
}
