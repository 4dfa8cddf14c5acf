package cli

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Output formats of `strand sql` (--format): text is psql's aligned
// table; json and csv are for scripts.
const (
	sqlFormatText = "text"
	sqlFormatJSON = "json"
	sqlFormatCSV  = "csv"
)

// maxAlignedRows bounds the rows the text format holds to measure its
// columns: past it the table is printed with the widths it has and the
// rest streams in them (a wider cell pushes its row out of line rather
// than holding an unbounded result in memory; psql holds it all).
const maxAlignedRows = 10_000

// resultWriter prints one statement's result as it arrives. Values are
// the server's text format (the simple query protocol's), which is what
// psql prints too; nil is NULL.
type resultWriter interface {
	// header starts a result that has rows (a RowDescription came).
	header(fields []pgconn.FieldDescription) error
	row(values [][]byte) error
	// end finishes the result: tag is the server's command tag.
	end(tag pgconn.CommandTag) error
}

func newResultWriter(w io.Writer, format, null string) resultWriter {
	switch format {
	case sqlFormatJSON:
		return &jsonResult{w: w}
	case sqlFormatCSV:
		return &csvResult{w: csv.NewWriter(w), null: null}
	}
	return &textResult{w: w, null: null}
}

// textResult is psql's aligned format: names centred over their
// columns, numbers right-aligned, " | " between columns, "(N rows)"
// after; a statement without rows prints its command tag.
type textResult struct {
	w       io.Writer
	null    string
	fields  []pgconn.FieldDescription
	rows    [][]string
	widths  []int
	flushed bool // the header and first rows are out; widths are fixed
	n       int
}

func (t *textResult) header(fields []pgconn.FieldDescription) error {
	t.fields, t.rows, t.flushed, t.n = fields, t.rows[:0], false, 0
	t.widths = make([]int, len(fields))
	for i, f := range fields {
		t.widths[i] = width(f.Name)
	}
	return nil
}

func (t *textResult) row(values [][]byte) error {
	t.n++
	cells := make([]string, len(values))
	for i, v := range values {
		cells[i] = t.null
		if v != nil {
			cells[i] = string(v)
		}
	}
	if t.flushed {
		return t.line(cells)
	}
	for i, c := range cells {
		if i < len(t.widths) {
			for part := range strings.SplitSeq(c, "\n") {
				t.widths[i] = max(t.widths[i], width(part))
			}
		}
	}
	t.rows = append(t.rows, cells)
	if len(t.rows) >= maxAlignedRows {
		return t.flush()
	}
	return nil
}

func (t *textResult) flush() error {
	if !t.flushed {
		var b strings.Builder
		for i, f := range t.fields {
			if i > 0 {
				b.WriteString("|")
			}
			pad := t.widths[i] - width(f.Name)
			fmt.Fprintf(&b, " %s%s%s ", strings.Repeat(" ", pad/2), f.Name, strings.Repeat(" ", pad-pad/2))
		}
		b.WriteString("\n")
		for i := range t.fields {
			if i > 0 {
				b.WriteString("+")
			}
			b.WriteString(strings.Repeat("-", t.widths[i]+2))
		}
		b.WriteString("\n")
		if _, err := io.WriteString(t.w, b.String()); err != nil {
			return err
		}
		t.flushed = true
	}
	for _, r := range t.rows {
		if err := t.line(r); err != nil {
			return err
		}
	}
	t.rows = t.rows[:0]
	return nil
}

// line writes a row as psql does: no padding after the last column
// when it is left-aligned, a right-aligned one ends at its value; a
// value holding newlines takes several lines, each but its last marked
// with '+' where the column's closing space would be.
func (t *textResult) line(cells []string) error {
	parts := make([][]string, len(cells))
	lines := 1
	for i, c := range cells {
		parts[i] = strings.Split(c, "\n")
		lines = max(lines, len(parts[i]))
	}
	var b strings.Builder
	for k := range lines {
		for i := range cells {
			if i > 0 {
				b.WriteString("|")
			}
			part, more := "", k < len(parts[i])-1
			if k < len(parts[i]) {
				part = parts[i][k]
			}
			pad := ""
			if i < len(t.widths) {
				pad = strings.Repeat(" ", max(0, t.widths[i]-width(part)))
			}
			end := " "
			switch {
			case more:
				end = "+"
			case i == len(cells)-1:
				end = ""
			}
			if i < len(t.fields) && numericOID(t.fields[i].DataTypeOID) {
				b.WriteString(" " + pad + part + end)
			} else if end == "" {
				b.WriteString(" " + part)
			} else {
				b.WriteString(" " + part + pad + end)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

func (t *textResult) end(tag pgconn.CommandTag) error {
	if t.fields == nil {
		_, err := fmt.Fprintln(t.w, tag.String())
		return err
	}
	if err := t.flush(); err != nil {
		return err
	}
	noun := "rows"
	if t.n == 1 {
		noun = "row"
	}
	t.fields = nil
	_, err := fmt.Fprintf(t.w, "(%d %s)\n\n", t.n, noun)
	return err
}

// width is the columns a line of a cell takes: one per rune (wide East Asian
// characters are counted as one; psql counts them as two).
func width(s string) int { return utf8.RuneCountInString(s) }

// numericOID reports the types psql right-aligns.
func numericOID(oid uint32) bool {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.Float4OID, pgtype.Float8OID,
		pgtype.NumericOID, pgtype.OIDOID:
		return true
	}
	return false
}

// jsonResult writes a result with rows as a JSON array of objects, one
// per row, keys in the columns' order. Numbers and booleans are JSON's
// own, json and jsonb values are embedded as they are, everything else
// is its text as a string, NULL is null. A statement without rows
// writes nothing: its tag is not data.
type jsonResult struct {
	w      io.Writer
	fields []pgconn.FieldDescription
	keys   [][]byte
	n      int
}

func (j *jsonResult) header(fields []pgconn.FieldDescription) error {
	j.fields, j.n = fields, 0
	j.keys = make([][]byte, len(fields))
	for i, f := range fields {
		j.keys[i], _ = json.Marshal(f.Name) // a string always encodes
	}
	_, err := io.WriteString(j.w, "[")
	return err
}

func (j *jsonResult) row(values [][]byte) error {
	var b strings.Builder
	if j.n > 0 {
		b.WriteString(",")
	}
	j.n++
	b.WriteString("\n  {")
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		if i < len(j.keys) {
			b.Write(j.keys[i])
		} else {
			b.WriteString(strconv.Quote(strconv.Itoa(i)))
		}
		b.WriteString(": ")
		var oid uint32
		if i < len(j.fields) {
			oid = j.fields[i].DataTypeOID
		}
		b.WriteString(jsonValue(oid, v))
	}
	b.WriteString("}")
	_, err := io.WriteString(j.w, b.String())
	return err
}

func jsonValue(oid uint32, v []byte) string {
	if v == nil {
		return "null"
	}
	s := string(v)
	switch oid {
	case pgtype.BoolOID:
		switch s {
		case "t":
			return "true"
		case "f":
			return "false"
		}
	case pgtype.JSONOID, pgtype.JSONBOID:
		if json.Valid(v) {
			return s
		}
	default:
		// NaN and Infinity are numbers to PostgreSQL, not to JSON: they
		// stay strings, as does anything json does not take.
		if numericOID(oid) && json.Valid(v) {
			return s
		}
	}
	q, _ := json.Marshal(s) // a string always encodes
	return string(q)
}

func (j *jsonResult) end(pgconn.CommandTag) error {
	if j.fields == nil {
		return nil
	}
	j.fields = nil
	if j.n == 0 {
		_, err := io.WriteString(j.w, "]\n")
		return err
	}
	_, err := io.WriteString(j.w, "\n]\n")
	return err
}

// csvResult writes RFC 4180 CSV: a header of the column names, then the
// rows, NULL as --null. A statement without rows writes nothing.
type csvResult struct {
	w      *csv.Writer
	null   string
	active bool
}

func (c *csvResult) header(fields []pgconn.FieldDescription) error {
	c.active = true
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return c.w.Write(names)
}

func (c *csvResult) row(values [][]byte) error {
	cells := make([]string, len(values))
	for i, v := range values {
		cells[i] = c.null
		if v != nil {
			cells[i] = string(v)
		}
	}
	return c.w.Write(cells)
}

func (c *csvResult) end(pgconn.CommandTag) error {
	if !c.active {
		return nil
	}
	c.active = false
	c.w.Flush()
	return c.w.Error()
}
