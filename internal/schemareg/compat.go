package schemareg

import (
	"fmt"
	"strings"
)

// Level is a compatibility level, as Confluent names them.
type Level string

const (
	None               Level = "NONE"
	Backward           Level = "BACKWARD"
	BackwardTransitive Level = "BACKWARD_TRANSITIVE"
	Forward            Level = "FORWARD"
	ForwardTransitive  Level = "FORWARD_TRANSITIVE"
	Full               Level = "FULL"
	FullTransitive     Level = "FULL_TRANSITIVE"
)

// DefaultLevel is Confluent's default compatibility level.
const DefaultLevel = Backward

// ParseLevel reads a level as the API accepts it (any case).
func ParseLevel(s string) (Level, error) {
	l := Level(strings.ToUpper(s))
	switch l {
	case None, Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive:
		return l, nil
	}
	return "", fmt.Errorf("invalid compatibility level %q: one of NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE", s)
}

// backward, forward and transitive say what a level checks.
func (l Level) backward() bool {
	return l == Backward || l == BackwardTransitive || l == Full || l == FullTransitive
}
func (l Level) forward() bool {
	return l == Forward || l == ForwardTransitive || l == Full || l == FullTransitive
}
func (l Level) transitive() bool {
	return l == BackwardTransitive || l == ForwardTransitive || l == FullTransitive
}

// Check reports why schema cannot be registered after existing (the
// subject's live versions, oldest first) under level, as Confluent's
// registry checks it: against the newest version, or every version
// when the level is transitive; backward means consumers using schema
// read data written with the old ones (Compatible(schema, old)),
// forward the other way, full both. Nil: it can be registered. Each
// message names the version it conflicts with.
func Check(f Format, level Level, schema Schema, existing []Schema) []string {
	versions := make([]int32, len(existing))
	for i := range versions {
		versions[i] = int32(i + 1)
	}
	return check(f, level, schema, existing, versions)
}

// check is Check with the subject's numbers of the existing versions
// (deleted ones leave gaps), for the messages.
func check(f Format, level Level, schema Schema, existing []Schema, versions []int32) []string {
	if level == None || len(existing) == 0 {
		return nil
	}
	against := existing
	if !level.transitive() {
		against = existing[len(existing)-1:]
	}
	var out []string
	for i, old := range against {
		v := versions[len(existing)-len(against)+i]
		if level.backward() {
			for _, m := range f.Compatible(schema, old) {
				out = append(out, fmt.Sprintf("version %d: %s", v, m))
			}
		}
		if level.forward() {
			for _, m := range f.Compatible(old, schema) {
				out = append(out, fmt.Sprintf("version %d (forward): %s", v, m))
			}
		}
	}
	return out
}
