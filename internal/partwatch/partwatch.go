// Package partwatch wakes long polls on the partitions an apply changed.
//
// A long-polling Fetch registers a Watch on the partitions it reads and
// waits on it. After each applied batch the replica hands the batch's
// meta.Changes to Notify, which signals only the watches holding one of
// those partitions, and records in each which of its partitions changed:
// a woken fetch reads those again and no others, so the work an apply
// causes is proportional to the partitions it changed, not to the
// partitions every waiting fetch reads. What cannot be placed (a change
// to everything, a halt, Close) wakes every watch with all of its
// partitions changed (NotifyAll).
//
// A fetch session (KIP-227, internal/kafka/fetch_session.go) keeps its
// Watch between requests, not only while a request waits: the marks
// collected meanwhile tell the next incremental fetch which partitions
// it must read again.
//
// # Bounds
//
// The registry holds one slot per partition of each live watch, and each
// watch at most one pending mark per partition (a bitset dedupes them),
// so it is bounded by what its watchers hold: a Fetch registers the
// partitions of its request, which it holds in memory anyway (its
// response skeleton is charged to the response budget per partition),
// and the number of Fetches waiting is bounded by connections times
// requests in flight per connection. A Watch must be closed; Close
// gives its slots back.
//
// # Ordering
//
// Register before reading: a change committed after Watch returns is
// notified to it, so a waiter that registers, reads the state, and then
// waits misses nothing. The replica commits a batch before it notifies.
package partwatch

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/strandkafka/strand/internal/meta"
)

// shards spreads the registry's topics over locks, so that the apply
// goroutine notifying one topic's partitions does not wait for a fetch
// registering another's.
const shards = 16

// maxIdleTopicsPerShard bounds the topics kept with no watch (see
// topicSlots), whatever races between a deletion and a registration
// leave behind.
const maxIdleTopicsPerShard = 256

// Registry holds the live watches. The zero value is not usable; call
// New. Safe for concurrent use.
type Registry struct {
	shards [shards]shard

	mu struct {
		sync.Mutex
		// watches is every live watch, for NotifyAll and topic-wide
		// changes.
		watches map[*Watch]struct{}
	}
	// busy, if set, is told when the first watch registers and when the
	// last one closes (OnBusy).
	busy func(busy bool)
}

type shard struct {
	mu     sync.Mutex
	topics map[meta.TopicID]*topicSlots
	// idle counts the topics with no slot.
	idle int
}

// topicSlots holds the slots of one topic's partitions, indexed by
// partition: partitions are dense, so a registration of a wide topic is
// an index per partition, not a map insert. It stays when no watch holds
// it, since a consumer's next fetch registers the same partitions, until
// a change to the whole topic (a deletion) is notified, or while fewer
// than maxIdleTopicsPerShard are idle.
type topicSlots struct {
	parts []slots
	// n counts the slots in parts.
	n int
	// gone: a change to the whole topic was notified; the last Close
	// drops it.
	gone bool
}

// slots is one partition's slots: the first inline, since a partition is
// mostly watched by one fetch at a time.
type slots struct {
	one  slot
	more []slot
}

// slot is one partition of one watch: the watch and the partition's
// index in its list.
type slot struct {
	w *Watch
	i int32
}

// New returns an empty registry.
func New() *Registry {
	r := &Registry{}
	for i := range r.shards {
		r.shards[i].topics = make(map[meta.TopicID]*topicSlots)
	}
	r.mu.watches = make(map[*Watch]struct{})
	return r
}

// OnBusy sets f to be called with true when the registry goes from no
// live watch to one, and with false when the last live watch closes, in
// that order and never twice in a row with one value: the replica makes
// a log that polls poll quickly while some fetch waits. f is called with
// the registry's lock held and must not block or call back. OnBusy must
// be called before the first Watch.
func (r *Registry) OnBusy(f func(busy bool)) { r.busy = f }

func (r *Registry) shardOf(id meta.TopicID) *shard {
	// Topic ids are random.
	return &r.shards[binary.LittleEndian.Uint32(id[:4])%shards]
}

// Watch is one waiter's interest in a list of partitions. Its methods
// may be called from any goroutine, but one goroutine is meant to wait
// on it.
type Watch struct {
	reg    *Registry
	parts  []meta.PartitionRef
	topics []meta.TopicID
	// ready holds a signal once something changed since the last Take.
	ready chan struct{}

	mu struct {
		sync.Mutex
		// marked has a bit per partition in changed.
		marked  []uint64
		changed []int32
		// all: everything may have changed since the last Take.
		all    bool
		closed bool
	}
}

// Watch registers a watch on parts (duplicates allowed), which it keeps
// and the caller must not change until Close. It is notified of every
// change committed after it returns.
func (r *Registry) Watch(parts []meta.PartitionRef) *Watch {
	w := &Watch{reg: r, parts: parts, ready: make(chan struct{}, 1)}
	w.mu.marked = make([]uint64, (len(parts)+63)/64)
	seen := make(map[meta.TopicID]struct{})
	for _, p := range parts {
		if _, ok := seen[p.TopicID]; !ok {
			seen[p.TopicID] = struct{}{}
			w.topics = append(w.topics, p.TopicID)
		}
	}
	r.mu.Lock()
	r.mu.watches[w] = struct{}{}
	if r.busy != nil && len(r.mu.watches) == 1 {
		r.busy(true)
	}
	r.mu.Unlock()
	w.eachTopicRun(func(s *shard, id meta.TopicID, from, to int) {
		ts := s.topics[id]
		switch {
		case ts == nil:
			ts = &topicSlots{}
			s.topics[id] = ts
		case ts.n == 0:
			s.idle--
		}
		for i := from; i < to; i++ {
			ts.add(w.parts[i].Partition, slot{w, int32(i)})
		}
	})
	return w
}

// eachTopicRun calls fn for each run of w's partitions of one topic,
// [from, to), with the topic's shard locked: a Fetch lists partitions
// by topic, so a wide topic is locked once.
func (w *Watch) eachTopicRun(fn func(s *shard, id meta.TopicID, from, to int)) {
	for from := 0; from < len(w.parts); {
		id := w.parts[from].TopicID
		to := from + 1
		for to < len(w.parts) && w.parts[to].TopicID == id {
			to++
		}
		s := w.reg.shardOf(id)
		s.mu.Lock()
		fn(s, id, from, to)
		s.mu.Unlock()
		from = to
	}
}

func (ts *topicSlots) add(p int32, sl slot) {
	if p < 0 {
		return // no such partition: nothing changes it
	}
	if int(p) >= len(ts.parts) {
		ts.parts = append(ts.parts, make([]slots, int(p)+1-len(ts.parts))...)
	}
	ps := &ts.parts[p]
	if ps.one.w == nil {
		ps.one = sl
	} else {
		ps.more = append(ps.more, sl)
	}
	ts.n++
}

func (ts *topicSlots) remove(p int32, sl slot) {
	if p < 0 || int(p) >= len(ts.parts) {
		return
	}
	ps := &ts.parts[p]
	switch {
	case ps.one == sl:
		ps.one = slot{}
		if n := len(ps.more); n > 0 {
			ps.one, ps.more[n-1] = ps.more[n-1], slot{}
			ps.more = ps.more[:n-1]
		}
	default:
		i := slices.Index(ps.more, sl)
		if i < 0 {
			return
		}
		n := len(ps.more)
		ps.more[i], ps.more[n-1] = ps.more[n-1], slot{}
		ps.more = ps.more[:n-1]
	}
	if len(ps.more) == 0 {
		ps.more = nil
	}
	ts.n--
}

// notify marks partition p of every watch holding it.
func (ts *topicSlots) notify(p int32) {
	if p < 0 || int(p) >= len(ts.parts) {
		return
	}
	ps := &ts.parts[p]
	if ps.one.w != nil {
		ps.one.w.mark(ps.one.i)
	}
	for _, sl := range ps.more {
		sl.w.mark(sl.i)
	}
}

// Len is the number of slots the registry holds: the partitions of its
// live watches.
func (r *Registry) Len() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for _, ts := range s.topics {
			n += ts.n
		}
		s.mu.Unlock()
	}
	return n
}

// Notify wakes the watches on what c names, marking which of their
// partitions changed.
func (r *Registry) Notify(c meta.Changes) {
	if c.All {
		r.NotifyAll()
		return
	}
	for _, id := range c.Topics {
		s := r.shardOf(id)
		s.mu.Lock()
		if ts := s.topics[id]; ts != nil {
			if ts.n == 0 {
				delete(s.topics, id)
				s.idle--
			} else {
				ts.gone = true
			}
		}
		s.mu.Unlock()
	}
	if len(c.Topics) > 0 {
		r.mu.Lock()
		for w := range r.mu.watches {
			for _, id := range c.Topics {
				if w.watchesTopic(id) {
					w.markAll()
					break
				}
			}
		}
		r.mu.Unlock()
	}
	// Changes lists partitions in key order, so by topic.
	for from := 0; from < len(c.Partitions); {
		id := c.Partitions[from].TopicID
		to := from + 1
		for to < len(c.Partitions) && c.Partitions[to].TopicID == id {
			to++
		}
		s := r.shardOf(id)
		s.mu.Lock()
		if ts := s.topics[id]; ts != nil {
			for _, p := range c.Partitions[from:to] {
				ts.notify(p.Partition)
			}
		}
		s.mu.Unlock()
		from = to
	}
}

// NotifyAll wakes every watch with all its partitions marked: for what
// cannot be placed in partitions (a halt, Close, a copy that jumped).
func (r *Registry) NotifyAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.mu.watches {
		w.markAll()
	}
}

func (w *Watch) watchesTopic(id meta.TopicID) bool {
	for _, t := range w.topics {
		if t == id {
			return true
		}
	}
	return false
}

func (w *Watch) mark(i int32) {
	w.mu.Lock()
	word, bit := i/64, uint64(1)<<(i%64)
	fresh := !w.mu.all && w.mu.marked[word]&bit == 0
	if fresh {
		w.mu.marked[word] |= bit
		w.mu.changed = append(w.mu.changed, i)
	}
	w.mu.Unlock()
	if fresh {
		w.signal()
	}
}

func (w *Watch) markAll() {
	w.mu.Lock()
	w.mu.all = true
	w.mu.Unlock()
	w.signal()
}

func (w *Watch) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// Ready receives once something changed since the last Take. A receive
// may find nothing to Take: a change that arrived between a receive and
// its Take leaves a signal behind.
func (w *Watch) Ready() <-chan struct{} { return w.ready }

// Take appends to dst the indexes (in the list given to Watch) of the
// partitions that changed since the last Take, and clears them; all is
// true instead when every partition may have changed.
func (w *Watch) Take(dst []int) (_ []int, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.all {
		w.mu.all = false
		clear(w.mu.marked)
		w.mu.changed = w.mu.changed[:0]
		return dst, true
	}
	for _, i := range w.mu.changed {
		dst = append(dst, int(i))
		w.mu.marked[i/64] &^= 1 << (i % 64)
	}
	w.mu.changed = w.mu.changed[:0]
	return dst, false
}

// Close unregisters the watch. It may be called more than once.
func (w *Watch) Close() {
	w.mu.Lock()
	closed := w.mu.closed
	w.mu.closed = true
	w.mu.Unlock()
	if closed {
		return
	}
	w.eachTopicRun(func(s *shard, id meta.TopicID, from, to int) {
		ts := s.topics[id]
		if ts == nil {
			return
		}
		for i := from; i < to; i++ {
			ts.remove(w.parts[i].Partition, slot{w, int32(i)})
		}
		if ts.n > 0 {
			return
		}
		if ts.gone || s.idle >= maxIdleTopicsPerShard {
			delete(s.topics, id)
		} else {
			s.idle++
		}
	})
	w.reg.mu.Lock()
	delete(w.reg.mu.watches, w)
	if w.reg.busy != nil && len(w.reg.mu.watches) == 0 {
		w.reg.busy(false)
	}
	w.reg.mu.Unlock()
}
