// Package cleaner owns the rules of key compaction (cleanup.policy
// compact): which records of a partition's cleanable range survive and
// how a batch is rewritten when some do not, following Kafka's log
// cleaner (LogCleaner.scala, MemoryRecords.filterTo) record for record.
// It is pure: batches, the partition's aborted transactions and the
// time go in, batches come out; reading objects, writing new ones and
// swapping index entries are the compactor's (package compact).
//
// A round, as in Kafka:
//
//  1. Index: the dirty batches (from the cleaner checkpoint, the first
//     offset no round has cleaned, to the first uncleanable offset; see
//     Plan) go through an OffsetMap, the newest offset of every key. The
//     map is bounded; when it fills, the round ends at the last batch it
//     mapped whole (OffsetMap.Latest) and the next round goes on.
//  2. Filter: every batch from the log start to that end goes through a
//     Filter, clean section included, since a newer dirty record makes
//     an older clean one obsolete.
//
// What a Filter keeps of a batch:
//   - A record whose key maps to a newer offset goes; so does a record
//     without a key (Kafka counts it invalid and drops it). Records past
//     the map's end stay.
//   - A tombstone (null value) stays until the batch's delete horizon
//     passes. The horizon is KIP-534's: the first round that keeps a
//     batch holding a tombstone stamps now + delete.retention.ms into it
//     (attribute bit 6, the first timestamp field), and a later round
//     drops the tombstones once the log clock passes it. So a tombstone
//     lives at least delete.retention.ms from the first time it was
//     cleaned, never less, whatever the object store's times say: this
//     is the analogue of Kafka's segment last-modified time that travels
//     with the data.
//   - Batches of aborted transactions go whole (the partition's aborted
//     transaction index says which). Transaction markers are index
//     entries here, not batches, and the compactor keeps them all: Kafka
//     drops a marker only after its transaction's batches are gone and a
//     delete horizon of its own passes, and a marker costs no bytes.
//   - A batch left with no records goes, but for two cases Kafka keeps
//     as an empty batch (header only, offsets and producer fields kept):
//     the last batch of a producer that is still active (its sequence
//     state), and the batch ending the round (the offset it ends at).
//   - A batch keeps its base offset and last offset delta, so offsets
//     rise with gaps and a producer's sequence range stays. A batch all
//     of whose records stay, and which needs no horizon stamped, is
//     copied byte for byte; any other is rebuilt with its own codec and
//     a new CRC.
package cleaner

import (
	"fmt"
	"slices"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/codec"
)

// AbortedTxn is an aborted transaction of the partition: its producer,
// its first offset and the offset of its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// Aborted answers which transactional batches were aborted.
type Aborted struct {
	byProducer map[int64][]AbortedTxn // by FirstOffset
}

// NewAborted indexes txns, a partition's aborted transactions that
// overlap the range being cleaned.
func NewAborted(txns []AbortedTxn) Aborted {
	a := Aborted{byProducer: make(map[int64][]AbortedTxn)}
	for _, t := range txns {
		a.byProducer[t.ProducerID] = append(a.byProducer[t.ProducerID], t)
	}
	for _, ts := range a.byProducer {
		slices.SortFunc(ts, func(x, y AbortedTxn) int { return int(min(max(x.FirstOffset-y.FirstOffset, -1), 1)) })
	}
	return a
}

// Contains reports whether a transactional batch of producer pid with
// offsets [base, last] belongs to an aborted transaction: one of the
// producer's that began at or before it and whose abort marker comes
// after it.
func (a Aborted) Contains(pid, base, last int64) bool {
	ts := a.byProducer[pid]
	i, _ := slices.BinarySearchFunc(ts, base+1, func(t AbortedTxn, off int64) int { return int(min(max(t.FirstOffset-off, -1), 1)) })
	// ts[i-1] is the last transaction beginning at or before base.
	return i > 0 && last < ts[i-1].LastOffset
}

// Index adds the keys of one dirty batch, base offset in its header, to
// m. Batches must come in offset order. An aborted batch adds no keys.
// full reports that m filled: this batch was not mapped whole, and the
// round ends at m.Latest(); ErrMapTooSmall if not even the first batch
// fit.
func Index(m *OffsetMap, batch []byte, aborted Aborted) (full bool, err error) {
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return false, err
	}
	if h.IsControl() || h.IsTransactional() && aborted.Contains(h.ProducerID, h.BaseOffset, h.LastOffset()) {
		m.latest = max(m.latest, h.LastOffset())
		return false, nil
	}
	raw, err := codec.RecordsOf(batch, h)
	if err != nil {
		return false, err
	}
	err = recordbatch.EachRecord(raw, h, func(_ int, r recordbatch.Record) error {
		if r.Key != nil && !m.put(r.Key, r.Offset) {
			return errFull
		}
		return nil
	})
	switch {
	case err == errFull && m.latest < 0:
		return true, ErrMapTooSmall
	case err == errFull:
		return true, nil
	case err != nil:
		return false, err
	}
	m.latest = max(m.latest, h.LastOffset())
	return false, nil
}

var errFull = fmt.Errorf("cleaner: offset map full")

// Outcome is what a Filter did with a batch.
type Outcome int8

const (
	// Copied: every record stays; the batch is copied byte for byte.
	Copied Outcome = iota
	// Rewritten: some records went, or a delete horizon was stamped;
	// the batch was rebuilt with its own codec.
	Rewritten
	// Emptied: no record stays, but the batch's header does (see the
	// package doc).
	Emptied
	// Dropped: nothing of the batch stays.
	Dropped
)

func (o Outcome) String() string {
	return [...]string{"copied", "rewritten", "emptied", "dropped"}[o]
}

// Stats counts what a Filter read and kept.
type Stats struct {
	BatchesRead, RecordsRead, BytesRead          int64
	BatchesKept, RecordsKept, BytesKept          int64
	TombstonesDropped, AbortedDropped, Rewritten int64
	// Emptied counts batches kept as a header only.
	Emptied int64
}

// Filter decides, batch by batch, what a round keeps. Set the fields,
// then call Batch for every batch from the log start to the round's end
// in offset order. Not safe for concurrent use.
type Filter struct {
	// Map is the round's offset map, built by Index.
	Map *OffsetMap
	// Now is the log clock in ms: tombstones whose horizon it passed go,
	// and horizons stamped now are Now + DeleteRetentionMs.
	Now               int64
	DeleteRetentionMs int64
	Aborted           Aborted
	// End is the offset after the round's last batch (Map.Latest()+1):
	// the batch ending there is kept, if only as a header.
	End int64
	// LastDataOffset returns the last offset a still-active producer
	// wrote to the partition; nil knows of none.
	LastDataOffset func(producerID int64) (int64, bool)

	Stats Stats
}

// Batch filters one whole batch (its real base offset in its header)
// and appends what stays to dst.
func (f *Filter) Batch(dst, batch []byte) ([]byte, Outcome, error) {
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return dst, Dropped, err
	}
	if h.Size() != len(batch) {
		return dst, Dropped, fmt.Errorf("cleaner: batch at offset %d: %d bytes, header says %d", h.BaseOffset, len(batch), h.Size())
	}
	f.Stats.BatchesRead++
	f.Stats.RecordsRead += int64(h.NumRecords)
	f.Stats.BytesRead += int64(len(batch))

	discard := h.IsTransactional() && !h.IsControl() && f.Aborted.Contains(h.ProducerID, h.BaseOffset, h.LastOffset())
	retainEmpty := h.HasProducerID() && f.lastOfProducer(h) || h.LastOffset()+1 == f.End

	var kept []recordbatch.Record
	all, tombstones := true, false
	if h.IsControl() {
		// Not expected (markers are index entries), but Kafka keeps a
		// control batch's record while its transaction has data.
		return f.keep(dst, batch, h, Copied)
	}
	if !discard {
		raw, err := codec.RecordsOf(batch, h)
		if err != nil {
			return dst, Dropped, err
		}
		horizon, hasHorizon := h.DeleteHorizon()
		err = recordbatch.EachRecord(raw, h, func(_ int, r recordbatch.Record) error {
			if f.retain(r, hasHorizon, horizon) {
				kept = append(kept, r)
				tombstones = tombstones || r.Value == nil
				return nil
			}
			all = false
			if r.Value == nil && r.Key != nil && f.Map.Get(r.Key) <= r.Offset {
				f.Stats.TombstonesDropped++
			}
			return nil
		})
		if err != nil {
			return dst, Dropped, err
		}
	} else {
		f.Stats.AbortedDropped++
	}

	switch {
	case len(kept) > 0:
		_, hasHorizon := h.DeleteHorizon()
		stamp := tombstones && !hasHorizon
		if all && !stamp {
			return f.keep(dst, batch, h, Copied)
		}
		out, err := f.rebuild(dst, h, kept, stamp)
		if err != nil {
			return dst, Dropped, err
		}
		f.Stats.Rewritten++
		f.Stats.BatchesKept++
		f.Stats.RecordsKept += int64(len(kept))
		f.Stats.BytesKept += int64(len(out) - len(dst))
		return out, Rewritten, nil
	case retainEmpty:
		out, err := codec.AppendBatch(dst, recordbatch.BatchSpec{
			BaseOffset: h.BaseOffset, LastOffsetDelta: h.LastOffsetDelta, PartitionLeaderEpoch: h.PartitionLeaderEpoch,
			TimestampType: h.TimestampType(), Transactional: h.IsTransactional(),
			FirstTimestamp: -1, MaxTimestamp: h.MaxTimestamp,
			ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
		}, nil)
		if err != nil {
			return dst, Dropped, err
		}
		f.Stats.BatchesKept++
		f.Stats.Emptied++
		f.Stats.BytesKept += int64(len(out) - len(dst))
		return out, Emptied, nil
	}
	return dst, Dropped, nil
}

func (f *Filter) keep(dst, batch []byte, h recordbatch.Header, o Outcome) ([]byte, Outcome, error) {
	f.Stats.BatchesKept++
	f.Stats.RecordsKept += int64(h.NumRecords)
	f.Stats.BytesKept += int64(len(batch))
	return append(dst, batch...), o, nil
}

// lastOfProducer is Kafka's isBatchLastRecordOfProducer for data
// batches: the batch holds the last offset its still-active producer
// wrote.
func (f *Filter) lastOfProducer(h recordbatch.Header) bool {
	if f.LastDataOffset == nil {
		return false
	}
	last, ok := f.LastDataOffset(h.ProducerID)
	return ok && last == h.LastOffset()
}

// retain is Kafka's Cleaner.shouldRetainRecord.
func (f *Filter) retain(r recordbatch.Record, hasHorizon bool, horizon int64) bool {
	if r.Offset > f.Map.Latest() {
		return true
	}
	if r.Key == nil {
		return false
	}
	if r.Offset < f.Map.Get(r.Key) {
		return false
	}
	return r.Value != nil || !hasHorizon || f.Now < horizon
}

// rebuild appends the batch of h holding only kept, as Kafka's
// buildRetainedRecordsInto: same base offset and last offset delta,
// producer fields, codec and timestamp type; the first timestamp is
// the first kept record's, or the delete horizon.
func (f *Filter) rebuild(dst []byte, h recordbatch.Header, kept []recordbatch.Record, stamp bool) ([]byte, error) {
	spec := recordbatch.BatchSpec{
		BaseOffset: h.BaseOffset, LastOffsetDelta: h.LastOffsetDelta, PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Compression: h.Compression(), TimestampType: h.TimestampType(), Transactional: h.IsTransactional(),
		FirstTimestamp: kept[0].Timestamp, MaxTimestamp: kept[0].Timestamp,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
		NumRecords: int32(len(kept)),
	}
	if old, ok := h.DeleteHorizon(); ok {
		spec.HasDeleteHorizon, spec.DeleteHorizon = true, old
	} else if stamp {
		spec.HasDeleteHorizon, spec.DeleteHorizon = true, f.Now+f.DeleteRetentionMs
	}
	for _, r := range kept {
		spec.MaxTimestamp = max(spec.MaxTimestamp, r.Timestamp)
	}
	base := spec.FirstTimestamp
	if spec.HasDeleteHorizon {
		base = spec.DeleteHorizon
	}
	if h.TimestampType() == recordbatch.LogAppendTime {
		// Every record's time is the batch's append time, which stays.
		spec.MaxTimestamp = h.MaxTimestamp
		if !spec.HasDeleteHorizon {
			spec.FirstTimestamp, base = h.FirstTimestamp, h.FirstTimestamp
		}
	}
	var records []byte
	for _, r := range kept {
		if h.TimestampType() == recordbatch.LogAppendTime {
			r.Timestamp = base // delta 0: consumers take the batch's time
		}
		records = recordbatch.AppendRecord(records, r, h.BaseOffset, base)
	}
	return codec.AppendBatch(dst, spec, records)
}
