package views

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

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
func stateOptions(cache *pebble.Cache) *pebble.Options {
	opts := &pebble.Options{Cache: cache, MemTableSize: 16 << 20, Logger: quietLogger{}}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return opts
}
