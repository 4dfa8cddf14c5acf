package meta

// Compaction's index swap (metadata level 4): a compactor (package
// compact) copies a partition's batches into new objects and proposes
// SwapIndex, whose apply replaces a run of the partition's index entries
// with entries pointing into the new objects, as a compare-and-swap.
//
// The swap names the run it replaces entry by entry (Old, as the
// compactor's View held it). Apply swaps only if the partition's index
// holds exactly that run, no entry more or less and every field equal;
// otherwise the swap lost, and nothing of the index changes. Everything
// that could race a compactor changes the run or the partition's
// existence first: retention and DeleteRecords delete entries from the
// start (trimIndex), topic deletion deletes the partition, re-creating a
// topic gives it a new id, and another compactor's swap replaces the
// entries. So a lost swap is a refusal, never lost or duplicated data.
//
// Object garbage collection (gc.go) sees a swap as the replaced entries
// leaving (releaseIndex: an old object left with no entry is queued
// dead, and the janitor deletes it only after the grace period, so a
// fetch that planned from an older View still reads it) and the new
// objects arriving as CommitObject's do: recorded (0x05), counted
// (0x19). A new object whose key time is below the orphan horizon is
// refused as CommitObject refuses it, since the reconciler may have
// deleted it already; the new objects of a swap that is refused for any
// reason after its shape was checked are recorded and queued dead at
// once, so the janitor deletes them after the grace period whatever the
// reconciler's sweep mark. New objects of a swap never proposed (the
// compactor died) are orphans for the reconciler.
//
// Offsets never change: batches keep their base offsets, markers are
// copied as the entries they are. For a topic whose cleanup.policy does
// not include compact, the new entries must tile the replaced offsets
// exactly and keep every marker, so no record can be dropped. A
// compacted topic's (cleanup.policy=compact) new entries may leave
// offsets out (gaps between entries, and within an entry with
// OwnOffsets), as Kafka's cleaner does; they stay inside the replaced
// range, in order.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TypeSwapIndex is compaction's index swap.
const TypeSwapIndex CommandType = 22

// Limits of SwapIndex, part of what apply means. A swap's entry stays
// far below the smallest log backend's entry limit (DynamoDB's 400 KB):
// a compactor makes several swaps of a longer run.
const (
	// MaxSwapEntries bounds each of a swap's entry lists.
	MaxSwapEntries = 4096
	// MaxSwapObjects bounds the new objects of one swap.
	MaxSwapObjects = 64
	// minSwapEntryBytes is the smallest encoded entry: twelve one-byte
	// varints.
	minSwapEntryBytes = 12
	// minSwapObjectBytes is the smallest encoded object: an empty key
	// and a one-byte size.
	minSwapObjectBytes = 2
)

// SwapIndex replaces a run of one partition's index entries (Old, in
// offset order, consecutive in the index) with New, which point into
// Objects, uploaded before the proposal. See the file comment.
// Result: 0 when swapped. INVALID_UPDATE_VERSION when the partition's
// index no longer holds exactly Old (the swap lost: retention,
// DeleteRecords or another swap came first), UNKNOWN_TOPIC_OR_PARTITION
// when the partition is gone; SwapLost reports both. KAFKA_STORAGE_ERROR
// for a new object below the orphan horizon, DUPLICATE_RESOURCE for one
// already known, INVALID_REQUEST for a malformed swap. Nothing of the
// index changes on any of them.
type SwapIndex struct {
	TopicID   TopicID
	Partition int32
	// Old is the run replaced, exactly as the index holds it.
	Old []IndexEntry
	// New replaces it: ascending, not overlapping, inside Old's offsets.
	// A marker (Control) must be a copy of one in Old.
	New []IndexEntry
	// Objects are the new data objects New points into, each at least
	// once; none may be known to the database yet.
	Objects []SwapObject
}

// SwapObject is a new object of a swap.
type SwapObject struct {
	Key  string
	Size int64
}

func (SwapIndex) Type() CommandType { return TypeSwapIndex }
func (SwapIndex) version() uint16   { return 1 }

// SwapLost reports whether a SwapIndex result means the swap lost a race
// (the index moved on, or the partition is gone): the compactor drops
// its work on that range and plans again from a newer View.
func SwapLost(r Result) bool {
	return r.Code == kerr.InvalidUpdateVersion.Code || r.Code == kerr.UnknownTopicOrPartition.Code
}

func (c SwapIndex) appendPayload(b []byte) []byte {
	b = append(b, c.TopicID[:]...)
	b = appendVarint(b, int64(c.Partition))
	b = appendSwapEntries(b, c.Old)
	b = appendSwapEntries(b, c.New)
	b = appendUvarint(b, uint64(len(c.Objects)))
	for _, o := range c.Objects {
		b = appendString(b, o.Key)
		b = appendVarint(b, o.Size)
	}
	return b
}

// appendSwapEntries writes a list of entries with their object keys in a
// table, each key once, in the order of first use: a run holds many
// entries of few objects. Index 0 is no key (a marker).
func appendSwapEntries(b []byte, es []IndexEntry) []byte {
	var keys []string
	idx := map[string]uint64{}
	for i := range es {
		if k := es[i].ObjectKey; k != "" {
			if _, ok := idx[k]; !ok {
				keys = append(keys, k)
				idx[k] = uint64(len(keys))
			}
		}
	}
	b = appendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
	}
	b = appendUvarint(b, uint64(len(es)))
	for i := range es {
		e := &es[i]
		b = appendVarint(b, e.BaseOffset)
		b = appendUvarint(b, idx[e.ObjectKey])
		b = appendIndexFields(b, e)
		b = appendUvarint(b, e.attrs())
	}
	return b
}

// readSwapEntries reads what appendSwapEntries wrote, refusing what it
// would not write (a key twice, keys out of first-use order or unused,
// unknown attribute bits), so the encoding stays canonical.
func readSwapEntries(r *reader) []IndexEntry {
	nk := r.count(1)
	keys := make([]string, 0, nk)
	seen := map[string]bool{}
	for i := 0; i < nk && r.err == nil; i++ {
		k := r.string()
		if k == "" || seen[k] {
			r.fail(errRange)
		}
		seen[k] = true
		keys = append(keys, k)
	}
	n := r.count(minSwapEntryBytes)
	var es []IndexEntry
	if n > 0 {
		es = make([]IndexEntry, n)
	}
	used := 0
	for i := 0; i < n && r.err == nil; i++ {
		e := &es[i]
		e.BaseOffset = r.varint()
		switch k := r.uvarint(); {
		case k == 0:
		case k <= uint64(used):
			e.ObjectKey = keys[k-1]
		case k == uint64(used)+1 && used < len(keys):
			e.ObjectKey = keys[used]
			used++
		default:
			r.fail(errRange)
		}
		r.indexFields(e)
		attrs := r.uvarint()
		if attrs&^indexAttrMask != 0 {
			r.fail(errTooMany)
		}
		e.setAttrs(attrs)
	}
	if r.err == nil && used != len(keys) {
		r.fail(errRange)
	}
	return es
}

func decodeSwapIndexV1(p []byte) (SwapIndex, error) {
	r := &reader{b: p}
	var c SwapIndex
	r.fixed(c.TopicID[:])
	c.Partition = r.int32()
	c.Old = readSwapEntries(r)
	c.New = readSwapEntries(r)
	n := r.count(minSwapObjectBytes)
	if n > 0 {
		c.Objects = make([]SwapObject, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		c.Objects[i].Key = r.string()
		c.Objects[i].Size = r.varint()
	}
	return c, r.done()
}

// attrs is the entry's attribute bits, as its index value stores them.
func (e *IndexEntry) attrs() uint64 {
	var a uint64
	if e.Transactional {
		a |= indexAttrTransactional
	}
	if e.Control {
		a |= indexAttrControl
	}
	if e.Commit {
		a |= indexAttrCommit
	}
	if e.OwnOffsets {
		a |= indexAttrOwnOffsets
	}
	return a
}

func (e *IndexEntry) setAttrs(a uint64) {
	e.Transactional = a&indexAttrTransactional != 0
	e.Control = a&indexAttrControl != 0
	e.Commit = a&indexAttrCommit != 0
	e.OwnOffsets = a&indexAttrOwnOffsets != 0
}

// encodeIndexValue stores e as an index value (the base offset lives
// in the key), as CommitObject and EndTxn write theirs
// (encodeIndexValueAttrs).
func encodeIndexValue(b []byte, e *IndexEntry) []byte {
	b = append(b, recordV1)
	b = appendString(b, e.ObjectKey)
	b = appendIndexFields(b, e)
	if a := e.attrs(); a != 0 {
		b = appendUvarint(b, a)
	}
	return b
}

// CompactPolicy reports whether a topic's cleanup.policy includes
// compact: its swaps may drop offsets. Like RetentionPolicyOf it parses
// here because it is part of what apply means.
func CompactPolicy(configs map[string]string) bool {
	v, ok := configs["cleanup.policy"]
	if !ok {
		return false
	}
	for _, it := range strings.Split(v, ",") {
		if strings.TrimSpace(it) == "compact" {
			return true
		}
	}
	return false
}

// shapeError says what makes a swap malformed on its own, before any
// state is read; "" when nothing does.
func (c *SwapIndex) shapeError() string {
	switch {
	case c.Partition < 0:
		return "negative partition"
	case len(c.Old) == 0 || len(c.Old) > MaxSwapEntries || len(c.New) > MaxSwapEntries:
		return "no old entries, or more than the limit"
	case len(c.Objects) > MaxSwapObjects:
		return "too many objects"
	}
	keys := map[string]bool{}
	for _, o := range c.Objects {
		if o.Key == "" || len(o.Key) > maxObjectKeyBytes || o.Size < 0 || keys[o.Key] {
			return "invalid or repeated object key or size"
		}
		keys[o.Key] = true
	}
	for i := 1; i < len(c.Old); i++ {
		if c.Old[i].BaseOffset <= c.Old[i-1].BaseOffset {
			return "old entries out of order"
		}
	}
	first := c.Old[0].BaseOffset
	last := &c.Old[len(c.Old)-1]
	end := last.BaseOffset + int64(last.Records)
	if first < 0 || last.Records <= 0 || end < last.BaseOffset {
		return "old range out of bounds"
	}
	old := map[int64]*IndexEntry{}
	for i := range c.Old {
		if c.Old[i].Control {
			old[c.Old[i].BaseOffset] = &c.Old[i]
		}
	}
	used := map[string]bool{}
	next := first
	for i := range c.New {
		e := &c.New[i]
		if e.Records <= 0 || e.BatchCount <= 0 || e.BaseOffset < next || e.BaseOffset > end-int64(e.Records) {
			return "new entries out of order or outside the old range"
		}
		next = e.BaseOffset + int64(e.Records)
		if e.Control {
			if o := old[e.BaseOffset]; o == nil || *o != *e {
				return "a new marker that is not an old one"
			}
			continue
		}
		if !keys[e.ObjectKey] || e.Commit || e.Position < 0 || e.Length <= 0 {
			return "a new entry outside the new objects"
		}
		for _, o := range c.Objects {
			if o.Key == e.ObjectKey && e.Length > o.Size-e.Position {
				return "a new entry past its object's end"
			}
		}
		used[e.ObjectKey] = true
	}
	if len(used) != len(c.Objects) {
		return "a new object no entry points into"
	}
	return ""
}

// tiles reports whether c.New covers c.Old's offsets exactly, with no
// entry of its own offsets and every marker kept: what a swap of a topic
// that is not compacted must do.
func (c *SwapIndex) tiles() bool {
	next, markers := c.Old[0].BaseOffset, 0
	for i := range c.Old {
		if c.Old[i].Control {
			markers--
		}
	}
	for i := range c.New {
		e := &c.New[i]
		if e.BaseOffset != next || e.OwnOffsets {
			return false
		}
		next += int64(e.Records)
		if e.Control {
			markers++
		}
	}
	last := &c.Old[len(c.Old)-1]
	return markers == 0 && next == last.BaseOffset+int64(last.Records)
}

func (a *Applier) swapIndex(c SwapIndex) (Result, error) {
	if why := c.shapeError(); why != "" {
		return failed(kerr.InvalidRequest, "%s", why), nil
	}
	for _, o := range c.Objects {
		if _, ok, err := a.get(objectKey(o.Key)); err != nil || ok {
			return failed(kerr.DuplicateResource, "object %q is known", o.Key), err
		}
	}
	// From here a refusal records the new objects as dead: see the
	// file comment.
	refuse := func(e *kerr.Error, format string, args ...any) (Result, error) {
		for _, o := range c.Objects {
			if err := a.b.Set(objectKey(o.Key), objectRecord{Size: o.Size, CommittedAt: a.clock}.encode()); err != nil {
				return Result{}, err
			}
			if err := a.objectCommitted(o.Key, o.Size, 0); err != nil {
				return Result{}, err
			}
		}
		return failed(e, format, args...), nil
	}
	for _, o := range c.Objects {
		if old, err := a.tooOld(o.Key); err != nil {
			return Result{}, err
		} else if old {
			return refuse(kerr.KafkaStorageError, "object %q is older than the garbage collection horizon", o.Key)
		}
	}
	ref := partRef{c.TopicID, c.Partition}
	t, ok, err := a.topicByID(c.TopicID)
	if err != nil {
		return Result{}, err
	}
	cp, err := a.part(ref)
	if err != nil {
		return Result{}, err
	}
	if !ok || !cp.exists {
		return refuse(kerr.UnknownTopicOrPartition, "no partition %d of topic %v", c.Partition, c.TopicID)
	}
	for i := range c.New {
		if e := &c.New[i]; e.BaseOffset+int64(e.Records) <= cp.st.LogStartOffset {
			// The log start moved into the run (DeleteRecords) since
			// the compactor read it: such an entry would outlive it.
			return refuse(kerr.InvalidUpdateVersion, "a new entry ends below the log start %d", cp.st.LogStartOffset)
		}
	}
	if !CompactPolicy(t.Configs) && !c.tiles() {
		return refuse(kerr.InvalidRequest, "the new entries of a topic that is not compacted must cover the old offsets exactly")
	}
	start := indexKey(nil, c.TopicID, c.Partition, c.Old[0].BaseOffset)
	end := indexKey(nil, c.TopicID, c.Partition, c.Old[len(c.Old)-1].BaseOffset+1)
	same, err := a.indexHolds(start, end, c.Old)
	if err != nil {
		return Result{}, err
	}
	if !same {
		return refuse(kerr.InvalidUpdateVersion, "the index no longer holds the entries swapped")
	}
	if err := a.subtractStored(c.TopicID, c.Partition, start, end); err != nil {
		return Result{}, err
	}
	if err := a.releaseIndex(start, end); err != nil {
		return Result{}, err
	}
	if err := a.b.DeleteRange(start, end); err != nil {
		return Result{}, err
	}
	refs := map[string]int64{}
	for i := range c.New {
		e := &c.New[i]
		a.keyBuf = indexKey(a.keyBuf[:0], c.TopicID, c.Partition, e.BaseOffset)
		a.valBuf = encodeIndexValue(a.valBuf[:0], e)
		if err := a.b.Set(a.keyBuf, a.valBuf); err != nil {
			return Result{}, err
		}
		if e.Control {
			continue
		}
		if err := a.addStored(ref, cp, e.Length); err != nil {
			return Result{}, err
		}
		refs[e.ObjectKey]++
	}
	for _, o := range c.Objects {
		rec := objectRecord{Size: o.Size, CommittedAt: a.clock, Batches: int32(refs[o.Key])}
		if err := a.b.Set(objectKey(o.Key), rec.encode()); err != nil {
			return Result{}, err
		}
		if err := a.objectCommitted(o.Key, o.Size, refs[o.Key]); err != nil {
			return Result{}, err
		}
	}
	return Result{}, nil
}

// indexHolds reports whether the index keys [start, end) are exactly
// the entries want, in order.
func (a *Applier) indexHolds(start, end []byte, want []IndexEntry) (bool, error) {
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return false, err
	}
	i, same := 0, true
	for ok := it.First(); ok && same; ok = it.Next() {
		var e IndexEntry
		if e, err = decodeIndexEntry(it.Key(), it.Value()); err != nil {
			break
		}
		same = i < len(want) && e == want[i]
		i++
	}
	if err == nil {
		err = it.Error()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return same && i == len(want), err
}
