package meta

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// What an applied batch changed, as Fetch sees it: the Applier notes
// every key it writes, deletes or deletes a range of, and names the
// partitions and topics those keys belong to. Long polls wait on these
// (package partwatch) instead of rereading every partition after every
// batch.
//
// The note is taken from the keys, not from the commands, so a new
// command is covered without being listed anywhere: a partition's Fetch
// answer is read from its state (high watermark, log start offset), its
// index, its open transactions (the last stable offset) and its aborted
// transactions, and each of those is a key of that partition. A range
// this cannot place in one partition or topic marks everything changed.

// PartitionRef names one partition of a topic.
type PartitionRef struct {
	TopicID   TopicID
	Partition int32
}

// Changes is what one applied batch may have changed of the partitions
// Fetch reads. It can name more than changed, never less.
type Changes struct {
	// All: the batch changed something not placed in a partition or
	// topic; every partition may have changed.
	All bool
	// Topics whose every partition may have changed (a topic deleted),
	// in key order.
	Topics []TopicID
	// Partitions that changed, in key order, none of them in Topics.
	Partitions []PartitionRef
}

// IsZero reports a batch that changed nothing Fetch reads.
func (c *Changes) IsZero() bool { return !c.All && len(c.Topics) == 0 && len(c.Partitions) == 0 }

// Lengths of the key heads that place a key: prefix and topic id, then
// the partition.
const (
	topicHeadBytes     = 1 + len(TopicID{})
	partitionHeadBytes = topicHeadBytes + 4
)

// partitionScoped reports the prefixes of keys that belong to one
// partition and that a Fetch answer reads.
func partitionScoped(prefix byte) bool {
	switch prefix {
	case prefixPartition, prefixIndex, prefixOpenTxn, prefixAbortedTxn:
		return true
	}
	return false
}

// fetchRead reports the prefixes whose keys can change a Fetch answer.
func fetchRead(prefix byte) bool { return partitionScoped(prefix) || prefix == prefixTopicID }

// changeTracker is the Batch the Applier writes through: it passes
// everything on and notes what the writes change.
type changeTracker struct {
	Batch
	parts  map[PartitionRef]struct{}
	topics map[TopicID]struct{}
	all    bool
	// last is the partition noted last: a commit writes runs of index
	// keys of one partition, and this spares the map a lookup per key.
	last    PartitionRef
	hasLast bool
	// outTopics and outParts back what changes returns, reused from
	// batch to batch.
	outTopics []TopicID
	outParts  []PartitionRef
}

func (t *changeTracker) reset(b Batch) {
	t.Batch = b
	clear(t.parts)
	clear(t.topics)
	t.all, t.hasLast = false, false
}

func (t *changeTracker) Set(key, value []byte) error {
	t.note(key)
	return t.Batch.Set(key, value)
}

func (t *changeTracker) Delete(key []byte) error {
	t.note(key)
	return t.Batch.Delete(key)
}

func (t *changeTracker) DeleteRange(start, end []byte) error {
	t.noteRange(start, end)
	return t.Batch.DeleteRange(start, end)
}

// note notes the partition or topic key belongs to, if a Fetch reads it.
func (t *changeTracker) note(key []byte) {
	if len(key) > partitionHeadBytes && key[0] == prefixShareState {
		// A share partition's state ends in its topic id and partition:
		// a ShareFetch waiting on the partition wakes when another
		// agent releases records there (a plain Fetch wakes too, for
		// nothing; share state changes are not frequent enough to
		// matter).
		tail := key[len(key)-partitionHeadBytes+1:]
		t.notePartition(PartitionRef{TopicID: TopicID(tail[:16]), Partition: int32(binary.BigEndian.Uint32(tail[16:]))})
		return
	}
	if len(key) == 0 || !fetchRead(key[0]) {
		return
	}
	switch {
	case partitionScoped(key[0]) && len(key) >= partitionHeadBytes:
		t.notePartition(refOf(key))
	case len(key) >= topicHeadBytes:
		t.topics[TopicID(key[1:topicHeadBytes])] = struct{}{}
	default:
		t.all = true
	}
}

func (t *changeTracker) notePartition(ref PartitionRef) {
	if t.hasLast && t.last == ref {
		return
	}
	t.parts[ref] = struct{}{}
	t.last, t.hasLast = ref, true
}

// noteRange notes what deleting [start, end) changes: one partition, one
// topic, nothing Fetch reads, or (any other range) everything.
func (t *changeTracker) noteRange(start, end []byte) {
	lo, hi := byte(0), byte(0xFF)
	if len(start) > 0 {
		lo = start[0]
	}
	if len(end) > 0 {
		hi = end[0]
	}
	touches := false
	for p := int(lo); p <= int(hi); p++ {
		// A range ending at a bare prefix holds none of its keys.
		if p == int(hi) && len(end) == 1 {
			break
		}
		if fetchRead(byte(p)) {
			touches = true
			break
		}
	}
	switch {
	case !touches:
	case partitionScoped(lo) && within(start, end, partitionHeadBytes):
		t.notePartition(refOf(start))
	case within(start, end, topicHeadBytes):
		t.topics[TopicID(start[1:topicHeadBytes])] = struct{}{}
	default:
		t.all = true
	}
}

// within reports [start, end) lies inside the keys that share start's
// first n bytes.
func within(start, end []byte, n int) bool {
	if len(start) < n || len(end) < n {
		return len(start) >= n && len(end) > 0 && bytes.Equal(end, keySuccessor(start[:n]))
	}
	return bytes.Equal(start[:n], end[:n]) || bytes.Equal(end, keySuccessor(start[:n]))
}

func refOf(key []byte) PartitionRef {
	return PartitionRef{
		TopicID:   TopicID(key[1:topicHeadBytes]),
		Partition: int32(binary.BigEndian.Uint32(key[topicHeadBytes:partitionHeadBytes])),
	}
}

// changes returns what was noted since the last reset, in key order,
// in slices valid until the next call.
func (t *changeTracker) changes() Changes {
	if t.all {
		return Changes{All: true}
	}
	topics, parts := t.outTopics[:0], t.outParts[:0]
	for id := range t.topics {
		topics = append(topics, id)
	}
	slices.SortFunc(topics, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	for ref := range t.parts {
		if _, ok := t.topics[ref.TopicID]; !ok {
			parts = append(parts, ref)
		}
	}
	slices.SortFunc(parts, comparePartitionRefs)
	t.outTopics, t.outParts = topics, parts
	var c Changes
	if len(topics) > 0 {
		c.Topics = topics
	}
	if len(parts) > 0 {
		c.Partitions = parts
	}
	return c
}

func comparePartitionRefs(x, y PartitionRef) int {
	if c := bytes.Compare(x.TopicID[:], y.TopicID[:]); c != 0 {
		return c
	}
	return int(x.Partition) - int(y.Partition)
}
