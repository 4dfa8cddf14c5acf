package sqltest

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/strandkafka/strand/internal/bench/nexmark"
)

// The query corpus: Nexmark q0-q8 over person, auction and bid (the
// files of package nexmark, which the bench runs too; how they are
// written: testdata/nexmark/README.md) and testdata/corpus (the general
// corpus over customers, products and orders, and a few over the
// Nexmark tables).
//
//go:embed testdata/corpus/*.sql
var corpusFS embed.FS

// setFS is where set's files are, and their directory in it.
func setFS(set string) (fs.FS, string) {
	if set == SetNexmark {
		return nexmark.QueryFS(), "."
	}
	return corpusFS, path.Join("testdata", set)
}

// Corpus sets.
const (
	SetNexmark = "nexmark"
	SetGeneral = "corpus"
)

// CorpusQuery is one query file. Its header lines, `-- key: value` at the
// top, say what it is for.
type CorpusQuery struct {
	// Name is the set and file name without .sql: "nexmark/q5",
	// "corpus/012_sum_avg".
	Name string
	SQL  string
	// Exercises says which features the query checks.
	Exercises string
	// Tables are the tables it reads.
	Tables []string
	// ExpectEmpty: the answer over the corpus tables is empty, on
	// purpose (expect: empty); otherwise it has rows (expect: rows).
	ExpectEmpty bool
	// Ordered: its ORDER BY is total and part of the answer (order:
	// ordered); compare with Options.Ordered.
	Ordered bool
}

// Query is the corpus query as an oracle Query.
func (c CorpusQuery) Query() Query { return Query{Name: c.Name, SQL: c.SQL} }

// Corpus returns the queries of set (SetNexmark or SetGeneral), in file
// name order.
func Corpus(set string) ([]CorpusQuery, error) {
	fsys, dir := setFS(set)
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("sqltest: corpus %q: %w", set, err)
	}
	var out []CorpusQuery
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		q, err := parseCorpusFile(set+"/"+strings.TrimSuffix(e.Name(), ".sql"), string(b))
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b CorpusQuery) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func parseCorpusFile(name, text string) (CorpusQuery, error) {
	q := CorpusQuery{Name: name}
	lines := strings.Split(text, "\n")
	i := 0
	seen := map[string]bool{}
	for ; i < len(lines); i++ {
		rest, ok := strings.CutPrefix(lines[i], "-- ")
		if !ok {
			break
		}
		key, val, ok := strings.Cut(rest, ": ")
		if !ok || strings.Contains(key, " ") {
			break // an ordinary comment: the SQL has begun
		}
		seen[key] = true
		switch key {
		case "exercises":
			q.Exercises = val
		case "tables":
			for _, t := range strings.Split(val, ",") {
				q.Tables = append(q.Tables, strings.TrimSpace(t))
			}
		case "expect":
			switch val {
			case "rows":
			case "empty":
				q.ExpectEmpty = true
			default:
				return q, fmt.Errorf("sqltest: %s: expect %q, want rows or empty", name, val)
			}
		case "order":
			if val != "ordered" {
				return q, fmt.Errorf("sqltest: %s: order %q, want ordered", name, val)
			}
			q.Ordered = true
		default:
			return q, fmt.Errorf("sqltest: %s: unknown header %q", name, key)
		}
	}
	for _, k := range []string{"exercises", "tables", "expect"} {
		if !seen[k] {
			return q, fmt.Errorf("sqltest: %s: no %q header", name, k)
		}
	}
	q.SQL = strings.TrimSpace(strings.Join(lines[i:], "\n"))
	if q.SQL == "" {
		return q, fmt.Errorf("sqltest: %s: no SQL", name)
	}
	return q, nil
}
