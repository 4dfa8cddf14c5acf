package flow

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

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
// The merged value is the operands' sum with the row of the first copy
// since the count was last zero (what addCounted keeps: equal values
// written differently, 1.50 and 1.5, show as first seen); a sum of zero
// is a deletion (reads skip it, compactions drop it). Only additions
// are merged: a retraction still reads the count, so a count below zero
// is refused at the epoch as before, never merged into the state.
var CountedMerger = &pebble.Merger{
	Name: "strand.flow.counted.v1",
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := &countedMerger{}
		return m, m.MergeNewer(value)
	},
}

// countedMerger collects a key's operands, oldest first: which row's
// encoding is kept depends on the running sum from the oldest.
type countedMerger struct {
	ops [][]byte
}

func (m *countedMerger) MergeNewer(value []byte) error {
	m.ops = append(m.ops, slices.Clone(value))
	return nil
}

func (m *countedMerger) MergeOlder(value []byte) error {
	m.ops = slices.Insert(m.ops, 0, slices.Clone(value))
	return nil
}

func (m *countedMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	v, _, c, err := m.DeletableFinish(includesBase)
	return v, c, err
}

func (m *countedMerger) DeletableFinish(bool) ([]byte, bool, io.Closer, error) {
	var (
		sum int64
		row []byte
	)
	for _, op := range m.ops {
		n, k := binary.Varint(op)
		if k <= 0 {
			return nil, false, nil, fmt.Errorf("flow: %w: merged count", types.ErrCorrupt)
		}
		if sum == 0 {
			row = op[k:]
		}
		sum += n
	}
	if sum < 0 {
		// Only additions are merged (over a stored count, never below
		// zero), so this is corrupt state.
		return nil, false, nil, fmt.Errorf("flow: %w: merged count %d", types.ErrCorrupt, sum)
	}
	if sum == 0 {
		return nil, true, nil, nil
	}
	return append(binary.AppendVarint(nil, sum), row...), false, nil, nil
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
