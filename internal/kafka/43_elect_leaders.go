// ElectLeaders: v0-2
//   - Leaders are placement, not elections: any agent serves any
//     partition from shared storage, so there is no leader to lose and
//     no log to fall behind. A partition's leader is already the one
//     either election would pick: its placement leader, or, for a
//     partition a reassignment gave a replica list (replicas.go), the
//     first live agent of the list. Each partition is answered as
//     Kafka's controller answers one whose leader is already the
//     preferred replica (PREFERRED) or that has a leader (UNCLEAN):
//     ELECTION_NOT_NEEDED. The exception is a list whose first agent
//     is not live: PREFERRED answers PREFERRED_LEADER_NOT_AVAILABLE, as
//     Kafka does when the preferred replica is down. Nothing is written.
//   - An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION, with
//     the controller's wording. Null topics mean every partition, and,
//     as Kafka's controller answers, list every topic with only the
//     partitions whose election is needed.
//   - v0 always elects the preferred replica; v1+ ElectionType 0 or 1,
//     another is INVALID_REQUEST for the request and each partition.
//   - ACLs (authz.go): Alter on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED (top level and every partition).

package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(43, 0, 2, handleElectLeaders) }

// ElectLeaders' ElectionType values.
const (
	electPreferred = 0
	electUnclean   = 1
)

// The messages Kafka's ApiError carries for these codes (Errors.java),
// which kerr words without the full stop.
const (
	msgElectionNotNeeded     = "Leader election not needed for topic partition."
	msgPreferredNotAvailable = "The preferred leader was not available."
)

func handleElectLeaders(_ context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := req.ElectionType
	if req.Version == 0 {
		typ = electPreferred
	}
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		for _, rt := range req.Topics {
			t := electTopic(rt.Topic)
			for _, p := range rt.Partitions {
				t.Partitions = append(t.Partitions, electResult(p, e, msg))
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	if !r.authz().cluster(kmsg.ACLOperationAlter) {
		return fail(kerr.ClusterAuthorizationFailed, "")
	}
	if typ != electPreferred && typ != electUnclean {
		return fail(kerr.InvalidRequest, fmt.Sprintf("Unknown election type %d", typ))
	}

	view := db.View()
	defer view.Close()
	e := elector{d: r.Deps, typ: typ, brokers: r.Deps.brokers(r.Conn), lists: replicaLists{view: view}}
	if req.Topics == nil {
		ts, err := view.Topics()
		if err != nil {
			// No top-level code before v1: the client retries on a
			// new connection.
			return nil, fmt.Errorf("kafka: elect leaders: listing topics: %w", err)
		}
		for i := range ts {
			rt := electTopic(ts[i].Name)
			for p := range ts[i].Partitions {
				if res := e.elect(&ts[i], p); res.ErrorCode != kerr.ElectionNotNeeded.Code {
					rt.Partitions = append(rt.Partitions, res)
				}
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		out := electTopic(rt.Topic)
		t, ok, err := view.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			switch {
			case err != nil:
				out.Partitions = append(out.Partitions, electResult(p, kerr.UnknownServerError, ""))
			case !ok:
				out.Partitions = append(out.Partitions, electResult(p, kerr.UnknownTopicOrPartition, "No such topic as "+rt.Topic))
			default:
				out.Partitions = append(out.Partitions, e.elect(&t, p))
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp, nil
}

// elector answers the partitions of one request.
type elector struct {
	d       *Deps
	typ     int8
	brokers []Broker
	lists   replicaLists
	// topic and byPartition are the lists of the topic last asked
	// about: requests name a topic's partitions together.
	topic       meta.TopicID
	byPartition map[int32][]int32
}

func (e *elector) elect(t *meta.Topic, p int32) kmsg.ElectLeadersResponseTopicPartition {
	if p < 0 || p >= t.Partitions {
		return electResult(p, kerr.UnknownTopicOrPartition, fmt.Sprintf("No such partition as %s-%d", t.Name, p))
	}
	if e.typ == electUnclean {
		// Every partition has a live leader.
		return electResult(p, kerr.ElectionNotNeeded, msgElectionNotNeeded)
	}
	if e.topic != t.ID || e.byPartition == nil {
		lists, err := e.lists.of(t.ID)
		if err != nil {
			return electResult(p, kerr.UnknownServerError, "")
		}
		e.topic, e.byPartition = t.ID, lists
		if e.byPartition == nil {
			e.byPartition = map[int32][]int32{}
		}
	}
	list := e.byPartition[p]
	if r := e.d.replicasOf(e.brokers, t.ID, p, list); len(list) > 0 && r.leader != list[0] {
		return electResult(p, kerr.PreferredLeaderNotAvailable, msgPreferredNotAvailable)
	}
	return electResult(p, kerr.ElectionNotNeeded, msgElectionNotNeeded)
}

func electTopic(name string) kmsg.ElectLeadersResponseTopic {
	rt := kmsg.NewElectLeadersResponseTopic()
	rt.Topic = name
	return rt
}

func electResult(p int32, e *kerr.Error, msg string) kmsg.ElectLeadersResponseTopicPartition {
	rp := kmsg.NewElectLeadersResponseTopicPartition()
	rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, e.Code, strPtr(msg)
	return rp
}
