package flow

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/sql/types"
)

// CountedMerger is the Pebble merger of counted rows (a zigzag varint
// count, then the row's encoding): a PebbleStore whose database is
// opened with it (and told so, SetCountedMerges) writes a view index's
// new rows blindly, as a merge operand "+d, row", instead of reading the
// key's count first. An append-only view (Nexmark's q0, q1: a row per
// bid) otherwise read a key per row that it almost never held, a miss
// through the epoch's batch, the memtables and every level's filter.
//
// The merged value is the operands' sum with the oldest one's row, the
// first copy since the count was last zero (what addCounted keeps:
// equal values written differently, 1.50 and 1.5, show as first seen).
// Only additions are merged: a retraction still reads the count (and
// writes the result, or deletes the key at zero), so a count below zero
// is refused at the epoch as before, never merged into the state.
var CountedMerger = &pebble.Merger{
	Name: "strand.flow.counted.v1",
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := &countedMerger{}
		return m, m.MergeNewer(value)
	},
}

// OpenPebble opens the database in dir with opts and CountedMerger as
// its merger; a database made with Pebble's default merger (a view's
// state from before views merged counted rows, or a sink's) is opened
// with that one instead, since Pebble refuses to open a database under
// another merger name than it recorded. merges reports which: only a
// database opened with CountedMerger may take merge operands
// (PebbleStore.SetCountedMerges). Whatever opens a view's state (its
// task, a snapshot's seal or restore check) opens it so.
func OpenPebble(dir string, opts *pebble.Options) (db *pebble.DB, merges bool, err error) {
	o := *opts
	o.Merger = CountedMerger
	db, err = pebble.Open(dir, &o)
	if err == nil {
		return db, true, nil
	}
	// Pebble has no sentinel for this refusal (options.go,
	// CheckCompatibility), only its message.
	if !strings.Contains(err.Error(), "merger name from file") {
		return nil, false, err
	}
	o.Merger = pebble.DefaultMerger
	db, err = pebble.Open(dir, &o)
	return db, false, err
}

// countedMerger sums a key's operands and keeps the oldest one's row.
// Every operand is an addition (a count above zero) and so is a stored
// counted row under them, so the sum from the oldest never returns to
// zero: the first copy since the count was last zero is the oldest
// operand's. A count of zero or below is corrupt state.
type countedMerger struct {
	sum int64
	row []byte // the oldest operand's row, copied: Pebble reuses operands
}

func (m *countedMerger) add(value []byte, older bool) error {
	n, k := binary.Varint(value)
	if k <= 0 || n <= 0 {
		return fmt.Errorf("flow: %w: merged count", types.ErrCorrupt)
	}
	m.sum += n
	if older || m.row == nil {
		m.row = append(m.row[:0], value[k:]...)
	}
	return nil
}

func (m *countedMerger) MergeNewer(value []byte) error { return m.add(value, false) }
func (m *countedMerger) MergeOlder(value []byte) error { return m.add(value, true) }

func (m *countedMerger) Finish(bool) ([]byte, io.Closer, error) {
	return append(binary.AppendVarint(make([]byte, 0, binary.MaxVarintLen64+len(m.row)), m.sum), m.row...), nil, nil
}

// counter is a Store that adds to a counted row without reading it.
type counter interface {
	// addBlind merges value (a counted row of a positive count) into
	// key's; false when the store cannot, and nothing was written.
	addBlind(key, value []byte) (bool, error)
}

func (p *prefixed) addBlind(key, value []byte) (bool, error) {
	if c, ok := p.s.(counter); ok {
		return c.addBlind(p.key(key), value)
	}
	return false, nil
}
