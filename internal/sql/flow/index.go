package flow

import (
	"fmt"

	"github.com/strandkafka/strand/internal/sql/types"
)

// IndexSpec says how a view's contents are kept for reads.
//
// Layout, under the store's 'v' prefix:
//
//	Unique:  key(KeyCols)            -> count, row   (count is 1)
//	else:    key(KeyCols) key(row)   -> count, row
//
// where key(...) is the types key encoding of those values in order
// and count, row a counted row (zigzag varint, types.AppendRow). A
// lookup by the key columns (or a prefix of them) is a prefix scan.
type IndexSpec struct {
	// KeyCols are the columns the view is read by: an aggregate's
	// group key, a top-N's partition key. Empty: the whole row.
	KeyCols []int
	// Unique: at most one row per key (a GROUP BY's output by its group
	// key), so the row is not part of the store key. A second row for
	// a key is an error.
	Unique bool
}

// Index is the consolidated output of a dataflow: the view's contents.
type Index struct {
	spec IndexSpec
	st   Store
}

// storeKey appends row's key in the index to b; rowKey, when not nil,
// is row's appendRowKey, already computed.
func (x *Index) storeKey(b []byte, row types.Row, rowKey []byte) []byte {
	if len(x.spec.KeyCols) > 0 {
		b = appendKeyCols(b, row, x.spec.KeyCols)
		if x.spec.Unique {
			return b
		}
	}
	if rowKey != nil {
		return append(b, rowKey...)
	}
	return appendRowKey(b, row)
}

// apply writes the epoch's consolidated output. Retractions go first,
// so a unique key's -old +new replaces its row. cons, when not nil,
// made out and holds its rows' key encodings.
func (x *Index) apply(out []types.Change, cons *consolidator) error {
	var buf, vbuf []byte
	// Additions are merged unread only in an epoch of additions alone
	// (an append-only view's, every epoch): where rows are also
	// retracted, a retraction would read back the merged keys, paying
	// for the merge there (BenchmarkNexmarkQ1's window of live bids
	// was slower with merges).
	bc, blind := x.st.(counter)
	if blind && !x.spec.Unique {
		for _, c := range out {
			if c.Diff < 0 {
				blind = false
				break
			}
		}
	}
	for pass := 0; pass < 2; pass++ {
		for i, c := range out {
			if (c.Diff < 0) != (pass == 0) {
				continue
			}
			var rowKey []byte
			if cons != nil {
				rowKey, _ = cons.rowKey(i)
			}
			// Where the whole row is the key, the consolidator's copy is
			// used as is (the store copies what it keeps).
			key := rowKey
			if key == nil || len(x.spec.KeyCols) > 0 {
				buf = x.storeKey(buf[:0], c.Row, rowKey)
				key = buf
			}
			if blind && c.Diff > 0 && !x.spec.Unique {
				// An addition to a row that may repeat needs no count
				// first where the store merges counted rows.
				vbuf = appendCounted(vbuf[:0], c.Diff, c.Row)
				if done, err := bc.addBlind(key, vbuf); err != nil {
					return fmt.Errorf("flow: view index: %w", err)
				} else if done {
					continue
				}
			}
			before, _, err := addCounted(x.st, key, c.Row, c.Diff, &vbuf)
			if err != nil {
				return fmt.Errorf("flow: view index: %w", err)
			}
			if x.spec.Unique && c.Diff > 0 && (before > 0 || c.Diff > 1) {
				// The epoch fails, so the write above is not kept.
				return fmt.Errorf("flow: view's key %v is not unique", keyVals(c.Row, x.spec.KeyCols))
			}
		}
	}
	return nil
}

func keyVals(row types.Row, cols []int) []string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = types.Format(row[c])
	}
	return s
}

// View reads a view's committed contents, safe for use concurrently
// with the driver.
type View struct {
	spec IndexSpec
	r    Reader
}

// KeyColumns are the columns the view's rows are kept by, in order:
// Scan's prefix is values of their first ones. nil means the whole row,
// its columns in order.
func (v *View) KeyColumns() []int { return v.spec.KeyCols }

// Lookup calls fn for each row whose key columns equal key, with its
// count, in index order.
func (v *View) Lookup(key types.Row, fn func(row types.Row, count int64) bool) error {
	if len(v.spec.KeyCols) > 0 && len(key) != len(v.spec.KeyCols) {
		return fmt.Errorf("flow: lookup by %d values, the key has %d columns", len(key), len(v.spec.KeyCols))
	}
	return v.Scan(key, fn)
}

// Scan calls fn for each row whose first key columns equal prefix (all
// rows for an empty prefix), in the order of the key columns' values,
// with its count. fn returns false to stop.
func (v *View) Scan(prefix types.Row, fn func(row types.Row, count int64) bool) error {
	if len(v.spec.KeyCols) > 0 && len(prefix) > len(v.spec.KeyCols) {
		return fmt.Errorf("flow: scan by %d values, the key has %d columns", len(prefix), len(v.spec.KeyCols))
	}
	var p []byte
	p = append(p, indexPrefix...)
	for _, val := range prefix {
		p = types.AppendKey(p, val)
	}
	return scanPrefix(v.r, p, false, func(_, val []byte) (bool, error) {
		n, row, err := decodeCounted(val)
		if err != nil {
			return false, err
		}
		return fn(row, n), nil
	})
}

// Rows returns the view's contents, each row repeated by its count.
func (v *View) Rows() ([]types.Row, error) {
	var rows []types.Row
	err := v.Scan(nil, func(row types.Row, n int64) bool {
		for range n {
			rows = append(rows, row)
		}
		return true
	})
	return rows, err
}
