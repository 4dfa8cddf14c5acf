package sqltest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// TypeCheck says how Compare matches column types.
type TypeCheck uint8

const (
	// TypesFamily (the default) requires the same family: numbers
	// (int2/4/8, numeric, float4/8) with numbers, text with text
	// (text, varchar, bpchar, name), any other type with itself. Engines
	// legitimately differ within a family: DuckDB's AVG is float8 where
	// PostgreSQL's is numeric, its SUM of int8 is HUGEINT.
	TypesFamily TypeCheck = iota
	// TypesExact requires the same PostgreSQL type name.
	TypesExact
	// TypesIgnore compares values only.
	TypesIgnore
)

// Default tolerances for values compared as floats.
const (
	DefaultRelTol = 1e-9
	DefaultAbsTol = 1e-12
)

// maxDiffRows bounds the rows a diff lists per section.
const maxDiffRows = 20

// Options tune Compare. The zero value compares rows as multisets,
// names case-insensitively, types by family, floats to DefaultRelTol.
type Options struct {
	// Ordered compares rows position by position (a query with ORDER BY
	// whose order is total).
	Ordered bool
	// IgnoreNames skips comparing column names.
	IgnoreNames bool
	Types       TypeCheck
	// RelTol and AbsTol: a value that is a float on either side equals
	// another when they differ by at most max(AbsTol, RelTol*max(|a|,|b|)).
	// Exact numbers (integers, numeric) on both sides compare exactly.
	RelTol, AbsTol float64
}

// Equal reports a difference between want and got as t's error, titled
// with want's name.
func Equal(t testing.TB, want, got Result, opts Options) bool {
	t.Helper()
	diff, err := Compare(want, got, opts)
	if err != nil {
		t.Errorf("%s: %v", want.Name, err)
		return false
	}
	if diff != "" {
		t.Errorf("%s: results differ:\n%s", want.Name, diff)
		return false
	}
	return true
}

// Compare returns "" when got has want's columns and rows, and otherwise
// a readable diff: the columns that differ, or the rows missing from got
// and the extra rows in got (each with its count, as multisets). Rows
// are unordered unless opts.Ordered. err is for values Compare cannot
// read, and for an Err in either result.
func Compare(want, got Result, opts Options) (string, error) {
	if want.Err != nil || got.Err != nil {
		return "", fmt.Errorf("cannot compare failed queries: want err %v, got err %v", want.Err, got.Err)
	}
	if opts.RelTol == 0 {
		opts.RelTol = DefaultRelTol
	}
	if opts.AbsTol == 0 {
		opts.AbsTol = DefaultAbsTol
	}
	if d := compareColumns(want.Columns, got.Columns, opts); d != "" {
		return d, nil
	}
	n := len(want.Columns)
	w, err := toCells(want.Rows, n)
	if err != nil {
		return "", fmt.Errorf("want: %w", err)
	}
	g, err := toCells(got.Rows, n)
	if err != nil {
		return "", fmt.Errorf("got: %w", err)
	}
	c := comparer{opts: opts, approx: approxColumns(n, w, g)}
	if opts.Ordered {
		return c.ordered(w, g), nil
	}
	return c.multiset(w, g), nil
}

func compareColumns(want, got []Column, opts Options) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "want %d columns %s, got %d %s\n", len(want), columnList(want), len(got), columnList(got))
		return b.String()
	}
	for i := range want {
		w, g := want[i], got[i]
		if !opts.IgnoreNames && !strings.EqualFold(w.Name, g.Name) {
			fmt.Fprintf(&b, "column %d: want name %q, got %q\n", i+1, w.Name, g.Name)
		}
		if !typesMatch(w.Type, g.Type, opts.Types) {
			fmt.Fprintf(&b, "column %d (%s): want type %s, got %s\n", i+1, w.Name, w.Type, g.Type)
		}
	}
	return b.String()
}

func columnList(cols []Column) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = c.Name + " " + c.Type
	}
	return "(" + strings.Join(s, ", ") + ")"
}

func typesMatch(w, g string, mode TypeCheck) bool {
	if mode == TypesIgnore || w == "" || g == "" {
		return true
	}
	if mode == TypesExact {
		return w == g
	}
	return typeFamily(w) == typeFamily(g)
}

func typeFamily(t string) string {
	switch t {
	case "int2", "int4", "int8", "numeric", "float4", "float8":
		return "number"
	case "text", "varchar", "bpchar", "name", "char":
		return "text"
	}
	return t
}

func toCells(rows [][]any, n int) ([][]cell, error) {
	out := make([][]cell, len(rows))
	for i, row := range rows {
		if len(row) != n {
			return nil, fmt.Errorf("row %d has %d values for %d columns", i, len(row), n)
		}
		out[i] = make([]cell, n)
		for j, v := range row {
			c, err := toCell(v)
			if err != nil {
				return nil, fmt.Errorf("row %d column %d: %w", i, j+1, err)
			}
			out[i][j] = c
		}
	}
	return out, nil
}

// approxColumns marks the columns holding a float on either side: those
// compare with tolerance, all others exactly.
func approxColumns(n int, sides ...[][]cell) []bool {
	approx := make([]bool, n)
	for _, rows := range sides {
		for _, row := range rows {
			for j, c := range row {
				if c.kind == kindFloat {
					approx[j] = true
				}
			}
		}
	}
	return approx
}

type comparer struct {
	opts   Options
	approx []bool
}

// cellEqual is SQL row equality as a test wants it: NULL equals NULL.
func (c comparer) cellEqual(a, b cell) bool {
	if a.kind == kindNull || b.kind == kindNull {
		return a.kind == b.kind
	}
	if a.kind == kindFloat || b.kind == kindFloat {
		x, ok1 := a.float()
		y, ok2 := b.float()
		return ok1 && ok2 && c.floatEqual(x, y)
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case kindBool:
		return a.b == b.b
	case kindExact:
		return a.r.Cmp(b.r) == 0
	case kindText, kindBytes:
		return a.s == b.s
	case kindTime:
		return a.t.Equal(b.t)
	case kindInterval:
		return intervalMicros(a.iv).Cmp(intervalMicros(b.iv)) == 0
	}
	return false
}

func (c comparer) floatEqual(x, y float64) bool {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return math.IsNaN(x) && math.IsNaN(y)
	case math.IsInf(x, 0) || math.IsInf(y, 0):
		return x == y
	}
	d := math.Abs(x - y)
	return d <= c.opts.AbsTol || d <= c.opts.RelTol*math.Max(math.Abs(x), math.Abs(y))
}

func (c comparer) rowEqual(a, b []cell) bool {
	for j := range a {
		if !c.cellEqual(a[j], b[j]) {
			return false
		}
	}
	return true
}

// key is the row's exact part: the cells of columns that compare
// exactly, in a form equal exactly when they are.
func (c comparer) key(row []cell) string {
	var b strings.Builder
	for j, x := range row {
		if c.approx[j] {
			continue
		}
		switch x.kind {
		case kindExact:
			b.WriteString("n" + x.r.RatString())
		case kindTime:
			fmt.Fprintf(&b, "t%d", x.t.UnixNano())
		case kindInterval:
			b.WriteString("i" + intervalMicros(x.iv).String())
		default:
			fmt.Fprintf(&b, "%d%q", x.kind, x.String())
		}
		b.WriteByte(0)
	}
	return b.String()
}

func rowString(row []cell) string {
	s := make([]string, len(row))
	for i, c := range row {
		s[i] = c.String()
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// multiset matches rows with equal exact parts, then pairs the rows of
// each such group by their float columns, both sides sorted, first fit:
// exact for the usual case of floats that differ in the last bits.
func (c comparer) multiset(want, got [][]cell) string {
	groups := map[string]*[2][][]cell{}
	var keys []string
	add := func(side int, rows [][]cell) {
		for _, r := range rows {
			k := c.key(r)
			g := groups[k]
			if g == nil {
				g = &[2][][]cell{}
				groups[k] = g
				keys = append(keys, k)
			}
			g[side] = append(g[side], r)
		}
	}
	add(0, want)
	add(1, got)
	var missing, extra [][]cell
	for _, k := range keys {
		g := groups[k]
		w, gt := g[0], g[1]
		if len(w) > 1 || len(gt) > 1 {
			c.sortApprox(w)
			c.sortApprox(gt)
		}
		used := make([]bool, len(gt))
		for _, wr := range w {
			found := false
			for i, gr := range gt {
				if !used[i] && c.rowEqual(wr, gr) {
					used[i], found = true, true
					break
				}
			}
			if !found {
				missing = append(missing, wr)
			}
		}
		for i, gr := range gt {
			if !used[i] {
				extra = append(extra, gr)
			}
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "want %d rows, got %d: %d missing, %d extra\n", len(want), len(got), len(missing), len(extra))
	writeCounted(&b, "missing (wanted, not got)", missing)
	writeCounted(&b, "extra (got, not wanted)", extra)
	return b.String()
}

func (c comparer) sortApprox(rows [][]cell) {
	slices.SortStableFunc(rows, func(a, b []cell) int {
		for j := range a {
			if !c.approx[j] {
				continue
			}
			x, _ := a[j].float()
			y, _ := b[j].float()
			if a[j].kind == kindNull || b[j].kind == kindNull {
				if r := cmp.Compare(a[j].kind, b[j].kind); r != 0 {
					return r
				}
				continue
			}
			if r := cmp.Compare(x, y); r != 0 {
				return r
			}
		}
		return 0
	})
}

// writeCounted lists rows once each with how many times they occur, in
// a stable order, at most maxDiffRows of them.
func writeCounted(b *strings.Builder, title string, rows [][]cell) {
	if len(rows) == 0 {
		return
	}
	counts := map[string]int{}
	var order []string
	for _, r := range rows {
		s := rowString(r)
		if counts[s] == 0 {
			order = append(order, s)
		}
		counts[s]++
	}
	slices.Sort(order)
	fmt.Fprintf(b, "%s:\n", title)
	for i, s := range order {
		if i == maxDiffRows {
			fmt.Fprintf(b, "  ... and %d more distinct rows\n", len(order)-i)
			break
		}
		fmt.Fprintf(b, "  %d× %s\n", counts[s], s)
	}
}

func (c comparer) ordered(want, got [][]cell) string {
	var b strings.Builder
	shown := 0
	for i := range min(len(want), len(got)) {
		if c.rowEqual(want[i], got[i]) {
			continue
		}
		if shown == maxDiffRows {
			b.WriteString("  ... and more\n")
			break
		}
		fmt.Fprintf(&b, "row %d: want %s\n       got  %s\n", i+1, rowString(want[i]), rowString(got[i]))
		shown++
	}
	if len(want) != len(got) {
		fmt.Fprintf(&b, "want %d rows, got %d\n", len(want), len(got))
		longer, what := want, "missing"
		if len(got) > len(want) {
			longer, what = got, "extra"
		}
		for i := min(len(want), len(got)); i < len(longer) && i < min(len(want), len(got))+maxDiffRows; i++ {
			fmt.Fprintf(&b, "row %d %s: %s\n", i+1, what, rowString(longer[i]))
		}
	}
	return b.String()
}
