package compat

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kadmModule is the franz-go admin package the kadm row runs.
const kadmModule = "github.com/twmb/franz-go/pkg/kadm"

// runKadm is the kadm row: franz-go's admin client, in process, calling
// the admin APIs the kgo suite does not (ElectLeaders,
// AlterPartitionReassignments, ListPartitionReassignments) and checking
// each answer is Kafka's for a cluster whose reassignments complete at
// once.
func runKadm(ctx context.Context, env Env) (row Row) {
	start := time.Now()
	row.Client = "kadm"
	defer func() { row.Elapsed = time.Since(start) }()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == kadmModule {
				row.Version = m.Version
			}
		}
	}
	detail, err := kadmAdmin(ctx, env)
	if err != nil {
		row.set(Admin, Cell{Status: Fail, Detail: err.Error()})
		return row
	}
	row.set(Admin, Cell{Status: Pass, Detail: detail})
	return row
}

func kadmAdmin(ctx context.Context, env Env) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, env.StepTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Addr))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := env.Prefix + "-kadm"
	if _, err := adm.CreateTopic(ctx, 2, -1, nil, topic); err != nil {
		return "", fmt.Errorf("CreateTopic: %w", err)
	}
	defer adm.DeleteTopic(context.WithoutCancel(ctx), topic)
	brokers, err := adm.BrokerMetadata(ctx)
	if err != nil || len(brokers.Brokers) == 0 {
		return "", fmt.Errorf("BrokerMetadata: %v, %d brokers", err, len(brokers.Brokers))
	}
	node := brokers.Brokers[0].NodeID

	// Every partition's leader is already the preferred replica.
	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		return "", fmt.Errorf("ElectLeaders: %w", err)
	}
	if len(elected[topic]) != 2 {
		return "", fmt.Errorf("ElectLeaders answered %v, want both partitions", elected)
	}
	for p, r := range elected[topic] {
		if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			return "", fmt.Errorf("ElectLeaders %s/%d: %v, want ELECTION_NOT_NEEDED", topic, p, r.Err)
		}
	}

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 1, []int32{node})
	req.Assign(topic, 0, []int32{node, node})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return "", fmt.Errorf("AlterPartitionAssignments: %w", err)
	}
	if r := res[topic][1]; r.Err != nil {
		return "", fmt.Errorf("AlterPartitionAssignments %s/1 to [%d]: %v", topic, node, r.Err)
	}
	if r := res[topic][0]; !errors.Is(r.Err, kerr.InvalidReplicaAssignment) {
		return "", fmt.Errorf("AlterPartitionAssignments %s/0 to a broker twice: %v, want INVALID_REPLICA_ASSIGNMENT", topic, r.Err)
	}
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign(topic, 1)
	res, err = adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil || !errors.Is(res[topic][1].Err, kerr.NoReassignmentInProgress) {
		return "", fmt.Errorf("cancelling a completed reassignment: %v, %v; want NO_REASSIGNMENT_IN_PROGRESS", err, res[topic][1].Err)
	}
	listed, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(listed) != 0 {
		return "", fmt.Errorf("ListPartitionReassignments: %v, %v; want none in progress", listed, err)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("ListTopics: %w", err)
	}
	if got := td[topic].Partitions[1].Replicas; !reflect.DeepEqual(got, []int32{node}) {
		return "", fmt.Errorf("%s/1 replicas %v after the reassignment, want [%d]", topic, got, node)
	}
	return "ElectLeaders (ELECTION_NOT_NEEDED), AlterPartitionAssignments (a reassignment, a refused one, a cancel), " +
		"ListPartitionReassignments, ListTopics reporting the replicas", nil
}
