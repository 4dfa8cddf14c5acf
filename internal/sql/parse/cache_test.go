package parse

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestCacheAgreesWithParse(t *testing.T) {
	c := NewCache(8)
	for _, sql := range []string{
		"SELECT * FROM nexmark_q2 WHERE auction = $1",
		"SELECT 1; SELECT 2",
		"CREATE SOURCE s (a int8) WITH (topic = 't', format = 'json')",
	} {
		want, werr := ParseStrand(sql)
		for range 2 { // a miss, then a hit
			got, err := c.ParseStrand(sql)
			if (err != nil) != (werr != nil) || len(got) != len(want) {
				t.Fatalf("%q: cached %d statements, %v; uncached %d, %v", sql, len(got), err, len(want), werr)
			}
			for i := range want {
				if got[i].Kind != want[i].Kind || got[i].Text != want[i].Text || got[i].Offset != want[i].Offset || !proto.Equal(got[i].Node, want[i].Node) {
					t.Fatalf("%q statement %d: cached %+v, uncached %+v", sql, i, got[i], want[i])
				}
			}
		}
		if _, err := Parse(sql); err == nil {
			want, _ := Parse(sql)
			got, err := c.Parse(sql)
			if err != nil || len(got) != len(want) || !proto.Equal(got[0].Node, want[0].Node) {
				t.Fatalf("%q: Parse through the cache %v, %v; uncached %v", sql, got, err, want)
			}
		}
	}
}

func TestCacheHitIsACopy(t *testing.T) {
	c := NewCache(8)
	sql := "SELECT a FROM v WHERE k = 1"
	first, err := c.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	// A caller changing its tree must not change the next caller's.
	first[0].Node.GetSelectStmt().TargetList = nil
	second, err := c.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(second[0].Node.GetSelectStmt().TargetList); n != 1 {
		t.Fatalf("hit after the caller changed its tree: %d target columns, want 1", n)
	}
	second[0].Node.GetSelectStmt().WhereClause = nil
	third, _ := c.Parse(sql)
	if third[0].Node.GetSelectStmt().WhereClause == nil {
		t.Fatal("a hit's tree is shared with the cache: a caller's change reached the next hit")
	}
}

func TestCacheBounds(t *testing.T) {
	c := NewCache(2)
	for i := range 3 {
		if _, err := c.Parse(fmt.Sprintf("SELECT %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 2 {
		t.Fatalf("%d entries cached, bound 2", n)
	}
	if _, ok := c.mu.byID[cacheKey{sql: "SELECT 0"}]; ok {
		t.Fatal("the least recently used text was kept past the bound")
	}
	// Failures are not cached; neither are long texts.
	if _, err := c.Parse("SELEC 1"); err == nil {
		t.Fatal("a syntax error parsed")
	}
	long := "SELECT 1" + fmt.Sprintf("%*s", maxCachedTextBytes, "")
	if _, err := c.Parse(long); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.mu.byID[cacheKey{sql: long}]; ok {
		t.Fatalf("a text over %d bytes was cached", maxCachedTextBytes)
	}
	if _, ok := c.mu.byID[cacheKey{sql: "SELEC 1"}]; ok {
		t.Fatal("a syntax error was cached")
	}
	// Parse's and ParseStrand's entries are apart.
	if _, err := c.ParseStrand("SELECT 2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.mu.byID[cacheKey{strand: true, sql: "SELECT 2"}]; !ok {
		t.Fatal("ParseStrand's result was not cached")
	}
}

// BenchmarkCachedLookup is a pull query's parses over the simple
// protocol (ParseStrand in the catalog, Parse in the engine), uncached
// and through the cache.
func BenchmarkCachedLookup(b *testing.B) {
	sql := "SELECT * FROM nexmark_q2 WHERE auction = 123000"
	if _, err := Parse(sql); err != nil { // compile outside the timings
		b.Fatal(err)
	}
	c := NewCache(DefaultCacheEntries)
	for _, run := range []struct {
		name   string
		strand func(string) ([]Statement, error)
		parse  func(string) ([]Stmt, error)
	}{
		{"uncached", ParseStrand, Parse},
		{"cached", c.ParseStrand, c.Parse},
	} {
		b.Run(run.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := run.strand(sql); err != nil {
					b.Fatal(err)
				}
				if _, err := run.parse(sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
