// AlterPartitionReassignments: v0-1 (KIP-455; v1 KIP-860)
//   - Storage is shared, so a reassignment moves no data: it completes
//     when it applies. The requested replica list is recorded through
//     the log (meta.ReassignPartitions), and Metadata reports it as the
//     partition's replicas, its first live agent as leader
//     (replicas.go). ListPartitionReassignments then finds nothing in
//     progress, as Kafka's does once a reassignment completed.
//   - Validated as Kafka's controller validates, with its wording: an
//     unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; an empty
//     list, a broker that is neither registered (the agent table) nor
//     live, or one named twice is INVALID_REPLICA_ASSIGNMENT.
//   - Cancel (null replicas) of an existing partition is
//     NO_REASSIGNMENT_IN_PROGRESS, as Kafka answers for a reassignment
//     that completed: none is ever pending to revert. Kafka's
//     kafka-reassign-partitions --cancel lists first and reports that
//     none is active.
//   - v1: AllowReplicationFactorChange false refuses a list whose length
//     differs from the partition's replicas with INVALID_REPLICATION_FACTOR,
//     and is echoed in the answer.
//   - Needs strand.metadata.version 3, from which agents write the
//     command; below it a valid reassignment is UNSUPPORTED_VERSION,
//     saying so.
//   - TimeoutMillis > 0 bounds the proposal; past it the answer is
//     REQUEST_TIMED_OUT (the lists may still change).
//   - ACLs (authz.go): Alter on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(45, 0, 1, handleAlterPartitionAssignments) }

// maxReassignPerCommand bounds the partitions of one ReassignPartitions,
// so a request moving a large topic becomes several commands of a size
// a log entry takes.
const maxReassignPerCommand = 1024

func handleAlterPartitionAssignments(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if req.Version >= 1 {
		resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	}
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	if resp.ErrorCode = r.authz().clusterCode(kmsg.ACLOperationAlter); resp.ErrorCode != 0 {
		return resp, nil
	}

	p := reassignPlanner{allowRF: allowRF}
	view := db.View()
	p.known, p.err = knownBrokers(view, r.Deps.brokers(r.Conn))
	if p.err == nil {
		var f meta.FinalizedFeatures
		f, p.err = view.Features()
		p.level = f.MetadataLevel()
	}
	p.lists = replicaLists{view: view}
	for _, rt := range req.Topics {
		p.plan(view, &rt)
	}
	view.Close()
	resp.Topics = p.answers

	if len(p.cmds) == 0 {
		return resp, nil
	}
	ctx, cancel := withTimeoutMillis(ctx, req.TimeoutMillis)
	defer cancel()
	outs := proposeAll(ctx, db, p.cmds)
	for i, o := range outs {
		slots := p.slots[i]
		e, msg := o.code()
		if errors.Is(o.err, meta.ErrNotAtLevel) {
			e, msg = errNoReassignLevel(p.level)
		}
		for j, s := range slots {
			rp := &resp.Topics[s.topic].Partitions[s.partition]
			switch {
			case e != nil:
				rp.ErrorCode, rp.ErrorMessage = e.Code, strPtr(msg)
			case j < len(o.res.Codes) && o.res.Codes[j] != 0:
				rp.ErrorCode = o.res.Codes[j]
			}
		}
	}
	return resp, nil
}

// reassignPlanner checks a request's partitions and makes one command per
// topic of those that pass.
type reassignPlanner struct {
	allowRF bool
	known   map[int32]bool
	level   int16
	lists   replicaLists
	// err is a failure to read what the checks need: every partition
	// gets UNKNOWN_SERVER_ERROR.
	err error

	answers []kmsg.AlterPartitionAssignmentsResponseTopic
	cmds    []meta.Command
	// slots are, per command, where each of its partitions is answered.
	slots [][]answerSlot
}

type answerSlot struct{ topic, partition int }

func (p *reassignPlanner) plan(view *meta.View, rt *kmsg.AlterPartitionAssignmentsRequestTopic) {
	out := kmsg.NewAlterPartitionAssignmentsResponseTopic()
	out.Topic = rt.Topic
	ti := len(p.answers)
	t, ok, err := view.Topic(rt.Topic)
	if err == nil {
		err = p.err
	}
	var lists map[int32][]int32
	if ok && err == nil && !p.allowRF {
		lists, err = p.lists.of(t.ID)
	}
	cmd := meta.ReassignPartitions{Topic: rt.Topic}
	var slots []answerSlot
	for _, rp := range rt.Partitions {
		a := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		a.Partition = rp.Partition
		e, msg := p.check(rt.Topic, t, ok, err, lists, &rp)
		if e != nil {
			a.ErrorCode, a.ErrorMessage = e.Code, strPtr(msg)
		} else {
			slots = append(slots, answerSlot{ti, len(out.Partitions)})
			cmd.Partitions = append(cmd.Partitions, meta.PartitionReplicas{Partition: rp.Partition, Replicas: append([]int32(nil), rp.Replicas...)})
		}
		out.Partitions = append(out.Partitions, a)
		if len(cmd.Partitions) == maxReassignPerCommand {
			p.cmds, p.slots = append(p.cmds, cmd), append(p.slots, slots)
			cmd, slots = meta.ReassignPartitions{Topic: rt.Topic}, nil
		}
	}
	p.answers = append(p.answers, out)
	if len(cmd.Partitions) > 0 {
		p.cmds, p.slots = append(p.cmds, cmd), append(p.slots, slots)
	}
}

// check returns the error to answer for one partition, nil to propose it.
func (p *reassignPlanner) check(name string, t meta.Topic, ok bool, err error, lists map[int32][]int32, rp *kmsg.AlterPartitionAssignmentsRequestTopicPartition) (*kerr.Error, string) {
	switch {
	case err != nil:
		return kerr.UnknownServerError, ""
	case !ok:
		return kerr.UnknownTopicOrPartition, fmt.Sprintf("Unable to find a topic named %s.", name)
	case rp.Partition < 0 || rp.Partition >= t.Partitions:
		return kerr.UnknownTopicOrPartition, fmt.Sprintf("Unable to find partition %s:%d.", name, rp.Partition)
	case rp.Replicas == nil:
		// Kafka's NoReassignmentInProgressException carries the
		// code's own message, which ApiError leaves out.
		return kerr.NoReassignmentInProgress, ""
	}
	if msg := checkReassignment(rp.Replicas, p.known); msg != "" {
		return kerr.InvalidReplicaAssignment, msg
	}
	if cur := max(1, len(lists[rp.Partition])); !p.allowRF && cur != len(rp.Replicas) {
		return kerr.InvalidReplicationFactor, fmt.Sprintf("The replication factor is changed from %d to %d", cur, len(rp.Replicas))
	}
	if p.level < meta.MetadataLevel3 {
		return errNoReassignLevel(p.level)
	}
	return nil, ""
}
