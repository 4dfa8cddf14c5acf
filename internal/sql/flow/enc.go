package flow

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"

	"github.com/strandkafka/strand/internal/sql/types"
)

// appendKeyCols appends the key encoding of row's columns cols: a tuple
// whose bytes order as the values do.
func appendKeyCols(b []byte, row types.Row, cols []int) []byte {
	for _, c := range cols {
		b = types.AppendKey(b, row[c])
	}
	return b
}

// appendRowKey appends the key encoding of every column: a row's
// identity, equal for rows equal column by column.
func appendRowKey(b []byte, row types.Row) []byte {
	for _, v := range row {
		b = types.AppendKey(b, v)
	}
	return b
}

// hasNull reports whether any of row's columns cols is NULL: such a row
// joins nothing.
func hasNull(row types.Row, cols []int) bool {
	for _, c := range cols {
		if row[c] == nil {
			return true
		}
	}
	return false
}

// A counted row is stored as a zigzag varint count then the row's value
// encoding (types.AppendRow), lossless.
func appendCounted(b []byte, n int64, row types.Row) []byte {
	return types.AppendRow(binary.AppendVarint(b, n), row)
}

func decodeCounted(b []byte) (int64, types.Row, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return 0, nil, fmt.Errorf("flow: %w: count", types.ErrCorrupt)
	}
	row, _, err := types.DecodeRow(b[k:])
	return n, row, err
}

func decodeCount(b []byte) (int64, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return 0, fmt.Errorf("flow: %w: count", types.ErrCorrupt)
	}
	return n, nil
}

// getCount reads a count key; a missing key is 0.
func getCount(s Reader, key []byte) (int64, error) {
	v, ok, err := s.Get(key)
	if err != nil || !ok {
		return 0, err
	}
	return decodeCount(v)
}

// addCount adds d to a count key, deleting it at 0, and returns the
// count before and after. A count below zero is a retraction of what
// was never there: an upstream bug or corrupt state, refused.
func addCount(s Store, key []byte, d int64) (before, after int64, err error) {
	if before, err = getCount(s, key); err != nil {
		return 0, 0, err
	}
	after = before + d
	switch {
	case after < 0:
		return before, after, fmt.Errorf("flow: %w", ErrNegative)
	case after == 0:
		err = s.Delete(key)
	default:
		err = s.Set(key, binary.AppendVarint(nil, after))
	}
	return before, after, err
}

// addCounted adds d copies of row under key (a counted row), deleting
// it at 0, encoding into *buf; it returns the count before and after.
// One read and one write of the key.
func addCounted(s Store, key []byte, row types.Row, d int64, buf *[]byte) (before, after int64, err error) {
	old, ok, err := s.Get(key)
	if err != nil {
		return 0, 0, err
	}
	var rest []byte
	if ok {
		n, k := binary.Varint(old)
		if k <= 0 {
			return 0, 0, fmt.Errorf("flow: %w: count", types.ErrCorrupt)
		}
		before, rest = n, old[k:]
	}
	after = before + d
	switch {
	case after < 0:
		return before, after, fmt.Errorf("flow: %w", ErrNegative)
	case after == 0:
		return before, 0, s.Delete(key)
	}
	b := binary.AppendVarint((*buf)[:0], after)
	if ok {
		// The first copy's encoding stays: values equal but written
		// differently (1.50 and 1.5) are one row, shown as first seen.
		// Its bytes are kept as they are, not decoded.
		b = append(b, rest...)
	} else {
		b = types.AppendRow(b, row)
	}
	*buf = b
	return before, after, s.Set(key, b)
}

// consolidate sums the diffs of equal rows and drops those summing to
// zero, keeping first-appearance order (so outputs are deterministic).
func consolidate(changes []types.Change) []types.Change {
	var k consolidator
	return k.consolidate(changes)
}

// maxKeptScratch bounds the entries of the maps and slabs an operator
// keeps from one epoch to the next: a larger epoch's (up to
// MaxEpochChanges) are made for it and dropped after.
const maxKeptScratch = 1 << 14

// consolidator consolidates change lists, keeping its table and
// buffers from one call to the next. The rows' key encodings it
// computes stay readable (rowKey) until the next call, so the view's
// index, keyed by them, does not encode each row twice.
//
// The table is open addressing over the rows' hashes, its keys in one
// buffer: a map keyed by string made a string per row, a fifth of an
// append-only view's consolidation.
type consolidator struct {
	seed  maphash.Seed
	slots []int32 // index+1 into the output, 0 empty; a power of two long
	keys  []byte  // the output rows' key encodings, one after another
	spans []keySpan
}

// keySpan is where an output row's key lies in keys.
type keySpan struct{ start, end int }

// maxKeptKeyBytes bounds the key buffer kept from one call to the next.
const maxKeptKeyBytes = 4 << 20

// consolidate is consolidate's work; the returned slice is the
// caller's (a new one, or changes itself when it has one change).
func (k *consolidator) consolidate(changes []types.Change) []types.Change {
	k.spans = k.spans[:0]
	if len(changes) <= 1 {
		if len(changes) == 1 && changes[0].Diff == 0 {
			return nil
		}
		return changes
	}
	if k.seed == (maphash.Seed{}) {
		k.seed = maphash.MakeSeed()
	}
	n := 1
	for n < 2*len(changes) {
		n <<= 1
	}
	if cap(k.slots) < n || cap(k.slots) > 4*n && cap(k.slots) > 2*maxKeptScratch {
		k.slots = make([]int32, n)
	} else {
		k.slots = k.slots[:n]
		clear(k.slots)
	}
	defer func() {
		if cap(k.slots) > 2*maxKeptScratch {
			k.slots = nil // a rare large epoch's table is not kept
		}
	}()
	mask := uint64(n - 1)
	if cap(k.keys) > maxKeptKeyBytes {
		// The last call's large buffer is not kept: dropped here, not
		// when that call returned, since its keys were read until now.
		k.keys = nil
	}
	keys := k.keys[:0]
	out := make([]types.Change, 0, len(changes))
	for _, c := range changes {
		start := len(keys)
		keys = appendRowKey(keys, c.Row)
		key := keys[start:]
		i := maphash.Bytes(k.seed, key) & mask
		for {
			j := k.slots[i]
			if j == 0 {
				k.slots[i] = int32(len(out) + 1)
				out = append(out, c)
				k.spans = append(k.spans, keySpan{start, len(keys)})
				break
			}
			if sp := k.spans[j-1]; bytes.Equal(keys[sp.start:sp.end], key) {
				out[j-1].Diff += c.Diff
				keys = keys[:start]
				break
			}
			i = (i + 1) & mask
		}
	}
	k.keys = keys
	m := 0
	for i, c := range out {
		if c.Diff != 0 {
			out[m] = c
			k.spans[m] = k.spans[i]
			m++
		}
	}
	k.spans = k.spans[:m]
	return out[:m]
}

// rowKey is the key encoding (appendRowKey) of the i-th change the last
// consolidate returned, valid until the next call; ok false when that
// call did not encode its rows (it had one change).
func (k *consolidator) rowKey(i int) (key []byte, ok bool) {
	if i >= len(k.spans) {
		return nil, false
	}
	sp := k.spans[i]
	return k.keys[sp.start:sp.end], true
}

// rowSlab hands out rows carved from larger allocations: an epoch's
// output rows are made together and live about as long, so one
// allocation serves many.
type rowSlab struct {
	buf []any
}

// rowSlabValues is the values one slab allocation holds.
const rowSlabValues = 1024

// row returns a zeroed row of n columns (its capacity n, so appending
// to it never writes into the next row). A nil slab allocates.
func (s *rowSlab) row(n int) types.Row {
	if s == nil || n > rowSlabValues/4 {
		return make(types.Row, n)
	}
	if len(s.buf)+n > cap(s.buf) {
		s.buf = make([]any, 0, rowSlabValues)
	}
	r := s.buf[len(s.buf) : len(s.buf)+n : len(s.buf)+n]
	s.buf = s.buf[:len(s.buf)+n]
	return r
}
