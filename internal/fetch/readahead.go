package fetch

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
)

// Read-ahead. A consumer catching up on old data from an agent that did
// not write it finds nothing in the read cache, and a level-0 object
// holds only a few tens of KiB of any one partition: read one range at a
// time, each fetch of a MiB waits for dozens of GETs in turn, and the
// consumer is limited by the store's first-byte latency, not its
// bandwidth. So a read that misses the cache becomes a stream: the
// ranges it needs and those of the next ReadAhead.Bytes of its partition
// are read with up to ReadAhead.MaxGets GETs at once, ranges of one
// object that lie close together (maxCoalesceGapBytes) read by one GET
// of at most maxSpanBytes. The reads themselves then find their bytes
// cached, or join the GET under way; the check on read is unchanged,
// since read-ahead goes through the cache, which keeps only bytes that
// passed it. A read that continues where the stream's last read ended
// moves the window on, in steps of half of it so that the window's edge
// does not cut every object's span; a read that hits the cache (a tail
// reader, served from the objects its agent wrote) starts no stream. An
// entry larger than the in-flight bound is left to the read that needs
// it.
//
// Memory: the bytes read ahead and not yet cached are counted against
// the cache's own bound (Cache.readAhead), and no more than a quarter of
// it is in flight at once (inFlight), so the read cache's share of the
// memory budget bounds the cache and its read-ahead together. The
// windows of the streams whose consumers are connected share half the
// cache, so that what is read ahead is still cached when it is read. A stream
// ends when its consumer's connection does (the read's context): no new
// GET starts for it; the ones under way finish into the cache, which
// may still serve another reader. Bytes read ahead that the cache
// evicts before the consumer gets to them (many streams in a small
// cache) are read again by the read that needs them: a stream wastes at
// most its window.

// ReadAhead configures read-ahead; the zero value turns it off.
type ReadAhead struct {
	// Bytes is how far ahead of a sequential reader's position its
	// partition is read.
	Bytes int64
	// MaxGets bounds the read-ahead GETs in flight at once, over all
	// partitions.
	MaxGets int
}

const (
	// maxSpanBytes bounds one coalesced GET: larger ranges are read by
	// several GETs at once, and one GET's bytes must fit the in-flight
	// bound.
	maxSpanBytes = 8 << 20
	// minReadAheadBytes is the smallest in-flight bound read-ahead runs
	// with: below it a cache is too small to keep what it reads.
	minReadAheadBytes = 1 << 20
	// rampReads is a new stream's first window, in reads of its size,
	// and minWindowBytes its least: a few objects' worth of a level-0
	// object's share of a partition.
	rampReads      = 4
	minWindowBytes = 256 << 10
	// maxStreams bounds the streams remembered: the oldest is dropped
	// (its pending GETs canceled) when a new one would pass it.
	maxStreams = 1024
)

// readAhead is a Reader's read-ahead state. Safe for concurrent use.
type readAhead struct {
	cfg ReadAhead
	// spanBytes bounds one GET (maxSpanBytes, or less for a small
	// cache).
	spanBytes int64
	gets      *semaphore.Weighted
	// inFlight bounds the bytes of read-ahead GETs not yet ended, at
	// budget.
	inFlight *semaphore.Weighted
	budget   int64
	// shareBytes is what the live streams' windows may hold together,
	// half the cache; live counts the streams whose connection lasts.
	shareBytes int64
	live       atomic.Int64

	mu struct {
		sync.Mutex
		// streams are by the offset their next read is expected at;
		// order holds *stream, oldest first.
		streams map[streamKey]*list.Element
		order   list.List
	}
}

type streamKey struct {
	topic     meta.TopicID
	partition int32
	next      int64
}

// stream is one sequential reader of a partition.
type stream struct {
	key streamKey
	// planned is the offset after the entries the stream's last plan
	// covered: read, or handed to run. window is the bytes the next
	// plan may look ahead, before the shared bound (readAhead.window).
	planned int64
	window  int64
	// spans are the GETs of the last plan, by object key: a read that
	// gets to an entry before run has started its GET makes that GET
	// itself (spanOf), rather than one of its own that run's would
	// then read again.
	spans map[string][]span
	// cancel stops the GETs of the stream's last plan that have not
	// started.
	cancel context.CancelFunc
	// conn is the context of the connection reading the stream (join);
	// leave stops counting the stream live, at most once.
	conn  context.Context
	leave func()
}

// newReadAhead returns the read-ahead of a reader over cache, nil if cfg
// turns it off or the cache is too small for it.
func newReadAhead(cfg ReadAhead, cache *Cache) *readAhead {
	budget := cache.maxBytes / 4
	if cfg.Bytes <= 0 || cfg.MaxGets <= 0 || budget < minReadAheadBytes {
		return nil
	}
	ra := &readAhead{
		cfg:        cfg,
		spanBytes:  min(maxSpanBytes, budget),
		gets:       semaphore.NewWeighted(int64(cfg.MaxGets)),
		inFlight:   semaphore.NewWeighted(budget),
		budget:     budget,
		shareBytes: cache.maxBytes / 2,
	}
	ra.mu.streams = make(map[streamKey]*list.Element)
	return ra
}

// WithReadAhead returns a Reader like r (same store, cache, damage log
// and copy slots) that reads ahead as cfg says. It has read-ahead state
// of its own.
func (r *Reader) WithReadAhead(cfg ReadAhead) *Reader {
	c := *r
	c.ahead = newReadAhead(cfg, r.cache)
	return &c
}

// maxSpan is the most bytes one GET of r reads from one object.
func (r *Reader) maxSpan() int64 {
	if r.ahead != nil {
		return r.ahead.spanBytes
	}
	return maxSpanBytes
}

// startReadAhead is called by a read of entries (the index entries from
// offset on it planned) before it reads them. If the read continues a
// stream, or misses the cache, it starts the GETs of the read's ranges
// and of the ReadAhead.Bytes after them, and returns the stream, which
// the read hands to endReadAhead; otherwise it returns nil.
func (r *Reader) startReadAhead(ctx context.Context, view *meta.View, topicID meta.TopicID, partition int32, offset, maxBytes int64, entries []meta.IndexEntry) *stream {
	ra := r.ahead
	if ra == nil {
		return nil
	}
	s := ra.take(streamKey{topicID, partition, offset})
	if s == nil {
		i := firstData(entries)
		if i < 0 || r.cached(&entries[i]) {
			return nil
		}
		s = &stream{}
	}
	ra.join(s, ctx)
	// A new stream starts with a window of a few reads and doubles it
	// with every plan, as a file system's read-ahead does: streams that
	// start together do not each take a whole window of the cache
	// before they have shown they go on.
	window := min(ra.window(), max(s.window, rampReads*maxBytes, minWindowBytes))
	ahead, err := planEntries(view, topicID, partition, offset, maxBytes+window, NoBound)
	if err != nil || len(ahead) == 0 {
		// Read-ahead is a hint: the read plans, and fails, alone.
		return s
	}
	// The window moves on in steps of half of it, not by each read's
	// few entries: a step of one entry at a time would read a level-0
	// object's entries of the partition one GET each, since the
	// window's edge cuts the object's span.
	if last := entries[len(entries)-1]; s.planned > last.BaseOffset && s.planned > offset {
		var fresh int64
		for i := range ahead {
			if ahead[i].BaseOffset >= s.planned {
				fresh += ahead[i].Length
			}
		}
		if fresh < window/2 {
			return s
		}
	}
	spans := coalesce(ahead, maxCoalesceGapBytes, ra.spanBytes, r.cached)
	end := &ahead[len(ahead)-1]
	s.planned = end.BaseOffset + int64(end.Records)
	s.window = 2 * window
	s.spans = make(map[string][]span, len(spans))
	for _, sp := range spans {
		s.spans[sp.key] = append(s.spans[sp.key], sp)
	}
	if len(spans) == 0 {
		return s
	}
	if s.cancel != nil {
		// The GETs of the last plan still waiting are in this one.
		s.cancel()
	}
	// The read waits for its first range now: it goes ahead of the
	// queue if there is room in flight, else the read makes the GET.
	if first := spans[0]; ra.inFlight.TryAcquire(first.length()) {
		r.cache.readAhead(ctx, r.store, first.key, first.start, first.length(), checkBatches, func() { ra.inFlight.Release(first.length()) })
	}
	var sctx context.Context
	sctx, s.cancel = context.WithCancel(ctx)
	go ra.run(sctx, r.cache, r.store, spans[1:])
	return s
}

// endReadAhead files s (if not nil) under the offset its next read is
// expected at.
func (r *Reader) endReadAhead(s *stream, topicID meta.TopicID, partition int32, next int64) {
	if s != nil {
		r.ahead.put(s, streamKey{topicID, partition, next})
	}
}

// run starts the GETs of spans in order, as GET slots and in-flight
// bytes allow, until ctx ends.
func (ra *readAhead) run(ctx context.Context, cache *Cache, store objstore.Store, spans []span) {
	for _, sp := range spans {
		if sp.length() > ra.budget || cache.Covered(sp.key, sp.start, sp.length()) {
			// An entry larger than what may be in flight is left
			// to the read that needs it.
			continue
		}
		if ra.gets.Acquire(ctx, 1) != nil {
			return
		}
		n := sp.length()
		if ra.inFlight.Acquire(ctx, n) != nil {
			ra.gets.Release(1)
			return
		}
		cache.readAhead(ctx, store, sp.key, sp.start, n, checkBatches, func() {
			ra.inFlight.Release(n)
			ra.gets.Release(1)
		})
	}
}

// take removes and returns the stream expecting a read at k, or nil.
func (ra *readAhead) take(k streamKey) *stream {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	el, ok := ra.mu.streams[k]
	if !ok {
		return nil
	}
	delete(ra.mu.streams, k)
	return ra.mu.order.Remove(el).(*stream)
}

// put files s under k, dropping the oldest stream if there are too many.
func (ra *readAhead) put(s *stream, k streamKey) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if old, ok := ra.mu.streams[k]; ok {
		// Two readers at one offset: they share one stream.
		ra.dropLocked(old)
	}
	s.key = k
	ra.mu.streams[k] = ra.mu.order.PushBack(s)
	for ra.mu.order.Len() > maxStreams {
		ra.dropLocked(ra.mu.order.Front())
	}
}

func (ra *readAhead) dropLocked(el *list.Element) {
	s := ra.mu.order.Remove(el).(*stream)
	delete(ra.mu.streams, s.key)
	if s.cancel != nil {
		s.cancel()
	}
	if s.leave != nil {
		s.leave()
	}
}

// join counts s among the live streams while conn, the context of the
// connection reading it, lasts.
func (ra *readAhead) join(s *stream, conn context.Context) {
	if s.conn == conn {
		return
	}
	if s.leave != nil {
		s.leave()
	}
	s.conn = conn
	ra.live.Add(1)
	var once sync.Once
	left := func() { once.Do(func() { ra.live.Add(-1) }) }
	stop := context.AfterFunc(conn, left)
	s.leave = func() {
		stop()
		left()
	}
}

// window is how far each stream reads ahead: ReadAhead.Bytes, or less
// when the live streams' windows together would pass half the cache,
// which would evict bytes read ahead before their reads come.
func (ra *readAhead) window() int64 {
	return min(ra.cfg.Bytes, ra.shareBytes/max(1, ra.live.Load()))
}

// firstData is the index of the first entry with object bytes, or -1.
func firstData(entries []meta.IndexEntry) int {
	for i := range entries {
		if !entries[i].Control {
			return i
		}
	}
	return -1
}

// span is bytes [start, end) of one object, read by one GET.
type span struct {
	key        string
	start, end int64
}

func (s span) length() int64 { return s.end - s.start }

// coalesce returns the GETs that read the bytes of entries, in order:
// entries of one object that follow each other at ascending positions,
// each at most maxGap bytes after the one before, share one span of at
// most maxSpan bytes (an entry larger than that is a span alone).
// Markers have no bytes and end a span, as they end a read's range.
// Entries that have (skip, if not nil) are in no span, and end one:
// their bytes are cached or being read already.
func coalesce(entries []meta.IndexEntry, maxGap, maxSpan int64, have func(*meta.IndexEntry) bool) []span {
	var spans []span
	for i := 0; i < len(entries); {
		if e := &entries[i]; e.Control || have != nil && have(e) {
			i++
			continue
		}
		n, start, end := nextSpan(entries[i:], maxGap, maxSpan, have)
		spans = append(spans, span{entries[i].ObjectKey, start, end})
		i += n
	}
	return spans
}

// nextSpan groups the leading entries that coalesce puts in one span:
// n of them, spanning [start, end). entries[0] is not a marker.
func nextSpan(entries []meta.IndexEntry, maxGap, maxSpan int64, have func(*meta.IndexEntry) bool) (n int, start, end int64) {
	first := &entries[0]
	start, end = first.Position, first.Position+first.Length
	n = 1
	for i := 1; i < len(entries); i++ {
		e := &entries[i]
		if e.Control || e.ObjectKey != first.ObjectKey || e.Position < end || e.Position-end > maxGap || e.Position+e.Length-start > maxSpan {
			break
		}
		if have != nil && have(e) {
			break
		}
		end = e.Position + e.Length
		n++
	}
	return n, start, end
}

// spanOf returns the span of s's last plan that holds e's bytes.
func (s *stream) spanOf(e *meta.IndexEntry) (span, bool) {
	if s == nil {
		return span{}, false
	}
	for _, sp := range s.spans[e.ObjectKey] {
		if sp.start <= e.Position && e.Position+e.Length <= sp.end {
			return sp, true
		}
	}
	return span{}, false
}

// entriesIn is how many of the leading entries sp holds; entries[0] is
// one.
func entriesIn(entries []meta.IndexEntry, sp span) int {
	n := 1
	for n < len(entries) {
		e := &entries[n]
		if e.Control || e.ObjectKey != sp.key || e.Position < sp.start || e.Position+e.Length > sp.end {
			break
		}
		n++
	}
	return n
}

// cached reports whether e's bytes are cached or being read.
func (r *Reader) cached(e *meta.IndexEntry) bool {
	return r.cache.Covered(e.ObjectKey, e.Position, e.Length)
}
