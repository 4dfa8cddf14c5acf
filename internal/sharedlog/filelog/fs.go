package filelog

import (
	"io"
	"io/fs"
	"os"
)

// FS is the file system a Loglet writes through: the operating system's
// (OS) unless Options.FS says otherwise. It is a seam for fault injection
// in the style of Pebble's vfs and errorfs: a wrapper fails writes,
// fsyncs or file creation (ENOSPC, EIO) to check that the loglet never
// acknowledges what is not durable and takes writes again once the fault
// clears (package faultfs is such a wrapper). A wrapper must pass through
// to the real files: the loglet reads directories and its STATE file
// with package os.
type FS interface {
	// OpenFile is os.OpenFile. The loglet also opens directories with
	// it (O_RDONLY) to fsync them.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Rename is os.Rename.
	Rename(oldpath, newpath string) error
	// Remove is os.Remove.
	Remove(name string) error
}

// File is an open file of an FS; *os.File implements it.
type File interface {
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Name() string
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }
