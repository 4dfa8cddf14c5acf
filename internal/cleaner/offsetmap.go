package cleaner

import (
	"crypto/md5"
	"errors"
)

// ErrMapTooSmall: the offset map filled before the first dirty batch was
// mapped whole, so a round could make no progress. Kafka fails the same
// way when log.cleaner.dedupe.buffer.size cannot hold one segment.
var ErrMapTooSmall = errors.New("cleaner: offset map too small for one batch of keys")

// EntryBytes is what one key of an OffsetMap costs: Kafka's 16-byte MD5
// of the key and 8-byte offset, and as much again for the Go map's
// buckets and free slots.
const EntryBytes = 48

// loadFactor is Kafka's log.cleaner.io.buffer.load.factor default: a
// map is full at 90% of its slots.
const loadFactor = 0.9

// OffsetMap is Kafka's dedupe buffer (SkimpyOffsetMap): for each key of
// the dirty records it has seen, the offset of the newest record with
// that key, keyed by the key's MD5 so every entry costs the same. Its
// size is bounded by the memory it is given; when full, a round cleans
// only up to the last batch it mapped whole (Latest), and the next
// round goes on from there. Not safe for concurrent use.
type OffsetMap struct {
	m map[[md5.Size]byte]int64
	// max is the keys it may hold.
	max int
	// latest is the last offset of the last batch mapped whole; -1
	// before any.
	latest int64
}

// NewOffsetMap returns an empty map that holds the keys memBytes buys
// (at least one).
func NewOffsetMap(memBytes int64) *OffsetMap {
	n := max(1, int(float64(memBytes/EntryBytes)*loadFactor))
	return &OffsetMap{m: make(map[[md5.Size]byte]int64), max: n, latest: -1}
}

// Len is the keys in the map; Cap the most it may hold.
func (m *OffsetMap) Len() int { return len(m.m) }
func (m *OffsetMap) Cap() int { return m.max }

// Latest is the last offset of the last batch mapped whole, -1 if none:
// the end of the round the map can clean.
func (m *OffsetMap) Latest() int64 { return m.latest }

// Get returns the newest offset mapped for key, -1 if none.
func (m *OffsetMap) Get(key []byte) int64 {
	if off, ok := m.m[md5.Sum(key)]; ok {
		return off
	}
	return -1
}

// Reset empties the map for another round, keeping its size.
func (m *OffsetMap) Reset() {
	clear(m.m)
	m.latest = -1
}

// put maps key to offset and reports false, mapping nothing, when the
// map is full and key is new.
func (m *OffsetMap) put(key []byte, offset int64) bool {
	h := md5.Sum(key)
	if _, ok := m.m[h]; !ok && len(m.m) >= m.max {
		return false
	}
	m.m[h] = offset
	return true
}
