package parse_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgquery "github.com/wasilibs/go-pgquery"

	"github.com/strandkafka/strand/internal/sql/parse"
)

// splitCases are the cases of `strand sql`'s scripts and prompt
// (internal/cli) and the lexical corners SplitTail must get right.
var splitCases = []struct {
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
	{"doubled quote", "SELECT 'a'';b'; SELECT 2;", []string{"SELECT 'a'';b'", "SELECT 2"}, "", true},
	{"E string escape", `SELECT E'a\';b'; SELECT 2;`, []string{`SELECT E'a\';b'`, "SELECT 2"}, "", true},
	{"plain string backslash", `SELECT 'a\'; SELECT 2;`, []string{`SELECT 'a\'`, "SELECT 2"}, "", true},
	{"not an E string", `SELECT abe'x\'; SELECT 2;`, []string{`SELECT abe'x\'`, "SELECT 2"}, "", true},
	{"E string continued", "SELECT E'a'\n'\\';'; SELECT 2;", []string{"SELECT E'a'\n'\\';'", "SELECT 2"}, "", true},
	{"E string not continued past a comment", "SELECT E'a' -- c;\n'\\'; SELECT 2;", []string{"SELECT E'a' -- c;\n'\\'", "SELECT 2"}, "", true},
	{"E string continued past blanks", "SELECT E'a' \t\r\n\v\f'\\';'; SELECT 2;", []string{"SELECT E'a' \t\r\n\v\f'\\';'", "SELECT 2"}, "", true},
	{"no continuation without newline", `SELECT E'a' '\'; SELECT 2;`, []string{`SELECT E'a' '\'`, "SELECT 2"}, "", true},
	{"nested comment", "SELECT 1 /* a /* b */ ; */; SELECT 2;", []string{"SELECT 1 /* a /* b */ ; */", "SELECT 2"}, "", true},
	{"dollar in identifier", "SELECT a$b$; SELECT $b$;$b$;", []string{"SELECT a$b$", "SELECT $b$;$b$"}, "", true},
	{"dollar tag mismatch", "SELECT $a$ $b$ ; $a$;", []string{"SELECT $a$ $b$ ; $a$"}, "", true},
	{"parameter", "SELECT $1; SELECT $2$;", []string{"SELECT $1", "SELECT $2$"}, "", true},
	{"operator then comment", "SELECT 1 +-- x;\n 2; SELECT 3 */* ; */ 4;", []string{"SELECT 1 +-- x;\n 2", "SELECT 3 */* ; */ 4"}, "", true},
	{"open dollar quote", "SELECT 1; SELECT $$;", []string{"SELECT 1"}, "SELECT $$;", false},
	{"open identifier", `SELECT 1; SELECT "a;`, []string{"SELECT 1"}, `SELECT "a;`, false},
	{"open E string", `SELECT 1; SELECT E'a\';`, []string{"SELECT 1"}, `SELECT E'a\';`, false},
	{"comment only tail", "SELECT 1; -- done", []string{"SELECT 1"}, "", true},
	{"multibyte identifier", "SELECT é'x'; SELECT ée'\\';", []string{"SELECT é'x'", "SELECT ée'\\'"}, "", true},
}

func TestSplit(t *testing.T) {
	for _, tc := range splitCases {
		t.Run(tc.name, func(t *testing.T) {
			stmts, tail, complete := parse.SplitTail(tc.in)
			if !slices.Equal(stmts, tc.stmts) || tail != tc.tail || complete != tc.complete {
				t.Fatalf("SplitTail(%q) = %q, %q, %v; want %q, %q, %v", tc.in, stmts, tail, complete, tc.stmts, tc.tail, tc.complete)
			}
			want := tc.stmts
			if tc.tail != "" {
				want = append(slices.Clone(want), tc.tail)
			}
			if got := parse.Split(tc.in); !slices.Equal(got, want) {
				t.Fatalf("Split(%q) = %q, want %q", tc.in, got, want)
			}
		})
	}
}

// TestSplitMatchesScanner runs the cases through PostgreSQL's scanner
// too, so the expectations above are the scanner's and not our guess.
func TestSplitMatchesScanner(t *testing.T) {
	for _, tc := range splitCases {
		stmts, tail, complete, ok := scannerSplit(tc.in)
		if !ok {
			t.Errorf("%s: the scanner refuses %q", tc.name, tc.in)
			continue
		}
		if !slices.Equal(stmts, tc.stmts) || tail != tc.tail || complete != tc.complete {
			t.Errorf("%s: the scanner splits %q as %q, %q, %v; the case says %q, %q, %v", tc.name, tc.in, stmts, tail, complete, tc.stmts, tc.tail, tc.complete)
		}
	}
}

// FuzzSplit: SplitTail agrees with a split at the ';' tokens of
// PostgreSQL's own scanner (go-pgquery's Scan) on every text the scanner
// reads, or leaves open inside a quote or comment.
func FuzzSplit(f *testing.F) {
	for _, tc := range splitCases {
		f.Add(tc.in)
	}
	for _, q := range catalogQueries(f) {
		f.Add(q + ";\n" + q)
	}
	f.Fuzz(func(t *testing.T, text string) {
		wantStmts, wantTail, wantComplete, ok := scannerSplit(text)
		if !ok {
			return
		}
		stmts, tail, complete := parse.SplitTail(text)
		if !slices.Equal(stmts, wantStmts) || tail != wantTail || complete != wantComplete {
			t.Fatalf("SplitTail(%q) = %q, %q, %v; the scanner's split is %q, %q, %v", text, stmts, tail, complete, wantStmts, wantTail, wantComplete)
		}
	})
}

// scannerSplit is the split the CLI made before parse.Split: at the ';'
// tokens of go-pgquery's Scan. ok is false for a text the comparison
// cannot use: one the scanner refuses for other reasons than an open
// quote or comment (trailing junk after a number, a bad escape), one
// with a NUL (the scanner reads a C string; the wire cannot carry one),
// or an open quote after non-ASCII text (the scanner's position counts
// characters, the text's bytes).
func scannerSplit(text string) (stmts []string, tail string, complete, ok bool) {
	if strings.IndexByte(text, 0) >= 0 || !utf8.ValidString(text) {
		return nil, "", false, false
	}
	scanned := text
	res, err := pgquery.Scan(text)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "unterminated") {
			return nil, "", false, false
		}
		pos := scanErrorPos(err)
		if pos < 1 || pos > len(text) || !isASCII(text[:pos-1]) {
			return nil, "", false, false
		}
		scanned = text[:pos-1]
		if res, err = pgquery.Scan(scanned); err != nil {
			return nil, "", false, false
		}
	}
	start, tokens := 0, 0
	for _, tok := range res.Tokens {
		switch tok.Token {
		case pg.Token_SQL_COMMENT, pg.Token_C_COMMENT:
			continue
		case pg.Token_ASCII_59:
		default:
			tokens++
			continue
		}
		if tokens > 0 {
			stmts = append(stmts, strings.TrimSpace(text[start:tok.Start]))
		}
		start, tokens = int(tok.End), 0
	}
	rest := strings.TrimSpace(text[start:])
	if scanned != text {
		return stmts, rest, false, true
	}
	if tokens == 0 {
		return stmts, "", true, true
	}
	return stmts, rest, false, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// scanErrorPos is the 1-based position a scanner error points at, read
// by field name as internal/sql/parse does (the type is go-pgquery's).
func scanErrorPos(err error) int {
	v := reflect.ValueOf(err)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return 0
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("Cursorpos"); f.IsValid() && f.CanInt() {
			return int(f.Int())
		}
	}
	return 0
}
