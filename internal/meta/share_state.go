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

	"github.com/twmb/franz-go/pkg/kerr"
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

func (a *Applier) shareState(group string, id TopicID, partition int32) (ShareState, bool, error) {
	a.keyBuf = appendShareStateKey(a.keyBuf[:0], group, id, partition)
	v, ok, err := a.get(a.keyBuf)
	if err != nil || !ok {
		return ShareState{}, false, err
	}
	s, err := decodeShareState(a.keyBuf, v)
	return s, err == nil, err
}

func (a *Applier) putShareState(s *ShareState) error {
	s.Runs = mergeShareRuns(s.Runs)
	a.keyBuf = appendShareStateKey(a.keyBuf[:0], s.Group, s.TopicID, s.Partition)
	return a.b.Set(a.keyBuf, encodeShareState(s))
}

// mergeShareRuns joins neighbours that differ in nothing but offsets,
// and drops the leading acknowledged and archived runs' offsets into the
// SPSO (done by advanceShareStart, which runs before).
func mergeShareRuns(runs []ShareRun) []ShareRun {
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 {
			p := &out[n-1]
			if p.State == r.State && p.DeliveryCount == r.DeliveryCount && p.Member == r.Member && p.Deadline == r.Deadline && p.Last+1 == r.First {
				p.Last = r.Last
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// advanceShareStart moves the SPSO past the leading acknowledged and
// archived runs.
func advanceShareStart(s *ShareState) {
	i := 0
	for i < len(s.Runs) && (s.Runs[i].State == ShareAcknowledged || s.Runs[i].State == ShareArchived) {
		i++
	}
	s.Runs = slices.Delete(s.Runs, 0, i)
	if len(s.Runs) == 0 {
		s.StartOffset = s.EndOffset
	} else {
		s.StartOffset = s.Runs[0].First
	}
}

// expireShareLocks makes available (or archives, at the delivery limit)
// every acquired run whose lock expired by the log clock, and returns
// how many records it archived and how many locks timed out.
func expireShareLocks(s *ShareState, clock int64, limit int32) (archived, timedOut int64) {
	for i := range s.Runs {
		r := &s.Runs[i]
		if r.State != ShareAcquired || r.Deadline > clock {
			continue
		}
		n := r.Last - r.First + 1
		timedOut += n
		r.Member, r.Deadline = "", 0
		if int32(r.DeliveryCount) >= limit {
			r.State = ShareArchived
			archived += n
		} else {
			r.State = ShareAvailable
		}
	}
	return archived, timedOut
}

// splitShareRuns splits runs so that first and last+1 are run
// boundaries, and returns the index range [i, j) of runs within
// [first, last] (both clamped to the window).
func splitShareRuns(s *ShareState, first, last int64) (int, int) {
	first, last = max(first, s.StartOffset), min(last, s.EndOffset-1)
	if first > last {
		return 0, 0
	}
	split := func(at int64) {
		for i, r := range s.Runs {
			if r.First < at && at <= r.Last {
				tail := r
				tail.First = at
				s.Runs[i].Last = at - 1
				s.Runs = slices.Insert(s.Runs, i+1, tail)
				return
			}
		}
	}
	split(first)
	split(last + 1)
	i := 0
	for i < len(s.Runs) && s.Runs[i].First < first {
		i++
	}
	j := i
	for j < len(s.Runs) && s.Runs[j].Last <= last {
		j++
	}
	return i, j
}

func checkShareIDs(group, member string) string {
	switch {
	case group == "" || len(group) > MaxShareGroupBytes:
		return "a group id has 1 to 255 bytes"
	case len(member) > MaxShareMemberBytes:
		return "a member id has at most 255 bytes"
	}
	return ""
}

func checkShareLimits(lockMs int64, limit int32) string {
	switch {
	case lockMs < 0 || lockMs > MaxShareLockMs:
		return "a record lock is 0 to 3600000 ms"
	case limit < 1 || limit > MaxShareDeliveryLimit:
		return "a delivery count limit is 1 to 10"
	}
	return ""
}

func (a *Applier) shareInit(c ShareInit) (Result, error) {
	if msg := checkShareIDs(c.Group, ""); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	cp, err := a.part(partRef{c.TopicID, c.Partition})
	if err != nil {
		return Result{}, err
	}
	if !cp.exists {
		return failed(kerr.UnknownTopicOrPartition, "no partition %d of topic %v", c.Partition, c.TopicID), nil
	}
	s, ok, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil || ok {
		return Result{ShareStartOffset: s.StartOffset}, err
	}
	start := min(max(c.StartOffset, cp.st.LogStartOffset), cp.st.NextOffset)
	s = ShareState{Group: c.Group, TopicID: c.TopicID, Partition: c.Partition, StartOffset: start, EndOffset: start}
	return Result{ShareStartOffset: start}, a.putShareState(&s)
}

func (a *Applier) shareAcquire(c ShareAcquire) (Result, error) {
	if msg := checkShareIDs(c.Group, c.Member); msg != "" || c.Member == "" {
		return failed(kerr.InvalidRequest, "%s", orElse(msg, "no member id")), nil
	}
	if msg := checkShareLimits(c.LockMs, c.DeliveryLimit); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	switch {
	case c.MaxLocks < 1 || c.MaxLocks > MaxShareRecordLocks:
		return failed(kerr.InvalidRequest, "a record-lock cap is 1 to %d", MaxShareRecordLocks), nil
	case len(c.Ranges) > MaxShareRanges:
		return failed(kerr.InvalidRequest, "more than %d ranges", MaxShareRanges), nil
	}
	for i, rg := range c.Ranges {
		if rg.First > rg.Last || rg.First < 0 || (i > 0 && rg.First <= c.Ranges[i-1].Last) {
			return failed(kerr.InvalidRequest, "ranges are not sorted, disjoint and non-empty"), nil
		}
	}
	s, ok, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return failed(kerr.UnknownTopicOrPartition, "share partition not initialized"), nil
	}
	var res Result
	if err := a.shareFollowLogStart(&s); err != nil {
		return Result{}, err
	}
	res.ShareArchived, res.ShareLockTimeouts = expireShareLocks(&s, a.clock, c.DeliveryLimit)
	deadline := satAdd(a.clock, c.LockMs)
	grant := func(first, last int64, count int16) {
		if n := len(res.ShareGrants); n > 0 && res.ShareGrants[n-1].Last+1 == first && res.ShareGrants[n-1].DeliveryCount == count {
			res.ShareGrants[n-1].Last = last
			return
		}
		res.ShareGrants = append(res.ShareGrants, ShareGrant{First: first, Last: last, DeliveryCount: count})
	}
	for _, rg := range c.Ranges {
		// In the window: what is available.
		if rg.First < s.EndOffset {
			i, j := splitShareRuns(&s, rg.First, rg.Last)
			for k := i; k < j; k++ {
				r := &s.Runs[k]
				if r.State != ShareAvailable {
					continue
				}
				if rg.Gap {
					r.State = ShareArchived
					continue
				}
				if int32(r.DeliveryCount) >= c.DeliveryLimit {
					r.State = ShareArchived
					res.ShareArchived += r.Last - r.First + 1
					continue
				}
				r.State, r.Member, r.Deadline = ShareAcquired, c.Member, deadline
				r.DeliveryCount++
				grant(r.First, r.Last, r.DeliveryCount)
			}
		}
		// Past the window: new offsets from the SPEO, contiguous, up to
		// the cap.
		first := max(rg.First, s.EndOffset)
		if first > rg.Last || first != s.EndOffset {
			continue
		}
		last := min(rg.Last, s.StartOffset+int64(c.MaxLocks)-1)
		if last < first {
			continue
		}
		run := ShareRun{First: first, Last: last, State: ShareArchived}
		if !rg.Gap {
			run = ShareRun{First: first, Last: last, State: ShareAcquired, DeliveryCount: 1, Member: c.Member, Deadline: deadline}
			grant(first, last, 1)
		}
		s.Runs = append(s.Runs, run)
		s.EndOffset = last + 1
	}
	advanceShareStart(&s)
	res.ShareStartOffset = s.StartOffset
	return res, a.putShareState(&s)
}

// shareFollowLogStart moves the SPSO up to the partition's log start
// offset: retention or DeleteRecords took what is below it.
func (a *Applier) shareFollowLogStart(s *ShareState) error {
	cp, err := a.part(partRef{s.TopicID, s.Partition})
	if err != nil || !cp.exists || cp.st.LogStartOffset <= s.StartOffset {
		return err
	}
	ls := cp.st.LogStartOffset
	if ls >= s.EndOffset {
		s.StartOffset, s.EndOffset, s.Runs = ls, ls, nil
		return nil
	}
	i, _ := splitShareRuns(s, ls, s.EndOffset-1)
	s.Runs = slices.Delete(s.Runs, 0, i)
	s.StartOffset = ls
	return nil
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (a *Applier) shareAck(c ShareAck) (Result, error) {
	if msg := checkShareIDs(c.Group, c.Member); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if msg := checkShareLimits(c.LockMs, c.DeliveryLimit); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if len(c.Batches) > MaxShareRanges {
		return failed(kerr.InvalidRequest, "more than %d batches", MaxShareRanges), nil
	}
	for i, bt := range c.Batches {
		n := bt.Last - bt.First + 1
		switch {
		case bt.First > bt.Last || bt.First < 0 || (i > 0 && bt.First <= c.Batches[i-1].Last):
			return failed(kerr.InvalidRequest, "batches are not sorted, disjoint and non-empty"), nil
		case len(bt.Types) != 1 && int64(len(bt.Types)) != n:
			return failed(kerr.InvalidRequest, "a batch has one acknowledge type or one per offset"), nil
		}
		for _, t := range bt.Types {
			if t > ShareAckRenew {
				return failed(kerr.InvalidRequest, "unknown acknowledge type %d", t), nil
			}
		}
	}
	s, ok, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return failed(kerr.InvalidRecordState, "share partition not initialized"), nil
	}
	if err := a.shareFollowLogStart(&s); err != nil {
		return Result{}, err
	}
	// Check all first: a partition's acknowledgements apply whole or not
	// at all.
	for _, bt := range c.Batches {
		if bt.First < s.StartOffset || bt.Last >= s.EndOffset {
			return failed(kerr.InvalidRecordState, "offsets %d-%d are not in flight", bt.First, bt.Last), nil
		}
		for _, r := range s.Runs {
			if r.Last < bt.First || r.First > bt.Last {
				continue
			}
			if r.State != ShareAcquired || r.Member != c.Member || r.Deadline <= a.clock {
				return failed(kerr.InvalidRecordState, "offsets %d-%d are not acquired by this member", max(r.First, bt.First), min(r.Last, bt.Last)), nil
			}
		}
	}
	var res Result
	set := func(first, last int64, t byte) {
		i, j := splitShareRuns(&s, first, last)
		for k := i; k < j; k++ {
			r := &s.Runs[k]
			switch t {
			case ShareAckGap, ShareAckAccept:
				r.State, r.Member, r.Deadline = ShareAcknowledged, "", 0
			case ShareAckReject:
				r.State, r.Member, r.Deadline = ShareArchived, "", 0
				res.ShareArchived += r.Last - r.First + 1
			case ShareAckRelease:
				r.State, r.Member, r.Deadline = ShareAvailable, "", 0
				if int32(r.DeliveryCount) >= c.DeliveryLimit {
					r.State = ShareArchived
					res.ShareArchived += r.Last - r.First + 1
				}
			case ShareAckRenew:
				r.Deadline = satAdd(a.clock, c.LockMs)
			}
		}
	}
	for _, bt := range c.Batches {
		if len(bt.Types) == 1 {
			set(bt.First, bt.Last, bt.Types[0])
			continue
		}
		// One type per offset: runs of equal types at once.
		start := 0
		for i := 1; i <= len(bt.Types); i++ {
			if i == len(bt.Types) || bt.Types[i] != bt.Types[start] {
				set(bt.First+int64(start), bt.First+int64(i-1), bt.Types[start])
				start = i
			}
		}
	}
	expArchived, timedOut := expireShareLocks(&s, a.clock, c.DeliveryLimit)
	res.ShareArchived += expArchived
	res.ShareLockTimeouts = timedOut
	advanceShareStart(&s)
	res.ShareStartOffset = s.StartOffset
	return res, a.putShareState(&s)
}

func (a *Applier) shareRelease(c ShareRelease) (Result, error) {
	if msg := checkShareIDs(c.Group, c.Member); msg != "" || c.Member == "" {
		return failed(kerr.InvalidRequest, "%s", orElse(msg, "no member id")), nil
	}
	if msg := checkShareLimits(0, c.DeliveryLimit); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if len(c.Partitions) > MaxShareReleasePartitions {
		return failed(kerr.InvalidRequest, "more than %d partitions", MaxShareReleasePartitions), nil
	}
	refs := c.Partitions
	if len(refs) == 0 {
		states, err := readShareStates(a.b, c.Group, nil)
		if err != nil {
			return Result{}, err
		}
		for _, s := range states {
			refs = append(refs, SharePartitionRef{s.TopicID, s.Partition})
		}
	}
	var res Result
	for _, ref := range refs {
		s, ok, err := a.shareState(c.Group, ref.TopicID, ref.Partition)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			continue
		}
		changed := false
		for i := range s.Runs {
			r := &s.Runs[i]
			if r.State != ShareAcquired || r.Member != c.Member {
				continue
			}
			changed = true
			n := r.Last - r.First + 1
			r.State, r.Member, r.Deadline = ShareAvailable, "", 0
			if int32(r.DeliveryCount) >= c.DeliveryLimit {
				r.State = ShareArchived
				res.ShareArchived += n
			} else {
				res.ShareReleased += n
			}
		}
		if !changed {
			continue
		}
		advanceShareStart(&s)
		if err := a.putShareState(&s); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (a *Applier) shareStateAlter(c ShareStateAlter) (Result, error) {
	if msg := checkShareIDs(c.Group, ""); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	cp, err := a.part(partRef{c.TopicID, c.Partition})
	if err != nil {
		return Result{}, err
	}
	if !cp.exists {
		return failed(kerr.UnknownTopicOrPartition, "no partition %d of topic %v", c.Partition, c.TopicID), nil
	}
	if c.StartOffset < 0 {
		return failed(kerr.InvalidRequest, "start offset %d", c.StartOffset), nil
	}
	s, _, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil {
		return Result{}, err
	}
	start := min(max(c.StartOffset, cp.st.LogStartOffset), cp.st.NextOffset)
	s = ShareState{Group: c.Group, TopicID: c.TopicID, Partition: c.Partition, StartOffset: start, EndOffset: start, StateEpoch: s.StateEpoch + 1}
	return Result{ShareStartOffset: start}, a.putShareState(&s)
}

func (a *Applier) shareStateDelete(c ShareStateDelete) (Result, error) {
	if msg := checkShareIDs(c.Group, ""); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if len(c.Topics) > MaxShareReleasePartitions {
		return failed(kerr.InvalidRequest, "more than %d topics", MaxShareReleasePartitions), nil
	}
	n, err := DeleteShareState(a.b, c.Group, c.Topics)
	return Result{ShareDeleted: n}, err
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
