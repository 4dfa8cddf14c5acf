package flow

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/sql/types"
)

// JoinExpiry frees a join's rows by the watermark: an interval join
// (`b.k = a.k AND b.t BETWEEN a.t AND a.t + INTERVAL '1 hour'`) over
// inputs that only insert, whose late records are dropped before the
// join (so every record after an epoch has an event time at or after
// the epoch's watermark). A row of a side may match only rows of the
// other side whose event time is at most its expiry: the least, over
// the side's JoinExpiry terms, of column Col (a timestamp of the row)
// plus Offset. Once the watermark passes the expiry no record to come
// can match the row, so the join forgets it: the view's contents stay
// what they were, a padded row of an outer join included (its match
// count is final). A NULL in Col makes the ON term NULL, so the row
// matches nothing: it expires at once.
//
// The planner derives the terms from the ON clause's conjuncts
// (other.event_time <= row.Col + Offset, or the same bound written as
// row.Col >= other.event_time - Offset); it sets them only where both
// sides only insert, since a retraction of a forgotten row could not be
// joined (it fails the epoch with ErrNegative instead of being wrong).
type JoinExpiry struct {
	Col    int
	Offset time.Duration
}

// expiryOf is row's expiry under terms: the least Col + Offset, the
// zero Time (before any watermark) when a Col is NULL.
func expiryOf(row types.Row, terms []JoinExpiry) (time.Time, error) {
	var least time.Time
	for i, e := range terms {
		if e.Col >= len(row) {
			return time.Time{}, fmt.Errorf("flow: join expiry column %d of a %d-column row", e.Col, len(row))
		}
		t, ok := row[e.Col].(time.Time)
		if !ok {
			if row[e.Col] != nil {
				return time.Time{}, fmt.Errorf("flow: join expiry column %d is %T, not a timestamp", e.Col, row[e.Col])
			}
			return time.Time{}, nil
		}
		if t = t.Add(e.Offset); i == 0 || t.Before(least) {
			least = t
		}
	}
	return least, nil
}

// The expiry index of a join side, in the join's own key space beside
// its rows, ordered by expiry so a watermark frees a prefix of it:
//
//	'e' side expiry(8 bytes) key(join key) key(row) -> uvarint len(key(join key)), varint count
//
// expiry is unix microseconds, big-endian with the sign bit flipped
// (byte order is time order). The value splits the rest of the key back
// into the join key and the row's key, and holds the row's count (as
// its 'r' key does), so freeing a row writes without reading it.
func expiryKey(buf []byte, side int, at time.Time, jk string, row types.Row) []byte {
	buf = append(buf[:0], 'e', byte(side))
	buf = binary.BigEndian.AppendUint64(buf, uint64(at.UnixMicro())^(1<<63))
	buf = append(buf, jk...)
	return appendRowKey(buf, row)
}

// expiryBound is the first 'e' key of side at or after time at.
func expiryBound(side int, at time.Time) []byte {
	return binary.BigEndian.AppendUint64([]byte{'e', byte(side)}, uint64(at.UnixMicro())^(1<<63))
}

// expired is one row the watermark freed: its join key, row key and
// count.
type expired struct {
	jk, row string
	n       int64
}

// expiryLow is the least expiry a side indexed in an epoch: where the
// epoch's freeing starts, if below the watermark before the epoch.
type expiryLow struct {
	t   time.Time
	set bool
}

func (l *expiryLow) note(t time.Time) {
	if !l.set || t.Before(l.t) {
		l.t, l.set = t, true
	}
}

// takeExpired deletes side's index entries whose expiry is before wm
// and returns their rows: the entries from the least of the watermark
// before the epoch (everything earlier went at the end of the last
// epoch) and the epoch's own least expiry (low), so a scan never walks
// the deletions of earlier epochs, which a Pebble store keeps as
// tombstones until a compaction.
func takeExpired(st Store, side int, before time.Time, low expiryLow, wm time.Time) ([]expired, error) {
	if wm.IsZero() {
		return nil, nil
	}
	lower := []byte{'e', byte(side)}
	if low.set && low.t.Before(before) {
		before = low.t
	}
	if !before.IsZero() {
		lower = expiryBound(side, before)
	}
	var out []expired
	var keys [][]byte
	err := st.Scan(lower, expiryBound(side, wm), false, func(k, v []byte) (bool, error) {
		n, w := binary.Uvarint(v)
		if w <= 0 || len(k) < 10 || n > uint64(len(k)-10) {
			return false, fmt.Errorf("flow: %w: join expiry entry", types.ErrCorrupt)
		}
		count, w2 := binary.Varint(v[w:])
		if w2 <= 0 || count <= 0 {
			return false, fmt.Errorf("flow: %w: join expiry entry's count", types.ErrCorrupt)
		}
		rest := k[10:]
		out = append(out, expired{jk: string(rest[:n]), row: string(rest[n:]), n: count})
		keys = append(keys, append([]byte(nil), k...))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := st.Delete(k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setExpiry indexes a row a side holds n copies of (n > 0: its count
// went up from 0, or changed), noting its expiry in low.
func setExpiry(st Store, buf *[]byte, low *expiryLow, side int, terms []JoinExpiry, jk string, row types.Row, n int64) error {
	at, err := expiryOf(row, terms)
	if err != nil {
		return err
	}
	low.note(at)
	*buf = expiryKey(*buf, side, at, jk, row)
	return st.Set(*buf, binary.AppendVarint(binary.AppendUvarint(nil, uint64(len(jk))), n))
}

// dropExpiry removes the index entry of a row a side no longer holds
// (a retraction of a row not yet expired).
func dropExpiry(st Store, buf *[]byte, side int, terms []JoinExpiry, jk string, row types.Row) error {
	at, err := expiryOf(row, terms)
	if err != nil {
		return err
	}
	*buf = expiryKey(*buf, side, at, jk, row)
	return st.Delete(*buf)
}
