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

// Datasyncer is an optional power of a File: fdatasync(2), which makes
// the file's data durable with the metadata needed to read it back (its
// size and blocks) but not its timestamps. The loglet uses it for appends
// that overwrite blocks an earlier fsync made durable (see Preallocation
// in the package doc): there it flushes the data alone, without a
// journal commit. A File without it (a wrapper that does not pass it
// on) gets Sync, which is never less durable.
type Datasyncer interface {
	Datasync() error
}

// datasync is Datasync where f has it, else Sync.
func datasync(f File) error {
	if d, ok := f.(Datasyncer); ok {
		return d.Datasync()
	}
	return f.Sync()
}

// OS is the operating system's file system. Its files are Datasyncers.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return osFile{f}, nil
}

// osFile is an *os.File with Datasync.
type osFile struct {
	*os.File
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

// Freer is an optional power of a File: the bytes its file system has
// free for an unprivileged writer (statfs(2)'s f_bavail). The loglet
// uses it to keep freeReserve of the disk for others (see
// checkReserve); a File without it is never refused for space.
type Freer interface {
	FreeBytes() (int64, error)
}
