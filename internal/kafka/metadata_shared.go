package kafka

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// partitionLists shares the partition entries of Metadata answers across
// requests and connections. A topic's entries depend only on its id, its
// partition count, the live agents (which one leads each partition) and
// the client's zone, whose agents lead (zones.go): one list per topic
// and zone. kmsg only reads them while encoding, so every answer naming the
// topic can hold the same slice: a flood of Metadata requests over large
// topics then allocates per topic, not per partition. Safe for concurrent
// use; the slices it returns must not be modified.
type partitionLists struct {
	// maxEntries bounds the partition entries kept. Entries of deleted
	// topics stay until the bound is passed, when the whole table is
	// dropped and rebuilt on demand.
	maxEntries int64
	mu         struct {
		sync.Mutex
		byTopic map[partitionListKey]*partitionList
		entries int64
	}
}

// partitionListKey is a topic and the zone its leaders are placed in,
// "" for all agents.
type partitionListKey struct {
	id   meta.TopicID
	zone string
}

// partitionList is one topic's shared entries.
type partitionList struct {
	count int32
	// leaders is the leadersKey the entries were made for.
	leaders string
	parts   []kmsg.MetadataResponseTopicPartition
}

func newPartitionLists(maxEntries int64) *partitionLists {
	l := &partitionLists{maxEntries: maxEntries}
	l.mu.byTopic = make(map[partitionListKey]*partitionList)
	return l
}

// get returns t's entries for clients of zone ("" for leaders placed on
// all agents) and leaders (a leadersKey), made by build on a miss. Two
// requests missing at once may both build; one copy is kept.
func (l *partitionLists) get(t *meta.Topic, zone, leaders string, build func() []kmsg.MetadataResponseTopicPartition) []kmsg.MetadataResponseTopicPartition {
	k := partitionListKey{t.ID, zone}
	l.mu.Lock()
	pl, ok := l.mu.byTopic[k]
	l.mu.Unlock()
	if ok && pl.count == t.Partitions && pl.leaders == leaders {
		return pl.parts
	}
	parts := build()
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.mu.byTopic[k]; ok {
		l.mu.entries -= int64(old.count)
	}
	if l.mu.entries+int64(t.Partitions) > l.maxEntries {
		clear(l.mu.byTopic)
		l.mu.entries = 0
	}
	l.mu.byTopic[k] = &partitionList{count: t.Partitions, leaders: leaders, parts: parts}
	l.mu.entries += int64(t.Partitions)
	return parts
}

// leadersKey identifies what a topic's partition entries depend on:
// this agent's node id, the node ids of the live agents (replica lists
// name them), in order, and those leaders are placed on (a client
// zone's; partitionLeader), after a separator no node id takes.
func (d *Deps) leadersKey(brokers, placeOn []Broker) string {
	b := make([]byte, 0, 4*(len(brokers)+len(placeOn)+2))
	b = binary.BigEndian.AppendUint32(b, uint32(d.Cluster.NodeID))
	for _, br := range brokers {
		b = binary.BigEndian.AppendUint32(b, uint32(br.NodeID))
	}
	b = binary.BigEndian.AppendUint32(b, math.MaxUint32)
	for _, br := range placeOn {
		b = binary.BigEndian.AppendUint32(b, uint32(br.NodeID))
	}
	return string(b)
}
