package kafka

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/partwatch"
)

// Fetch sessions (KIP-227), as Kafka's FetchSession.scala keeps them. A
// full fetch with epoch 0 opens a session holding each partition's fetch
// offset, PartitionMaxBytes and what the client was last told of it
// (error, high watermark, last stable offset, log start offset). An
// incremental fetch names only the partitions whose offset changed and
// those to forget (ForgottenTopics); its answer carries only the
// partitions with records or with news.
//
// The session also keeps the agent's work proportional to what changed:
// it holds a watch on its partitions (package partwatch) between
// requests, so an incremental fetch reads only the partitions the client
// named, those that changed since, and those that still have something
// to send (records past the fetch offset that did not fit, or an error).
// A consumer caught up on 10,000 partitions costs a few, not 10,000, per
// fetch, and its long poll waits on the session's watch instead of
// registering one per request.
//
// Sessions live in this agent's memory only: a client that moves to
// another agent is answered FETCH_SESSION_ID_NOT_FOUND there and falls
// back to a full fetch, which opens a session on that agent.
//
// The cache is bounded as Kafka's is, by sessions
// (max.incremental.fetch.session.cache.slots, 1000) and, which Kafka
// does not, by the partitions of all sessions together. Eviction,
// simplified from Kafka's: a new session may evict the least recently
// used session idle for fetchSessionEvictionIdle
// (min.incremental.fetch.session.eviction.ms), else the smallest session
// with fewer partitions than itself; a session in use is never evicted.
// When nothing can be evicted the full fetch is answered with SessionID
// 0, and the client goes on without a session (Kafka's answer too).
// Follower sessions, which Kafka privileges, do not exist here.

const (
	// fetchSessionSlots is Kafka's
	// max.incremental.fetch.session.cache.slots default.
	fetchSessionSlots = 1000
	// fetchSessionPartitions bounds the partitions of all sessions
	// together: about 300 bytes each with their watch slot, so 80 MiB.
	fetchSessionPartitions = 1 << 18
	// fetchSessionEvictionIdle is Kafka's
	// min.incremental.fetch.session.eviction.ms default.
	fetchSessionEvictionIdle = 120 * time.Second
)

// fetchSessionCache holds an agent's fetch sessions. Safe for concurrent
// use.
type fetchSessionCache struct {
	now         func() time.Time
	maxSessions int
	maxParts    int
	mu          struct {
		sync.Mutex
		sessions map[int32]*fetchSession
		// parts is the sum of the sessions' size.
		parts int
	}
}

func newFetchSessionCache(now func() time.Time, maxSessions, maxParts int) *fetchSessionCache {
	c := &fetchSessionCache{now: now, maxSessions: maxSessions, maxParts: maxParts}
	c.mu.sessions = make(map[int32]*fetchSession)
	return c
}

// fetchSessionCache returns the agent's fetch sessions; nil (no
// sessions) for handlers run without a server.
func (s *sharedState) fetchSessionCache() *fetchSessionCache {
	if s == nil {
		return nil
	}
	return s.sessions
}

// fetchSession is one client's session.
type fetchSession struct {
	id int32
	// byID: opened by a v13+ fetch, which names topics by id.
	byID bool

	// Under the cache's mu.
	epoch    int32
	inUse    bool
	removed  bool
	lastUsed time.Time
	// size is len(parts) when last released, as counted by the cache.
	size int

	// The rest is owned by the one request using the session (inUse),
	// or by open before the session is in the cache.
	parts map[sessionKey]*sessionPart
	// all lists the partitions, in no order.
	all []*sessionPart
	// dirty lists the partitions to read on the next fetch: every one
	// with its dirty flag set, and perhaps some no longer set or
	// removed, dropped when the next fetch lists them, so a fetch
	// costs what changed, not the session's size.
	dirty []*sessionPart
	// nextSeq orders the partitions: a fetch reads them by seq, and
	// those that returned records take the next ones, moving to the
	// end, so the response's MaxBytes does not always go to the same
	// partitions (as Kafka does).
	nextSeq uint64
	// watch watches watched, the partitions when it was made.
	watch   *partwatch.Watch
	watched []*sessionPart
	// rewatch: the partitions or their topic ids changed since watch
	// was made.
	rewatch bool
	changed []int
}

// sessionKey names a partition as the session's requests do: by topic
// id (v13+) or by name.
type sessionKey struct {
	id        meta.TopicID
	name      string
	partition int32
}

// sessionPart is one partition of a session.
type sessionPart struct {
	key sessionKey
	// topicID is what the watch watches: key.id, or the id key.name
	// resolved to when last read (zero while unknown).
	topicID     meta.TopicID
	offset      int64
	maxBytes    int32
	leaderEpoch int32
	// What the client was last told.
	errorCode          int16
	hwm, lso, logStart int64
	// seq is the partition's place in the session's order.
	seq uint64
	// dirty: read on the next fetch (named by the client, changed
	// since, or with something left to send). Set through mark.
	dirty   bool
	removed bool
}

func sessionKeyOf(byID bool, t *kmsg.FetchRequestTopic, partition int32) sessionKey {
	if byID {
		return sessionKey{id: meta.TopicID(t.TopicID), partition: partition}
	}
	return sessionKey{name: t.Topic, partition: partition}
}

// open opens a session from f, the answer of a full fetch with epoch 0,
// and returns its id, or 0 when the cache has no room (or the agent
// cannot watch partitions).
func (c *fetchSessionCache) open(f *fetchAnswer) int32 {
	if c == nil || len(f.parts) == 0 {
		return 0
	}
	n, err := f.r.Deps.notifier()
	if err != nil {
		return 0
	}
	s := &fetchSession{byID: f.req.Version >= 13, parts: make(map[sessionKey]*sessionPart, len(f.parts))}
	i := 0
	for ti := range f.req.Topics {
		t := &f.req.Topics[ti]
		for pi := range t.Partitions {
			rp, fp := &t.Partitions[pi], &f.parts[i]
			i++
			k := sessionKeyOf(s.byID, t, rp.Partition)
			p := s.parts[k]
			if p == nil {
				p = s.add(k)
			}
			p.offset, p.maxBytes, p.leaderEpoch = rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch
			p.topicID = fp.id
			sp := fp.sp
			p.errorCode, p.hwm, p.lso, p.logStart = sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset
			// The watch starts after the read: what changed in
			// between is only seen by reading every partition once
			// more.
			s.mark(p)
		}
	}
	s.watchAgain(n)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.makeRoomLocked(len(s.parts), now) {
		s.watch.Close()
		return 0
	}
	for {
		s.id = 1 + rand.Int32N(math.MaxInt32-1)
		if _, taken := c.mu.sessions[s.id]; !taken {
			break
		}
	}
	s.epoch = nextSessionEpoch(sessionEpochInitial)
	s.lastUsed, s.size = now, len(s.parts)
	c.mu.sessions[s.id] = s
	c.mu.parts += s.size
	return s.id
}

// nextSessionEpoch is the epoch after e: 1 after the largest, never 0 or
// -1 (Kafka's FetchMetadata.nextEpoch).
func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// makeRoomLocked evicts sessions until one of n partitions fits, and
// reports whether it does.
func (c *fetchSessionCache) makeRoomLocked(n int, now time.Time) bool {
	if n > c.maxParts {
		return false
	}
	for len(c.mu.sessions) >= c.maxSessions || c.mu.parts+n > c.maxParts {
		v := c.victimLocked(n, now)
		if v == nil {
			return false
		}
		c.removeLocked(v)
	}
	return true
}

// victimLocked picks the session a new one of n partitions may evict:
// the least recently used of those idle for fetchSessionEvictionIdle,
// else the smallest (then least recently used) with fewer than n
// partitions; nil when there is none.
func (c *fetchSessionCache) victimLocked(n int, now time.Time) *fetchSession {
	var stale, small *fetchSession
	for _, s := range c.mu.sessions {
		switch {
		case s.inUse:
		case now.Sub(s.lastUsed) >= fetchSessionEvictionIdle:
			if stale == nil || s.lastUsed.Before(stale.lastUsed) {
				stale = s
			}
		case s.size < n:
			if small == nil || s.size < small.size || (s.size == small.size && s.lastUsed.Before(small.lastUsed)) {
				small = s
			}
		}
	}
	if stale != nil {
		return stale
	}
	return small
}

// remove closes session id, if the cache holds it.
func (c *fetchSessionCache) remove(id int32) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.mu.sessions[id]; s != nil {
		c.removeLocked(s)
	}
}

// removeLocked takes s out of the cache; its watch is closed now, or
// when the request using it releases it.
func (c *fetchSessionCache) removeLocked(s *fetchSession) {
	delete(c.mu.sessions, s.id)
	c.mu.parts -= s.size
	s.removed = true
	if !s.inUse {
		s.watch.Close()
	}
}

// acquire returns session id for an incremental fetch at epoch, with
// byID whether it names topics by id, and moves it to the next epoch;
// else Kafka's error for the request.
func (c *fetchSessionCache) acquire(id, epoch int32, byID bool) (*fetchSession, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.mu.sessions[id]
	switch {
	case s == nil:
		return nil, kerr.FetchSessionIDNotFound
	case s.inUse || s.epoch != epoch:
		// In use: another fetch of the same epoch is being
		// answered, and moves the session past this one's.
		return nil, kerr.InvalidFetchSessionEpoch
	case s.byID != byID:
		return nil, kerr.FetchSessionTopicIDError
	}
	s.inUse = true
	s.epoch = nextSessionEpoch(s.epoch)
	s.lastUsed = c.now()
	return s, nil
}

// release ends the use of s by a request.
func (c *fetchSessionCache) release(s *fetchSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.inUse = false
	s.lastUsed = c.now()
	if s.removed {
		s.watch.Close()
		return
	}
	c.mu.parts += len(s.parts) - s.size
	s.size = len(s.parts)
}

// update applies an incremental fetch's partitions and ForgottenTopics.
func (s *fetchSession) update(req *kmsg.FetchRequest) {
	for ti := range req.Topics {
		t := &req.Topics[ti]
		for pi := range t.Partitions {
			rp := &t.Partitions[pi]
			k := sessionKeyOf(s.byID, t, rp.Partition)
			p := s.parts[k]
			if p == nil {
				p = s.add(k)
				p.topicID, p.hwm, p.lso, p.logStart = k.id, -1, -1, -1
				s.rewatch = true
			}
			p.offset, p.maxBytes, p.leaderEpoch = rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch
			s.mark(p)
		}
	}
	forgot := false
	for ti := range req.ForgottenTopics {
		ft := &req.ForgottenTopics[ti]
		t := kmsg.FetchRequestTopic{Topic: ft.Topic, TopicID: ft.TopicID}
		for _, partition := range ft.Partitions {
			k := sessionKeyOf(s.byID, &t, partition)
			if p := s.parts[k]; p != nil {
				delete(s.parts, k)
				p.removed = true
				forgot = true
			}
		}
	}
	if forgot {
		s.all = deleteRemoved(s.all)
		s.rewatch = true
	}
}

// add adds partition k, last in the order.
func (s *fetchSession) add(k sessionKey) *sessionPart {
	p := &sessionPart{key: k, seq: s.nextSeq}
	s.nextSeq++
	s.parts[k] = p
	s.all = append(s.all, p)
	return p
}

// mark marks p to be read on the next fetch.
func (s *fetchSession) mark(p *sessionPart) {
	if !p.dirty {
		p.dirty = true
		s.dirty = append(s.dirty, p)
	}
}

func deleteRemoved(parts []*sessionPart) []*sessionPart {
	out := parts[:0]
	for _, p := range parts {
		if !p.removed {
			out = append(out, p)
		}
	}
	clear(parts[len(out):])
	return out
}

// watchAgain replaces the session's watch by one on its partitions now.
// The new watch is made before the old one is closed, and what the old
// one saw is marked, so no change falls between them.
func (s *fetchSession) watchAgain(n Notifier) {
	refs := make([]meta.PartitionRef, len(s.all))
	for i, p := range s.all {
		refs[i] = meta.PartitionRef{TopicID: p.topicID, Partition: p.key.partition}
	}
	old, oldParts := s.watch, s.watched
	s.watch, s.watched = n.Watch(refs), slices.Clone(s.all)
	s.rewatch = false
	if old != nil {
		s.markChanged(old, oldParts)
		old.Close()
	}
}

// markChanged marks dirty the partitions w saw change (watched is its
// list), and reports whether there were any.
func (s *fetchSession) markChanged(w *partwatch.Watch, watched []*sessionPart) bool {
	changed, all := w.Take(s.changed[:0])
	s.changed = changed
	if all {
		for _, p := range watched {
			s.mark(p)
		}
		return len(watched) > 0
	}
	for _, k := range changed {
		s.mark(watched[k])
	}
	return len(changed) > 0
}

// request returns the fetch of the session's dirty partitions, in
// session order, with req's other fields; parts gets the session's
// partition of each.
func (s *fetchSession) request(req *kmsg.FetchRequest, parts []*sessionPart) (*kmsg.FetchRequest, []*sessionPart) {
	sub := *req
	sub.Topics, sub.ForgottenTopics = nil, nil
	// Drop what is no longer dirty, then the duplicates (a partition
	// cleared and marked again).
	s.dirty = slices.DeleteFunc(s.dirty, func(p *sessionPart) bool { return !p.dirty || p.removed })
	slices.SortFunc(s.dirty, func(a, b *sessionPart) int { return cmp.Compare(a.seq, b.seq) })
	s.dirty = slices.Compact(s.dirty)
	parts = parts[:0]
	var last sessionKey
	for _, p := range s.dirty {
		if len(sub.Topics) == 0 || p.key.id != last.id || p.key.name != last.name {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.key.name, p.key.id
			sub.Topics = append(sub.Topics, t)
			last = p.key
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p.key.partition, p.offset, p.maxBytes, p.leaderEpoch
		t := &sub.Topics[len(sub.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
		parts = append(parts, p)
	}
	return &sub, parts
}

// handleIncrementalFetch answers a fetch of session req.SessionID at
// req.SessionEpoch.
func handleIncrementalFetch(ctx context.Context, r *Request, db MetaDB, rd Fetcher, c *fetchSessionCache, req *kmsg.FetchRequest, resp *kmsg.FetchResponse) (kmsg.Response, error) {
	s, e := c.acquire(req.SessionID, req.SessionEpoch, req.Version >= 13)
	if e != nil {
		resp.ErrorCode = e.Code
		return resp, nil
	}
	defer c.release(s)
	n, err := r.Deps.notifier()
	if err != nil {
		return nil, err
	}
	s.update(req)
	if s.rewatch {
		s.watchAgain(n)
	}
	resp.SessionID = s.id

	maxWait := time.NewTimer(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	defer maxWait.Stop()
	wctx, cancel := r.untilDrain(ctx)
	defer cancel()
	var (
		f     *fetchAnswer
		parts []*sessionPart
		total int64
		waits WaitStats
		// waited: the fetch long-polled; waits counts its
		// wake-ups and the partitions each read again.
		waited bool
	)
	for {
		s.markChanged(s.watch, s.watched)
		var sub *kmsg.FetchRequest
		sub, parts = s.request(req, parts)
		if waited {
			waits.Wakeups++
			waits.PartitionsRechecked += len(parts)
		}
		f = &fetchAnswer{r: r, req: sub, rd: rd, hold: r.Deps.holdResponse()}
		var failed, short bool
		total, failed, short, err = f.planAndRead(ctx, db, resp, maxWait.C)
		if err != nil {
			f.hold.release()
			return nil, err
		}
		if req.MaxWaitMillis <= 0 || total >= int64(req.MinBytes) || failed || short {
			break
		}
		s.settle(f, parts)
		waited = true
		if h := r.Deps.longPollWaiting; h != nil {
			h()
		}
		waitStart := time.Now()
		woke := waitSession(wctx, s, maxWait.C)
		r.waitedSince(waitStart)
		if ctx.Err() != nil {
			f.hold.release()
			return nil, context.Cause(ctx)
		}
		if !woke {
			break
		}
		f.hold.release()
	}
	if waited {
		r.reportWaits(waits)
	}
	total = f.applyQuota(total)
	s.answered(f, parts, resp)
	if s.rewatch {
		s.watchAgain(n)
	}
	if err := f.pace(ctx, total); err != nil {
		f.hold.release()
		return nil, err
	}
	f.reportFetched()
	return f.wrapHeld(resp), nil
}

// waitSession waits until one of the session's partitions changes (true),
// or maxWait passes or ctx ends (false).
func waitSession(ctx context.Context, s *fetchSession, maxWait <-chan time.Time) bool {
	select {
	case <-s.watch.Ready():
		return true
	case <-maxWait:
	case <-ctx.Done():
	}
	return false
}

// answered records in the session what f's answer tells the client, and
// cuts resp down to the partitions it must carry: those with records, an
// error, or a high watermark, last stable offset or log start offset
// the client was not told yet (Kafka's
// CachedPartition.maybeUpdateResponseData). parts is the session's
// partition of each of f.parts. Partitions that returned records move to
// the end of the session's order.
func (s *fetchSession) answered(f *fetchAnswer, parts []*sessionPart, resp *kmsg.FetchResponse) {
	committed := f.req.IsolationLevel == isolationReadCommitted
	keep := make([]bool, len(f.parts))
	for i := range f.parts {
		fp, p := &f.parts[i], parts[i]
		sp := fp.sp
		keep[i] = len(sp.RecordBatches) > 0 || p.news(sp)
		p.errorCode, p.hwm, p.lso, p.logStart = sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset
		// Something left to send (the client's offset is not at
		// the end, or the partition failed) is read again next time
		// whether or not it changes. (p is in s.dirty: it was
		// read.)
		p.dirty = p.pending(sp, committed)
		if fp.id != p.topicID && fp.id != (meta.TopicID{}) {
			// A name that now resolves to another topic: watch
			// that one, and read it again once watched.
			p.topicID = fp.id
			s.rewatch = true
			p.dirty = true
		}
		if len(sp.RecordBatches) > 0 {
			// Served: to the end of the order (parts is in
			// order, so the served keep theirs).
			p.seq = s.nextSeq
			s.nextSeq++
		}
	}
	i := 0
	topics := resp.Topics[:0]
	for _, t := range resp.Topics {
		ps := t.Partitions[:0]
		for _, p := range t.Partitions {
			if keep[i] {
				ps = append(ps, p)
			}
			i++
		}
		if len(ps) > 0 {
			t.Partitions = ps
			topics = append(topics, t)
		}
	}
	clear(resp.Topics[len(topics):])
	resp.Topics = topics
}

// news reports whether sp tells the client what it was not told yet:
// an error, or another high watermark, last stable offset or log start
// offset.
func (p *sessionPart) news(sp *kmsg.FetchResponseTopicPartition) bool {
	return sp.ErrorCode != 0 || sp.ErrorCode != p.errorCode || sp.HighWatermark != p.hwm ||
		sp.LastStableOffset != p.lso || sp.LogStartOffset != p.logStart
}

// pending reports whether a partition answered sp must be read again on
// the next fetch even if it does not change: it failed, or the client's
// offset is below its end, so there are records the answer did not
// carry, or that the client has not moved past.
func (p *sessionPart) pending(sp *kmsg.FetchResponseTopicPartition, committed bool) bool {
	return sp.ErrorCode != 0 || p.offset < bound(sp, committed)
}

// settle, before a long poll, stops reading again the partitions of f
// with nothing to send and nothing new: only a change marks them again.
func (s *fetchSession) settle(f *fetchAnswer, parts []*sessionPart) {
	committed := f.req.IsolationLevel == isolationReadCommitted
	for i := range f.parts {
		fp, p := &f.parts[i], parts[i]
		if fp.id == p.topicID && len(fp.sp.RecordBatches) == 0 && !p.news(fp.sp) && !p.pending(fp.sp, committed) {
			p.dirty = false
		}
	}
}
