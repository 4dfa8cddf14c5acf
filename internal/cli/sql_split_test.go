package cli

import (
	"slices"
	"testing"
)

func TestSplitSQL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		stmts    []string
		tail     string
		complete bool
	}{
		{"two", "SELECT 1; SELECT 2;", []string{"SELECT 1", "SELECT 2"}, "", true},
		{"semicolon in string", "SELECT 'a;b'; SELECT 2", []string{"SELECT 'a;b'"}, "SELECT 2", false},
		{"comments", "-- c;\nSELECT 1 /* ; */;\n-- trailing;\n", []string{"-- c;\nSELECT 1 /* ; */"}, "", true},
		{"dollar quotes", "SELECT $$a;b$$; SELECT $x$;$x$;", []string{"SELECT $$a;b$$", "SELECT $x$;$x$"}, "", true},
		{"quoted identifier", `SELECT 1 AS "x;y";`, []string{`SELECT 1 AS "x;y"`}, "", true},
		{"empty statements", ";;SELECT 1;;", []string{"SELECT 1"}, "", true},
		{"open quote", "SELECT 1; SELECT 'abc;\n", []string{"SELECT 1"}, "SELECT 'abc;", false},
		{"open comment", "SELECT 1; /* x;", []string{"SELECT 1"}, "/* x;", false},
		{"blank", "  \n", nil, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stmts, tail, complete := splitSQL(tc.in)
			if !slices.Equal(stmts, tc.stmts) || tail != tc.tail || complete != tc.complete {
				t.Fatalf("splitSQL(%q) = %q, %q, %v; want %q, %q, %v", tc.in, stmts, tail, complete, tc.stmts, tc.tail, tc.complete)
			}
		})
	}
}
