//go:build strand_planted

package planted

import (
	"fmt"
	"os"
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
