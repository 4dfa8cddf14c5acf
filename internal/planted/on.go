//go:build strand_planted

package planted

import (
	"fmt"
	"os"
	"time"
)

// bug is the bug STRAND_PLANTED_BUG selects, read once at start; a value
// that does not parse stops the test build at once rather than run it
// without the bug its test expects.
var bug, target = func() (string, Target) {
	v := os.Getenv(EnvBug)
	if v == "" {
		return "", Target{}
	}
	b, t, err := Parse(v)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", EnvBug, err))
	}
	return b, t
}()

// plantedBuild is whether this build has the bugs.
const plantedBuild = true

// DropAcked returns the target of drop-acked, if it is the bug planted.
func DropAcked() (Target, bool) { return target, bug == BugDropAcked }

// ExposeAborted returns the target of expose-aborted, if it is the bug
// planted.
func ExposeAborted() (Target, bool) { return target, bug == BugExposeAborted }

// clockOffset is STRAND_PLANTED_CLOCK_OFFSET, read once at start.
var clockOffset = func() time.Duration {
	v := os.Getenv(EnvClockOffset)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", EnvClockOffset, err))
	}
	return d
}()

// ClockOffset is how far this agent's clock runs from the wall clock.
func ClockOffset() time.Duration { return clockOffset }

// gcGraceFloor is STRAND_PLANTED_GC_GRACE_FLOOR in ms, or -1.
var gcGraceFloor = func() int64 {
	v := os.Getenv(EnvGCGraceFloor)
	if v == "" {
		return -1
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		panic(fmt.Sprintf("%s: %q: want a duration", EnvGCGraceFloor, v))
	}
	return d.Milliseconds()
}()

// GCGraceFloor is STRAND_PLANTED_GC_GRACE_FLOOR, or floor without it.
func GCGraceFloor(floor int64) int64 {
	if gcGraceFloor < 0 {
		return floor
	}
	return gcGraceFloor
}
