package agent

import (
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// PathShareGroupState is GET /v1/share-groups/{group}/state:
// ShareGroupState, each share partition of the group with its start and
// end offsets and how many records of its in-flight window are in each
// state, from this agent's copy of the metadata. Kafka's APIs carry no
// such counts (DescribeShareGroupOffsets gives the start offset and the
// lag only), so `strand group describe` and the console read them here.
// The caller needs DESCRIBE on the group, as DescribeShareGroupOffsets
// requires.
const PathShareGroupState = "/v1/share-groups/{group}/state"

// MaxShareGroupStatePartitions caps the partitions of one answer: a
// group's share partitions are bounded only by the partitions of the
// topics it subscribes to.
const MaxShareGroupStatePartitions = 10000

// ShareGroupState is the answer of GET /v1/share-groups/{group}/state.
type ShareGroupState struct {
	Group string `json:"group"`
	// LogClockMs is the log clock (unix ms) of the last metadata entry
	// this agent applied: a lock whose deadline is at or before it counts
	// as available, as the next entry to look at it would decide. It is
	// not the wall clock, so a lock that expired since the last entry
	// still counts as acquired.
	LogClockMs int64 `json:"log_clock_ms"`
	// Partitions are in the order of the metadata's keys (topic id,
	// partition); a group that never fetched has none.
	Partitions []SharePartitionState `json:"partitions"`
	// Truncated: the group has more than MaxShareGroupStatePartitions
	// share partitions, and the answer holds the first of them.
	Truncated bool `json:"truncated,omitempty"`
}

// SharePartitionState is one share partition: its start offset (SPSO)
// and end offset (SPEO), and the records of [SPSO, SPEO) by state.
type SharePartitionState struct {
	Topic string `json:"topic"`
	// TopicID is the topic's id, as Kafka prints one: a deleted topic's state has no
	// name left until the group's state of it is deleted.
	TopicID      string `json:"topic_id"`
	Partition    int32  `json:"partition"`
	StartOffset  int64  `json:"start_offset"`
	EndOffset    int64  `json:"end_offset"`
	StateEpoch   int32  `json:"state_epoch"`
	Available    int64  `json:"available"`
	Acquired     int64  `json:"acquired"`
	Acknowledged int64  `json:"acknowledged"`
	Archived     int64  `json:"archived"`
}

// needGroupDescribe is the need of the GET endpoints that name a group
// in their path ({group}).
func needGroupDescribe(r *http.Request) httpNeed {
	return httpNeed{op: kmsg.ACLOperationDescribe, typ: kmsg.ACLResourceTypeGroup, name: r.PathValue("group")}
}

func (a *Agent) handleShareGroupState(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	st, err := a.ShareGroupState(group)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// ShareGroupState reads group's share partitions from the agent's
// copy: GET /v1/share-groups/{group}/state's answer, which the console's
// share group page shows too.
func (a *Agent) ShareGroupState(group string) (ShareGroupState, error) {
	v := a.replica.View()
	defer v.Close()
	now, err := v.LogClock()
	if err != nil {
		return ShareGroupState{}, err
	}
	states, truncated, err := v.ShareStatesUpTo(group, MaxShareGroupStatePartitions)
	if err != nil {
		return ShareGroupState{}, fmt.Errorf("reading the share partitions of %s: %w", group, err)
	}
	out := ShareGroupState{Group: group, LogClockMs: now, Partitions: []SharePartitionState{}, Truncated: truncated}
	names := map[meta.TopicID]string{}
	for _, s := range states {
		name, ok := names[s.TopicID]
		if !ok {
			t, found, err := v.TopicByID(s.TopicID)
			if err != nil {
				return ShareGroupState{}, err
			}
			if found {
				name = t.Name
			}
			names[s.TopicID] = name
		}
		avail, acq, acked, arch := s.InFlight(now)
		out.Partitions = append(out.Partitions, SharePartitionState{
			Topic: name, TopicID: s.TopicID.String(), Partition: s.Partition,
			StartOffset: s.StartOffset, EndOffset: s.EndOffset, StateEpoch: s.StateEpoch,
			Available: avail, Acquired: acq, Acknowledged: acked, Archived: arch,
		})
	}
	return out, nil
}
