//go:build unix

package source_test

import (
	"syscall"
	"testing"
	"time"
)

func init() {
	processCPU = func(b *testing.B) time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}
