package cli

import (
	"reflect"
	"strings"

	pgquery "github.com/wasilibs/go-pgquery"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// splitSQL cuts a script into its statements at the ';' tokens of
// PostgreSQL's own scanner (go-pgquery's Scan, the lexer of the grammar
// the agent parses with), so a ';' inside a string, a quoted identifier,
// a comment or a dollar-quoted body does not end a statement, exactly as
// psql's lexer would have it. Statements are returned without their ';';
// stretches holding only blanks and comments are dropped.
//
// complete is false when the text ends inside a statement: after its
// last ';' there is more than blanks and comments, or the scanner
// stopped at an open quote or comment. The interactive session reads
// more lines then; a script sends that tail as its last statement and
// lets the server say what is wrong with it.
//
// The first call compiles the scanner's WebAssembly module (about 1.4 s
// on a 2-core machine, see internal/sql/parse), which is why -e never
// splits: its text goes to the server as it is, as psql -c does.
func splitSQL(text string) (stmts []string, tail string, complete bool) {
	scanned := text
	res, err := pgquery.Scan(text)
	if err != nil {
		// An open quote or comment: split what comes before it, the
		// rest is one unfinished statement.
		pos := scanErrorPos(err)
		if pos <= 1 || pos > len(text) {
			return nil, text, false
		}
		scanned = text[:pos-1]
		if res, err = pgquery.Scan(scanned); err != nil {
			return nil, text, false
		}
	}
	start, tokens := 0, 0
	for _, tok := range res.Tokens {
		switch tok.Token {
		case pg.Token_SQL_COMMENT, pg.Token_C_COMMENT:
			continue // a statement of comments alone is no statement
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
	rest := text[start:]
	if scanned != text {
		return stmts, strings.TrimSpace(rest), false
	}
	if tokens == 0 {
		return stmts, "", true
	}
	return stmts, strings.TrimSpace(rest), false
}

// scanErrorPos is the 1-based byte offset a scanner error points at, 0
// when unknown. The error's type is internal to go-pgquery, so the field
// is read by name, as internal/sql/parse does: a library that renamed it
// costs the split of a script with an open quote, not a wrong answer.
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
