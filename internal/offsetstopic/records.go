package offsetstopic

import (
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// Kafka's record schemas for __consumer_offsets (group-coordinator's
// OffsetCommitKey/Value and GroupMetadataKey/Value), encoded by kmsg,
// in the versions Kafka 2.3 and later write for classic groups, but for
// one: a group without static members gets GroupMetadataValue v1, which
// is v3 without the state timestamp (v2) and the members' instance ids
// (v3). Burrow 1.2 (Debian's package) decodes group values up to v1
// only ("failed to decode ... value version 2"), and then shows no
// owner or client id for the group's partitions; readers of the topic
// that know v3 know v1.
const (
	offsetKeyVersion        = 1
	offsetValueVersion      = 3
	groupKeyVersion         = 2
	groupValueVersion       = 1
	groupValueVersionStatic = 3
)

// PartitionFor is the __consumer_offsets partition of group, as Kafka's
// group coordinator places it: abs(group.hashCode()) % partitions with
// Java's String.hashCode and Kafka's Utils.abs (MinInt32 maps to 0).
func PartitionFor(group string, partitions int32) int32 {
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the UTF-16 code units, wrapping in 32 bits. Invalid UTF-8 counts
// as U+FFFD, as Kafka's string decoding replaces it.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// offsetKey is the record key of group's committed offset of topic's
// partition.
func offsetKey(r meta.OffsetRef) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: r.Group, Topic: r.Topic, Partition: r.Partition}
	return k.AppendTo(nil)
}

// offsetValue is the record value of a committed offset.
func offsetValue(o *meta.CommittedOffset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset = o.Offset
	v.LeaderEpoch = o.LeaderEpoch
	v.Metadata = o.Metadata
	v.CommitTimestamp = o.CommitTimestamp
	return v.AppendTo(nil)
}

// groupKey is the record key of group's state.
func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// groupValue is the record value of a classic group's stored state.
func groupValue(g *meta.Group) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	for _, m := range g.Members {
		if m.InstanceID != "" {
			v.Version = groupValueVersionStatic
		}
	}
	v.ProtocolType = g.ProtocolType
	v.Generation = g.Generation
	if g.Protocol != "" {
		v.Protocol = kmsg.StringPtr(g.Protocol)
	}
	if g.Leader != "" {
		v.Leader = kmsg.StringPtr(g.Leader)
	}
	v.CurrentStateTimestamp = g.StateTimestamp
	for _, m := range g.Members {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.MemberID
		if m.InstanceID != "" {
			vm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		vm.ClientID = m.ClientID
		vm.ClientHost = m.ClientHost
		vm.RebalanceTimeoutMillis = m.RebalanceTimeoutMs
		vm.SessionTimeoutMillis = m.SessionTimeoutMs
		vm.Subscription = m.Metadata
		vm.Assignment = m.Assignment
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}
