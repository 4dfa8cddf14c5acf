package flow

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Session appends window_start and window_end of the row's session
// window: per partition (the values of PartitionBy, NULLs one
// partition), the rows whose times (TimeCol) follow each other by less
// than Gap are one session, from its first time to its last time plus
// Gap (as Flink's session windows: a row at t opens [t, t+Gap), and
// overlapping windows merge). A row with a NULL time is in no session
// and dropped.
//
// An insert may merge sessions and a delete split one, which changes
// the window of rows that did not change: their old rows are retracted
// and re-inserted with the new window. Per epoch and changed
// partition, the rows around the changed times (from the first to the
// last changed time, extended to each side while the state's times
// follow by less than Gap) are read before and after the changes, and
// the difference emitted: a cost of the sessions touched, not of the
// partition.
//
// State:
//
//	key(partition) key(time) key(row) -> count, row
//	'S' end(8 bytes) key(partition)   -> start (8 bytes): each session, by its end (with Expire)
//
// (end and start are unix microseconds, big-endian with the sign bit
// flipped, so byte order is time order; a row's key begins with a
// value's key encoding, 0x01 or 0x02, never 'S'.)
//
// With Expire (an input that only inserts, whose late records are
// dropped before it: every record after an epoch has a time at or
// after the epoch's watermark), a session whose end is at or before
// the watermark can never change again (a record to come is at least
// its gap after its last time) and its rows are freed at the end of
// that epoch; its rows already emitted stay as they are downstream.
type Session struct {
	TimeCol     int
	PartitionBy []int
	Gap         time.Duration
	// Expire frees closed sessions' rows by the watermark.
	Expire bool
}

// maxSessionRows bounds the rows an epoch reads around one partition's
// changes (the sessions they touch, before and after): a session is
// held in memory to assign its window. Past it the epoch fails (54000)
// rather than exhaust memory; a shorter gap makes smaller sessions.
const maxSessionRows = 1_000_000

func (s *Session) Arity() int { return 1 }

func (s *Session) validate() error {
	if s.Gap < time.Microsecond {
		return fmt.Errorf("flow: session gap %v, at least 1µs", s.Gap)
	}
	return nil
}

// sessionPart is one partition's changes in an epoch.
type sessionPart struct {
	prefix   []byte
	changes  []types.Change
	min, max time.Time
}

func (s *Session) Step(ctx *Context, ins [][]types.Change) ([]types.Change, error) {
	parts := map[string]*sessionPart{}
	var order []*sessionPart
	for _, c := range consolidate(ins[0]) {
		t, ok := c.Row[s.TimeCol].(time.Time)
		if !ok {
			continue // no time, no session
		}
		key := appendKeyCols(nil, c.Row, s.PartitionBy)
		p := parts[string(key)]
		if p == nil {
			p = &sessionPart{prefix: key, min: t, max: t}
			parts[string(key)] = p
			order = append(order, p)
		}
		p.changes = append(p.changes, c)
		if t.Before(p.min) {
			p.min = t
		}
		if t.After(p.max) {
			p.max = t
		}
	}
	var out []types.Change
	for _, p := range order {
		var err error
		if out, err = s.partition(ctx.State, p, out); err != nil {
			return nil, err
		}
	}
	if s.Expire {
		n, err := s.expire(ctx.State, ctx.InputWatermark, ctx.Watermark)
		if err != nil {
			return nil, err
		}
		ctx.Freed += n
	}
	return consolidate(out), nil
}

// sessionIndexTag begins the session index's keys: above any row key's
// first byte (a value's key encoding, 0x01 or 0x02).
const sessionIndexTag = 'S'

func appendMicros(b []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixMicro())^(1<<63))
}

func decodeMicros(b []byte) time.Time {
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b) ^ (1 << 63))).UTC()
}

// rowsEnd bounds a partition's rows from above: with no partition
// columns every row key, and not the session index.
func rowsEnd(prefix []byte) []byte {
	if len(prefix) == 0 {
		return []byte{0x03}
	}
	return prefixEnd(prefix)
}

// indexSessions updates the session index for a partition's rows
// before and after an epoch's changes (whole sessions, in time order):
// the sessions before go, the sessions after come.
func (s *Session) indexSessions(st Store, prefix []byte, before, after []timed) error {
	var key []byte
	for pass, rows := range [][]timed{before, after} {
		for i := 0; i < len(rows); {
			j := i + 1
			for j < len(rows) && rows[j].t.Sub(rows[j-1].t) < s.Gap {
				j++
			}
			key = append(appendMicros(append(key[:0], sessionIndexTag), rows[j-1].t.Add(s.Gap)), prefix...)
			var err error
			if pass == 0 {
				err = st.Delete(key)
			} else {
				err = st.Set(key, appendMicros(nil, rows[i].t))
			}
			if err != nil {
				return err
			}
			i = j
		}
	}
	return nil
}

// expire frees the rows of every session whose end is at or before wm
// and returns how many (with multiplicity). Those ending at or before
// the watermark before the epoch (before) went at the end of the last
// epoch, and no session this epoch made or changed ends there (it ends
// after a record at or after that watermark): the scan starts at it, so
// it never walks the deletions of earlier epochs, which a Pebble store
// keeps as tombstones until a compaction.
func (s *Session) expire(st Store, before, wm time.Time) (int64, error) {
	if wm.IsZero() {
		return 0, nil
	}
	type closed struct {
		key, prefix []byte
		start, last time.Time
	}
	var done []closed
	lower := []byte{sessionIndexTag}
	if !before.IsZero() {
		lower = appendMicros(lower, before)
	}
	upper := prefixEnd(appendMicros([]byte{sessionIndexTag}, wm))
	err := st.Scan(lower, upper, false, func(k, v []byte) (bool, error) {
		if len(k) < 9 || len(v) != 8 {
			return false, fmt.Errorf("flow: %w: session index entry", types.ErrCorrupt)
		}
		done = append(done, closed{key: bytes.Clone(k), prefix: bytes.Clone(k[9:]), start: decodeMicros(v), last: decodeMicros(k[1:9]).Add(-s.Gap)})
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	var freed int64
	for _, c := range done {
		lower := types.AppendKey(bytes.Clone(c.prefix), c.start)
		upper := prefixEnd(types.AppendKey(bytes.Clone(c.prefix), c.last))
		var keys [][]byte
		err := st.Scan(lower, upper, false, func(k, v []byte) (bool, error) {
			n, err := decodeCount(v)
			if err != nil {
				return false, err
			}
			freed += n
			keys = append(keys, bytes.Clone(k))
			return true, nil
		})
		if err != nil {
			return 0, err
		}
		for _, k := range append(keys, c.key) {
			if err := st.Delete(k); err != nil {
				return 0, err
			}
		}
	}
	return freed, nil
}

// timed is a stored row and its count.
type timed struct {
	t   time.Time
	n   int64
	row types.Row
}

func (s *Session) partition(st Store, p *sessionPart, out []types.Change) ([]types.Change, error) {
	// The range touched: from the first changed time back while the
	// stored times before it follow by less than Gap, and from the last
	// forward. Every session before or after the changes that holds a
	// changed time, or that a deleted one split, lies within.
	lo, hi := p.min, p.max
	err := st.Scan(p.prefix, types.AppendKey(append([]byte(nil), p.prefix...), p.min), true, func(_, v []byte) (bool, error) {
		r, err := s.decode(v)
		if err != nil {
			return false, err
		}
		if lo.Sub(r.t) >= s.Gap {
			return false, nil
		}
		lo = r.t
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	err = st.Scan(prefixEnd(types.AppendKey(append([]byte(nil), p.prefix...), p.max)), rowsEnd(p.prefix), false, func(_, v []byte) (bool, error) {
		r, err := s.decode(v)
		if err != nil {
			return false, err
		}
		if r.t.Sub(hi) >= s.Gap {
			return false, nil
		}
		hi = r.t
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	read := func() ([]timed, error) {
		var rows []timed
		lower := types.AppendKey(append([]byte(nil), p.prefix...), lo)
		upper := prefixEnd(types.AppendKey(append([]byte(nil), p.prefix...), hi))
		err := st.Scan(lower, upper, false, func(_, v []byte) (bool, error) {
			r, err := s.decode(v)
			if err != nil {
				return false, err
			}
			rows = append(rows, r)
			if len(rows) > maxSessionRows {
				return false, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "session windows: more than %d rows in the sessions one epoch changes", maxSessionRows)
			}
			return true, nil
		})
		return rows, err
	}
	before, err := read()
	if err != nil {
		return nil, err
	}
	var key, vbuf []byte
	for _, c := range p.changes {
		key = appendRowKey(types.AppendKey(append(key[:0], p.prefix...), c.Row[s.TimeCol]), c.Row)
		if _, _, err := addCounted(st, key, c.Row, c.Diff, &vbuf); err != nil {
			return nil, fmt.Errorf("flow: session: %w", err)
		}
	}
	after, err := read()
	if err != nil {
		return nil, err
	}
	if s.Expire {
		if err := s.indexSessions(st, p.prefix, before, after); err != nil {
			return nil, err
		}
	}
	out = s.assign(before, -1, out)
	return s.assign(after, 1, out), nil
}

// assign emits rows (in time order) with their sessions' windows, each
// count times sign.
func (s *Session) assign(rows []timed, sign int64, out []types.Change) []types.Change {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].t.Before(rows[j].t) })
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].t.Sub(rows[j-1].t) < s.Gap {
			j++
		}
		start, end := rows[i].t, rows[j-1].t.Add(s.Gap)
		for _, r := range rows[i:j] {
			row := append(append(make(types.Row, 0, len(r.row)+2), r.row...), start, end)
			out = append(out, types.Change{Row: row, Diff: sign * r.n})
		}
		i = j
	}
	return out
}

func (s *Session) decode(v []byte) (timed, error) {
	n, row, err := decodeCounted(v)
	if err != nil {
		return timed{}, err
	}
	if s.TimeCol >= len(row) {
		return timed{}, fmt.Errorf("flow: %w: session row", types.ErrCorrupt)
	}
	t, ok := row[s.TimeCol].(time.Time)
	if !ok {
		return timed{}, fmt.Errorf("flow: %w: session row without a time", types.ErrCorrupt)
	}
	return timed{t: t, n: n, row: row}, nil
}
