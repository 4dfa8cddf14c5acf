package parse

import (
	"container/list"
	"sync"

	"google.golang.org/protobuf/proto"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// A pull query sent over the simple protocol (psql, `strand sql`, any
// driver not preparing) is parsed at every execution: Strand's dialect
// first (a scan and a parse in the WebAssembly module), then the SELECT
// again for the engine that plans it. Each is tens to hundreds of
// microseconds, behind one module instance every session shares (the
// gate above), where the lookup itself reads Pebble for tens of
// microseconds. Dashboards and services send the same texts again and
// again, so the sessions parse through a Cache.
//
// The cache holds syntax trees, not plans: a tree is a function of the
// text alone, so no DDL, setting or privilege can make an entry wrong,
// and nothing needs invalidating; what a name means (and who may read
// it) is decided by planning, every time. Each hit is a deep copy of
// the cached trees, so a caller may keep or change what it gets, as
// it may Parse's.

// Cache memoizes Parse and ParseStrand by text, for texts of at most
// maxCachedTextBytes, keeping the most recently used entries. Failures
// are not cached. Safe for concurrent use.
type Cache struct {
	entries int
	mu      struct {
		sync.Mutex
		lru  *list.List // of *cacheEntry, most recent first
		byID map[cacheKey]*list.Element
	}
}

// maxCachedTextBytes bounds a cached text; with the entries' bound it
// bounds the cache's memory (a tree is a few times its text).
const maxCachedTextBytes = 4 << 10

// DefaultCacheEntries is the Cache the engines share: a few hundred
// distinct statements, at most ~10 MB with their trees.
const DefaultCacheEntries = 512

type cacheKey struct {
	strand bool // ParseStrand's result, else Parse's
	sql    string
}

type cacheEntry struct {
	key   cacheKey
	stmts []Statement // Kind is KindOther in Parse's
}

// NewCache returns a cache of at most entries texts (at least 1).
func NewCache(entries int) *Cache {
	c := &Cache{entries: max(1, entries)}
	c.mu.lru = list.New()
	c.mu.byID = map[cacheKey]*list.Element{}
	return c
}

// Shared is the cache the SQL engines parse through.
var Shared = NewCache(DefaultCacheEntries)

// Parse is parse.Parse, through the cache.
func (c *Cache) Parse(sql string) ([]Stmt, error) {
	got, err := c.get(cacheKey{sql: sql}, func() ([]Statement, error) {
		stmts, err := Parse(sql)
		out := make([]Statement, len(stmts))
		for i, s := range stmts {
			out[i] = Statement{Stmt: s, Kind: KindOther}
		}
		return out, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Stmt, len(got))
	for i, s := range got {
		out[i] = s.Stmt
	}
	return out, nil
}

// ParseStrand is parse.ParseStrand, through the cache.
func (c *Cache) ParseStrand(sql string) ([]Statement, error) {
	return c.get(cacheKey{strand: true, sql: sql}, func() ([]Statement, error) { return ParseStrand(sql) })
}

// Len is the number of texts cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.lru.Len()
}

// get returns a copy of k's cached trees, parsing (outside the lock)
// and caching them on a miss. Two sessions missing the same text at
// once both parse it; the second's result replaces the first's.
func (c *Cache) get(k cacheKey, parse func() ([]Statement, error)) ([]Statement, error) {
	if len(k.sql) > maxCachedTextBytes {
		return parse()
	}
	c.mu.Lock()
	if el, ok := c.mu.byID[k]; ok {
		c.mu.lru.MoveToFront(el)
		stmts := el.Value.(*cacheEntry).stmts
		c.mu.Unlock()
		return cloneStatements(stmts), nil
	}
	c.mu.Unlock()
	stmts, err := parse()
	if err != nil {
		return nil, err
	}
	// The cache keeps its own copy: the caller owns what it got.
	kept := cloneStatements(stmts)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.byID[k]; ok {
		c.mu.lru.Remove(el)
	}
	c.mu.byID[k] = c.mu.lru.PushFront(&cacheEntry{key: k, stmts: kept})
	for c.mu.lru.Len() > c.entries {
		old := c.mu.lru.Remove(c.mu.lru.Back()).(*cacheEntry)
		delete(c.mu.byID, old.key)
	}
	return stmts, nil
}

func cloneStatements(in []Statement) []Statement {
	out := make([]Statement, len(in))
	for i, s := range in {
		out[i] = s
		if s.Node != nil {
			out[i].Node = proto.Clone(s.Node).(*pg.Node)
		}
	}
	return out
}
