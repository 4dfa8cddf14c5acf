package meta

// Consumer group commands: the durable facts of a group. Membership lives
// in memory on the group's coordinator (package group); what must survive
// the coordinator (committed offsets, each completed rebalance, deletion,
// expiry) is proposed here and applied by every copy.

// GroupKind is the membership protocol a group runs. Values are part of
// the log format.
type GroupKind uint8

const (
	// GroupClassic groups rebalance with JoinGroup and SyncGroup; the
	// leader member computes the assignment.
	GroupClassic GroupKind = 0
	// GroupConsumer groups run KIP-848 (ConsumerGroupHeartbeat); the
	// coordinator computes the assignment.
	GroupConsumer GroupKind = 1
)

func (k GroupKind) String() string {
	switch k {
	case GroupClassic:
		return "classic"
	case GroupConsumer:
		return "consumer"
	case GroupShare:
		return "share"
	}
	return "unknown"
}

// OffsetCommit stores a group's committed offsets. It creates the group's
// record when there is none (a standalone consumer commits without ever
// joining).
// Result: Codes, one per offset: UNKNOWN_TOPIC_OR_PARTITION for a topic or
// partition that does not exist at apply, OFFSET_METADATA_TOO_LARGE. Code
// INVALID_GROUP_ID, or ILLEGAL_GENERATION when Generation is below the
// stored generation (the group has moved on, likely under another
// coordinator); then every offset carries the code too.
type OffsetCommit struct {
	Group string
	// Generation is the generation (or KIP-848 member epoch) the commit
	// was validated against by the coordinator; -1 for a commit outside
	// group management.
	Generation int32
	// RetentionMs >= 0 gives the offsets an explicit expiry, the log clock
	// at apply plus RetentionMs (OffsetCommit v2-v4). -1: the offsets
	// expire by the group's retention policy (ExpireOffsets).
	RetentionMs int64
	Offsets     []OffsetCommitPartition
}

// OffsetCommitPartition is one committed offset, by topic name: apply
// resolves the name, so a topic deleted and created again between the
// coordinator's check and the apply gets the commit as Kafka would.
type OffsetCommitPartition struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// CommitTimestamp is the commit time (unix ms) a client chose
	// (OffsetCommit v1); -1 means the log clock at apply.
	CommitTimestamp int64
}

// GroupState is a group's state after a completed rebalance, written by
// its coordinator when a generation's assignment is settled, when the
// group becomes empty, and when a static member is replaced. It replaces
// the group's stored state; offsets are untouched.
// Result: INVALID_GROUP_ID, INVALID_REQUEST (unknown kind, too many
// members), or ILLEGAL_GENERATION when Generation is below the stored one,
// which fences a coordinator that lost the group.
type GroupState struct {
	Group        string
	Kind         GroupKind
	ProtocolType string
	// Protocol is the selected protocol (the assignor), empty when the
	// group is empty.
	Protocol   string
	Generation int32
	Leader     string
	// SubscribedKnown says whether Subscribed lists every topic the
	// members consume (the coordinator can read "consumer" protocol
	// subscriptions). Offset expiry spares the offsets of subscribed
	// topics of a non-empty group, and every offset of a non-empty group
	// whose subscriptions are unknown.
	SubscribedKnown bool
	Subscribed      []string
	Members         []GroupMember
}

// GroupMember is one member as the coordinator stored it.
type GroupMember struct {
	MemberID   string
	InstanceID string // empty for a dynamic member
	ClientID   string
	ClientHost string
	// SessionTimeoutMs and RebalanceTimeoutMs are the member's timeouts.
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	// Metadata is the member's subscription for the group's protocol;
	// Assignment is what the leader assigned it.
	Metadata   []byte
	Assignment []byte
}

// DeleteGroup deletes a group's state and committed offsets. Whether the
// group has members is the coordinator's question (membership is in its
// memory); apply deletes what is stored.
// Result: GROUP_ID_NOT_FOUND when nothing is stored for the group.
type DeleteGroup struct {
	Group string
}

// OffsetDelete deletes some of a group's committed offsets. Deleting an
// offset that is not stored succeeds.
// Result: Codes, one per partition (UNKNOWN_TOPIC_OR_PARTITION for a
// topic that does not exist); Code GROUP_ID_NOT_FOUND when the group has
// no record.
type OffsetDelete struct {
	Group      string
	Partitions []TopicPartition
}

// TopicPartition names a partition by topic name.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ExpireOffsets applies offset retention (offsets.retention.minutes,
// KIP-211) to the named groups at the log clock. An offset expires when:
//   - it has an explicit expiry (OffsetCommit.RetentionMs) and the clock
//     reached it; otherwise
//   - the group has no protocol type (offsets only, a standalone
//     consumer) and RetentionMs passed since the offset's commit;
//   - the group has a protocol type and no members, and RetentionMs
//     passed since it became empty (its state timestamp);
//   - the group has members, its subscriptions are known and do not
//     include the topic, and RetentionMs passed since the commit.
//
// A group left with no members and no offsets is deleted. Groups without
// a record are skipped. The coordinator names only groups it coordinates
// and that are not rebalancing, so the stored state it acts on is
// current.
// Result: INVALID_REQUEST for a negative RetentionMs or too many groups.
type ExpireOffsets struct {
	RetentionMs int64
	Groups      []string
}

func (OffsetCommit) Type() CommandType  { return TypeOffsetCommit }
func (GroupState) Type() CommandType    { return TypeGroupState }
func (DeleteGroup) Type() CommandType   { return TypeDeleteGroup }
func (OffsetDelete) Type() CommandType  { return TypeOffsetDelete }
func (ExpireOffsets) Type() CommandType { return TypeExpireOffsets }

func (OffsetCommit) version() uint16  { return 1 }
func (GroupState) version() uint16    { return 1 }
func (DeleteGroup) version() uint16   { return 1 }
func (OffsetDelete) version() uint16  { return 1 }
func (ExpireOffsets) version() uint16 { return 1 }

// Smallest encodings of repeated elements, for the decoders' count
// checks: every string, bytes and varint takes at least one byte.
const (
	minOffsetCommitPartitionBytes = 6
	minGroupMemberBytes           = 8
	minTopicPartitionBytes        = 2
)

func (c OffsetCommit) appendPayload(b []byte) []byte {
	b = appendString(b, c.Group)
	b = appendVarint(b, int64(c.Generation))
	b = appendVarint(b, c.RetentionMs)
	return appendOffsetCommitPartitions(b, c.Offsets)
}

// appendOffsetCommitPartitions encodes offsets for OffsetCommit and
// TxnOffsetCommit.
func appendOffsetCommitPartitions(b []byte, os []OffsetCommitPartition) []byte {
	b = appendUvarint(b, uint64(len(os)))
	for i := range os {
		o := &os[i]
		b = appendString(b, o.Topic)
		b = appendVarint(b, int64(o.Partition))
		b = appendVarint(b, o.Offset)
		b = appendVarint(b, int64(o.LeaderEpoch))
		b = appendString(b, o.Metadata)
		b = appendVarint(b, o.CommitTimestamp)
	}
	return b
}

func (r *reader) offsetCommitPartitions() []OffsetCommitPartition {
	n := r.count(minOffsetCommitPartitionBytes)
	var os []OffsetCommitPartition
	if n > 0 {
		os = make([]OffsetCommitPartition, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		o := &os[i]
		o.Topic = r.string()
		o.Partition = r.int32()
		o.Offset = r.varint()
		o.LeaderEpoch = r.int32()
		o.Metadata = r.string()
		o.CommitTimestamp = r.varint()
	}
	return os
}

func decodeOffsetCommitV1(p []byte) (OffsetCommit, error) {
	r := &reader{b: p}
	var c OffsetCommit
	c.Group = r.string()
	c.Generation = r.int32()
	c.RetentionMs = r.varint()
	c.Offsets = r.offsetCommitPartitions()
	return c, r.done()
}

func (c GroupState) appendPayload(b []byte) []byte {
	b = appendString(b, c.Group)
	b = appendUvarint(b, uint64(c.Kind))
	b = appendString(b, c.ProtocolType)
	b = appendString(b, c.Protocol)
	b = appendVarint(b, int64(c.Generation))
	b = appendString(b, c.Leader)
	b = appendBool(b, c.SubscribedKnown)
	b = appendStringList(b, c.Subscribed)
	return appendGroupMembers(b, c.Members)
}

func appendGroupMembers(b []byte, ms []GroupMember) []byte {
	b = appendUvarint(b, uint64(len(ms)))
	for i := range ms {
		m := &ms[i]
		b = appendString(b, m.MemberID)
		b = appendString(b, m.InstanceID)
		b = appendString(b, m.ClientID)
		b = appendString(b, m.ClientHost)
		b = appendVarint(b, int64(m.SessionTimeoutMs))
		b = appendVarint(b, int64(m.RebalanceTimeoutMs))
		b = appendBytes(b, m.Metadata)
		b = appendBytes(b, m.Assignment)
	}
	return b
}

func (r *reader) groupKind() GroupKind {
	v := r.uvarint()
	if v > 0xff {
		r.fail(errRange)
		return 0
	}
	return GroupKind(v)
}

// groupMembers decodes what appendGroupMembers wrote. Byte fields are
// copied: nothing aliases the input.
func (r *reader) groupMembers() []GroupMember {
	n := r.count(minGroupMemberBytes)
	if n == 0 {
		return nil
	}
	ms := make([]GroupMember, n)
	for i := 0; i < n && r.err == nil; i++ {
		m := &ms[i]
		m.MemberID = r.string()
		m.InstanceID = r.string()
		m.ClientID = r.string()
		m.ClientHost = r.string()
		m.SessionTimeoutMs = r.int32()
		m.RebalanceTimeoutMs = r.int32()
		m.Metadata = r.bytesCopy()
		m.Assignment = r.bytesCopy()
	}
	return ms
}

// bytesCopy is bytes, copied; empty decodes as nil.
func (r *reader) bytesCopy() []byte {
	p := r.bytes()
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func decodeGroupStateV1(p []byte) (GroupState, error) {
	r := &reader{b: p}
	var c GroupState
	c.Group = r.string()
	c.Kind = r.groupKind()
	c.ProtocolType = r.string()
	c.Protocol = r.string()
	c.Generation = r.int32()
	c.Leader = r.string()
	c.SubscribedKnown = r.bool()
	c.Subscribed = r.stringList()
	c.Members = r.groupMembers()
	return c, r.done()
}

func (c DeleteGroup) appendPayload(b []byte) []byte {
	return appendString(b, c.Group)
}

func (c OffsetDelete) appendPayload(b []byte) []byte {
	b = appendString(b, c.Group)
	b = appendUvarint(b, uint64(len(c.Partitions)))
	for _, tp := range c.Partitions {
		b = appendString(b, tp.Topic)
		b = appendVarint(b, int64(tp.Partition))
	}
	return b
}

func decodeOffsetDeleteV1(p []byte) (OffsetDelete, error) {
	r := &reader{b: p}
	var c OffsetDelete
	c.Group = r.string()
	n := r.count(minTopicPartitionBytes)
	if n > 0 {
		c.Partitions = make([]TopicPartition, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		c.Partitions[i].Topic = r.string()
		c.Partitions[i].Partition = r.int32()
	}
	return c, r.done()
}

func (c ExpireOffsets) appendPayload(b []byte) []byte {
	b = appendVarint(b, c.RetentionMs)
	return appendStringList(b, c.Groups)
}

func decodeDeleteGroupV1(p []byte) (DeleteGroup, error) {
	r := &reader{b: p}
	c := DeleteGroup{Group: r.string()}
	return c, r.done()
}

func decodeExpireOffsetsV1(p []byte) (ExpireOffsets, error) {
	r := &reader{b: p}
	var c ExpireOffsets
	c.RetentionMs = r.varint()
	c.Groups = r.stringList()
	return c, r.done()
}
