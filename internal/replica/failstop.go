package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Fail-stop: what happens when Pebble cannot write.
//
// The replica does not try to recover from a failed write or fsync of
// any of Pebble's files. Pebble itself cannot: a failed WAL write stays
// stuck in its log writer and panics at the next WAL rotation (with its
// mutex unlocked, so the process dies of "sync: unlock of unlocked
// mutex", not a recoverable panic); a failed MANIFEST write is a Fatalf;
// a failed flush is retried at once, in a loop with no backoff, while
// commits stall behind it. Nor does it need to: the copy is soft state.
// Each apply batch carries its applied position, Pebble recovers a
// prefix of its batches after a crash, and a restart replays the log
// from there (or restores a snapshot), so exiting loses nothing. So the
// first failed write in the store's directory, and Pebble's own Fatalf,
// end the process through Config.FailStop, before Pebble sees the error.
//
// The shared log is the other way round: the file loglet recovers by
// itself (package filelog), because it is the durable copy and can cut
// a failed write off cleanly.

// stopper calls Config.FailStop, once.
type stopper struct {
	failStop func(error)
	once     sync.Once
	// halt, set once the Replica exists, halts it should FailStop
	// return.
	mu   sync.Mutex
	halt func(error)
}

func newStopper(cfg *Config) *stopper {
	fn := cfg.FailStop
	if fn == nil {
		logger := cfg.Logger
		fn = func(err error) {
			logger.Error("replica: the local metadata copy cannot be trusted; exiting", "err", err)
			os.Exit(1)
		}
	}
	return &stopper{failStop: fn}
}

func (s *stopper) setHalt(halt func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.halt = halt
}

// stop calls FailStop the first time, and halts the replica if FailStop
// returns (only a test's does).
func (s *stopper) stop(err error) {
	s.once.Do(func() { s.failStop(err) })
	s.mu.Lock()
	halt := s.halt
	s.mu.Unlock()
	if halt != nil {
		halt(err)
	}
}

// stopInPebble is stop for a goroutine inside Pebble. It never returns:
// Pebble must not act on the failure, which would be the panic FailStop
// is there to prevent. In production the process is gone by then.
func (s *stopper) stopInPebble(err error) {
	s.stop(err)
	select {}
}

// watchFS wraps fs so that a failed write, fsync or file creation in dir,
// the live store's directory, calls stop. Files elsewhere (a snapshot's
// checkpoint, written through the same FS) keep their errors: Pebble
// reports those to its caller and stays sound. Failed removals are left
// to Pebble, which treats them as harmless, and so are preallocations,
// which it ignores.
func watchFS(fs vfs.FS, dir string, stop func(error)) vfs.FS {
	return &watchedFS{FS: fs, dir: filepath.Clean(dir), stop: stop}
}

type watchedFS struct {
	vfs.FS
	dir  string
	stop func(error)
}

// inDir reports whether path is a file of the live store.
func (w *watchedFS) inDir(path string) bool { return filepath.Dir(filepath.Clean(path)) == w.dir }

func (w *watchedFS) failed(op, path string, err error) {
	w.stop(fmt.Errorf("replica: pebble could not %s %s: %w", op, path, err))
}

// watch checks the result of opening a file for writing.
func (w *watchedFS) watch(op, name string, f vfs.File, err error) (vfs.File, error) {
	if !w.inDir(name) {
		return f, err
	}
	if err != nil {
		w.failed(op, name, err)
		return nil, err
	}
	return &watchedFile{File: f, name: name, fs: w}, nil
}

func (w *watchedFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.Create(name, category)
	return w.watch("create", name, f, err)
}

func (w *watchedFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := w.FS.OpenReadWrite(name, category, opts...)
	return w.watch("open for writing", name, f, err)
}

func (w *watchedFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.ReuseForWrite(oldname, newname, category)
	return w.watch("reuse "+oldname+" as", newname, f, err)
}

// OpenDir watches the store's directory: fsyncing it makes file
// creations and renames durable.
func (w *watchedFS) OpenDir(name string) (vfs.File, error) {
	f, err := w.FS.OpenDir(name)
	if err != nil || filepath.Clean(name) != w.dir {
		return f, err
	}
	return &watchedFile{File: f, name: name, fs: w}, nil
}

func (w *watchedFS) Rename(oldname, newname string) error {
	err := w.FS.Rename(oldname, newname)
	if err != nil && w.inDir(newname) {
		w.failed("rename "+oldname+" to", newname, err)
	}
	return err
}

func (w *watchedFS) Link(oldname, newname string) error {
	err := w.FS.Link(oldname, newname)
	if err != nil && w.inDir(newname) {
		w.failed("link "+oldname+" to", newname, err)
	}
	return err
}

// Unwrap lets Pebble find the file system underneath, as errorfs does.
func (w *watchedFS) Unwrap() vfs.FS { return w.FS }

type watchedFile struct {
	vfs.File
	name string
	fs   *watchedFS
}

func (f *watchedFile) check(op string, err error) error {
	if err != nil {
		f.fs.failed(op, f.name, err)
	}
	return err
}

func (f *watchedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.check("write", err)
}

func (f *watchedFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.check("write", err)
}

func (f *watchedFile) Sync() error { return f.check("fsync", f.File.Sync()) }

func (f *watchedFile) SyncData() error { return f.check("fsync", f.File.SyncData()) }

func (f *watchedFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.check("fsync", err)
}

// Close can report a write the kernel failed to write back.
func (f *watchedFile) Close() error { return f.check("close", f.File.Close()) }
