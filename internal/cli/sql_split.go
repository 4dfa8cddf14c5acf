package cli

import "github.com/strandkafka/strand/internal/sql/parse"

// splitSQL cuts a script into its statements at its ';' tokens, by
// parse.SplitTail: a small lexer of PostgreSQL's rules for strings,
// quoted identifiers, dollar quotes and comments, as psql's own, so a
// ';' inside them does not end a statement. It replaces a split by the
// grammar's scanner, whose WebAssembly module cost `strand sql -f` 1-3 s
// and ~300 MB before its first statement. Statements come without their
// ';'; stretches of blanks and comments alone are dropped.
//
// complete is false when the text ends inside a statement (after its
// last ';' there is more than blanks and comments, or a quote or comment
// is left open). The interactive session reads more lines then; a script
// sends that tail as its last statement and lets the server say what is
// wrong with it.
func splitSQL(text string) (stmts []string, tail string, complete bool) {
	return parse.SplitTail(text)
}
