// Metadata: v0-13
//   - Brokers are the live agents (Deps.Cluster). ControllerID (v1+) is
//     this agent: every agent takes admin requests. ClusterID from v2.
//   - Topics: in v0 an empty list means every topic; from v1 a null list
//     means every topic and an empty one none (MetadataRequest.isAllTopics).
//     A topic asked for twice is answered once.
//   - Every partition: leader its placement (Deps.partitionLeader) over
//     the live agents of the client's zone (zones.go), over every live
//     agent when the zone is unknown or has none; leader epoch 0 (v7+), replicas and ISR just the leader, no offline replicas
//     (v5+). Storage is shared: there is nothing to replicate, and any
//     agent serves any partition. A partition an AlterPartitionReassignments
//     gave a replica list reports that list, led by its first live agent
//     (its first live agent of the client's zone, if any), with the
//     others offline (replicas.go).
//   - An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, unless
//     Deps.AutoCreateTopics is on and the request allows it
//     (AllowAutoTopicCreation from v4; always below v4): then it is created
//     with Deps.DefaultPartitions and default configs. As Kafka, the
//     answer is LEADER_NOT_AVAILABLE with no partitions (nor id), and the
//     client asks again; here the topic exists by then, since creation is
//     done when the proposal returns. A name that cannot
//     be a topic, or that collides with one ('.' vs '_'), is then
//     INVALID_TOPIC_EXCEPTION; one the partition limits leave no room for
//     POLICY_VIOLATION (partition_limits.go).
//   - The answer reserves its size from the response budget and holds it
//     until written (respbudget.go); partition entries are shared
//     across answers (metadata_shared.go); answers over 64 KiB are paced
//     to 64 MiB/s across the agent (metadata_rate.go).
//   - v10+: TopicID. v12: topics asked for by id (UNKNOWN_TOPIC_ID, with a
//     null name, when unknown; never auto-created). An id in a v10-11
//     request is INVALID_REQUEST, as Kafka answers.
//   - v8+: authorized operations when asked (cluster ones v8-10 only):
//     what the client may do (everything the resource supports with
//     ACLs off); -2147483648 when not asked.
//   - IsInternal is true for __consumer_offsets (internal_topics.go),
//     which holds records derived from the committed offsets in the
//     metadata database (package offsetstopic).
//   - v13 (KIP-1102): top-level ErrorCode. REBOOTSTRAP_REQUIRED, with no
//     brokers and no topics, when this agent is draining for shutdown and
//     no other live agent serves the client's listener: every broker the
//     client could learn of is leaving, so it should go back to its
//     bootstrap servers (a name behind which the next agents come up)
//     rather than retry this one. Otherwise 0; Kafka 4.2's brokers set
//     nothing else there either.
//   - ACLs (authz.go): a topic the client may not Describe is left out of
//     an all-topics answer and TOPIC_AUTHORIZATION_FAILED when named;
//     auto-creation needs Create on the cluster or the topic, else
//     TOPIC_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(3, 0, 13, handleMetadata) }

func handleMetadata(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	d := r.Deps
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	brokers := d.brokers(r.Conn)
	if req.Version >= 13 && rebootstrapRequired(r, brokers) {
		resp.ErrorCode = kerr.RebootstrapRequired.Code
		return resp, nil
	}
	for _, b := range brokers {
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.NodeID, b.Host, b.Port, rackPtr(b.Rack)
		resp.Brokers = append(resp.Brokers, rb)
	}
	resp.ClusterID = strPtr(d.Cluster.ClusterID)
	resp.ControllerID = d.Cluster.NodeID
	z := r.authz()
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = z.clusterOps()
	}
	m := metadataAnswer{d: d, z: z, brokers: brokers, includeOps: req.Version >= 8 && req.IncludeTopicAuthorizedOperations}
	m.placeOn, m.zone = placeLeaders(brokers, r.Conn.Zone())

	hold := d.holdResponse()
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		// Listing every topic allocates per topic before the size is
		// known: pace and reserve by what the last such answer took
		// first, so waiting answers hold nothing.
		if err := m.pace(ctx, r, d.shared.allTopicsHeld()); err != nil {
			return nil, err
		}
		if err := m.takeBudget(ctx, r, hold, d.shared.lastAllTopicsBytes()); err != nil {
			return nil, err
		}
		view := db.View()
		defer view.Close()
		m.lists.view = view
		ts, err := view.Topics()
		if err != nil {
			hold.release()
			// No per-request error code before v13: the client
			// retries on a new connection.
			return nil, fmt.Errorf("kafka: metadata: listing topics: %w", err)
		}
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(ts))
		for i := range ts {
			// Topics the client may not describe are left out, as
			// Kafka leaves them out.
			if z.quiet().topic(kmsg.ACLOperationDescribe, ts[i].Name) {
				resp.Topics = append(resp.Topics, m.topic(&ts[i]))
			}
		}
		n := metadataHeldBytes(resp)
		d.shared.noteAllTopicsBytes(n)
		hold.resize(n)
		return hold.wrap(resp, n/2), nil
	}
	resp, err = m.topics(ctx, db, req, resp)
	if err != nil {
		return nil, err
	}
	n := metadataHeldBytes(resp)
	if err := m.pace(ctx, r, n); err != nil {
		return nil, err
	}
	if err := m.takeBudget(ctx, r, hold, n); err != nil {
		return nil, err
	}
	return hold.wrap(resp, n/2), nil
}

// pace waits, for an answer holding held bytes of the budget (about twice
// its encoding), until the agent's Metadata pace allows it
// (metadata_rate.go).
func (m *metadataAnswer) pace(ctx context.Context, r *Request, held int64) error {
	encoded := held / 2
	if m.d == nil || m.d.shared == nil || m.d.shared.metadataPacer == nil || encoded < metadataPacedBytes {
		return nil
	}
	return m.d.shared.metadataPacer.take(ctx, encoded, r.draining())
}

// Response budget use of a Metadata answer (respbudget.go): its encoding,
// twice for the writer's buffer growing to it, plus a topic's structs.
const (
	metadataTopicHeldBytes     = 256
	metadataPartitionHeldBytes = 2 * 34
)

// metadataHeldBytes is what resp holds of the response budget.
func metadataHeldBytes(resp *kmsg.MetadataResponse) int64 {
	var n int64
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		n += metadataTopicHeldBytes + int64(len(rt.Partitions))*metadataPartitionHeldBytes
		if rt.Topic != nil {
			n += int64(len(*rt.Topic))
		}
	}
	return n
}

// takeBudget waits until hold has n bytes of the response budget, or the
// connection ends (its error). A server shutting down answers without.
func (m *metadataAnswer) takeBudget(ctx context.Context, r *Request, hold *respHold, n int64) error {
	if hold == nil || n <= 0 {
		return nil
	}
	if hold.take(ctx, n, n, nil, r.draining()) == 0 && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// topics answers a request naming topics (by name or, v12, by id),
// creating those it may.
func (m *metadataAnswer) topics(ctx context.Context, db MetaDB, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) (*kmsg.MetadataResponse, error) {
	d := m.d
	view := db.View()
	defer view.Close()
	m.lists.view = view

	allowAuto := d.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	seen := make(map[string]bool, len(req.Topics))
	seenID := make(map[meta.TopicID]bool)
	// pending are auto-creations: their index in resp.Topics and name.
	type pendingTopic struct {
		idx  int
		name string
	}
	var pending []pendingTopic
	var collisions map[string]string
	for _, rt := range req.Topics {
		if id := meta.TopicID(rt.TopicID); !id.IsZero() {
			if req.Version < 12 {
				name := rt.Topic
				if name == nil {
					name = kmsg.StringPtr("")
				}
				resp.Topics = append(resp.Topics, errTopic(name, id, kerr.InvalidRequest))
				continue
			}
			if seenID[id] {
				continue
			}
			seenID[id] = true
			t, ok, err := view.TopicByID(id)
			switch {
			case err != nil:
				resp.Topics = append(resp.Topics, errTopic(nil, id, kerr.UnknownServerError))
			case !ok:
				resp.Topics = append(resp.Topics, errTopic(nil, id, kerr.UnknownTopicID))
			case !m.z.topic(kmsg.ACLOperationDescribe, t.Name):
				resp.Topics = append(resp.Topics, errTopic(nil, id, kerr.TopicAuthorizationFailed))
			case !seen[t.Name]:
				seen[t.Name] = true
				resp.Topics = append(resp.Topics, m.topic(&t))
			}
			continue
		}
		if rt.Topic == nil || seen[*rt.Topic] {
			continue
		}
		name := *rt.Topic
		seen[name] = true
		if !m.z.topic(kmsg.ACLOperationDescribe, name) {
			resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.TopicAuthorizationFailed))
			continue
		}
		t, ok, err := view.Topic(name)
		switch {
		case err != nil:
			resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.UnknownServerError))
			continue
		case ok:
			resp.Topics = append(resp.Topics, m.topic(&t))
			continue
		case !allowAuto:
			resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.UnknownTopicOrPartition))
			continue
		case !m.z.mayCreateTopic(name):
			resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.TopicAuthorizationFailed))
			continue
		case !meta.ValidTopicName(name):
			resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.InvalidTopicException))
			continue
		}
		if collisions == nil {
			if collisions, err = collisionIndex(view); err != nil {
				resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.UnknownServerError))
				continue
			}
		}
		if _, taken := collisions[collisionName(name)]; taken {
			resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.InvalidTopicException))
			continue
		}
		collisions[collisionName(name)] = name
		pending = append(pending, pendingTopic{idx: len(resp.Topics), name: name})
		resp.Topics = append(resp.Topics, errTopic(&name, meta.TopicID{}, kerr.LeaderNotAvailable))
	}
	if len(pending) == 0 {
		return resp, nil
	}

	cmds := make([]meta.Command, len(pending))
	for i, p := range pending {
		cmds[i] = meta.CreateTopic{Name: p.name, Partitions: d.defaultPartitions()}
	}
	outs := d.proposeCreations(ctx, db, cmds)
	for i, p := range pending {
		// Created, or TOPIC_ALREADY_EXISTS (someone else created it
		// first, which is as good): LEADER_NOT_AVAILABLE stays, as
		// Kafka answers, and the client asks again.
		if e, _ := outs[i].code(); e != nil && e != kerr.TopicAlreadyExists {
			resp.Topics[p.idx].ErrorCode = e.Code
		}
	}
	return resp, nil
}

// metadataAnswer builds the topic entries of one Metadata response.
type metadataAnswer struct {
	d       *Deps
	z       authz
	brokers []Broker
	// placeOn are the brokers leaders are placed on: those of the
	// client's zone, else brokers; zone is that zone, "" for brokers.
	placeOn    []Broker
	zone       string
	includeOps bool
	// leaders is d.leadersKey(brokers, placeOn), made on first use.
	leaders string
	// lists reads the replica lists reassignments recorded.
	lists replicaLists
}

func (m *metadataAnswer) topic(t *meta.Topic) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr(t.Name)
	rt.TopicID = t.ID
	rt.IsInternal = isInternalTopic(t.Name)
	if m.includeOps {
		rt.AuthorizedOperations = m.z.topicOps(t.Name)
	}
	var epoch uint64
	if m.lists.view != nil {
		var err error
		if epoch, err = m.lists.epoch(t.ID); err != nil {
			rt.ErrorCode = kerr.UnknownServerError.Code
			return rt
		}
	}
	var listsErr error
	build := func() []kmsg.MetadataResponseTopicPartition {
		if epoch == 0 {
			return m.partitions(t, nil)
		}
		lists, err := m.lists.of(t.ID)
		if err != nil {
			listsErr = err
			return nil
		}
		return m.partitions(t, lists)
	}
	if s := m.d.shared; s != nil {
		if m.leaders == "" {
			m.leaders = m.d.leadersKey(m.brokers, m.placeOn)
		}
		rt.Partitions = s.partitionLists.get(t, m.zone, withEpoch(m.leaders, epoch), build)
	} else {
		rt.Partitions = build()
	}
	if listsErr != nil {
		rt.ErrorCode, rt.Partitions = kerr.UnknownServerError.Code, nil
	}
	return rt
}

// partitions makes t's partition entries; lists are the replica lists
// reassignments recorded, by partition (nil for none).
func (m *metadataAnswer) partitions(t *meta.Topic, lists map[int32][]int32) []kmsg.MetadataResponseTopicPartition {
	n := t.Partitions
	parts := make([]kmsg.MetadataResponseTopicPartition, n)
	// One backing array for every partition's one-replica lists.
	leaders := make([]int32, n)
	for p := range n {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = p
		rp.LeaderEpoch = 0
		if list, ok := lists[p]; ok {
			r := m.d.replicasOf(m.brokers, t.ID, p, list)
			if m.zone != "" {
				// The operator chose the agents; of them, a client's
				// zone's leads for it.
				if i := slices.IndexFunc(r.isr, func(n int32) bool { return live(m.placeOn, n) }); i >= 0 {
					r.leader = r.isr[i]
				}
			}
			rp.Leader, rp.Replicas, rp.ISR, rp.OfflineReplicas = r.leader, r.replicas, r.isr, r.offline
			parts[p] = rp
			continue
		}
		leaders[p] = m.d.partitionLeader(m.placeOn, t.ID, p)
		rp.Leader = leaders[p]
		rp.Replicas = leaders[p : p+1 : p+1]
		rp.ISR = rp.Replicas
		rp.OfflineReplicas = leaders[:0:0]
		parts[p] = rp
	}
	return parts
}

func errTopic(name *string, id meta.TopicID, e *kerr.Error) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = name
	rt.TopicID = id
	rt.ErrorCode = e.Code
	if name == nil && rt.TopicID == ([16]byte{}) {
		// Below v12 the name is not nullable.
		rt.Topic = kmsg.StringPtr("")
	}
	return rt
}

// collisionIndex maps collisionName of every topic to its name.
func collisionIndex(v *meta.View) (map[string]string, error) {
	ts, err := v.Topics()
	if err != nil {
		return nil, err
	}
	idx := make(map[string]string, len(ts))
	for _, t := range ts {
		idx[collisionName(t.Name)] = t.Name
	}
	return idx, nil
}

// rebootstrapRequired reports whether a Metadata v13 answer should send
// the client back to its bootstrap servers: this agent is draining and
// brokers names no other agent.
func rebootstrapRequired(r *Request, brokers []Broker) bool {
	select {
	case <-r.draining():
	default:
		return false
	}
	return !slices.ContainsFunc(brokers, func(b Broker) bool { return b.NodeID != r.Deps.Cluster.NodeID })
}
