// Package sqltest holds test-only helpers for Strand's SQL: DuckDB as an
// independent oracle (Oracle runs batch queries over given tables in a
// real DuckDB, through its node API), a comparison of results that
// forgives what may differ between engines (row order unless asked,
// float rounding, DuckDB's type names against PostgreSQL's) and prints
// a readable diff, the tables a corpus runs over (a generated Nexmark
// stream, small tables with NULLs and duplicates), and the query corpus
// itself (Nexmark's q0-q8 in internal/bench/nexmark, testdata/corpus) that every SQL feature of
// Strand is checked with.
//
// Nothing here is linked into the strand binary: import it from _test.go
// files only.
//
// DuckDB is @duckdb/node-api from npm, pinned to DuckDBVersion.
// scripts/test installs it under the user cache directory
// (<os.UserCacheDir()>/strand/duckdb-node-<version>); DirEnv names
// another install prefix. Without node or the package a test using the
// Oracle skips, except under CI=true, where it fails.
package sqltest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

const (
	// DuckDBVersion is the @duckdb/node-api release the oracle runs.
	DuckDBVersion = "1.5.6-r.1"
	// DirEnv names the npm prefix holding node_modules/@duckdb/node-api.
	DirEnv = "STRAND_DUCKDB_DIR"
	// DefaultMaxRows bounds each query's result: a query returning more
	// is an error, not a truncated answer.
	DefaultMaxRows = 100_000
	// maxResponseBytes bounds what the oracle process may print.
	maxResponseBytes = 256 << 20
	// stderrBytes is how much of the process's stderr explains a failure.
	stderrBytes = 8 << 10
	// DefaultTimeout bounds one batch run by Query.
	DefaultTimeout = 5 * time.Minute
)

//go:embed duckdb.js
var duckdbScript string

// ErrUnavailable: node or the DuckDB package is not installed.
var ErrUnavailable = errors.New("sqltest: DuckDB oracle unavailable")

// Column is a result's or a table's column. Type is PostgreSQL's name
// for it in a Result (int8, float8, numeric, text, timestamp, ...; see
// PGType), and any SQL type DuckDB accepts in a Table (PostgreSQL's
// names work: int8, text, float8, numeric(12,2), timestamp, bool).
type Column struct {
	Name string
	Type string
}

// Table is a table to load before the queries run. Rows hold Go values:
// nil for NULL, integers, floats, bool, string, []byte, time.Time,
// pgtype.Numeric, pgtype.Interval, json.Number, *big.Int, *big.Rat, or
// any driver.Valuer; they reach DuckDB as text cast to the column's
// type, so no value loses precision on the way.
type Table struct {
	Name    string
	Columns []Column
	Rows    [][]any
}

// Query is one statement to run, named for the report.
type Query struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// Result is a query's answer. Rows hold int64 (DuckDB's integer types up
// to 32 bits unsigned), float64, pgtype.Numeric (DECIMAL, HUGEINT,
// UBIGINT), string, bool, time.Time (UTC), pgtype.Interval, or nil.
type Result struct {
	Name    string
	Columns []Column
	Rows    [][]any
	// Err is the engine's error for this query; Columns and Rows are
	// then empty.
	Err error
	// DuckDBTypes are DuckDB's own type names, beside Columns' mapped
	// ones, for a report.
	DuckDBTypes []string
}

// Oracle runs batches of queries in DuckDB. The zero value is not
// usable; get one from NewOracle or FindOracle. An Oracle is safe for
// concurrent use: each Run is its own process.
type Oracle struct {
	node    string
	modules string
	// MaxRows bounds each query's rows (DefaultMaxRows if 0).
	MaxRows int
	// Threads is DuckDB's worker threads per run (1 if 0): the tests
	// share a small machine, and the tables are small.
	Threads int
}

// Dir is the npm prefix the DuckDB package is looked for in: DirEnv, or
// <user cache dir>/strand/duckdb-node-<DuckDBVersion>.
func Dir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "strand", "duckdb-node-"+DuckDBVersion), nil
}

// FindOracle returns an Oracle, or an error wrapping ErrUnavailable that
// says how to install what is missing.
func FindOracle() (*Oracle, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w: node not in PATH (Debian: apt-get install nodejs)", ErrUnavailable)
	}
	dir, err := Dir()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	install := fmt.Sprintf("npm install --prefix %q --save-exact @duckdb/node-api@%s, or set %s", dir, DuckDBVersion, DirEnv)
	modules := filepath.Join(dir, "node_modules")
	b, err := os.ReadFile(filepath.Join(modules, "@duckdb", "node-api", "package.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: @duckdb/node-api not in %s (%s)", ErrUnavailable, dir, install)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != DuckDBVersion {
		return nil, fmt.Errorf("%w: %s has @duckdb/node-api %q, want %s (%s)", ErrUnavailable, dir, pkg.Version, DuckDBVersion, install)
	}
	return &Oracle{node: node, modules: modules}, nil
}

// NewOracle returns an Oracle for t, or skips t when DuckDB is not
// installed (fails it under CI=true, where a skip would hide a broken
// setup).
func NewOracle(t testing.TB) *Oracle {
	t.Helper()
	o, err := FindOracle()
	if err != nil {
		if testproc.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return o
}

// The request and response the script reads and writes.
type (
	request struct {
		Tables  []reqTable `json:"tables"`
		Queries []Query    `json:"queries"`
		MaxRows int        `json:"max_rows"`
		Threads int        `json:"threads"`
	}
	reqTable struct {
		Name    string      `json:"name"`
		Columns []reqColumn `json:"columns"`
		Rows    [][]*string `json:"rows"`
	}
	reqColumn struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	response struct {
		Version string      `json:"version"`
		Error   string      `json:"error"`
		Results []respQuery `json:"results"`
	}
	respQuery struct {
		Name    string              `json:"name"`
		Error   string              `json:"error"`
		Columns []reqColumn         `json:"columns"`
		Rows    [][]json.RawMessage `json:"rows"`
	}
)

// Run loads tables into a fresh in-memory DuckDB and runs queries in
// order, in one process: statements that return no rows (CREATE VIEW,
// INSERT, DELETE) may come between the queries and see what the earlier
// ones did. A query's own failure is in its Result's Err; Run's error is
// for the batch (a table that would not load, the process).
func (o *Oracle) Run(ctx context.Context, tables []Table, queries []Query) ([]Result, error) {
	req := request{Queries: queries, MaxRows: o.MaxRows, Threads: o.Threads}
	if req.MaxRows <= 0 {
		req.MaxRows = DefaultMaxRows
	}
	if req.Threads <= 0 {
		req.Threads = 1
	}
	for _, t := range tables {
		rt, err := encodeTable(t)
		if err != nil {
			return nil, err
		}
		req.Tables = append(req.Tables, rt)
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, o.node, "-e", duckdbScript)
	cmd.Env = append(os.Environ(), "NODE_PATH="+o.modules)
	cmd.Stdin = bytes.NewReader(in)
	var stderr limitedBuffer
	stderr.max = stderrBytes
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sqltest: start node: %w", err)
	}
	out, readErr := io.ReadAll(io.LimitReader(stdout, maxResponseBytes+1))
	waitErr := cmd.Wait()
	switch {
	case readErr != nil:
		return nil, fmt.Errorf("sqltest: read DuckDB's answer: %w", readErr)
	case len(out) > maxResponseBytes:
		return nil, fmt.Errorf("sqltest: DuckDB's answer exceeds %d bytes", maxResponseBytes)
	case waitErr != nil:
		return nil, fmt.Errorf("sqltest: DuckDB oracle: %w: %s", waitErr, strings.TrimSpace(stderr.String()))
	}
	var resp response
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("sqltest: DuckDB's answer: %w", err)
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("sqltest: DuckDB %s: %s", resp.Version, resp.Error)
	}
	if len(resp.Results) != len(queries) {
		return nil, fmt.Errorf("sqltest: DuckDB answered %d of %d queries", len(resp.Results), len(queries))
	}
	results := make([]Result, len(queries))
	for i, rq := range resp.Results {
		r, err := decodeResult(rq)
		if err != nil {
			return nil, fmt.Errorf("sqltest: query %s: %w", queries[i].Name, err)
		}
		results[i] = r
	}
	return results, nil
}

// Query runs queries over tables within DefaultTimeout and fails t if
// the batch fails; each query's own error is in its Result.
func (o *Oracle) Query(t testing.TB, tables []Table, queries ...Query) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	res, err := o.Run(ctx, tables, queries)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func encodeTable(t Table) (reqTable, error) {
	rt := reqTable{Name: t.Name, Rows: make([][]*string, len(t.Rows))}
	for _, c := range t.Columns {
		rt.Columns = append(rt.Columns, reqColumn(c))
	}
	for i, row := range t.Rows {
		if len(row) != len(t.Columns) {
			return rt, fmt.Errorf("sqltest: table %s row %d: %d values for %d columns", t.Name, i, len(row), len(t.Columns))
		}
		out := make([]*string, len(row))
		for j, v := range row {
			s, ok, err := textValue(v)
			if err != nil {
				return rt, fmt.Errorf("sqltest: table %s row %d column %s: %w", t.Name, i, t.Columns[j].Name, err)
			}
			if ok {
				out[j] = &s
			}
		}
		rt.Rows[i] = out
	}
	return rt, nil
}

func decodeResult(rq respQuery) (Result, error) {
	r := Result{Name: rq.Name}
	if rq.Error != "" {
		r.Err = errors.New(rq.Error)
		return r, nil
	}
	for _, c := range rq.Columns {
		r.Columns = append(r.Columns, Column{Name: c.Name, Type: PGType(c.Type)})
		r.DuckDBTypes = append(r.DuckDBTypes, c.Type)
	}
	r.Rows = make([][]any, len(rq.Rows))
	for i, row := range rq.Rows {
		if len(row) != len(rq.Columns) {
			return r, fmt.Errorf("row %d: %d values for %d columns", i, len(row), len(rq.Columns))
		}
		vals := make([]any, len(row))
		for j, raw := range row {
			v, err := duckValue(rq.Columns[j].Type, raw)
			if err != nil {
				return r, fmt.Errorf("row %d column %s: %w", i, rq.Columns[j].Name, err)
			}
			vals[j] = v
		}
		r.Rows[i] = vals
	}
	return r, nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
