package meta

// Share partitions (metadata level 9, KIP-932): the state Kafka keeps in
// __share_group_state, here in the replicated metadata, so that no agent
// owns a share partition and any agent serves any consumer of it.
//
// One record per (group, topic id, partition) holds the share-partition
// start offset (SPSO: below it every record is acknowledged or archived),
// the end offset (SPEO: the first offset never acquired), a state epoch
// raised by AlterShareGroupOffsets, and the in-flight window
// [SPSO, SPEO) as runs of offsets that share a state, a delivery count,
// a holder and a lock deadline. The window is bounded by the record-lock
// cap the proposer passes (group.share.partition.max.record.locks, at
// most MaxShareRecordLocks), so the record is too.
//
// Every change goes through the log and apply decides it, so two agents
// racing to acquire the same offsets get disjoint grants: no record is
// ever held by two members. Locks expire by the log clock of the entry
// that looks at them (logclock.go), never by an agent's clock: an
// acquired run whose deadline is at or before the clock is available
// again, or archived when it was delivered DeliveryLimit times already.
//
// Offsets the proposer saw as no record (control records, compacted
// away, aborted transactions under read_committed) come as gap ranges:
// apply archives them without a delivery, so the SPSO moves past them.

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// LevelShareGroups is the metadata level that writes the share
// partitions' commands.
const LevelShareGroups int16 = 9

// prefixShareState keys a share partition's state: uvarint length of
// the group, the group, topic id, partition (4 bytes).
const prefixShareState byte = 0x38

// Command types of the share partitions, written from level 9.
const (
	TypeShareInit        CommandType = 42
	TypeShareAcquire     CommandType = 43
	TypeShareAck         CommandType = 44
	TypeShareRelease     CommandType = 45
	TypeShareStateAlter  CommandType = 46
	TypeShareStateDelete CommandType = 47
)

// Limits of apply, part of what apply means.
const (
	// MaxShareRecordLocks bounds the in-flight window of a share
	// partition whatever the group config says: every copy keeps the
	// window in one record. Kafka's
	// group.share.max.partition.max.record.locks is 10000 too.
	MaxShareRecordLocks = 10000
	// MaxShareRanges bounds the ranges of one ShareAcquire and the
	// batches of one ShareAck.
	MaxShareRanges = 4096
	// MaxShareGroupBytes and MaxShareMemberBytes bound the ids.
	MaxShareGroupBytes  = 255
	MaxShareMemberBytes = 255
	// MaxShareReleasePartitions bounds the partitions one ShareRelease
	// or ShareStateDelete names.
	MaxShareReleasePartitions = 10000
	// MaxShareDeliveryLimit is Kafka's bound of
	// group.share.delivery.count.limit.
	MaxShareDeliveryLimit = 10
	// MaxShareLockMs bounds a record lock (Kafka allows up to an hour).
	MaxShareLockMs = 3_600_000
)

// ShareRecordState is an in-flight run's state; the values are Kafka's
// RecordState.
type ShareRecordState uint8

const (
	ShareAvailable    ShareRecordState = 0
	ShareAcquired     ShareRecordState = 1
	ShareAcknowledged ShareRecordState = 2
	ShareArchived     ShareRecordState = 4
)

func (s ShareRecordState) String() string {
	switch s {
	case ShareAvailable:
		return "available"
	case ShareAcquired:
		return "acquired"
	case ShareAcknowledged:
		return "acknowledged"
	case ShareArchived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Acknowledge types, Kafka's (ShareAcknowledge, ShareFetch).
const (
	ShareAckGap     = 0
	ShareAckAccept  = 1
	ShareAckRelease = 2
	ShareAckReject  = 3
	ShareAckRenew   = 4
)

// ShareRange is a closed range of offsets. Gap marks offsets the
// proposer found no deliverable record at.
type ShareRange struct {
	First, Last int64
	Gap         bool
}

// ShareInit creates a share partition's state at StartOffset (what
// share.auto.offset.reset chose) if it has none: the first applied wins,
// a later one changes nothing. Result: ShareState (the state after).
type ShareInit struct {
	Group       string
	TopicID     TopicID
	Partition   int32
	StartOffset int64
}

// ShareAcquire acquires for Member what of Ranges is available by the
// log clock: offsets in the window that are available or whose lock
// expired, then new offsets from the SPEO on while the window holds
// fewer than MaxLocks. Ranges are sorted and do not overlap; gap ranges
// past the SPEO are archived, never granted. Result: ShareGrants (what
// was acquired, with delivery counts), ShareArchived and
// ShareLockTimeouts; UNKNOWN_TOPIC_OR_PARTITION before ShareInit.
type ShareAcquire struct {
	Group         string
	TopicID       TopicID
	Partition     int32
	Member        string
	LockMs        int64
	DeliveryLimit int32
	MaxLocks      int32
	Ranges        []ShareRange
}

// ShareAckTypes holds one acknowledge type for the whole batch, or one
// per offset.
type ShareAckTypes []byte

// ShareAckBatch acknowledges First..Last.
type ShareAckBatch struct {
	First, Last int64
	Types       ShareAckTypes
}

// ShareAck acknowledges records Member holds. Every offset must be in
// the window, acquired by Member with a lock unexpired by the log clock,
// else nothing changes and the result is INVALID_RECORD_STATE (Kafka's
// answer for the partition). Accept, and gap, mark records
// acknowledged, reject archives them, release makes them available
// (archived at the delivery limit), renew extends the lock by LockMs.
// Result: ShareArchived, ShareState.
type ShareAck struct {
	Group         string
	TopicID       TopicID
	Partition     int32
	Member        string
	LockMs        int64
	DeliveryLimit int32
	Batches       []ShareAckBatch
}

// SharePartitionRef names a share partition of a group.
type SharePartitionRef struct {
	TopicID   TopicID
	Partition int32
}

// ShareRelease makes available every record Member holds in Partitions
// (every partition of Group when empty): its share session closed, or
// its connection dropped. Records at the delivery limit are archived.
// Result: ShareArchived, ShareReleased (records released).
type ShareRelease struct {
	Group         string
	Member        string
	DeliveryLimit int32
	Partitions    []SharePartitionRef
}

// ShareStateAlter sets a share partition's SPSO (AlterShareGroupOffsets):
// the window is dropped and the state epoch raised. Creates the state.
type ShareStateAlter struct {
	Group       string
	TopicID     TopicID
	Partition   int32
	StartOffset int64
}

// ShareStateDelete deletes a group's share-partition states: those of
// Topics, or all of them when Topics is empty (DeleteShareGroupOffsets,
// and DeleteGroups of a share group). Result: ShareDeleted (states).
type ShareStateDelete struct {
	Group  string
	Topics []TopicID
}

func (ShareInit) Type() CommandType        { return TypeShareInit }
func (ShareInit) version() uint16          { return 1 }
func (ShareAcquire) Type() CommandType     { return TypeShareAcquire }
func (ShareAcquire) version() uint16       { return 1 }
func (ShareAck) Type() CommandType         { return TypeShareAck }
func (ShareAck) version() uint16           { return 1 }
func (ShareRelease) Type() CommandType     { return TypeShareRelease }
func (ShareRelease) version() uint16       { return 1 }
func (ShareStateAlter) Type() CommandType  { return TypeShareStateAlter }
func (ShareStateAlter) version() uint16    { return 1 }
func (ShareStateDelete) Type() CommandType { return TypeShareStateDelete }
func (ShareStateDelete) version() uint16   { return 1 }

func appendSharePartition(b []byte, group string, id TopicID, partition int32) []byte {
	b = appendString(b, group)
	b = append(b, id[:]...)
	return appendVarint(b, int64(partition))
}

func (r *reader) sharePartition() (string, TopicID, int32) {
	g := r.string()
	var id TopicID
	r.fixed(id[:])
	return g, id, r.int32()
}

func (c ShareInit) appendPayload(b []byte) []byte {
	return appendVarint(appendSharePartition(b, c.Group, c.TopicID, c.Partition), c.StartOffset)
}

func decodeShareInitV1(p []byte) (ShareInit, error) {
	r := &reader{b: p}
	var c ShareInit
	c.Group, c.TopicID, c.Partition = r.sharePartition()
	c.StartOffset = r.varint()
	return c, r.done()
}

func (c ShareAcquire) appendPayload(b []byte) []byte {
	b = appendSharePartition(b, c.Group, c.TopicID, c.Partition)
	b = appendString(b, c.Member)
	b = appendVarint(b, c.LockMs)
	b = appendVarint(b, int64(c.DeliveryLimit))
	b = appendVarint(b, int64(c.MaxLocks))
	b = appendUvarint(b, uint64(len(c.Ranges)))
	for _, rg := range c.Ranges {
		b = appendVarint(b, rg.First)
		b = appendVarint(b, rg.Last)
		b = appendBool(b, rg.Gap)
	}
	return b
}

func decodeShareAcquireV1(p []byte) (ShareAcquire, error) {
	r := &reader{b: p}
	var c ShareAcquire
	c.Group, c.TopicID, c.Partition = r.sharePartition()
	c.Member = r.string()
	c.LockMs = r.varint()
	c.DeliveryLimit = r.int32()
	c.MaxLocks = r.int32()
	if n := r.count(3); n > 0 {
		c.Ranges = make([]ShareRange, n)
		for i := range c.Ranges {
			c.Ranges[i] = ShareRange{First: r.varint(), Last: r.varint(), Gap: r.bool()}
		}
	}
	return c, r.done()
}

func (c ShareAck) appendPayload(b []byte) []byte {
	b = appendSharePartition(b, c.Group, c.TopicID, c.Partition)
	b = appendString(b, c.Member)
	b = appendVarint(b, c.LockMs)
	b = appendVarint(b, int64(c.DeliveryLimit))
	b = appendUvarint(b, uint64(len(c.Batches)))
	for _, bt := range c.Batches {
		b = appendVarint(b, bt.First)
		b = appendVarint(b, bt.Last)
		b = appendBytes(b, bt.Types)
	}
	return b
}

func decodeShareAckV1(p []byte) (ShareAck, error) {
	r := &reader{b: p}
	var c ShareAck
	c.Group, c.TopicID, c.Partition = r.sharePartition()
	c.Member = r.string()
	c.LockMs = r.varint()
	c.DeliveryLimit = r.int32()
	if n := r.count(3); n > 0 {
		c.Batches = make([]ShareAckBatch, n)
		for i := range c.Batches {
			c.Batches[i] = ShareAckBatch{First: r.varint(), Last: r.varint(), Types: r.bytes()}
		}
	}
	return c, r.done()
}

func appendShareRefs(b []byte, refs []SharePartitionRef) []byte {
	b = appendUvarint(b, uint64(len(refs)))
	for _, p := range refs {
		b = append(b, p.TopicID[:]...)
		b = appendVarint(b, int64(p.Partition))
	}
	return b
}

func (c ShareRelease) appendPayload(b []byte) []byte {
	b = appendString(b, c.Group)
	b = appendString(b, c.Member)
	b = appendVarint(b, int64(c.DeliveryLimit))
	return appendShareRefs(b, c.Partitions)
}

func decodeShareReleaseV1(p []byte) (ShareRelease, error) {
	r := &reader{b: p}
	c := ShareRelease{Group: r.string(), Member: r.string(), DeliveryLimit: r.int32()}
	if n := r.count(17); n > 0 {
		c.Partitions = make([]SharePartitionRef, n)
		for i := range c.Partitions {
			r.fixed(c.Partitions[i].TopicID[:])
			c.Partitions[i].Partition = r.int32()
		}
	}
	return c, r.done()
}

func (c ShareStateAlter) appendPayload(b []byte) []byte {
	return appendVarint(appendSharePartition(b, c.Group, c.TopicID, c.Partition), c.StartOffset)
}

func decodeShareStateAlterV1(p []byte) (ShareStateAlter, error) {
	r := &reader{b: p}
	var c ShareStateAlter
	c.Group, c.TopicID, c.Partition = r.sharePartition()
	c.StartOffset = r.varint()
	return c, r.done()
}

func (c ShareStateDelete) appendPayload(b []byte) []byte {
	b = appendString(b, c.Group)
	b = appendUvarint(b, uint64(len(c.Topics)))
	for _, id := range c.Topics {
		b = append(b, id[:]...)
	}
	return b
}

func decodeShareStateDeleteV1(p []byte) (ShareStateDelete, error) {
	r := &reader{b: p}
	c := ShareStateDelete{Group: r.string()}
	if n := r.count(16); n > 0 {
		c.Topics = make([]TopicID, n)
		for i := range c.Topics {
			r.fixed(c.Topics[i][:])
		}
	}
	return c, r.done()
}

// ShareRun is a run of in-flight offsets in one state.
type ShareRun struct {
	First, Last   int64
	State         ShareRecordState
	DeliveryCount int16
	// Member holds an acquired run until Deadline (log clock, unix
	// ms); both are empty otherwise.
	Member   string
	Deadline int64
}

// ShareState is one share partition's state.
type ShareState struct {
	Group       string
	TopicID     TopicID
	Partition   int32
	StartOffset int64 // SPSO
	EndOffset   int64 // SPEO
	StateEpoch  int32
	// Runs cover [StartOffset, EndOffset) in order, with no gap; the
	// first is never acknowledged or archived (the SPSO moved past it).
	Runs []ShareRun
}

// InFlight counts the window's offsets in each state, with acquired
// runs whose lock expired by now counted as available.
func (s ShareState) InFlight(now int64) (available, acquired, acknowledged, archived int64) {
	for _, r := range s.Runs {
		n := r.Last - r.First + 1
		switch st := r.effective(now); st {
		case ShareAvailable:
			available += n
		case ShareAcquired:
			acquired += n
		case ShareAcknowledged:
			acknowledged += n
		case ShareArchived:
			archived += n
		}
	}
	return
}

// effective is the run's state at now: an acquired run whose lock
// expired is available (or will be archived by the next command).
func (r ShareRun) effective(now int64) ShareRecordState {
	if r.State == ShareAcquired && r.Deadline <= now {
		return ShareAvailable
	}
	return r.State
}

// ShareGrant is a range acquired with its delivery count.
type ShareGrant struct {
	First, Last   int64
	DeliveryCount int16
}

func appendShareStateKey(dst []byte, group string, id TopicID, partition int32) []byte {
	dst = append(dst, prefixShareState)
	dst = appendString(dst, group)
	dst = append(dst, id[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

func shareGroupSpan(group string) (start, end []byte) {
	start = appendString([]byte{prefixShareState}, group)
	return start, keySuccessor(start)
}

func encodeShareState(s *ShareState) []byte {
	b := []byte{recordV1}
	b = appendVarint(b, s.StartOffset)
	b = appendVarint(b, s.EndOffset)
	b = appendVarint(b, int64(s.StateEpoch))
	b = appendUvarint(b, uint64(len(s.Runs)))
	for _, r := range s.Runs {
		// Runs are contiguous: a run's length is all it needs.
		b = appendUvarint(b, uint64(r.Last-r.First))
		b = append(b, byte(r.State))
		b = appendVarint(b, int64(r.DeliveryCount))
		b = appendString(b, r.Member)
		b = appendVarint(b, r.Deadline)
	}
	return b
}

// decodeShareState decodes a record keyed by k.
func decodeShareState(k, v []byte) (ShareState, error) {
	kr := &reader{b: k[1:]}
	var s ShareState
	s.Group = kr.string()
	kr.fixed(s.TopicID[:])
	if len(kr.b) != 4 {
		return ShareState{}, corrupt("share state key", errShort)
	}
	s.Partition = int32(binary.BigEndian.Uint32(kr.b))
	r := recordReader(v)
	s.StartOffset = r.varint()
	s.EndOffset = r.varint()
	s.StateEpoch = r.int32()
	n := r.count(4)
	if n > 0 {
		s.Runs = make([]ShareRun, n)
	}
	next := s.StartOffset
	for i := range s.Runs {
		l := r.uvarint()
		if l >= MaxShareRecordLocks {
			r.fail(errRange)
		}
		s.Runs[i] = ShareRun{First: next, Last: next + int64(l), State: ShareRecordState(r.byte()), DeliveryCount: r.int16(), Member: r.string(), Deadline: r.varint()}
		next += int64(l) + 1
	}
	if err := r.done(); err != nil {
		return ShareState{}, corrupt("share state", err)
	}
	if next != s.EndOffset || s.EndOffset-s.StartOffset > MaxShareRecordLocks {
		return ShareState{}, corrupt("share state", errRange)
	}
	return s, nil
}

// DeleteShareState deletes group's share-partition states of topics (all
// when topics is empty) in w and returns how many it deleted. It is the
// apply of ShareStateDelete, for another command's apply (DeleteGroups
// of a share group) to call with its batch.
func DeleteShareState(w Batch, group string, topics []TopicID) (int, error) {
	states, err := readShareStates(w, group, topics)
	if err != nil {
		return 0, err
	}
	for _, s := range states {
		if err := w.Delete(appendShareStateKey(nil, group, s.TopicID, s.Partition)); err != nil {
			return 0, err
		}
	}
	return len(states), nil
}

// readShareStates reads group's states, of topics only if any, in key
// order.
func readShareStates(r Reader, group string, topics []TopicID) ([]ShareState, error) {
	start, end := shareGroupSpan(group)
	it, err := r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []ShareState
	for ok := it.First(); ok; ok = it.Next() {
		s, err := decodeShareState(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		if s.Group != group {
			continue
		}
		if len(topics) > 0 && !slices.Contains(topics, s.TopicID) {
			continue
		}
		out = append(out, s)
	}
	return out, it.Error()
}

// ShareState reads one share partition's state.
func (v *View) ShareState(group string, id TopicID, partition int32) (ShareState, bool, error) {
	k := appendShareStateKey(nil, group, id, partition)
	val, ok, err := v.get(k)
	if err != nil || !ok {
		return ShareState{}, false, err
	}
	s, err := decodeShareState(k, val)
	return s, err == nil, err
}

// ShareStates reads a group's share-partition states in key order.
func (v *View) ShareStates(group string) ([]ShareState, error) {
	return readShareStates(v.r, group, nil)
}

// ShareStatesUpTo reads up to limit of a group's share-partition
// states in key order; truncated says the group has more.
func (v *View) ShareStatesUpTo(group string, limit int) (states []ShareState, truncated bool, err error) {
	start, end := shareGroupSpan(group)
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		s, err := decodeShareState(it.Key(), it.Value())
		if err != nil {
			return nil, false, err
		}
		if s.Group != group {
			continue
		}
		if len(states) == limit {
			return states, true, it.Error()
		}
		states = append(states, s)
	}
	return states, false, it.Error()
}

// AllShareStates reads every share partition's state, of every group,
// in key order, up to limit states.
func (v *View) AllShareStates(limit int) ([]ShareState, error) {
	it, err := v.r.NewIter([]byte{prefixShareState}, []byte{prefixShareState + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []ShareState
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		s, err := decodeShareState(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, it.Error()
}
