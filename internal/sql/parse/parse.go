// Package parse owns turning SQL text into a syntax tree: PostgreSQL's own
// grammar (libpg_query, compiled to WebAssembly and run by wazero through
// github.com/wasilibs/go-pgquery), so Strand accepts exactly the SQL that
// PostgreSQL accepts and hands the planner pg_query's protobuf node types
// (github.com/pganalyze/pg_query_go/v6), which every later stage builds on.
//
// It also owns cutting a script into statements without the grammar
// (Split, split.go): a lexer of the few rules that decide where a ';'
// ends one, for the CLI, which must not pay the module's compilation.
//
// # The decision, measured
//
// Three ways were open: go-pgquery (pure Go, wazero), a parser of our own
// for a subset, and pg_query_go (cgo; the binary is CGO_ENABLED=0, so no).
// go-pgquery was measured on the project's 2-core machine
// (BenchmarkParse in this package; numbers from a standalone run of the
// same queries, see docs/sql.md):
//
//   - First parse: 1.4 s, spent compiling the 2.2 MB WebAssembly module to
//     machine code. It is paid lazily, at the first statement the process
//     parses, never at agent start; every later parse reuses the module.
//   - Parse latency: SELECT 1 30 µs; a typical aggregate query (163 bytes)
//     260 µs; the 13 catalog queries psql 15 sends for \d, \dt, \dm, \l
//     and \d TABLE (200-1,000 bytes) 230-720 µs each. Parsing happens once
//     per statement prepared, not per row, so this is off the data path.
//   - Memory: the compilation peaks at about 270 MiB resident (garbage
//     freed right after); afterwards the Go heap holds about 10 MiB for the
//     compiled module, plus the module's linear memory.
//   - Binary: +9.0 MB to the strand binary (83.8 to 92.8 MB with
//     CGO_ENABLED=0, the wire server and minimal engine included; the
//     embedded module is 2.2 MB of it).
//   - Compilation cache in the data dir: not possible as the library
//     stands. go-pgquery builds its own wazero runtime with an in-memory
//     cache per module instance and offers no hook for wazero's file cache
//     (wazero.NewCompilationCacheWithDir); using one would mean forking
//     the library. The 1.4 s is therefore paid once per process.
//   - Each module instance compiles anew (the library pools instances and
//     makes one per concurrent caller). Parse therefore lets at most
//     maxInstances callers in at once, so a burst of clients costs one
//     compilation, not one each, and the memory stays bounded.
//
// A parser of our own would start faster and parse faster, but the SQL
// this endpoint must take is PostgreSQL's, in full: psql's catalog
// queries alone use OPERATOR(pg_catalog.~), COLLATE, CASE, regex
// matches, outer joins and correlated subqueries, and BI tools send far
// more. Matching that grammar by hand, and keeping it matched, costs more
// than 1.4 s once per process; errors and positions then also read as
// PostgreSQL's own.
package parse

import (
	"errors"
	"fmt"
	"reflect"

	pgquery "github.com/wasilibs/go-pgquery"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// MaxQueryBytes bounds the SQL text one call parses: the module's linear
// memory grows with its input and is never given back.
const MaxQueryBytes = 1 << 20

// maxInstances bounds the module instances, and so the compilations
// (1.4 s and ~270 MiB at peak each), one process makes. Parses are short
// next to a network round trip; one instance serves thousands a second.
const maxInstances = 1

// gate lets maxInstances callers into the library at a time, which keeps
// its pool at that many instances.
var gate = make(chan struct{}, maxInstances)

// Stmt is one statement of a parsed string.
type Stmt struct {
	// Node is the statement's tree, e.g. a *pg.Node holding SelectStmt.
	Node *pg.Node
	// Text is the statement's own text, without the separating ';'.
	Text string
	// Offset is where Text starts in the parsed string (bytes from 0),
	// to move an error position inside Text to one in the string.
	Offset int
}

// Error is a syntax error: PostgreSQL's message, and the byte offset into
// the parsed text it points at (1-based, as PostgreSQL's error position;
// 0 when the parser gave none).
type Error struct {
	Message  string
	Position int
}

func (e *Error) Error() string { return e.Message }

// ErrTooLong is returned for a text over MaxQueryBytes.
var ErrTooLong = fmt.Errorf("statement text is longer than %d bytes", MaxQueryBytes)

// Parse parses sql, which may hold several statements separated by ';',
// into their trees. An empty or blank sql gives no statements and no
// error. Safe for concurrent use.
func Parse(sql string) (stmts []Stmt, err error) {
	if len(sql) > MaxQueryBytes {
		return nil, ErrTooLong
	}
	gate <- struct{}{}
	defer func() { <-gate }()
	defer func() {
		// The library panics when the module's memory cannot be read
		// back; a bad statement must not take the agent with it.
		if r := recover(); r != nil {
			stmts, err = nil, fmt.Errorf("parser failed: %v", r)
		}
	}()
	return parseLocked(sql, sql)
}

// parseLocked parses grammar, a text of sql's length with the same
// statement bounds, and cuts each statement's Text out of sql: the
// dialect (strand.go) hands the grammar a rewritten text and keeps the
// user's. The caller holds the gate.
func parseLocked(sql, grammar string) ([]Stmt, error) {
	res, err := pgquery.Parse(grammar)
	if err != nil {
		return nil, syntaxError(err)
	}
	stmts := make([]Stmt, 0, len(res.Stmts))
	for _, s := range res.Stmts {
		text, err := stmtText(sql, s)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, Stmt{Node: s.Stmt, Text: text, Offset: int(s.StmtLocation)})
	}
	return stmts, nil
}

// stmtText cuts a statement's text out of sql by the location and length
// the parser reports (length 0: to the end).
func stmtText(sql string, s *pg.RawStmt) (string, error) {
	start, n := int(s.StmtLocation), int(s.StmtLen)
	if start < 0 || start > len(sql) || n < 0 || start+n > len(sql) {
		return "", fmt.Errorf("parser reported statement bounds [%d,+%d) outside a %d-byte text", start, n, len(sql))
	}
	if n == 0 {
		return sql[start:], nil
	}
	return sql[start : start+n], nil
}

// syntaxError turns the library's error into an Error. Its type lives in
// an internal package of go-pgquery, so the cursor position is read by
// field name; a library that renamed it loses positions, not errors.
func syntaxError(err error) error {
	e := &Error{Message: err.Error()}
	v := reflect.ValueOf(err)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return e
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("Cursorpos"); f.IsValid() && f.CanInt() {
			e.Position = int(f.Int())
		}
	}
	return e
}

// IsSyntax reports whether err is a syntax error from Parse.
func IsSyntax(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
