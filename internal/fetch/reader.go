// Package fetch owns an agent's read path: it finds a partition's record
// batches through the local offset index (a meta.View, no remote call),
// reads their bytes from data objects through a bounded read cache, and
// patches each batch's baseOffset to the offset apply assigned, so the
// result is what a Kafka broker returns for a Fetch partition. Wait is the
// long-poll helper: it sleeps on the replica's apply notifications, not on
// a timer loop.
package fetch

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/recordbatch"
)

// ErrCorrupt: a data object's bytes disagree with the offset index that
// points at them (short range, batches that do not frame, record counts
// that do not add up).
var ErrCorrupt = errors.New("fetch: data object disagrees with the index")

const (
	// maxEntriesPerRead bounds the index entries one Read plans, so a
	// huge maxBytes over tiny batches cannot make an unbounded plan.
	maxEntriesPerRead = 4096
	// maxCoalesceGapBytes bounds the bytes of other partitions one GET
	// may read between two wanted entries of the same object: a few
	// tens of KiB cost less than another request.
	maxCoalesceGapBytes = 64 << 10
)

// FetchResult is one partition's answer.
type FetchResult struct {
	// Records are whole record batches with patched base offsets, the
	// first one holding the requested offset (or the next offset that
	// exists). The caller owns the slice.
	Records []byte
	// HighWatermark and LogStartOffset are the partition's, as of the
	// view; -1 with UNKNOWN_TOPIC_OR_PARTITION.
	HighWatermark  int64
	LogStartOffset int64
	// Err is a Kafka error code: OFFSET_OUT_OF_RANGE or
	// UNKNOWN_TOPIC_OR_PARTITION, else 0.
	Err int16
}

// Reader reads committed batches. Safe for concurrent use.
type Reader struct {
	store objstore.Store
	cache *Cache
}

// NewReader returns a Reader over store. cache may be shared with a
// produce pipeline (it then holds the objects just written); nil means a
// cache that keeps nothing.
func NewReader(store objstore.Store, cache *Cache) *Reader {
	if cache == nil {
		cache = NewCache(0)
	}
	return &Reader{store: store, cache: cache}
}

// Cache returns the reader's cache.
func (r *Reader) Cache() *Cache { return r.cache }

// Read returns the batches of a partition from offset on, as of view.
//
// maxBytes bounds the records returned, except that the first batch is
// returned whole even if it is larger (KIP-74), so a consumer always makes
// progress; maxBytes <= 0 returns no records, only the offsets. An offset
// below the log start or above the high watermark is OFFSET_OUT_OF_RANGE;
// offset == high watermark returns no records.
//
// A store error fails Read only if no batch was read yet; otherwise Read
// returns the batches before it and the consumer's next fetch retries.
func (r *Reader) Read(ctx context.Context, view *meta.View, topicID meta.TopicID, partition int32, offset int64, maxBytes int32) (FetchResult, error) {
	st, ok, err := view.Partition(topicID, partition)
	if err != nil {
		return FetchResult{}, err
	}
	if !ok {
		return FetchResult{HighWatermark: -1, LogStartOffset: -1, Err: kerr.UnknownTopicOrPartition.Code}, nil
	}
	res := FetchResult{HighWatermark: st.HighWatermark(), LogStartOffset: st.LogStartOffset}
	switch {
	case offset < st.LogStartOffset || offset > res.HighWatermark:
		res.Err = kerr.OffsetOutOfRange.Code
		return res, nil
	case offset == res.HighWatermark || maxBytes <= 0:
		return res, nil
	}

	entries, err := planEntries(view, topicID, partition, offset, int64(maxBytes))
	if err != nil {
		return FetchResult{}, err
	}
	out := make([]byte, 0, min(int64(maxBytes), planBytes(entries)))
	for len(entries) > 0 {
		n, start, end := nextRange(entries)
		data, err := r.cache.Get(ctx, r.store, entries[0].ObjectKey, start, end-start)
		if err != nil {
			if len(out) > 0 {
				break
			}
			return FetchResult{}, fmt.Errorf("fetch: read %s: %w", entries[0].ObjectKey, err)
		}
		var full bool
		for _, e := range entries[:n] {
			pos := e.Position - start
			if out, full, err = appendEntry(out, data[pos:pos+e.Length], e, offset, int(maxBytes)); err != nil {
				return FetchResult{}, err
			}
			if full {
				break
			}
		}
		if full {
			break
		}
		entries = entries[n:]
	}
	res.Records = out
	return res, nil
}

// planEntries returns the index entries a read of maxBytes from offset
// needs: at least one, and at most enough to cover maxBytes.
func planEntries(view *meta.View, topicID meta.TopicID, partition int32, offset, maxBytes int64) ([]meta.IndexEntry, error) {
	it, err := view.Seek(topicID, partition, offset)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var entries []meta.IndexEntry
	var planned int64
	for planned < maxBytes && len(entries) < maxEntriesPerRead && it.Next() {
		e := it.Entry()
		entries = append(entries, e)
		planned += e.Length
	}
	return entries, it.Err()
}

func planBytes(entries []meta.IndexEntry) int64 {
	var n int64
	for _, e := range entries {
		n += e.Length
	}
	return n
}

// nextRange groups the leading entries that lie in the same object, in
// ascending position with small gaps, into one byte range [start, end).
func nextRange(entries []meta.IndexEntry) (n int, start, end int64) {
	first := entries[0]
	start, end = first.Position, first.Position+first.Length
	n = 1
	for _, e := range entries[1:] {
		if e.ObjectKey != first.ObjectKey || e.Position < end || e.Position-end > maxCoalesceGapBytes {
			break
		}
		end = e.Position + e.Length
		n++
	}
	return n, start, end
}

// appendEntry appends the batches of one index entry that hold offsets at
// or above offset, patching their base offsets, until out would pass
// maxBytes (the first batch of a read is always taken). full reports that
// the read should stop. It checks the entry's bytes against the index: an
// offset counted twice or skipped would hand consumers wrong offsets.
func appendEntry(out, data []byte, e meta.IndexEntry, offset int64, maxBytes int) (_ []byte, full bool, err error) {
	base := e.BaseOffset
	var batches int32
	for rest := data; len(rest) > 0; batches++ {
		batch, next, err := recordbatch.Next(rest)
		if err != nil {
			return out, false, fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, e.ObjectKey, e.Position, err)
		}
		h, err := recordbatch.ParseHeader(batch)
		if err != nil || h.LastOffsetDelta < 0 {
			return out, false, fmt.Errorf("%w: %s at %d: batch %d: %v (lastOffsetDelta %d)", ErrCorrupt, e.ObjectKey, e.Position, batches, err, h.LastOffsetDelta)
		}
		last := base + int64(h.LastOffsetDelta)
		if last >= offset {
			if len(out) > 0 && len(out)+len(batch) > maxBytes {
				return out, true, nil
			}
			at := len(out)
			out = append(out, batch...)
			recordbatch.SetBaseOffset(out[at:], base)
		}
		base = last + 1
		rest = next
	}
	if base != e.BaseOffset+int64(e.Records) || batches != e.BatchCount {
		return out, false, fmt.Errorf("%w: %s at %d: %d batches ending at offset %d, index says %d batches ending at %d",
			ErrCorrupt, e.ObjectKey, e.Position, batches, base, e.BatchCount, e.BaseOffset+int64(e.Records))
	}
	return out, len(out) >= maxBytes, nil
}
