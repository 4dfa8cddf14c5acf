package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionOfBuiltBinaries builds the binary twice, as a plain
// `go build -buildvcs=false` (what a source tarball gives) and with the
// release command of docs/operations.md, and checks what `strand version`
// says of each: the first that its commit is unknown and why, the second
// the stamped version, commit and build time.
func TestVersionOfBuiltBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	dir := t.TempDir()

	plain := filepath.Join(dir, "strand-plain")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", plain, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=false: %v\n%s", err, out)
	}
	v := runVersion(t, plain)
	for _, want := range []string{"strand dev\n", "commit:      " + unknownCommit + "\n"} {
		if !strings.Contains(v, want) {
			t.Errorf("plain build: strand version lacks %q:\n%s", want, v)
		}
	}

	release := filepath.Join(dir, "strand-release")
	script := documentedReleaseBuild(t)
	sh := exec.Command("sh", "-c", strings.Replace(script, "-o strand ", "-o "+release+" ", 1))
	sh.Dir = "../.."
	sh.Env = append(os.Environ(), "VERSION=v9.1.2", "COMMIT=0123456789abcdef0123456789abcdef01234567",
		"BUILD_TIME=2026-12-07T22:00:00Z")
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	v = runVersion(t, release)
	for _, want := range []string{"strand v9.1.2\n", "commit:      0123456789abcdef0123456789abcdef01234567\n",
		"build time:  2026-12-07T22:00:00Z\n"} {
		if !strings.Contains(v, want) {
			t.Errorf("release build: strand version lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "unknown") {
		t.Errorf("release build: strand version says unknown:\n%s", v)
	}
}

func runVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	return string(out)
}

// documentedReleaseBuild returns the go build command of the release
// build in docs/operations.md, its continuation lines joined; the lines
// that set VERSION, COMMIT and BUILD_TIME from git are left to the
// caller's environment.
func documentedReleaseBuild(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Building a release binary\n")
	if !ok {
		t.Fatal("docs/operations.md has no section Building a release binary")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	joined := strings.ReplaceAll(section, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if strings.Contains(line, "go build") && strings.Contains(line, "-ldflags") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("no go build -ldflags command in Building a release binary:\n%s", section)
	return ""
}
