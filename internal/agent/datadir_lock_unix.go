//go:build unix

package agent

import (
	"os"
	"syscall"
)

// tryLock takes f's exclusive flock without waiting.
func tryLock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
