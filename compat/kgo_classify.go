package compat

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// kgoBrokerRoots are the kgo test helpers and variables that hand a
// client the broker's address (KGO_SEEDS, or KGO_TEST_SCRAM_SEEDS and
// KGO_TEST_OAUTH_SEEDS for the SASL tests, which dial it themselves); a
// test that reaches one of them, directly or through other helpers,
// talks to the broker under test.
var kgoBrokerRoots = []string{"getSeedBrokers", "scramSeeds", "oauthSeeds"}

// brokerTests reads the _test.go files in dir and reports, for every
// top-level Test function, whether it reaches a kgoBrokerRoots helper.
// Functions and methods are matched by name only, so a method sharing a
// name with a broker helper counts as one: the error is towards "uses
// the broker", the side that does not flatter the pass rate.
func brokerTests(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	refs := make(map[string]map[string]bool) // function name -> identifiers it uses
	var tests []string
	addRefs := func(name string, n ast.Node) {
		if refs[name] == nil {
			refs[name] = make(map[string]bool)
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				refs[name][id.Name] = true
			}
			return true
		})
	}
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Body == nil {
					continue
				}
				addRefs(d.Name.Name, d.Body)
				if d.Recv == nil && strings.HasPrefix(d.Name.Name, "Test") {
					tests = append(tests, d.Name.Name)
				}
			case *ast.GenDecl:
				// Package-level variables may hold helper closures.
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							addRefs(name.Name, vs.Values[i])
						}
					}
				}
			}
		}
	}
	broker := make(map[string]bool)
	for _, r := range kgoBrokerRoots {
		broker[r] = true
	}
	for changed := true; changed; {
		changed = false
		for fn, ids := range refs {
			if broker[fn] {
				continue
			}
			for id := range ids {
				if broker[id] {
					broker[fn], changed = true, true
					break
				}
			}
		}
	}
	out := make(map[string]bool, len(tests))
	for _, t := range tests {
		out[t] = broker[t]
	}
	return out, nil
}
