// CreatePartitions: v0-3
//   - Count is the new total. Not above the current count, or above
//     65536: INVALID_PARTITIONS. Unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
//     A topic named twice: INVALID_REQUEST, answered once.
//   - Assignment, if given, must list Count minus the current count
//     replica lists of the same length with distinct, known broker ids
//     (else INVALID_REPLICA_ASSIGNMENT); placement means nothing here.
//   - A count above Deps.MaxPartitionsPerTopic, or growth past
//     Deps.MaxPartitions in the cluster, is POLICY_VIOLATION
//     (partition_limits.go).
//   - ValidateOnly runs every check and proposes nothing.
//   - New partitions start empty at offset 0. Apply checks the count
//     again, so of two concurrent growths to the same total one fails.
//   - TimeoutMillis > 0 bounds the wait for the proposal, as CreateTopics.
//   - ACLs (authz.go): Alter on the topic, else TOPIC_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	brokers := r.Deps.brokers(r.Conn)

	counts := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	var cmds []meta.Command
	var cmdIdx []int
	dupAnswered := make(map[string]bool)
	view := db.View()
	z := r.authz()
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if counts[rt.Topic] > 1 {
			if !dupAnswered[rt.Topic] {
				dupAnswered[rt.Topic] = true
				st.ErrorCode, st.ErrorMessage = kerr.InvalidRequest.Code, strPtr("duplicate topic name")
				resp.Topics = append(resp.Topics, st)
			}
			continue
		}
		if !z.topic(kmsg.ACLOperationAlter, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
		} else if e, msg := checkCreatePartitions(view, rt, brokers); e != nil {
			st.ErrorCode, st.ErrorMessage = e.Code, strPtr(msg)
		} else {
			cmds = append(cmds, meta.CreatePartitions{Name: rt.Topic, NewTotal: rt.Count})
			cmdIdx = append(cmdIdx, len(resp.Topics))
		}
		resp.Topics = append(resp.Topics, st)
	}
	view.Close()
	if len(cmds) == 0 {
		return resp, nil
	}

	outs := r.Deps.createOrValidate(ctx, db, cmds, req.ValidateOnly, req.TimeoutMillis)
	for i, idx := range cmdIdx {
		if e, msg := outs[i].code(); e != nil {
			resp.Topics[idx].ErrorCode, resp.Topics[idx].ErrorMessage = e.Code, strPtr(msg)
		}
	}
	return resp, nil
}

func checkCreatePartitions(view *meta.View, rt *kmsg.CreatePartitionsRequestTopic, brokers []Broker) (*kerr.Error, string) {
	t, ok, err := view.Topic(rt.Topic)
	switch {
	case err != nil:
		return kerr.UnknownServerError, err.Error()
	case !ok:
		return kerr.UnknownTopicOrPartition, fmt.Sprintf("no topic %q", rt.Topic)
	case rt.Count == t.Partitions:
		return kerr.InvalidPartitions, fmt.Sprintf("topic already has %d partitions", t.Partitions)
	case rt.Count < t.Partitions:
		return kerr.InvalidPartitions, fmt.Sprintf("topic has %d partitions, more than the %d asked for", t.Partitions, rt.Count)
	case rt.Count > maxPartitionsPerTopic:
		return kerr.InvalidPartitions, fmt.Sprintf("at most %d partitions", maxPartitionsPerTopic)
	}
	if rt.Assignment == nil {
		return nil, ""
	}
	if added := int(rt.Count - t.Partitions); len(rt.Assignment) != added {
		return kerr.InvalidReplicaAssignment, fmt.Sprintf("%d assignments for %d new partitions", len(rt.Assignment), added)
	}
	lists := make([][]int32, len(rt.Assignment))
	for i, a := range rt.Assignment {
		if len(a.Replicas) == 0 {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("assignment %d has no replicas", i)
		}
		lists[i] = a.Replicas
	}
	if msg := checkReplicaLists(lists, brokers); msg != "" {
		return kerr.InvalidReplicaAssignment, msg
	}
	return nil, ""
}
