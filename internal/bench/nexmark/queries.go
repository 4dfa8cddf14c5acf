package nexmark

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
)

// The queries, in batch form (queries/q0.sql-q8.sql; the streaming
// forms and the notes on how they are written are in
// internal/sql/sqltest/testdata/nexmark): the one copy, which the bench
// creates as materialized views and internal/sql/sqltest's corpus
// (SetNexmark) checks against DuckDB and PostgreSQL, so what the bench
// measures is what the tests check.
//
//go:embed queries/*.sql
var queryFiles embed.FS

// QueryFS is the query files, q0.sql to q8.sql, at its root.
func QueryFS() fs.FS {
	sub, err := fs.Sub(queryFiles, "queries")
	if err != nil {
		panic(err) // a constant directory of the embed
	}
	return sub
}

// QueryNames are the Nexmark queries the bench knows, in order.
var QueryNames = []string{"q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"}

// Query is one Nexmark query in batch form.
type Query struct {
	Name string
	// SQL is the SELECT, over the tables person, auction and bid.
	SQL string
	// Tables are the tables it reads (its "-- tables:" line).
	Tables []string
}

// LoadQuery returns the query called name (q0 to q8).
func LoadQuery(name string) (Query, error) {
	b, err := queryFiles.ReadFile("queries/" + name + ".sql")
	if err != nil {
		return Query{}, fmt.Errorf("nexmark: no query %q (want q0 to q8)", name)
	}
	q := Query{Name: name, SQL: string(b)}
	for line := range strings.SplitSeq(q.SQL, "\n") {
		if t, ok := strings.CutPrefix(line, "-- tables:"); ok {
			for s := range strings.SplitSeq(t, ",") {
				q.Tables = append(q.Tables, strings.TrimSpace(s))
			}
		}
	}
	if len(q.Tables) == 0 {
		return Query{}, fmt.Errorf("nexmark: query %s names no tables", name)
	}
	return q, nil
}

// SourceColumns are the columns of a SQL source over the table's topic
// of JSON records, as the generator writes them.
func SourceColumns(table string) (string, error) {
	switch table {
	case "person":
		return "id int8, name text, email_address text, credit_card text, city text, state text, date_time timestamp, extra text", nil
	case "auction":
		return "id int8, item_name text, description text, initial_bid int8, reserve int8, date_time timestamp, expires timestamp, seller int8, category int8, extra text", nil
	case "bid":
		return "auction int8, bidder int8, price int8, channel text, url text, date_time timestamp, extra text", nil
	}
	return "", fmt.Errorf("nexmark: no table %q", table)
}
