// CreateTopics: v0-7
//   - Any agent takes it: each is the controller as far as clients know.
//   - NumPartitions -1 is Deps.DefaultPartitions (KIP-464; accepted at
//     every version); 0, below -1 or above 65536 is INVALID_PARTITIONS.
//   - ReplicationFactor -1 or any value >= 1 is accepted and not kept:
//     storage is shared and acknowledged data is durable in the object
//     store, so Metadata shows one replica per partition and the response
//     reports 1. 0 or below -1 is INVALID_REPLICATION_FACTOR.
//   - ReplicaAssignment needs NumPartitions and ReplicationFactor -1
//     (else INVALID_REQUEST); its partitions must be 0..n-1 once each,
//     with the same number of distinct, known broker ids (else
//     INVALID_REPLICA_ASSIGNMENT). It sets the partition count; placement
//     means nothing here.
//   - Configs must be known topic configs (internal/topicconfig) with
//     valid, non-null values, else INVALID_CONFIG; a name given twice is
//     INVALID_REQUEST. The confluent.* schema validation configs need
//     strand.metadata.version 6 (schema_validation.go), else
//     INVALID_CONFIG.
//   - A topic named twice in one request gets one INVALID_REQUEST entry.
//     An invalid name, or one colliding with another topic ('.' vs '_'),
//     is INVALID_TOPIC_EXCEPTION; an existing topic TOPIC_ALREADY_EXISTS.
//     The collision check reads the local copy, so two agents creating
//     "a.b" and "a_b" at once can both succeed.
//   - More partitions than Deps.MaxPartitionsPerTopic, or than the
//     cluster has room for under Deps.MaxPartitions, is POLICY_VIOLATION
//     (partition_limits.go).
//   - v1+ ValidateOnly runs every check and proposes nothing.
//   - v5+ answers NumPartitions, ReplicationFactor and every config of the
//     topic (value and source); v7+ the TopicID.
//   - TimeoutMillis > 0 bounds the wait for the proposal; past it the
//     answer is REQUEST_TIMED_OUT and the topic may still be created, as
//     with Kafka.
//   - ACLs (authz.go): Create on the cluster or the topic, else
//     TOPIC_AUTHORIZATION_FAILED; without DescribeConfigs on the topic the
//     configs are left out (TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED).

package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

func init() { regKey(19, 0, 7, handleCreateTopics) }

// reportedReplicationFactor is the replica count Metadata shows.
const reportedReplicationFactor = 1

func handleCreateTopics(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	view := db.View()
	defer view.Close()

	counts := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	p := topicPlanner{d: r.Deps, view: view, brokers: r.Deps.brokers(r.Conn)}
	z := r.authz()
	type planned struct {
		idx int
		cmd meta.CreateTopic
	}
	var plans []planned
	dupAnswered := make(map[string]bool)
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		if counts[rt.Topic] > 1 {
			if !dupAnswered[rt.Topic] {
				dupAnswered[rt.Topic] = true
				st.ErrorCode = kerr.InvalidRequest.Code
				st.ErrorMessage = strPtr("duplicate topic name")
				resp.Topics = append(resp.Topics, st)
			}
			continue
		}
		if !z.mayCreateTopic(rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		cmd, e, msg := p.createTopic(rt)
		if e != nil {
			st.ErrorCode = e.Code
			st.ErrorMessage = strPtr(msg)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		resp.Topics = append(resp.Topics, st)
		plans = append(plans, planned{idx: len(resp.Topics) - 1, cmd: cmd})
	}
	if len(plans) == 0 {
		return resp, nil
	}

	cmds := make([]meta.Command, len(plans))
	for i, pl := range plans {
		cmds[i] = pl.cmd
	}
	outs := r.Deps.createOrValidate(ctx, db, cmds, req.ValidateOnly, req.TimeoutMillis)
	for i, pl := range plans {
		st := &resp.Topics[pl.idx]
		if e, msg := outs[i].code(); e != nil {
			st.ErrorCode = e.Code
			st.ErrorMessage = strPtr(msg)
			continue
		}
		fillCreatedTopic(st, pl.cmd, outs[i].res.TopicID)
		if !z.topic(kmsg.ACLOperationDescribeConfigs, st.Topic) {
			st.Configs, st.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
		}
	}
	return resp, nil
}

// fillCreatedTopic sets the v5+ and v7+ fields of a successful answer.
func fillCreatedTopic(st *kmsg.CreateTopicsResponseTopic, cmd meta.CreateTopic, id meta.TopicID) {
	st.TopicID = id
	st.NumPartitions = cmd.Partitions
	st.ReplicationFactor = reportedReplicationFactor
	for _, k := range topicconfig.Keys() {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = k.Name
		v, set := cmd.Configs[k.Name]
		c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		if !set {
			v = k.Default
			c.Source = int8(kmsg.ConfigSourceDefaultConfig)
		}
		c.Value = &v
		st.Configs = append(st.Configs, c)
	}
}

// topicPlanner validates topic creations against one view. It remembers
// the names it planned, so two topics of one request cannot collide.
type topicPlanner struct {
	d       *Deps
	view    *meta.View
	brokers []Broker
	// collisions maps collisionName of existing and planned topics to
	// their names; loaded on first use.
	collisions map[string]string
}

// createTopic returns the command creating rt, or the error to answer.
func (p *topicPlanner) createTopic(rt *kmsg.CreateTopicsRequestTopic) (meta.CreateTopic, *kerr.Error, string) {
	name := rt.Topic
	if !meta.ValidTopicName(name) {
		return meta.CreateTopic{}, kerr.InvalidTopicException, topicNameError(name)
	}
	if _, exists, err := p.view.Topic(name); err != nil {
		return meta.CreateTopic{}, kerr.UnknownServerError, err.Error()
	} else if exists {
		return meta.CreateTopic{}, kerr.TopicAlreadyExists, fmt.Sprintf("topic %q already exists", name)
	}
	if p.collisions == nil {
		var err error
		if p.collisions, err = collisionIndex(p.view); err != nil {
			return meta.CreateTopic{}, kerr.UnknownServerError, err.Error()
		}
	}
	if other, ok := p.collisions[collisionName(name)]; ok {
		return meta.CreateTopic{}, kerr.InvalidTopicException,
			fmt.Sprintf("topic %q collides with topic %q ('.' and '_' are the same in metric names)", name, other)
	}

	var partitions int32
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return meta.CreateTopic{}, kerr.InvalidRequest, "a replica assignment needs numPartitions and replicationFactor -1"
		}
		lists := make([][]int32, len(rt.ReplicaAssignment))
		for i, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(lists) || lists[a.Partition] != nil {
				return meta.CreateTopic{}, kerr.InvalidReplicaAssignment,
					fmt.Sprintf("assignment partitions must be 0 to %d, each once", len(lists)-1)
			}
			if len(a.Replicas) == 0 {
				return meta.CreateTopic{}, kerr.InvalidReplicaAssignment, fmt.Sprintf("partition %d has no replicas", a.Partition)
			}
			lists[a.Partition] = rt.ReplicaAssignment[i].Replicas
		}
		if msg := checkReplicaLists(lists, p.brokers); msg != "" {
			return meta.CreateTopic{}, kerr.InvalidReplicaAssignment, msg
		}
		partitions = int32(min(len(lists), maxPartitionsPerTopic+1))
	} else {
		switch {
		case rt.NumPartitions == -1:
			partitions = p.d.defaultPartitions()
		case rt.NumPartitions < 1:
			return meta.CreateTopic{}, kerr.InvalidPartitions, "number of partitions must be at least 1, or -1 for the default"
		default:
			partitions = rt.NumPartitions
		}
		if rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1 {
			return meta.CreateTopic{}, kerr.InvalidReplicationFactor, "replication factor must be at least 1, or -1 for the default"
		}
	}
	if partitions > maxPartitionsPerTopic {
		return meta.CreateTopic{}, kerr.InvalidPartitions, fmt.Sprintf("at most %d partitions", maxPartitionsPerTopic)
	}

	var configs map[string]string
	for _, c := range rt.Configs {
		if _, dup := configs[c.Name]; dup {
			return meta.CreateTopic{}, kerr.InvalidRequest, fmt.Sprintf("config %q given twice", c.Name)
		}
		if c.Value == nil {
			return meta.CreateTopic{}, kerr.InvalidConfig, fmt.Sprintf("null value for config %q", c.Name)
		}
		if err := topicconfig.Validate(c.Name, *c.Value); err != nil {
			return meta.CreateTopic{}, kerr.InvalidConfig, err.Error()
		}
		if configs == nil {
			configs = make(map[string]string, len(rt.Configs))
		}
		configs[c.Name] = *c.Value
	}
	if err := topicconfig.ValidateCombination(configs); err != nil {
		return meta.CreateTopic{}, kerr.InvalidConfig, err.Error()
	}
	if e, msg := checkSchemaConfigLevel(p.view, configs); e != nil {
		return meta.CreateTopic{}, e, msg
	}
	p.collisions[collisionName(name)] = name
	return meta.CreateTopic{Name: name, Partitions: partitions, Configs: configs}, nil, ""
}

// checkReplicaLists checks a manual assignment: every list as long as the
// first, with distinct ids of known brokers. It returns what is wrong, or
// "".
func checkReplicaLists(lists [][]int32, brokers []Broker) string {
	known := make(map[int32]bool, len(brokers))
	for _, b := range brokers {
		known[b.NodeID] = true
	}
	for i, l := range lists {
		if len(l) != len(lists[0]) {
			return "every partition must have the same number of replicas"
		}
		for j, id := range l {
			if !known[id] {
				return fmt.Sprintf("assignment %d names unknown broker %d", i, id)
			}
			for _, prev := range l[:j] {
				if prev == id {
					return fmt.Sprintf("assignment %d names broker %d twice", i, id)
				}
			}
		}
	}
	return ""
}
