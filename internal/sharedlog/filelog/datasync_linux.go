package filelog

import (
	"os"
	"syscall"
)

// Datasync is fdatasync(2), retried on EINTR as os.File.Sync retries
// fsync.
func (f osFile) Datasync() error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// FreeBytes is statfs(2)'s space available to an unprivileged writer.
func (f osFile) FreeBytes() (int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var st syscall.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fstatfs(int(fd), &st); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, &os.PathError{Op: "fstatfs", Path: f.Name(), Err: serr}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
