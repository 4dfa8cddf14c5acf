//go:build !strand_planted

package planted

// plantedBuild is whether this build has the bugs.
const plantedBuild = false

// DropAcked reports no bug: this build has none planted.
func DropAcked() (Target, bool) { return Target{}, false }

// ExposeAborted reports no bug: this build has none planted.
func ExposeAborted() (Target, bool) { return Target{}, false }
