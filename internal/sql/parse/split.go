package parse

import "strings"

// Splitting a script into statements needs only the few lexical rules of
// PostgreSQL's scanner (src/backend/parser/scan.l) that decide whether a
// ';' is a token: psql splits with its own small lexer (psqlscan.l) for
// the same reason. Loading the grammar's WebAssembly module for it would
// cost the CLI 1-3 s and ~300 MB before its first statement. The rules:
//
//   - '...' strings, '' inside; B'', X'', N'' and U&'' the same;
//   - E'...' strings, where a backslash escapes the next byte; a string
//     followed by blanks holding a newline and another ' goes on
//     (SQL's continuation), which matters only for E'' strings, whose
//     escapes then apply to the continued part;
//   - $tag$...$tag$ (tag optional: $$), up to the same delimiter;
//   - "..." identifiers, "" inside;
//   - -- comments to the end of the line, /* */ comments, nested;
//   - identifiers, consumed whole, so that a '$' or an 'e' inside one
//     starts nothing (ab$c$ is one identifier; abe'x' is not an E string).
//
// FuzzSplit checks that SplitTail agrees with PostgreSQL's scanner.

// Split cuts script into its statements, without their ';' and trimmed;
// stretches holding only blanks and comments are dropped. A last
// statement without its ';', or left open inside a quote or comment, is
// the last element: a script sends it as it is and lets the server say
// what is wrong with it.
func Split(script string) []string {
	stmts, tail, _ := SplitTail(script)
	if tail != "" {
		stmts = append(stmts, tail)
	}
	return stmts
}

// SplitTail is Split for a text still being typed: stmts are the
// statements a ';' ended; tail is what follows the last ';' if it holds
// more than blanks and comments, or opens a quote or comment, in which
// case complete is false and an interactive reader waits for more lines.
func SplitTail(text string) (stmts []string, tail string, complete bool) {
	start, tokens := 0, 0
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ';':
			if tokens > 0 {
				stmts = append(stmts, strings.TrimSpace(text[start:i]))
			}
			i++
			start, tokens = i, 0
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			i = lineEnd(text, i)
			continue // a statement of comments alone is no statement
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			end, ok := commentEnd(text, i)
			if !ok {
				return stmts, strings.TrimSpace(text[start:]), false
			}
			i = end
			continue
		}
		tokens++
		end, ok := tokenEnd(text, i)
		if !ok {
			return stmts, strings.TrimSpace(text[start:]), false
		}
		i = end
	}
	if tokens == 0 {
		return stmts, "", true
	}
	return stmts, strings.TrimSpace(text[start:]), false
}

// tokenEnd is the end of the token at text[i] that is no blank, comment
// or ';': a quoted string or identifier, an identifier, or one byte of
// anything else. ok is false for a quote the text leaves open.
func tokenEnd(text string, i int) (end int, ok bool) {
	switch c := text[i]; {
	case c == '\'':
		return quotedEnd(text, i+1, false)
	case c == '"':
		return doubledEnd(text, i+1, '"')
	case c == '$':
		if tag := dollarTag(text[i:]); tag != "" {
			at := strings.Index(text[i+len(tag):], tag)
			if at < 0 {
				return 0, false
			}
			return i + len(tag) + at + len(tag), true
		}
		return i + 1, true
	case identStart(c):
		j := i + 1
		for j < len(text) && identCont(text[j]) {
			j++
		}
		if j == i+1 && (c == 'e' || c == 'E') && j < len(text) && text[j] == '\'' {
			return quotedEnd(text, j+1, true)
		}
		return j, true
	}
	return i + 1, true
}

// quotedEnd is the end of a '...' string whose body starts at text[i]:
// a doubled quote is one inside, and so (escapes) is a backslash's next byte;
// the continuation rule may carry the string on past its closing quote.
func quotedEnd(text string, i int, escapes bool) (int, bool) {
	for i < len(text) {
		switch text[i] {
		case '\\':
			if escapes {
				i += 2
				continue
			}
		case '\'':
			if i+1 < len(text) && text[i+1] == '\'' {
				i += 2
				continue
			}
			if next, ok := continuation(text, i+1); ok {
				i = next
				continue
			}
			return i + 1, true
		}
		i++
	}
	return 0, false
}

// continuation reports whether text[i:], just after a string's closing
// quote, is scan.l's {whitespace_with_newline}{quote}: the string goes
// on after that quote, at next. A comment in between ends the string,
// as the scanner of PostgreSQL 17 has it (FuzzSplit checks).
func continuation(text string, i int) (next int, ok bool) {
	newline := false
	for i < len(text) {
		switch c := text[i]; {
		case c == '\n' || c == '\r':
			newline = true
			i++
		case c == ' ' || c == '\t' || c == '\f' || c == '\v':
			i++
		case c == '\'' && newline:
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// doubledEnd is the end of a text quoted by q whose body starts at
// text[i], q doubled inside.
func doubledEnd(text string, i int, q byte) (int, bool) {
	for i < len(text) {
		if text[i] == q {
			if i+1 < len(text) && text[i+1] == q {
				i += 2
				continue
			}
			return i + 1, true
		}
		i++
	}
	return 0, false
}

// dollarTag is the $tag$ delimiter s starts with, "" if none.
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1]
		case identStart(c), j > 1 && c >= '0' && c <= '9':
		default:
			return ""
		}
	}
	return ""
}

// lineEnd is the end of the -- comment at text[i]: its newline or the
// end of the text.
func lineEnd(text string, i int) int {
	if j := strings.IndexAny(text[i:], "\n\r"); j >= 0 {
		return i + j
	}
	return len(text)
}

// commentEnd is the end of the /* comment at text[i], nested ones
// inside it; ok is false if the text leaves it open.
func commentEnd(text string, i int) (int, bool) {
	depth := 0
	for i += 2; i+1 < len(text); {
		switch {
		case text[i] == '/' && text[i+1] == '*':
			depth++
			i += 2
		case text[i] == '*' && text[i+1] == '/':
			if depth == 0 {
				return i + 2, true
			}
			depth--
			i += 2
		default:
			i++
		}
	}
	return 0, false
}

// identStart and identCont are scan.l's ident_start and ident_cont:
// every byte of a multi-byte character counts as a letter.
func identStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func identCont(c byte) bool {
	return identStart(c) || c >= '0' && c <= '9' || c == '$'
}
