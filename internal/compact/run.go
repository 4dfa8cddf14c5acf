package compact

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/segment"
)

// ErrCorrupt: the bytes an index entry points at are not whole batches
// with good CRCs whose counts are the entry's. The compactor leaves
// such a run alone (it never copies damage into a new object); the
// fetch path reports it to readers.
var ErrCorrupt = errors.New("compact: data object corrupt or disagreeing with the index")

// read returns the run's batches and markers in offset order, each
// batch's base offset set to the offset apply gave it, checked: whole
// batches, good CRC-32Cs, counts that are the entry's. It reads up to
// readConcurrency entries at once, paced.
func (c *Compactor) read(ctx context.Context, r *run) ([]Batch, error) {
	data := make([][]byte, len(r.old))
	errs := make([]error, len(r.old))
	sem := make(chan struct{}, readConcurrency)
	var wg sync.WaitGroup
	for i := range r.old {
		e := &r.old[i]
		if e.Control {
			continue
		}
		if err := c.pace.wait(ctx, e.Length); err != nil {
			wg.Wait()
			return nil, err
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			data[i], errs[i] = c.cfg.Store.Get(ctx, e.ObjectKey, e.Position, e.Length)
			if errs[i] == nil && int64(len(data[i])) != e.Length {
				errs[i] = fmt.Errorf("%w: %s at %d: %d bytes, index says %d", ErrCorrupt, e.ObjectKey, e.Position, len(data[i]), e.Length)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("compact: read %s/%d: %w", r.topic.Name, r.partition, err)
	}
	var out []Batch
	for i := range r.old {
		e := &r.old[i]
		if e.Control {
			out = append(out, Batch{BaseOffset: e.BaseOffset, LastOffset: e.BaseOffset, Marker: *e,
				FirstTimestamp: e.FirstTimestamp, MaxTimestamp: e.MaxTimestamp})
			continue
		}
		var err error
		if out, err = appendBatches(out, data[i], e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendBatches splits one entry's bytes into batches, checks them and
// sets their base offsets.
func appendBatches(out []Batch, data []byte, e *meta.IndexEntry) ([]Batch, error) {
	base := e.BaseOffset
	var n int32
	for rest := data; len(rest) > 0; n++ {
		batch, next, err := recordbatch.Next(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, e.ObjectKey, e.Position, err)
		}
		h, err := recordbatch.ParseHeader(batch)
		if err == nil {
			err = recordbatch.CheckCRC(batch)
		}
		if err != nil || h.LastOffsetDelta < 0 {
			return nil, fmt.Errorf("%w: %s at %d: batch %d: %v", ErrCorrupt, e.ObjectKey, e.Position, n, err)
		}
		if e.OwnOffsets {
			if h.BaseOffset < base {
				return nil, fmt.Errorf("%w: %s at %d: batch %d at offset %d, before %d", ErrCorrupt, e.ObjectKey, e.Position, n, h.BaseOffset, base)
			}
			base = h.BaseOffset
		}
		// The base offset is outside the CRC: what a fetch would patch
		// it to, so the new object is readable on its own.
		recordbatch.SetBaseOffset(batch, base)
		last := base + int64(h.LastOffsetDelta)
		out = append(out, Batch{BaseOffset: base, LastOffset: last, Data: batch, Transactional: e.Transactional,
			FirstTimestamp: e.FirstTimestamp, MaxTimestamp: e.MaxTimestamp})
		base = last + 1
		rest = next
	}
	end := e.BaseOffset + int64(e.Records)
	if n != e.BatchCount || base > end || (!e.OwnOffsets && base != end) {
		return nil, fmt.Errorf("%w: %s at %d: %d batches ending at %d, index says %d ending at %d",
			ErrCorrupt, e.ObjectKey, e.Position, n, base, e.BatchCount, end)
	}
	return out, nil
}

// build writes the rewritten run into one object named key and returns
// its bytes (nil if it holds no batch) and the new index entries: one
// per stretch of batches between markers of at most entryBytes, and the
// markers as they were. An entry whose batches leave offsets out
// carries its own offsets.
func build(r *run, key string, out []Batch, entryBytes int64) ([]byte, []meta.IndexEntry, error) {
	var size int64
	for i := range out {
		size += int64(len(out[i].Data))
	}
	w := segment.NewWriterSize(int(size) + segment.HeaderSize + segment.EntrySize + segment.TrailerSize)
	var entries []meta.IndexEntry
	var cur *meta.IndexEntry // the entry batches are added to
	next := r.old[0].BaseOffset
	end := r.old[len(r.old)-1].BaseOffset + int64(r.old[len(r.old)-1].Records)
	for i := range out {
		b := &out[i]
		if b.BaseOffset < next || b.LastOffset < b.BaseOffset || b.LastOffset >= end {
			return nil, nil, fmt.Errorf("compact: rewritten item at %d..%d out of order or outside %d..%d", b.BaseOffset, b.LastOffset, next, end-1)
		}
		if b.IsMarker() {
			entries = append(entries, b.Marker)
			cur, next = nil, b.LastOffset+1
			continue
		}
		ref, err := w.Add(r.topic.ID, r.partition, b.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("compact: build %s: %w", key, err)
		}
		if cur != nil && cur.Length+ref.Length > entryBytes {
			cur = nil
		}
		if cur == nil {
			entries = append(entries, meta.IndexEntry{BaseOffset: b.BaseOffset, ObjectKey: key, Position: ref.Offset,
				FirstTimestamp: b.FirstTimestamp, MaxTimestamp: b.MaxTimestamp,
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
			cur = &entries[len(entries)-1]
		} else if b.BaseOffset != next {
			cur.OwnOffsets = true
		}
		cur.Length += ref.Length
		cur.BatchCount++
		cur.Records = int32(b.LastOffset + 1 - cur.BaseOffset)
		cur.FirstTimestamp = min(cur.FirstTimestamp, b.FirstTimestamp)
		cur.MaxTimestamp = max(cur.MaxTimestamp, b.MaxTimestamp)
		cur.Transactional = cur.Transactional || b.Transactional
		next = b.LastOffset + 1
	}
	if len(w.Chunks()) == 0 {
		return nil, entries, nil
	}
	return w.Finish(), entries, nil
}
