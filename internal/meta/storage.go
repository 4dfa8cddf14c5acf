package meta

// Storage accounting: per partition, the bytes its index entries hold in
// data objects and how many such entries there are, kept by apply from
// metadata level 3 so that retention.bytes, `strand topic describe` and
// DescribeLogDirs read a number instead of walking an index.
//
// The numbers change in exactly three places: CommitObject adds each
// committed range, trimIndex (through subtractStored) takes away the
// entries it removes, and a compaction swap (compact.go) does both. Topic deletion drops the records with the topic.
// Transaction markers are index entries without object bytes (the fetch
// path synthesizes them) and are counted in neither.

import (
	"encoding/binary"
)

// prefixPartitionStorage starts (topic id, partition) keys: the
// partition's PartitionStorage. A partition with nothing stored has
// none. (0x18 is kept for retention as well.)
const prefixPartitionStorage byte = 0x17

// PartitionStorage is what one partition holds in data objects.
type PartitionStorage struct {
	// Bytes is the sum of the lengths of its index entries' byte ranges:
	// record batches as the producers sent them, compression included.
	Bytes int64
	// Entries is the number of its index entries that point into data
	// objects.
	Entries int64
}

// storedPart is a partition's PartitionStorage in the Applier's
// partition cache, written back with the partition state (flushParts).
type storedPart struct {
	n      PartitionStorage
	loaded bool
	dirty  bool
}

func appendPartitionStorageKey(dst []byte, id TopicID, partition int32) []byte {
	return appendPartitionPrefix(dst, prefixPartitionStorage, id, partition)
}

func (s PartitionStorage) encode(b []byte) []byte {
	b = append(b, recordV1)
	b = appendVarint(b, s.Bytes)
	return appendVarint(b, s.Entries)
}

func decodePartitionStorage(v []byte) (PartitionStorage, error) {
	r := recordReader(v)
	var s PartitionStorage
	s.Bytes = r.varint()
	s.Entries = r.varint()
	if r.err == nil && (s.Bytes < 0 || s.Entries < 0) {
		r.fail(errRange)
	}
	if err := r.done(); err != nil {
		return PartitionStorage{}, corrupt("partition storage", err)
	}
	return s, nil
}

// lifecycleOn reports whether the finalized metadata level is 3 or more:
// only then does apply keep storage numbers and trim producer state with
// the log start, so that every copy of a log applies it alike whatever
// its build. The level is read once per batch, and again after a
// FinalizeFeatures changed it.
func (a *Applier) lifecycleOn() (bool, error) {
	level, err := a.metadataLevel()
	return level >= MetadataLevel3, err
}

// metadataLevel is the finalized strand.metadata.version, read once per
// batch, and again after a FinalizeFeatures changed it.
func (a *Applier) metadataLevel() (int16, error) {
	if !a.levelLoaded || a.featuresChanged {
		f, err := ReadFeatures(a.b)
		if err != nil {
			return 0, err
		}
		a.level, a.levelLoaded = f.MetadataLevel(), true
	}
	return a.level, nil
}

// storedOf returns cp's storage numbers, read on first use.
func (a *Applier) storedOf(ref partRef, cp *cachedPart) (*storedPart, error) {
	if cp.stored.loaded {
		return &cp.stored, nil
	}
	a.keyBuf = appendPartitionStorageKey(a.keyBuf[:0], ref.id, ref.partition)
	v, ok, err := a.get(a.keyBuf)
	if err != nil {
		return nil, err
	}
	if ok {
		if cp.stored.n, err = decodePartitionStorage(v); err != nil {
			return nil, err
		}
	}
	cp.stored.loaded = true
	return &cp.stored, nil
}

// addStored counts one committed range of length bytes.
func (a *Applier) addStored(ref partRef, cp *cachedPart, length int64) error {
	if on, err := a.lifecycleOn(); err != nil || !on {
		return err
	}
	s, err := a.storedOf(ref, cp)
	if err != nil {
		return err
	}
	s.n.Bytes += length
	s.n.Entries++
	s.dirty = true
	return nil
}

// subtractStored takes the data entries of the index range [start, end)
// of one partition, which the caller is about to delete, out of its
// numbers.
func (a *Applier) subtractStored(id TopicID, partition int32, start, end []byte) error {
	if on, err := a.lifecycleOn(); err != nil || !on {
		return err
	}
	var gone PartitionStorage
	err := scanIndex(a.b, start, end, func(e *IndexEntry) { gone.add(e, 1) })
	if err != nil || gone == (PartitionStorage{}) {
		return err
	}
	ref := partRef{id, partition}
	cp, err := a.part(ref)
	if err != nil {
		return err
	}
	s, err := a.storedOf(ref, cp)
	if err != nil {
		return err
	}
	s.n.Bytes = max(s.n.Bytes-gone.Bytes, 0)
	s.n.Entries = max(s.n.Entries-gone.Entries, 0)
	s.dirty = true
	return nil
}

// add counts e (sign 1) or takes it away (-1) if it points into a data
// object.
func (s *PartitionStorage) add(e *IndexEntry, sign int64) {
	if e.Control || e.ObjectKey == "" {
		return
	}
	s.Bytes += sign * e.Length
	s.Entries += sign
}

// scanIndex calls f with every index entry in [start, end).
func scanIndex(r Reader, start, end []byte, f func(e *IndexEntry)) error {
	it, err := r.NewIter(start, end)
	if err != nil {
		return err
	}
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		var e IndexEntry
		if e, err = decodeIndexEntry(it.Key(), it.Value()); err == nil {
			f(&e)
		}
	}
	if err == nil {
		err = it.Error()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeStored writes a dirty cached record back (flushParts), or deletes
// it when nothing is stored.
func (a *Applier) writeStored(ref partRef, s *storedPart) error {
	a.keyBuf = appendPartitionStorageKey(a.keyBuf[:0], ref.id, ref.partition)
	s.dirty = false
	if s.n == (PartitionStorage{}) {
		return a.b.Delete(a.keyBuf) // a partition with nothing stored has no record
	}
	a.valBuf = s.n.encode(a.valBuf[:0])
	return a.b.Set(a.keyBuf, a.valBuf)
}

// buildPartitionStorage counts every partition's storage from its index
// when a FinalizeFeatures raises strand.metadata.version from below 3 to
// 3 or more: a log that ran before level 3 has an index and no numbers.
// One pass over the index, in key order; a new cluster starts at level 3
// with an empty index, so there it costs nothing.
func (a *Applier) buildPartitionStorage(from, to int16) error {
	if from >= MetadataLevel3 || to < MetadataLevel3 {
		return nil
	}
	if err := a.b.DeleteRange([]byte{prefixPartitionStorage}, []byte{prefixPartitionStorage + 1}); err != nil {
		return err
	}
	var cur partRef
	var n PartitionStorage
	started := false
	flush := func() error {
		if !started || n == (PartitionStorage{}) {
			return nil
		}
		return a.b.Set(appendPartitionStorageKey(nil, cur.id, cur.partition), n.encode(nil))
	}
	it, err := a.b.NewIter([]byte{prefixIndex}, []byte{prefixIndex + 1})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		var ref partRef
		copy(ref.id[:], k[1:17])
		ref.partition = int32(binary.BigEndian.Uint32(k[17:21]))
		if !started || ref != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, n, started = ref, PartitionStorage{}, true
		}
		e, err := decodeIndexEntry(k, it.Value())
		if err != nil {
			return err
		}
		n.add(&e, 1)
	}
	if err := it.Error(); err != nil {
		return err
	}
	return flush()
}

// PartitionStorage returns what a partition holds in data objects: zero
// for a partition with nothing stored, or on a log below metadata level
// 3, which keeps no numbers.
func (v *View) PartitionStorage(id TopicID, partition int32) (PartitionStorage, error) {
	val, ok, err := v.get(appendPartitionStorageKey(nil, id, partition))
	if err != nil || !ok {
		return PartitionStorage{}, err
	}
	return decodePartitionStorage(val)
}

// TopicStorage returns the storage of each of a topic's partitions that
// holds any, by partition.
func (v *View) TopicStorage(id TopicID) (map[int32]PartitionStorage, error) {
	start, end := topicSpan(prefixPartitionStorage, id)
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[int32]PartitionStorage{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+4 {
			continue
		}
		s, err := decodePartitionStorage(it.Value())
		if err != nil {
			return nil, err
		}
		out[int32(binary.BigEndian.Uint32(k[len(start):]))] = s
	}
	return out, it.Error()
}
