package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestPure keeps the state machine pure by construction: it fails if the
// package depends, however indirectly, on Pebble, the shared log, the
// object store or the driver, or if it or any non-standard package it
// depends on imports what reads the clock, the file system or the network,
// starts goroutines that race, or draws random numbers.
//
// Standard packages are not followed into their own imports: fmt imports
// os to print to stdout, which is not apply reaching the file system.
func TestPure(t *testing.T) {
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(gotool); err != nil {
		t.Skipf("no go command to list dependencies: %v", err)
	}
	cmd := exec.Command(gotool, "list", "-deps", "-json=ImportPath,Imports,Standard", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	const module = "github.com/strandkafka/strand/"
	forbiddenDeps := []string{
		"github.com/cockroachdb/pebble",
		module + "internal/sharedlog",
		module + "internal/objstore",
		module + "internal/replica",
	}
	forbiddenImports := []string{
		"os", "time", "net", "syscall", "io/fs", "path/filepath",
		"sync", "runtime", "math/rand", "crypto/rand", "log",
	}
	under := func(path string, roots []string) bool {
		for _, root := range roots {
			if path == root || strings.HasPrefix(path, root+"/") {
				return true
			}
		}
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	n := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Standard   bool
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		if under(p.ImportPath, forbiddenDeps) {
			t.Errorf("the state machine depends on %s", p.ImportPath)
		}
		if p.Standard {
			continue
		}
		for _, imp := range p.Imports {
			if under(imp, forbiddenImports) {
				t.Errorf("%s imports %s", p.ImportPath, imp)
			}
		}
	}
	if n < 2 {
		t.Fatalf("go list listed %d packages", n)
	}
}
