// What readers of the registry outside its REST API need (the web
// console; the CLI's output): the subjects and a subject's versions,
// read from the same view the API reads, and a schema's text laid out
// for a person.

package schemareg

import (
	"bytes"
	"encoding/json"

	"github.com/strandkafka/strand/internal/meta"
)

// Subjects returns the subjects that have a live version (deleted: any
// version, soft-deleted ones too), sorted.
func (r *Registry) Subjects(deleted bool) ([]string, error) {
	v := r.md.View()
	defer v.Close()
	subjects, live, err := v.SchemaSubjects()
	if err != nil {
		return nil, err
	}
	out := subjects[:0]
	for i, s := range subjects {
		if live[i] || deleted {
			out = append(out, s)
		}
	}
	return out, nil
}

// Versions returns subject's versions, oldest first: the live ones, and
// the soft-deleted ones too when deleted.
func (r *Registry) Versions(subject string, deleted bool) ([]meta.SchemaVersion, error) {
	v := r.md.View()
	defer v.Close()
	vs, err := v.SchemaVersions(subject)
	if err != nil {
		return nil, err
	}
	out := vs[:0]
	for _, sv := range vs {
		if deleted || !sv.Deleted {
			out = append(out, sv)
		}
	}
	return out, nil
}

// maxIndentedBytes bounds what Indent makes of a schema: a deeply
// nested one would grow by its depth on every line.
const maxIndentedBytes = 4 << 20

// Indent lays out an Avro schema or a JSON Schema (stored compact, on
// one line) with one member a line, indented two spaces a level, for a
// person to read or a line diff to compare. Other text (Protobuf), and
// JSON whose indented form would pass maxIndentedBytes, is returned as
// it is.
func Indent(schema string) string {
	if !json.Valid([]byte(schema)) || indentedSize(schema) > maxIndentedBytes {
		return schema
	}
	var b bytes.Buffer
	if json.Indent(&b, []byte(schema), "", "  ") != nil {
		return schema
	}
	return b.String()
}

// indentedSize bounds from above the size of valid JSON s indented: each
// line break (after an opening bracket, a comma, or before a closing
// bracket) adds a newline and at most two spaces a level of the deepest
// nesting, each colon a space.
func indentedSize(s string) int {
	var (
		inString, escaped bool
		depth, maxDepth   int
		lines, colons     int
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			maxDepth = max(maxDepth, depth)
			lines += 2 // after it, and before its closing bracket
		case '}', ']':
			depth--
		case ',':
			lines++
		case ':':
			colons++
		}
	}
	return len(s) + colons + lines*(1+2*maxDepth)
}
