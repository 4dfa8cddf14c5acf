// Package faultfs owns fault injection for the file loglet's file system,
// in the style of Pebble's errorfs: Wrap puts an FS in front of another
// (usually filelog.OS), and while a Fault is set, the operations it names
// fail with its error, as a full disk or a failing device would make
// them fail. Clear lets them through again, as freeing space does.
//
// A failing Write or WriteAt writes the first half of its bytes before it
// returns the error, as a write that runs out of space part-way does, so
// a test sees the loglet deal with a torn tail.
package faultfs

import (
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// Op names file operations. Ops are bits so a set of them is an Op too.
type Op uint8

const (
	// OpWrite is File.Write and File.WriteAt.
	OpWrite Op = 1 << iota
	// OpSync is File.Sync, of files and of directories.
	OpSync
	// OpCreate is FS.OpenFile with os.O_CREATE.
	OpCreate
	// OpTruncate is File.Truncate.
	OpTruncate
	// OpRename is FS.Rename.
	OpRename

	// OpAll is every operation that writes. Reads, opening an existing
	// file, Close and Remove never fail: a test must be able to tear
	// down, and a full disk lets them through.
	OpAll = OpWrite | OpSync | OpCreate | OpTruncate | OpRename
)

// ErrNoSpace is the error of a full disk, the default Fault.Err.
var ErrNoSpace error = syscall.ENOSPC

// Fault says which operations fail and how.
type Fault struct {
	// Ops are the operations that fail.
	Ops Op
	// Match limits the fault to paths it accepts (the file's path for
	// file operations, the new path for Rename). Nil means every path.
	Match func(path string) bool
	// Err is the error they fail with. Nil means ErrNoSpace.
	Err error
}

// FS is an FS that injects the current Fault. Safe for concurrent use.
type FS struct {
	inner filelog.FS

	mu struct {
		sync.Mutex
		fault    Fault
		set      bool
		injected int
		// hit is closed and replaced on each injected failure.
		hit chan struct{}
	}
}

var _ filelog.FS = (*FS)(nil)

// Wrap returns an FS that passes every operation to inner until a Fault
// is set.
func Wrap(inner filelog.FS) *FS {
	f := &FS{inner: inner}
	f.mu.hit = make(chan struct{})
	return f
}

// Set makes the operations of flt fail, replacing any earlier Fault.
func (f *FS) Set(flt Fault) {
	if flt.Err == nil {
		flt.Err = ErrNoSpace
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.fault, f.mu.set = flt, true
}

// Clear lets every operation through again.
func (f *FS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.fault, f.mu.set = Fault{}, false
}

// Injected returns how many operations have failed so far, and a channel
// closed at the next failure.
func (f *FS) Injected() (int, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.injected, f.mu.hit
}

// check returns the injected error for op on path, or nil.
func (f *FS) check(op Op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	flt := f.mu.fault
	if !f.mu.set || flt.Ops&op == 0 || (flt.Match != nil && !flt.Match(path)) {
		return nil
	}
	f.mu.injected++
	close(f.mu.hit)
	f.mu.hit = make(chan struct{})
	return &fs.PathError{Op: op.String(), Path: path, Err: flt.Err}
}

func (op Op) String() string {
	switch op {
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpCreate:
		return "create"
	case OpTruncate:
		return "truncate"
	case OpRename:
		return "rename"
	}
	return "op"
}

func (f *FS) OpenFile(name string, flag int, perm fs.FileMode) (filelog.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.check(OpCreate, name); err != nil {
			return nil, err
		}
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *FS) Rename(oldpath, newpath string) error {
	if err := f.check(OpRename, newpath); err != nil {
		return err
	}
	return f.inner.Rename(oldpath, newpath)
}

func (f *FS) Remove(name string) error { return f.inner.Remove(name) }

type faultFile struct {
	filelog.File
	fs *FS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.Name()); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, err
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite, f.Name()); err != nil {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}
