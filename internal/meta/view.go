package meta

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
)

// View is a consistent, read-only snapshot of a copy. Reads are local:
// no log access. For a linearizable read, the driver syncs with the log
// first (replica.Replica.Sync). A View must be closed, and before the
// store it reads is.
type View struct {
	r Snapshot
}

// Viewer is the read side of a copy, what a reader of metadata needs: a
// View of the state as it is now. replica.Replica is one over Pebble;
// metatest.DB one over a MemStore, so code that reads through a Viewer
// is tested without Pebble. A Viewer is safe for concurrent use; each
// View belongs to its caller, who closes it.
type Viewer interface {
	View() *View
}

// NewView returns a View reading s, which it closes on Close.
func NewView(s Snapshot) *View { return &View{r: s} }

// Close releases the snapshot.
func (v *View) Close() error { return v.r.Close() }

func (v *View) get(key []byte) ([]byte, bool, error) { return v.r.Get(key) }

// NextToApply is the log position of the first entry this view's state
// does not hold: every entry below it is applied.
func (v *View) NextToApply() (uint64, error) { return NextToApply(v.r) }

// NextToApply reads the applied position a store records with each
// apply batch (0 for an empty store).
func NextToApply(r Reader) (uint64, error) {
	val, ok, err := r.Get(keyApplied)
	if err != nil || !ok {
		return 0, err
	}
	return decodeUint64("applied position", val)
}

// LogClock is the time apply uses (unix ms): the newest entry timestamp
// applied, as far as the live agents' vote lets it move (logclock.go).
func (v *View) LogClock() (int64, error) {
	val, ok, err := v.get(keyClock)
	if err != nil || !ok {
		return 0, err
	}
	c, err := decodeUint64("log clock", val)
	return int64(c), err
}

// Topic looks a topic up by name.
func (v *View) Topic(name string) (Topic, bool, error) {
	val, ok, err := v.get(topicNameKey(name))
	if err != nil || !ok {
		return Topic{}, false, err
	}
	t, err := decodeTopic(val)
	return t, err == nil, err
}

// TopicByID looks a topic up by id.
func (v *View) TopicByID(id TopicID) (Topic, bool, error) {
	name, ok, err := v.get(topicIDKey(id))
	if err != nil || !ok {
		return Topic{}, false, err
	}
	return v.Topic(string(name))
}

// TopicNameByID returns the name of the topic with this id: one read,
// where TopicByID reads and decodes the topic too (a v13 Produce names
// its topics by id on every request).
func (v *View) TopicNameByID(id TopicID) (string, bool, error) {
	name, ok, err := v.get(topicIDKey(id))
	if err != nil || !ok {
		return "", false, err
	}
	return string(name), true, nil
}

// Topics returns every topic, sorted by name.
func (v *View) Topics() ([]Topic, error) {
	it, err := v.r.NewIter([]byte{prefixTopicName}, []byte{prefixTopicName + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ts []Topic
	for ok := it.First(); ok; ok = it.Next() {
		t, err := decodeTopic(it.Value())
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, it.Error()
}

// Partition returns a partition's offsets; false if the topic or partition
// does not exist.
func (v *View) Partition(id TopicID, partition int32) (PartitionState, bool, error) {
	if partition < 0 {
		return PartitionState{}, false, nil
	}
	val, ok, err := v.get(partitionKey(id, partition))
	if err != nil || !ok {
		return PartitionState{}, false, err
	}
	p, err := decodePartitionState(val)
	return p, err == nil, err
}

// Seek returns an iterator over one partition's index entries in offset
// order, starting at the entry that holds offset. If no entry holds it
// (offset is below the first entry or in a gap), it starts at the next
// entry. The iterator never leaves the partition; the caller stops when it
// has read enough and must Close it.
func (v *View) Seek(id TopicID, partition int32, offset int64) (*IndexIter, error) {
	start, end := indexSpan(id, partition)
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	ii := &IndexIter{it: it}
	if partition < 0 {
		ii.valid = false
		return ii, nil
	}
	offset = max(offset, 0)
	// The entry with the greatest base offset <= offset holds offset if
	// it is long enough; otherwise the one after it is next.
	var found bool
	if offset == math.MaxInt64 {
		found = it.Last()
	} else {
		found = it.SeekLT(indexKey(nil, id, partition, offset+1))
	}
	if found {
		e, err := decodeIndexEntry(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		if e.BaseOffset+int64(e.Records) > offset {
			ii.valid, ii.cur, ii.decoded = true, e, true
			return ii, nil
		}
		ii.valid = it.Next()
	} else {
		ii.valid = it.First()
	}
	return ii, nil
}

// IndexIter walks index entries. Call Next before the first Entry.
type IndexIter struct {
	it      Iterator
	started bool
	valid   bool // it is positioned at the next entry to return
	decoded bool // cur already holds that entry
	cur     IndexEntry
	err     error
}

// Next moves to the next entry and reports whether there is one.
func (i *IndexIter) Next() bool {
	if i.err != nil {
		return false
	}
	if i.started {
		i.valid, i.decoded = i.it.Next(), false
	}
	i.started = true
	if !i.valid {
		i.err = i.it.Error()
		return false
	}
	if !i.decoded {
		i.cur, i.err = decodeIndexEntry(i.it.Key(), i.it.Value())
		if i.err != nil {
			return false
		}
	}
	return true
}

// Entry is the entry Next moved to.
func (i *IndexIter) Entry() IndexEntry { return i.cur }

// Err is the error that ended the iteration, if any.
func (i *IndexIter) Err() error { return i.err }

// Close releases the iterator.
func (i *IndexIter) Close() error { return i.it.Close() }

// OffsetForTimestamp returns the first index entry with MaxTimestamp >= ts.
// It scans the partition's index from the start: fine while indexes are
// short; a time index replaces the scan when retention and compaction
// bound them less than now.
func (v *View) OffsetForTimestamp(id TopicID, partition int32, ts int64) (IndexEntry, bool, error) {
	it, err := v.Seek(id, partition, 0)
	if err != nil {
		return IndexEntry{}, false, err
	}
	defer it.Close()
	for it.Next() {
		if e := it.Entry(); e.MaxTimestamp >= ts {
			return e, true, nil
		}
	}
	return IndexEntry{}, false, it.Err()
}

// Digest is a SHA-256 over every replicated key and value in key order
// (local-only keys excluded), each length-prefixed.
func (v *View) Digest() ([32]byte, error) {
	it, err := v.r.NewIter(nil, replicatedEnd)
	if err != nil {
		return [32]byte{}, err
	}
	defer it.Close()
	h := sha256.New()
	var lens []byte
	for ok := it.First(); ok; ok = it.Next() {
		k, val := it.Key(), it.Value()
		lens = binary.AppendUvarint(lens[:0], uint64(len(k)))
		lens = binary.AppendUvarint(lens, uint64(len(val)))
		h.Write(lens)
		h.Write(k)
		h.Write(val)
	}
	if err := it.Error(); err != nil {
		return [32]byte{}, err
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}
