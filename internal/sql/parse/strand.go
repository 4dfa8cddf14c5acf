package parse

// Strand's dialect, decided so that PostgreSQL's grammar parses it: each
// statement of Strand's own is a PostgreSQL statement with a keyword
// swapped for one of the same length, so the grammar's error positions
// are positions in what the user wrote.
//
//	CREATE SOURCE name (col type, ...) WITH (topic = 't', ...)   CREATE TABLE  (SOURCE -> "TABLE ")
//	DROP SOURCE [IF EXISTS] name, ... [CASCADE]                   DROP TABLE
//	CREATE SINK name WITH (topic = 't', ...) AS SELECT ...        CREATE VIEW   (SINK -> VIEW)
//	DROP SINK [IF EXISTS] name, ... [CASCADE]                     DROP VIEW
//	SUBSCRIBE [TO] name                                           TABLE name    (SUBSCRIBE -> "    TABLE", TO -> "  ")
//	SHOW MATERIALIZED VIEWS                                       SHOW materialized_views
//	EXPLAIN [MATERIALIZED VIEW] name                              TABLE name    (EXPLAIN -> "  TABLE", the other words blanked)
//	CREATE CONNECTOR [IF NOT EXISTS] name WITH ('k' = 'v', ...)   CREATE COLLATION name ("k" = 'v', ...)  (WITH blanked)
//	ALTER CONNECTOR name SET ('k' = 'v' | NONE, ...)             ALTER TYPE name SET ("k" = 'v', ...)
//	DROP CONNECTOR [IF EXISTS] name, ...                          DROP COLLATION
//
// A connector's keys are Connect's, with dots (database.hostname), so
// they are written quoted as strings; PostgreSQL's definition lists take
// identifiers, so a plain 'key' in a key's place (after '(' or ',',
// before '=') becomes "key", the same length. OptionKey reads a key back
// from the user's text, untruncated (PostgreSQL cuts identifiers at 63
// bytes; Connect's keys may be longer).
//
// CREATE/DROP MATERIALIZED VIEW, SHOW SOURCES, SHOW SINKS, SHOW VIEWS
// and SHOW CONNECTORS are PostgreSQL's own and parse as they are; ParseStrand marks them
// too, so a caller reads one Kind rather than matching node shapes.
//
// The keywords are found by PostgreSQL's own scanner (the module's
// Scan), never by matching text: a "source" inside a string, a quoted
// identifier or a comment is not a keyword, and statement bounds are
// the scanner's ';' tokens.

import (
	"errors"
	"fmt"
	"strings"

	pgquery "github.com/wasilibs/go-pgquery"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Kind says which of Strand's relations a statement is about, for the
// statements whose PostgreSQL form does not say it.
type Kind uint8

const (
	// KindOther is any other statement: PostgreSQL's own, CREATE TABLE
	// and CREATE VIEW included (Strand has no tables or plain views).
	KindOther Kind = iota
	// KindSource: CREATE SOURCE (a CreateStmt), DROP SOURCE (a DropStmt
	// of OBJECT_TABLE), SHOW SOURCES (a VariableShowStmt).
	KindSource
	// KindMaterializedView: CREATE MATERIALIZED VIEW (a
	// CreateTableAsStmt of OBJECT_MATVIEW), DROP MATERIALIZED VIEW (a
	// DropStmt of OBJECT_MATVIEW), SHOW MATERIALIZED VIEWS and SHOW
	// VIEWS (a VariableShowStmt).
	KindMaterializedView
	// KindSink: CREATE SINK (a ViewStmt), DROP SINK (a DropStmt of
	// OBJECT_VIEW), SHOW SINKS (a VariableShowStmt).
	KindSink
	// KindSubscribe: SUBSCRIBE [TO] name, a SelectStmt of `TABLE name`
	// (SubscribeTarget names the relation).
	KindSubscribe
	// KindExplain: EXPLAIN [MATERIALIZED VIEW] name, a SelectStmt of
	// `TABLE name` (ExplainTarget names the relation). EXPLAIN SELECT
	// is PostgreSQL's own ExplainStmt, KindOther.
	KindExplain
	// KindConnector: CREATE CONNECTOR (a DefineStmt of
	// OBJECT_COLLATION), ALTER CONNECTOR (an AlterTypeStmt), DROP
	// CONNECTOR (a DropStmt of OBJECT_COLLATION), SHOW CONNECTORS (a
	// VariableShowStmt). A connector is no relation: package connect
	// keeps it, as Kafka Connect's REST API does.
	KindConnector
)

func (k Kind) String() string {
	switch k {
	case KindSource:
		return "source"
	case KindMaterializedView:
		return "materialized view"
	case KindSink:
		return "sink"
	case KindSubscribe:
		return "subscribe"
	case KindExplain:
		return "explain"
	case KindConnector:
		return "connector"
	}
	return "other"
}

// Statement is a parsed statement and what it is about.
type Statement struct {
	Stmt
	Kind Kind
}

// ParseStrand parses sql in Strand's dialect (the table above): each
// statement's Node is the tree of its PostgreSQL form, its Text what the
// user wrote. Errors are Parse's, with positions in sql. Safe for
// concurrent use.
func ParseStrand(sql string) (out []Statement, err error) {
	if len(sql) > MaxQueryBytes {
		return nil, ErrTooLong
	}
	gate <- struct{}{}
	defer func() { <-gate }()
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("parser failed: %v", r)
		}
	}()
	grammar, kinds := sql, []marked(nil)
	scan, err := pgquery.Scan(sql)
	if err != nil {
		// The scanner refuses a text with an open quote or comment. The
		// keywords before it are swapped all the same, so the grammar
		// reports that error as PostgreSQL does for the swapped form,
		// rather than one at a keyword it does not know.
		var pe *Error
		if errors.As(syntaxError(err), &pe) && pe.Position > 1 {
			scan, err = pgquery.Scan(sql[:pe.Position-1])
		}
	}
	if err == nil {
		grammar, kinds = rewrite(sql, scan.Tokens)
	}
	stmts, err := parseLocked(sql, grammar)
	if err != nil {
		return nil, err
	}
	out = make([]Statement, 0, len(stmts))
	for _, s := range stmts {
		st := Statement{Stmt: s, Kind: KindOther}
		for _, k := range kinds {
			if k.at >= s.Offset && k.at < s.Offset+len(s.Text) {
				st.Kind = k.kind
				break
			}
		}
		if st.Kind == KindOther {
			st.Kind = postgresKind(s.Node)
		}
		if st.Kind == KindExplain && ExplainTarget(st) == nil {
			return nil, &Error{Message: "EXPLAIN takes a SELECT or the name of a relation", Position: s.Offset + 1}
		}
		if st.Kind == KindSubscribe && SubscribeTarget(st) == nil {
			return nil, &Error{Message: "SUBSCRIBE takes the name of a relation", Position: s.Offset + 1}
		}
		out = append(out, st)
	}
	return out, nil
}

// marked is a statement of Strand's dialect: its first token's offset
// and its kind.
type marked struct {
	at   int
	kind Kind
}

// rewrite swaps the dialect's keywords for PostgreSQL's in each
// statement of sql, keeping every byte offset, and reports the kinds of
// the statements it changed or must mark.
func rewrite(sql string, toks []*pg.ScanToken) (string, []marked) {
	b := []byte(sql)
	var kinds []marked
	// word is token i's text in lower case, "" past the statement (a
	// quoted identifier keeps its quotes, so it matches no keyword).
	word := func(stmt []*pg.ScanToken, i int) string {
		if i >= len(stmt) {
			return ""
		}
		return strings.ToLower(sql[stmt[i].Start:stmt[i].End])
	}
	put := func(t *pg.ScanToken, with string) { copy(b[t.Start:t.End], with) }
	for len(toks) > 0 {
		n := 0
		for n < len(toks) && toks[n].Token != pg.Token_ASCII_59 {
			n++
		}
		stmt := toks[:n]
		toks = toks[min(n+1, len(toks)):]
		if len(stmt) < 2 {
			continue
		}
		at := int(stmt[0].Start)
		switch first, second := word(stmt, 0), word(stmt, 1); {
		case (first == "create" || first == "drop") && second == "source":
			put(stmt[1], "TABLE ")
			kinds = append(kinds, marked{at, KindSource})
		case (first == "create" || first == "drop") && second == "sink":
			put(stmt[1], "VIEW")
			kinds = append(kinds, marked{at, KindSink})
		case (first == "create" || first == "drop" || first == "alter") && second == "connector":
			with := "COLLATION"
			if first == "alter" {
				with = "TYPE     "
			}
			put(stmt[1], with)
			for i := 2; first == "create" && i+1 < len(stmt); i++ {
				// WITH before the option list: CREATE COLLATION
				// takes the list bare.
				if word(stmt, i) == "with" && stmt[i+1].Token == pg.Token_ASCII_40 {
					put(stmt[i], "    ")
					break
				}
			}
			for i := 3; i+1 < len(stmt); i++ {
				prev := stmt[i-1].Token
				if stmt[i].Token != pg.Token_SCONST || stmt[i+1].Token != pg.Token_ASCII_61 || (prev != pg.Token_ASCII_40 && prev != pg.Token_ASCII_44) {
					continue
				}
				// A key: 'k' reads as the identifier "k". A key
				// with a quote inside is left as it is, and the
				// grammar refuses it.
				key := sql[stmt[i].Start:stmt[i].End]
				if len(key) >= 2 && key[0] == '\'' && key[len(key)-1] == '\'' && !strings.ContainsAny(key[1:len(key)-1], `'"`) {
					b[stmt[i].Start], b[stmt[i].End-1] = '"', '"'
				}
			}
			kinds = append(kinds, marked{at, KindConnector})
		case first == "subscribe":
			put(stmt[0], "    TABLE")
			if second == "to" {
				put(stmt[1], "  ")
			}
			kinds = append(kinds, marked{at, KindSubscribe})
		case first == "explain" && isName(stmt, 1) && len(stmt) == 2,
			first == "explain" && second == "materialized" && word(stmt, 2) == "view" && isName(stmt, 3) && len(stmt) == 4:
			// A relation's name alone is no ExplainableStmt in
			// PostgreSQL's grammar: read it as TABLE name.
			put(stmt[0], "  TABLE")
			for _, t := range stmt[1 : len(stmt)-1] {
				put(t, strings.Repeat(" ", int(t.End-t.Start)))
			}
			kinds = append(kinds, marked{at, KindExplain})
		case first == "show" && second == "materialized" && word(stmt, 2) == "views" && len(stmt) == 3:
			// One identifier in place of two words, padded with the
			// blanks that were between them and more.
			span := b[stmt[1].Start:stmt[2].End]
			copy(span, "materialized_views")
			for i := len("materialized_views"); i < len(span); i++ {
				span[i] = ' '
			}
			kinds = append(kinds, marked{at, KindMaterializedView})
		}
	}
	return string(b), kinds
}

// postgresKind is the kind of PostgreSQL's own statements about
// materialized views, and of SHOW SOURCES, SINKS and VIEWS.
func postgresKind(n *pg.Node) Kind {
	switch {
	case n.GetCreateTableAsStmt() != nil && n.GetCreateTableAsStmt().Objtype == pg.ObjectType_OBJECT_MATVIEW:
		return KindMaterializedView
	case n.GetDropStmt() != nil && n.GetDropStmt().RemoveType == pg.ObjectType_OBJECT_MATVIEW:
		return KindMaterializedView
	case n.GetVariableShowStmt() != nil:
		switch n.GetVariableShowStmt().Name {
		case "sources":
			return KindSource
		case "sinks":
			return KindSink
		case "views", "materialized_views":
			return KindMaterializedView
		case "connectors":
			return KindConnector
		}
	}
	return KindOther
}

// isName reports whether token i of stmt can name a relation: an
// identifier (quoted or not) or an unreserved keyword, which PostgreSQL
// takes as a name (a view called "nothing"). EXPLAIN SELECT, EXPLAIN
// VALUES and EXPLAIN (options) stay PostgreSQL's.
func isName(stmt []*pg.ScanToken, i int) bool {
	return i < len(stmt) && (stmt[i].Token == pg.Token_IDENT || stmt[i].KeywordKind == pg.KeywordKind_UNRESERVED_KEYWORD)
}

// ExplainTarget is the relation an EXPLAIN of a name names, nil for a
// statement that is not one.
func ExplainTarget(s Statement) *pg.RangeVar {
	sel := s.Node.GetSelectStmt()
	if s.Kind != KindExplain || sel == nil || len(sel.FromClause) != 1 || sel.WhereClause != nil {
		return nil
	}
	return sel.FromClause[0].GetRangeVar()
}

// SubscribeTarget is the relation a SUBSCRIBE names, nil for a statement
// that is not one.
func SubscribeTarget(s Statement) *pg.RangeVar {
	sel := s.Node.GetSelectStmt()
	if s.Kind != KindSubscribe || sel == nil || len(sel.FromClause) != 1 || sel.WhereClause != nil {
		return nil
	}
	return sel.FromClause[0].GetRangeVar()
}

// OptionKey is the key of an option of st (a connector's, or any
// definition list's) as the user wrote it: a quoted key ('k' or "k")
// unquoted and untruncated, a bare word as the grammar read it (lower
// case).
func OptionKey(st Statement, de *pg.DefElem) string {
	at := int(de.Location) - st.Offset
	if at < 0 || at >= len(st.Text) {
		return de.Defname
	}
	text := st.Text[at:]
	q := text[0]
	if q != '\'' && q != '"' {
		return de.Defname
	}
	var key strings.Builder
	for i := 1; i < len(text); i++ {
		if text[i] != q {
			key.WriteByte(text[i])
			continue
		}
		if i+1 < len(text) && text[i+1] == q {
			// A doubled quote inside "...": one quote.
			key.WriteByte(q)
			i++
			continue
		}
		return key.String()
	}
	return de.Defname
}

// Deparse prints a statement or query tree back as SQL, PostgreSQL's
// own way (pg_query's deparser): the catalog keeps a view's query in
// this normalized form, free of the CREATE around it.
func Deparse(n *pg.Node) (sql string, err error) {
	gate <- struct{}{}
	defer func() { <-gate }()
	defer func() {
		if r := recover(); r != nil {
			sql, err = "", fmt.Errorf("deparser failed: %v", r)
		}
	}()
	return pgquery.Deparse(&pg.ParseResult{Stmts: []*pg.RawStmt{{Stmt: n}}})
}
