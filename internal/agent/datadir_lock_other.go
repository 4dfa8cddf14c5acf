//go:build !unix

package agent

import "os"

// tryLock is a no-op where flock is not: Pebble's own lock still stops
// a second agent, with its own words.
func tryLock(*os.File) error { return nil }
