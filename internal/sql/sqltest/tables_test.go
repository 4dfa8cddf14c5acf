package sqltest

import (
	"reflect"
	"strings"
	"testing"
)

func TestSmallChanges(t *testing.T) {
	a, b := SmallChanges(4, 500), SmallChanges(4, 500)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different histories")
	}
	if len(a) != 500 {
		t.Fatalf("%d changes, want 500", len(a))
	}
	// The history must hold what retractions are made of: updates of a
	// live key, deletes, and keys inserted again after a delete.
	seen := map[string]map[int64]string{}
	var updates, deletes, reinserts int
	for _, c := range a {
		if seen[c.Table] == nil {
			seen[c.Table] = map[int64]string{}
		}
		prev := seen[c.Table][c.Key]
		switch {
		case c.Row == nil:
			if prev != "live" {
				t.Fatalf("delete of %s %d, which is not live", c.Table, c.Key)
			}
			deletes++
			seen[c.Table][c.Key] = "dead"
		case prev == "live":
			updates++
		case prev == "dead":
			reinserts++
			seen[c.Table][c.Key] = "live"
		default:
			seen[c.Table][c.Key] = "live"
		}
		if c.Row != nil && c.Row[0] != c.Key {
			t.Fatalf("%s row %v does not start with its key %d", c.Table, c.Row, c.Key)
		}
	}
	if updates < 20 || deletes < 10 || reinserts < 1 {
		t.Fatalf("updates %d, deletes %d, re-inserts %d: too few to exercise retractions", updates, deletes, reinserts)
	}
	// The final state holds exactly the live keys, in key order.
	for _, tbl := range SmallTables(a) {
		var live int
		for _, st := range seen[tbl.Name] {
			if st == "live" {
				live++
			}
		}
		if len(tbl.Rows) != live {
			t.Errorf("%s: %d rows, %d keys live", tbl.Name, len(tbl.Rows), live)
		}
		for i := 1; i < len(tbl.Rows); i++ {
			if tbl.Rows[i-1][0].(int64) >= tbl.Rows[i][0].(int64) {
				t.Fatalf("%s rows out of key order at %d", tbl.Name, i)
			}
		}
	}
}

func TestCorpusHeaders(t *testing.T) {
	good := "-- exercises: x\n-- tables: a, b\n-- expect: empty\n-- order: ordered\n-- an ordinary comment\nSELECT 1\n"
	q, err := parseCorpusFile("set/q", good)
	if err != nil {
		t.Fatal(err)
	}
	if !q.ExpectEmpty || !q.Ordered || !reflect.DeepEqual(q.Tables, []string{"a", "b"}) ||
		q.SQL != "-- an ordinary comment\nSELECT 1" {
		t.Fatalf("parsed %+v", q)
	}
	for _, bad := range []string{
		"-- tables: a\n-- expect: rows\nSELECT 1",                                  // no exercises
		"-- exercises: x\n-- tables: a\n-- expect: some\nSELECT 1",                 // bad expect
		"-- exercises: x\n-- tables: a\n-- expect: rows\n",                         // no SQL
		"-- exercises: x\n-- tables: a\n-- expect: rows\n-- colour: red\nSELECT 1", // unknown key
	} {
		if _, err := parseCorpusFile("set/bad", bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	// Every shipped file parses and names only tables the corpus has.
	known := map[string]bool{"person": true, "auction": true, "bid": true, "customers": true, "products": true, "orders": true}
	for _, set := range []string{SetNexmark, SetGeneral} {
		qs, err := Corpus(set)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			for _, tb := range q.Tables {
				if !known[tb] {
					t.Errorf("%s reads unknown table %q", q.Name, tb)
				}
				if !strings.Contains(strings.ToLower(q.SQL), tb) {
					t.Errorf("%s says it reads %s but its SQL does not name it", q.Name, tb)
				}
			}
		}
	}
}
