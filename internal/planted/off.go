//go:build !strand_planted

package planted

import "time"

// plantedBuild is whether this build has the bugs.
const plantedBuild = false

// DropAcked reports no bug: this build has none planted.
func DropAcked() (Target, bool) { return Target{}, false }

// ExposeAborted reports no bug: this build has none planted.
func ExposeAborted() (Target, bool) { return Target{}, false }

// ClockOffset reports no offset: this build runs on the wall clock.
func ClockOffset() time.Duration { return 0 }

// GCGraceFloor returns floor: this build keeps the real floor.
func GCGraceFloor(floor int64) int64 { return floor }
