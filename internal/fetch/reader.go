// Package fetch owns an agent's read path: it finds a partition's record
// batches through the local offset index (a meta.View, no remote call),
// reads their bytes from data objects through a bounded read cache (and
// reads ahead of consumers catching up on what it does not hold),
// patches each batch's baseOffset to the offset apply assigned, and
// synthesizes the control batches of transaction markers (index entries
// with no object bytes), so the result is what a Kafka broker returns for
// a Fetch partition. The long poll is the Kafka handler's, on the
// partition watches of package partwatch.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/planted"
	"github.com/strandkafka/strand/internal/recordbatch"
)

// ErrCorrupt: a data object's bytes are damaged (batches that do not
// frame, a CRC-32C that does not match) or disagree with the offset index
// that points at them (short range, record counts that do not add up),
// or a marker entry is not one one-record batch.
var ErrCorrupt = errors.New("fetch: data object corrupt or disagreeing with the index")

const (
	// maxEntriesPerRead bounds the index entries one Read plans, so a
	// huge maxBytes over tiny batches cannot make an unbounded plan.
	maxEntriesPerRead = 4096
	// maxCoalesceGapBytes bounds the bytes of other partitions one GET
	// may read between two wanted entries of the same object: a few
	// tens of KiB cost less than another request.
	maxCoalesceGapBytes = 64 << 10
)

// NoBound is the upTo of a read that may return every record below the
// high watermark.
const NoBound = math.MaxInt64

// markerLeaderEpoch is the partitionLeaderEpoch of synthesized markers:
// every partition is at epoch 0, which Produce stamps on every data batch,
// and a marker says the same so a consumer's epoch does not go backwards.
const markerLeaderEpoch = 0

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
//
// Every byte it returns was checked: bytes from the store pass
// checkBatches (framing and CRC-32C of every batch) before the cache
// keeps or returns them (see Cache), and the index entry's counts are
// checked as the batches are appended. A damaged object fails the reads
// of the partitions whose batches it damages with ErrCorrupt, a missing
// one with ErrMissing, and is reported to the DamageLog.
type Reader struct {
	store  objstore.Store
	cache  *Cache
	damage *DamageLog
	// slots bounds the answers being copied at once (copy.go).
	slots copySlots
	// answers are answers given back to copy the next ones into
	// (answerpool.go).
	answers *answerPool
	// ahead is the read-ahead (readahead.go); nil: none.
	ahead *readAhead
	// copying is called while a copy slot is held, waiting when a read
	// finds none free; both nil but in tests.
	copying, waiting func()
}

// NewReader returns a Reader over store. cache may be shared with a
// produce pipeline (it then holds the objects just written); nil means a
// cache that keeps nothing. Damage goes to a DamageLog that logs nowhere
// until WithDamageLog replaces it.
func NewReader(store objstore.Store, cache *Cache) *Reader {
	if cache == nil {
		cache = NewCache(0)
	}
	return &Reader{store: store, cache: cache, damage: NewDamageLog(nil), slots: newCopySlots(), answers: newAnswerPool()}
}

// Recycle gives back the Records of a FetchResult this reader returned,
// once the caller is done with them and nothing refers to them or to any
// part of them any more: a later read may copy its answer into them.
// Calling it is optional; records from elsewhere must not be given.
func (r *Reader) Recycle(records []byte) { r.answers.put(records) }

// WithDamageLog returns a Reader like r (same store, cache and copy
// slots) that reports damaged objects to d.
func (r *Reader) WithDamageLog(d *DamageLog) *Reader {
	c := *r
	c.damage = d
	return &c
}

// Cache returns the reader's cache.
func (r *Reader) Cache() *Cache { return r.cache }

// DamageLog returns where the reader reports damaged objects.
func (r *Reader) DamageLog() *DamageLog { return r.damage }

// Read returns the batches of a partition from offset on, as of view.
//
// maxBytes bounds the records returned, except that the first batch is
// returned whole even if it is larger (KIP-74), so a consumer always makes
// progress; maxBytes <= 0 returns no records, only the offsets. An offset
// below the log start or above the high watermark is OFFSET_OUT_OF_RANGE;
// offset == high watermark returns no records.
//
// Transaction markers are index entries without object bytes: Read
// synthesizes their control batches (coordinator epoch 0) in offset
// order among the data batches.
//
// A store error or a damaged object (ErrCorrupt, ErrMissing) fails Read
// only if no batch was read yet; otherwise Read returns the batches
// before it, and the consumer's next fetch, starting at the damage, gets
// the error.
func (r *Reader) Read(ctx context.Context, view *meta.View, topicID meta.TopicID, partition int32, offset int64, maxBytes int32) (FetchResult, error) {
	return r.ReadUpTo(ctx, view, topicID, partition, offset, maxBytes, NoBound)
}

// ReadUpTo is Read returning no batch that starts at or above upTo: a
// read_committed Fetch passes the last stable offset. Since a transaction
// begins with a batch of its own, no batch straddles that bound. An offset
// at or above upTo (but not above the high watermark) returns no records
// and no error, as Kafka answers a read_committed fetch at its LSO.
func (r *Reader) ReadUpTo(ctx context.Context, view *meta.View, topicID meta.TopicID, partition int32, offset int64, maxBytes int32, upTo int64) (FetchResult, error) {
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
	case offset == res.HighWatermark || offset >= upTo || maxBytes <= 0:
		return res, nil
	}

	entries, err := planEntries(view, topicID, partition, offset, int64(maxBytes), upTo)
	if err != nil {
		return FetchResult{}, err
	}
	// One run per entry, but for entries the read does not reach.
	a := answer{runs: make([][]byte, 0, len(entries)), bases: make([]int64, 0, len(entries))}
	ahead := r.startReadAhead(ctx, view, topicID, partition, offset, int64(maxBytes), entries)
	// A read that fails returns nothing: the consumer asks at offset
	// again.
	next := offset
	defer func() { r.endReadAhead(ahead, topicID, partition, next) }()
	// coalesce: read neighbouring entries of one object with one GET.
	// It turns off after a coalesced range fails its check, since the
	// damage may lie in other partitions' batches between ours.
	coalesce := true
	for len(entries) > 0 {
		var full bool
		if e := &entries[0]; e.Control {
			if full, err = a.addMarker(e, int(maxBytes)); err != nil {
				return FetchResult{}, err
			}
			if full {
				break
			}
			entries = entries[1:]
			continue
		}
		n, start, end := 1, entries[0].Position, entries[0].Position+entries[0].Length
		// Entries cached (or being read ahead) are served entry by
		// entry, and a range of those that are not stops at the next
		// one that is: a range over both would read bytes again.
		if coalesce && !r.cached(&entries[0]) {
			if sp, ok := ahead.spanOf(&entries[0]); ok {
				n, start, end = entriesIn(entries, sp), sp.start, sp.end
			} else {
				n, start, end = nextSpan(entries, maxCoalesceGapBytes, r.maxSpan(), r.cached)
			}
		}
		data, err := r.get(ctx, entries[0].ObjectKey, start, end-start)
		if err != nil {
			if end-start > entries[0].Length && errors.Is(err, ErrCorrupt) {
				// Reported by the reads of whichever partition's
				// batches are damaged, ours or not.
				coalesce = false
				continue
			}
			r.damage.Report(entries[0].ObjectKey, topicID, partition, entries[0].BaseOffset, err)
			if a.size > 0 {
				break
			}
			return FetchResult{}, fmt.Errorf("fetch: read %s: %w", entries[0].ObjectKey, err)
		}
		for i := range entries[:n] {
			e := &entries[i]
			pos := e.Position - start
			if full, err = a.addEntry(data[pos:pos+e.Length], e, offset, upTo, int(maxBytes)); err != nil {
				// None of an entry that disagrees with the index.
				r.damage.Report(e.ObjectKey, topicID, partition, e.BaseOffset, err)
				if a.size > 0 {
					full = true
					break
				}
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
	if res.Records, err = r.join(ctx, &a); err != nil {
		return FetchResult{}, err
	}
	next = a.next(offset)
	if t, ok := planted.DropAcked(); ok {
		res.Records = dropPlanted(view, topicID, partition, res.Records, t)
	}
	return res, nil
}

// dropPlanted is the test build's planted bug: see internal/planted.
func dropPlanted(view *meta.View, topicID meta.TopicID, partition int32, records []byte, t planted.Target) []byte {
	if topic, ok, err := view.TopicByID(topicID); err == nil && ok && topic.Name == t.Topic && partition == t.Partition {
		return planted.DropRecord(records, t.Offset)
	}
	return records
}

// get reads bytes [pos, pos+length) of object key through the cache,
// checked by checkBatches. An object not in the store is ErrMissing,
// and stays so without another GET for missingRecheckInterval; one
// shorter than the range is ErrCorrupt.
func (r *Reader) get(ctx context.Context, key string, pos, length int64) ([]byte, error) {
	if r.damage.missingRecently(key) {
		return nil, fmt.Errorf("%w: %s (%w)", ErrMissing, key, errMissingRecently)
	}
	data, err := r.cache.Get(ctx, r.store, key, pos, length, checkBatches)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		err = fmt.Errorf("%w: %w", ErrMissing, err)
	case errors.Is(err, objstore.ErrInvalidRange):
		// The index points past the object's end: cut short.
		err = fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
	}
	return data, err
}

// planEntries returns the index entries a read of maxBytes from offset
// needs: at least one, and at most enough to cover maxBytes, none starting
// at or above upTo.
func planEntries(view *meta.View, topicID meta.TopicID, partition int32, offset, maxBytes, upTo int64) ([]meta.IndexEntry, error) {
	it, err := view.Seek(topicID, partition, offset)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var entries []meta.IndexEntry
	var planned int64
	for planned < maxBytes && len(entries) < maxEntriesPerRead && it.Next() {
		e := it.Entry()
		if e.BaseOffset >= upTo {
			break
		}
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

// answer is what a read returns, gathered before it is copied: runs of
// whole batches that are still the checked, shared bytes of the cache,
// each with the offset its first batch is patched to. Gathering first
// lets Reader.join copy the answer once, into memory it allocates
// without zeroing, while holding a copy slot.
type answer struct {
	runs [][]byte
	// bases[i] is the base offset of runs[i]'s first batch; the
	// batches after it follow on.
	bases []int64
	// size is the bytes of runs.
	size int
	// markers holds synthesized control batches, which runs refer to.
	markers []byte
	// end is the offset after the last batch added, 0 before one is.
	end int64
}

// next is the offset a consumer reads next after a read from offset.
func (a *answer) next(offset int64) int64 {
	if a.size == 0 {
		return offset
	}
	return a.end
}

func (a *answer) add(run []byte, base int64) {
	a.runs = append(a.runs, run)
	a.bases = append(a.bases, base)
	a.size += len(run)
}

// addEntry adds the batches of one index entry that hold offsets at or
// above offset, until the answer would pass maxBytes (the first batch of
// a read is always taken) or a batch starts at upTo. full reports that
// the read should stop. It checks the entry's bytes against the index: an
// offset counted twice or skipped would hand consumers wrong offsets. An
// entry that fails the check adds nothing.
func (a *answer) addEntry(data []byte, e *meta.IndexEntry, offset, upTo int64, maxBytes int) (full bool, err error) {
	if e.OwnOffsets {
		return a.addOwnOffsets(data, e, offset, upTo, maxBytes)
	}
	base := e.BaseOffset
	// The batches taken are data[from:to], the first at offset first.
	from, to, first, end := 0, 0, int64(-1), int64(0)
	defer func() {
		if err == nil && to > from {
			a.add(data[from:to], first)
			a.end = end
		}
	}()
	var batches int32
	for rest := data; len(rest) > 0; batches++ {
		if base >= upTo {
			// An entry may hold several batches; a transaction's
			// first one can be among them.
			return true, nil
		}
		batch, next, err := recordbatch.Next(rest)
		if err != nil {
			return false, fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, e.ObjectKey, e.Position, err)
		}
		h, err := recordbatch.ParseHeader(batch)
		if err != nil || h.LastOffsetDelta < 0 {
			return false, fmt.Errorf("%w: %s at %d: batch %d: %v (lastOffsetDelta %d)", ErrCorrupt, e.ObjectKey, e.Position, batches, err, h.LastOffsetDelta)
		}
		last := base + int64(h.LastOffsetDelta)
		if last >= offset {
			size := a.size + to - from
			if size > 0 && size+len(batch) > maxBytes {
				return true, nil
			}
			if first < 0 {
				from, first = len(data)-len(rest), base
			}
			to, end = len(data)-len(next), last+1
		}
		base = last + 1
		rest = next
	}
	if base != e.BaseOffset+int64(e.Records) || batches != e.BatchCount {
		return false, fmt.Errorf("%w: %s at %d: %d batches ending at offset %d, index says %d batches ending at %d",
			ErrCorrupt, e.ObjectKey, e.Position, batches, base, e.BatchCount, e.BaseOffset+int64(e.Records))
	}
	return a.size+to-from >= maxBytes, nil
}

// addOwnOffsets is addEntry for an entry whose batches carry their own
// offsets (a compacted topic's, meta.IndexEntry.OwnOffsets): they may
// leave offsets out, so each batch is a run of its own, at the offset
// its bytes hold, which must rise and stay inside the entry.
func (a *answer) addOwnOffsets(data []byte, e *meta.IndexEntry, offset, upTo int64, maxBytes int) (full bool, err error) {
	var runs [][]byte
	var bases []int64
	size := a.size
	defer func() {
		if err == nil {
			for i := range runs {
				a.add(runs[i], bases[i])
			}
		}
	}()
	next, end := e.BaseOffset, e.BaseOffset+int64(e.Records)
	var batches int32
	for rest := data; len(rest) > 0; batches++ {
		batch, more, err := recordbatch.Next(rest)
		if err != nil {
			return false, fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, e.ObjectKey, e.Position, err)
		}
		h, err := recordbatch.ParseHeader(batch)
		if err != nil || h.LastOffsetDelta < 0 || h.BaseOffset < next || h.LastOffset() >= end {
			return false, fmt.Errorf("%w: %s at %d: batch %d at offsets %d..%d, not in order inside %d..%d (%v)",
				ErrCorrupt, e.ObjectKey, e.Position, batches, h.BaseOffset, h.LastOffset(), next, end-1, err)
		}
		if h.BaseOffset >= upTo {
			return true, nil
		}
		if h.LastOffset() >= offset {
			if size > 0 && size+len(batch) > maxBytes {
				return true, nil
			}
			runs, bases = append(runs, batch), append(bases, h.BaseOffset)
			size += len(batch)
		}
		next = h.LastOffset() + 1
		rest = more
	}
	if batches != e.BatchCount {
		return false, fmt.Errorf("%w: %s at %d: %d batches, index says %d", ErrCorrupt, e.ObjectKey, e.Position, batches, e.BatchCount)
	}
	return size >= maxBytes, nil
}

// addMarker adds the control batch of a transaction marker entry, unless
// the answer would pass maxBytes (the first batch of a read is always
// taken). full reports that the read should stop.
func (a *answer) addMarker(e *meta.IndexEntry, maxBytes int) (full bool, err error) {
	if e.Records != 1 || e.BatchCount != 1 || e.Length != recordbatch.ControlBatchSize {
		return false, fmt.Errorf("%w: marker at offset %d: %d records in %d batches of %d bytes",
			ErrCorrupt, e.BaseOffset, e.Records, e.BatchCount, e.Length)
	}
	if a.size > 0 && a.size+recordbatch.ControlBatchSize > maxBytes {
		return true, nil
	}
	// Runs keep referring to the bytes appended before markers grows:
	// growing copies them, and the old array stays as it was.
	at := len(a.markers)
	a.markers = recordbatch.AppendControlBatch(a.markers, e.ProducerID, e.ProducerEpoch, e.Commit, e.BaseOffset, e.FirstTimestamp, 0)
	recordbatch.SetPartitionLeaderEpoch(a.markers[at:], markerLeaderEpoch)
	a.add(a.markers[at:], e.BaseOffset)
	a.end = e.BaseOffset + 1
	return a.size >= maxBytes, nil
}
