//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sharedlog

import (
	"errors"
	"os"
)

// flockExclusive fails where flock is missing: without it two processes
// could both win one CAS, and a forked chain loses acknowledged entries.
func flockExclusive(*os.File) error {
	return errors.New("flock is not available on this platform")
}
