package schemareg_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/schemareg"
)

// setFormat is a toy format for the level logic: a schema is a set of
// field names, some marked optional ("x?"). A reader reads a writer's
// data when every field the reader requires is written.
type setFormat struct{}

type setSchema struct{ fields map[string]bool } // name -> required

func (setSchema) Type() schemareg.Type { return "SET" }
func (s setSchema) Canonical(bool) string {
	var names []string
	for n, req := range s.fields {
		if !req {
			n += "?"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func (setFormat) Type() schemareg.Type { return "SET" }

func (setFormat) Parse(text string, _ schemareg.Resolved) (schemareg.Schema, error) {
	s := setSchema{fields: map[string]bool{}}
	for _, f := range strings.Split(text, ",") {
		if f == "" {
			continue
		}
		name, opt := strings.CutSuffix(f, "?")
		s.fields[name] = !opt
	}
	return s, nil
}

func (setFormat) Compatible(reader, writer schemareg.Schema) []string {
	r, w := reader.(setSchema), writer.(setSchema)
	var out []string
	for n, req := range r.fields {
		if _, ok := w.fields[n]; req && !ok {
			out = append(out, fmt.Sprintf("READER_FIELD_MISSING_DEFAULT_VALUE: %s", n))
		}
	}
	slices.Sort(out)
	return out
}

func parse(t *testing.T, texts ...string) []schemareg.Schema {
	t.Helper()
	var out []schemareg.Schema
	for _, s := range texts {
		p, err := setFormat{}.Parse(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestCheckLevels: each level checks the directions and versions
// Confluent's does. History: v1 writes a, v2 writes a and b; candidates
// differ in what they require ("x?": optional).
func TestCheckLevels(t *testing.T) {
	history := parse(t, "a", "a,b?")
	for _, tc := range []struct {
		level     schemareg.Level
		candidate string
		ok        bool
	}{
		{schemareg.None, "z", true},
		// Requires b: v2 writes it, v1 does not.
		{schemareg.Backward, "a,b", true},
		{schemareg.BackwardTransitive, "a,b", false},
		// Requires only a: backward with both.
		{schemareg.Backward, "a,c?", true},
		// Drops a: v2's readers need a (forward fails), reading v2's
		// data needs nothing (backward holds).
		{schemareg.Backward, "b?", true},
		{schemareg.Forward, "b?", false},
		{schemareg.Full, "b?", false},
		// Requires c?: fine both ways against every version.
		{schemareg.FullTransitive, "a,c?", true},
	} {
		got := schemareg.Check(setFormat{}, tc.level, parse(t, tc.candidate)[0], history)
		if (len(got) == 0) != tc.ok {
			t.Errorf("%s %q: %v, want ok %v", tc.level, tc.candidate, got, tc.ok)
		}
	}
}

// TestCheckTransitive: a change compatible with the newest version only
// passes BACKWARD and fails BACKWARD_TRANSITIVE, naming the old version.
func TestCheckTransitive(t *testing.T) {
	history := parse(t, "x", "a") // v1 writes x only, v2 writes a
	candidate := parse(t, "a")[0] // requires a: v1 lacks it
	if got := schemareg.Check(setFormat{}, schemareg.Backward, candidate, history); got != nil {
		t.Errorf("BACKWARD: %v, want compatible with the newest", got)
	}
	got := schemareg.Check(setFormat{}, schemareg.BackwardTransitive, candidate, history)
	if len(got) != 1 || !strings.HasPrefix(got[0], "version 1:") {
		t.Errorf("BACKWARD_TRANSITIVE: %v, want one conflict with version 1", got)
	}
	if got := schemareg.Check(setFormat{}, schemareg.FullTransitive, candidate, nil); got != nil {
		t.Errorf("first version: %v, want nothing to check", got)
	}
}

func TestParseLevel(t *testing.T) {
	for _, s := range []string{"none", "BACKWARD", "Full_Transitive"} {
		if _, err := schemareg.ParseLevel(s); err != nil {
			t.Errorf("ParseLevel(%q): %v", s, err)
		}
	}
	if _, err := schemareg.ParseLevel("SIDEWAYS"); err == nil {
		t.Error("ParseLevel(SIDEWAYS) accepted")
	}
}
