package views

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/strandkafka/strand/internal/sql/flow"
)

// openState opens a view's state database in dir (flow.OpenPebble:
// merges says whether its merger is flow.CountedMerger; a database
// made before views merged counted rows keeps Pebble's default and
// the view reads before it writes, as it did when it was made).
func openState(dir string, cache *pebble.Cache) (db *pebble.DB, merges bool, err error) {
	return flow.OpenPebble(dir, stateOptions(cache))
}

// stateOptions are the options of a view's Pebble database, its block
// cache given.
//
// Most of a view's state reads are misses: a join side's index looked
// up for a new key, a group or a row not seen before (flow's own cache
// answers the hot keys in front of Pebble). Without filters each miss
// reads an index and a data block from every sstable the key could be
// in, and an epoch's large batch is committed as a flushable batch
// (more than half a memtable), which becomes an L0 table of its own:
// replaying a topic made tens of them, and the misses' block reads were
// a third of q4's and q7's CPU. A bloom filter per table (10 bits a key,
// about 1% false positives) answers a miss from the cached filter, as
// the agent's own database does (internal/replica).
//
// The memtable is stateMemTableBytes, so that an epoch's batch (at most
// MaxEpochChanges changes, about 12 MB for q0's 50,000 bids) fits in
// half of one and is applied to it, rather than committed as a
// flushable batch: each of those became a small L0 table, whose index
// blocks the next reads loaded from disk and which compactions then
// rewrote (a tenth of q3's replay). Pebble keeps at most two memtables
// (MemTableStopWritesThreshold), so a view's memtables hold at most
// 64 MB; the WAL stays on: an epoch's batch, its input offsets
// included, is one atomic write to it.
//
// Its merger is flow.CountedMerger: a view index's new rows are merge
// operands, written without reading their keys.
func stateOptions(cache *pebble.Cache) *pebble.Options {
	opts := &pebble.Options{Cache: cache, MemTableSize: stateMemTableBytes, MemTableStopWritesThreshold: stateMemTables,
		Logger: quietLogger{}, Merger: flow.CountedMerger}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return opts
}

// stateMemTableBytes is a view database's memtable size (see
// stateOptions).
const stateMemTableBytes = 32 << 20

// stateCacheSize is the size of the Pebble cache a view's database is
// given. Pebble charges its memtables to that cache (Cache.Reserve, each
// memtable's whole size while it lives), so a cache of stateCacheBytes
// alone, smaller than one memtable, kept no block at all once the
// memtables had grown to stateMemTableBytes: every read of a table's
// index and filter blocks went to the file (a sixth of q3's replay,
// most of q8's reads of its groups). The memtables' most
// (stateMemTables) on top leave blocks stateCacheBytes at least; what
// the view may hold is the same as before, memtables and blocks
// together at most this.
const stateCacheSize = stateCacheBytes + stateMemTables*stateMemTableBytes

// stateMemTables is how many memtables a view's database keeps at most
// (its MemTableStopWritesThreshold, Pebble's default).
const stateMemTables = 2
