package meta

// Replica lists: what AlterPartitionReassignments asked a partition's
// replicas to be. Storage is shared, so a reassignment moves no data and
// completes when it applies: the list is only what Metadata reports
// (replicas, and the leader it prefers), never where bytes live. A
// partition no reassignment named has no record, and Metadata reports
// its placement leader alone.
//
// Each list is a 0x1D record under (topic id, partition); a 0x1E record
// per topic holds the log position of the topic's last reassignment, so
// readers that cache a topic's answer (package kafka) learn that its
// lists changed from one key. Both go with the topic.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Key prefixes (keys.go lists the others).
const (
	// prefixReplicas keys a partition's replica list: topic id (16),
	// partition (u32).
	prefixReplicas byte = 0x1D
	// prefixReplicaEpoch keys a topic's replica-list epoch: topic id (16).
	prefixReplicaEpoch byte = 0x1E
)

// Limits on a ReassignPartitions. Like apply's other limits they are
// part of what apply means.
const (
	// maxReplicasPerPartition bounds one list: far more agents than a
	// cluster runs, few enough that a record stays small.
	maxReplicasPerPartition = 256
)

// TypeReassignPartitions is type 30, written from metadata level 3.
const TypeReassignPartitions CommandType = 30

// ReassignPartitions records the replica lists of partitions of one
// topic, completing their reassignment at once. The proposer checked the
// brokers against the live agents; apply checks what it can alone.
// Result: UNKNOWN_TOPIC_OR_PARTITION for a missing topic, or INVALID_REQUEST
// for more partitions than a topic may have, changing nothing; else Codes,
// one per partition in order: UNKNOWN_TOPIC_OR_PARTITION for a partition
// the topic lacks, INVALID_REPLICA_ASSIGNMENT for an empty list, one over
// 256 ids, a negative id or an id named twice. A partition named twice
// takes its last list.
type ReassignPartitions struct {
	Topic      string
	Partitions []PartitionReplicas
}

// PartitionReplicas is one partition's replica list, the preferred
// leader first.
type PartitionReplicas struct {
	Partition int32
	Replicas  []int32
}

func (ReassignPartitions) Type() CommandType { return TypeReassignPartitions }
func (ReassignPartitions) version() uint16   { return 1 }

func (c ReassignPartitions) appendPayload(b []byte) []byte {
	b = appendString(b, c.Topic)
	b = appendUvarint(b, uint64(len(c.Partitions)))
	for _, p := range c.Partitions {
		b = appendVarint(b, int64(p.Partition))
		b = appendInt32s(b, p.Replicas)
	}
	return b
}

func decodeReassignPartitionsV1(p []byte) (ReassignPartitions, error) {
	r := &reader{b: p}
	var c ReassignPartitions
	c.Topic = r.string()
	n := r.count(2) // a partition and an empty list
	if n > 0 {
		c.Partitions = make([]PartitionReplicas, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		c.Partitions = append(c.Partitions, PartitionReplicas{Partition: r.int32(), Replicas: r.int32s()})
	}
	return c, r.done()
}

func appendInt32s(b []byte, l []int32) []byte {
	b = appendUvarint(b, uint64(len(l)))
	for _, v := range l {
		b = appendVarint(b, int64(v))
	}
	return b
}

// int32s decodes what appendInt32s wrote; an empty list decodes as nil.
func (r *reader) int32s() []int32 {
	n := r.count(1)
	if n == 0 {
		return nil
	}
	l := make([]int32, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		l = append(l, r.int32())
	}
	return l
}

func replicasKey(id TopicID, partition int32) []byte {
	k := make([]byte, 0, 1+16+4)
	k = append(k, prefixReplicas)
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

func replicaEpochKey(id TopicID) []byte { return append([]byte{prefixReplicaEpoch}, id[:]...) }

// validReplicaList reports what is wrong with a list, "" if nothing.
func validReplicaList(l []int32) string {
	switch {
	case len(l) == 0:
		return "empty replica list"
	case len(l) > maxReplicasPerPartition:
		return "more than 256 replicas"
	}
	for i, id := range l {
		if id < 0 {
			return "negative broker id"
		}
		for _, prev := range l[:i] {
			if prev == id {
				return "a broker named twice"
			}
		}
	}
	return ""
}

func (a *Applier) reassignPartitions(c ReassignPartitions) (Result, error) {
	if len(c.Partitions) > maxPartitionsPerTopic {
		return failed(kerr.InvalidRequest, "%d partitions, at most %d", len(c.Partitions), maxPartitionsPerTopic), nil
	}
	t, ok, err := a.topic(c.Topic)
	if err != nil || !ok {
		return failed(kerr.UnknownTopicOrPartition, "no topic %q", c.Topic), err
	}
	res := Result{TopicID: t.ID, Codes: make([]int16, len(c.Partitions))}
	changed := false
	for i, p := range c.Partitions {
		switch {
		case p.Partition < 0 || p.Partition >= t.Partitions:
			res.Codes[i] = kerr.UnknownTopicOrPartition.Code
		case validReplicaList(p.Replicas) != "":
			res.Codes[i] = kerr.InvalidReplicaAssignment.Code
		default:
			v := appendInt32s([]byte{recordV1}, p.Replicas)
			if err := a.b.Set(replicasKey(t.ID, p.Partition), v); err != nil {
				return Result{}, err
			}
			changed = true
		}
	}
	if changed {
		v := append([]byte{recordV1}, binary.AppendUvarint(nil, a.pos+1)...)
		if err := a.b.Set(replicaEpochKey(t.ID), v); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func decodeReplicaList(v []byte) ([]int32, error) {
	r := recordReader(v)
	l := r.int32s()
	if err := r.done(); err != nil {
		return nil, corrupt("replica list", err)
	}
	return l, nil
}

// ReplicaEpochs returns, for every topic some reassignment named, the
// log position after its last one: a topic's recorded lists change only
// when its epoch does. Topics no reassignment named are absent.
func (v *View) ReplicaEpochs() (map[TopicID]uint64, error) {
	it, err := v.r.NewIter([]byte{prefixReplicaEpoch}, []byte{prefixReplicaEpoch + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var m map[TopicID]uint64
	for ok := it.First(); ok; ok = it.Next() {
		r := recordReader(it.Value())
		epoch := r.uvarint()
		if err := r.done(); err != nil || len(it.Key()) != 1+16 {
			return nil, corrupt("replica epoch", errRange)
		}
		if m == nil {
			m = make(map[TopicID]uint64)
		}
		var id TopicID
		copy(id[:], it.Key()[1:])
		m[id] = epoch
	}
	return m, it.Error()
}

// ReplicaLists returns the recorded replica lists of a topic's
// partitions, by partition; nil when none is recorded. The caller owns
// the map.
func (v *View) ReplicaLists(id TopicID) (map[int32][]int32, error) {
	start, end := topicSpan(prefixReplicas, id)
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var m map[int32][]int32
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 1+16+4 {
			return nil, corrupt("replica list key", errRange)
		}
		l, err := decodeReplicaList(it.Value())
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = make(map[int32][]int32)
		}
		m[int32(binary.BigEndian.Uint32(k[17:]))] = l
	}
	return m, it.Error()
}
