package kafka

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// Replica lists, as Metadata and ElectLeaders report them. A partition
// no reassignment named has its placement leader as its one replica. A
// partition with a recorded list (meta.ReassignPartitions) reports that
// list; its leader is the first live agent in it, the one a preferred
// election would pick, or the placement leader when none is live, since
// any agent serves any partition. Its ISR is the live agents of the list
// (the leader alone when none is), its offline replicas the others.

// partitionReplicas is one partition's answer.
type partitionReplicas struct {
	leader                 int32
	replicas, isr, offline []int32
}

// live reports whether node is one of brokers, which are sorted by node
// id (ClusterInfo.Brokers).
func live(brokers []Broker, node int32) bool {
	_, ok := slices.BinarySearchFunc(brokers, node, func(b Broker, n int32) int { return int(b.NodeID) - int(n) })
	return ok
}

// replicasOf answers partition p of topic id whose recorded list is list
// (nil for none).
func (d *Deps) replicasOf(brokers []Broker, id meta.TopicID, p int32, list []int32) partitionReplicas {
	if len(list) == 0 {
		leader := d.partitionLeader(brokers, id, p)
		one := []int32{leader}
		return partitionReplicas{leader: leader, replicas: one, isr: one, offline: []int32{}}
	}
	r := partitionReplicas{leader: -1, replicas: list, isr: []int32{}, offline: []int32{}}
	for _, n := range list {
		if live(brokers, n) {
			if r.leader == -1 {
				r.leader = n
			}
			r.isr = append(r.isr, n)
		} else {
			r.offline = append(r.offline, n)
		}
	}
	if r.leader == -1 {
		r.leader = d.partitionLeader(brokers, id, p)
		r.isr = []int32{r.leader}
	}
	return r
}

// replicaLists reads recorded replica lists for one request: which topics
// have any (one scan, usually empty), and a topic's lists on demand.
type replicaLists struct {
	view   *meta.View
	epochs map[meta.TopicID]uint64
	loaded bool
	err    error
}

// epoch returns the epoch of id's lists, 0 when it has none.
func (l *replicaLists) epoch(id meta.TopicID) (uint64, error) {
	if !l.loaded {
		l.epochs, l.err = l.view.ReplicaEpochs()
		l.loaded = true
	}
	return l.epochs[id], l.err
}

// of returns id's lists by partition, nil when it has none.
func (l *replicaLists) of(id meta.TopicID) (map[int32][]int32, error) {
	if e, err := l.epoch(id); err != nil || e == 0 {
		return nil, err
	}
	return l.view.ReplicaLists(id)
}

// withEpoch extends a leadersKey with a topic's replica-list epoch, so
// that shared Metadata entries (metadata_shared.go) are rebuilt when a
// reassignment changes the lists.
func withEpoch(leaders string, epoch uint64) string {
	if epoch == 0 {
		return leaders
	}
	return string(binary.BigEndian.AppendUint64([]byte(leaders+"/"), epoch))
}

// checkReassignment checks a reassignment's target list as Kafka's
// controller does (ReplicationControlManager.validateManualPartitionAssignment),
// with its wording: ids in order, each a known broker, none twice. known
// holds the registered agents and the live ones.
func checkReassignment(list []int32, known map[int32]bool) string {
	if len(list) == 0 {
		return "The manual partition assignment includes an empty replica list."
	}
	sorted := slices.Sorted(slices.Values(list))
	for i, id := range sorted {
		if !known[id] {
			return fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	return ""
}

// knownBrokers is the registered agents and the live ones: the brokers a
// replica list may name. Kafka allows any registered broker, fenced ones
// included.
func knownBrokers(view *meta.View, brokers []Broker) (map[int32]bool, error) {
	agents, err := view.Agents()
	if err != nil {
		return nil, err
	}
	known := make(map[int32]bool, len(agents)+len(brokers))
	for _, a := range agents {
		known[a.NodeID] = true
	}
	for _, b := range brokers {
		known[b.NodeID] = true
	}
	return known, nil
}

// errNoReassignLevel answers a reassignment on a log below the level
// that writes ReassignPartitions.
func errNoReassignLevel(level int16) (*kerr.Error, string) {
	return kerr.UnsupportedVersion, fmt.Sprintf("Reassignments are recorded from %s %d; the log is at %d (strand features upgrade raises it).",
		meta.FeatureMetadata, meta.MetadataLevel3, level)
}
