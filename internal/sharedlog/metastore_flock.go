//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sharedlog

import (
	"os"
	"syscall"
)

// flockExclusive blocks until f holds an exclusive flock. The wait is
// bounded by the holder: it keeps the lock only for one chain write.
func flockExclusive(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}
