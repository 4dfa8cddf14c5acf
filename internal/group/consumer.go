// KIP-848 consumer groups, the requests: ConsumerGroupHeartbeat (validation,
// joining, leaving, epoch checks, the answer), offset commits checked
// against member epochs, and ConsumerGroupDescribe. The group's state,
// its target assignment and the members' reconciliation toward it are in
// reconcile.go.

package group

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// Member epochs with a meaning in ConsumerGroupHeartbeat.
const (
	epochJoin        = 0
	epochLeave       = -1
	epochStaticLeave = -2
)

// maxRegexBytes bounds a subscription regex, which is compiled on the
// coordinator.
const maxRegexBytes = 4096

func compileSubscription(expr string) (*regexp.Regexp, error) {
	if len(expr) > maxRegexBytes {
		return nil, fmt.Errorf("regex is longer than %d bytes", maxRegexBytes)
	}
	// Kafka matches the whole topic name (RE2/J); Go's regexp is RE2.
	return regexp.Compile("^(?:" + expr + ")$")
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat (KIP-848). A nil
// field leaves what the member said before unchanged.
type ConsumerHeartbeatRequest struct {
	Group string
	// MemberID names the member; on a first join it may be empty for the
	// coordinator to name it, unless RequireMemberID.
	MemberID        string
	RequireMemberID bool
	// MemberEpoch is the member's epoch: 0 joins, -1 leaves, -2 is a
	// static member's leave.
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeoutMs is -1 when not given; a join must give it.
	RebalanceTimeoutMs   int32
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	ServerAssignor       *string
	// Owned is what the member owns, by topic id; a join owns nothing
	// (not nil).
	Owned []ConsumerTopic
}

// ConsumerTopic is some partitions of a topic in a KIP-848 assignment.
type ConsumerTopic struct {
	TopicID meta.TopicID
	// Topic is set in answers; requests name topics by id only.
	Topic      string
	Partitions []int32
}

// ConsumerHeartbeatResult answers a ConsumerHeartbeatRequest.
type ConsumerHeartbeatResult struct {
	// Code is a Kafka error code, 0 for success; Message may explain it.
	Code              int16
	Message           string
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment, if not nil, is the member's assignment, sent when it
	// changed or the member's view of it differs.
	Assignment []ConsumerTopic
}

// validateConsumerHeartbeat is KIP-848's request validation.
func validateConsumerHeartbeat(req *ConsumerHeartbeatRequest) (*kerr.Error, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidGroupID, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return kerr.InvalidRequest, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return kerr.InvalidRequest, "RackId can't be empty."
	case req.RequireMemberID && req.MemberID == "":
		return kerr.InvalidRequest, "MemberId can't be empty."
	case req.MemberEpoch < epochStaticLeave:
		return kerr.InvalidRequest, "MemberEpoch is invalid."
	case req.MemberEpoch == epochStaticLeave && req.InstanceID == nil:
		return kerr.InvalidRequest, "InstanceId can't be null for a static leave."
	case req.MemberEpoch > 0 && req.MemberID == "":
		return kerr.InvalidRequest, "MemberId can't be empty."
	case req.ServerAssignor != nil && !knownAssignor(*req.ServerAssignor):
		return kerr.UnsupportedAssignor, fmt.Sprintf("ServerAssignor %q is not supported; supported: %q, %q.", *req.ServerAssignor, UniformAssignor, RangeAssignor)
	}
	if req.MemberEpoch == epochJoin {
		switch {
		case req.RebalanceTimeoutMs == -1:
			return kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case len(req.Owned) > 0 || req.Owned == nil:
			return kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return kerr.InvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileSubscription(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression, fmt.Sprintf("SubscribedTopicRegex: %v", err)
		}
	}
	return nil, ""
}

// ConsumerGroupHeartbeat serves a KIP-848 member: it joins (epoch 0),
// heartbeats with its epoch and what it owns, and leaves (epoch -1, or
// -2 for a static member). The answer carries the member's epoch, the
// heartbeat interval and, when it changed or the member's view differs,
// its assignment. A heartbeat that changed a durable fact is answered
// once the group's state applied.
//
// It works in two steps, as OffsetCommit does: the call decides the
// heartbeat (epochs, revocations, assignment) and queues what must be
// stored, the returned function waits for that and answers. A caller
// that makes a connection's calls in request order keeps a heartbeat
// from overtaking a commit the member sent before it: the heartbeat that
// hands partitions back moves the member's epoch, after which a commit
// of those partitions at the old epoch is STALE_MEMBER_EPOCH.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, cl Client, req ConsumerHeartbeatRequest) func(context.Context) ConsumerHeartbeatResult {
	fail := func(e *kerr.Error, msg string) func(context.Context) ConsumerHeartbeatResult {
		res := ConsumerHeartbeatResult{Code: e.Code, Message: msg}
		return func(context.Context) ConsumerHeartbeatResult { return res }
	}
	if e, msg := validateConsumerHeartbeat(&req); e != nil {
		return fail(e, msg)
	}
	if !c.Owns(req.Group) {
		return fail(kerr.NotCoordinator, "")
	}
	g, e := c.lockGroup(ctx, req.Group, req.MemberEpoch == epochJoin)
	if e != nil {
		return fail(e, "")
	}
	if g == nil {
		return fail(kerr.GroupIDNotFound, fmt.Sprintf("Consumer group %s not found.", req.Group))
	}
	res, wait, e, msg := g.consumerHeartbeatLocked(cl, &req)
	g.mu.Unlock()
	c.notify()
	if e != nil {
		return fail(e, msg)
	}
	return awaitStored(c, res, wait, func(code int16) ConsumerHeartbeatResult { return ConsumerHeartbeatResult{Code: code} })
}

// awaitStored is the second step of ConsumerGroupHeartbeat and
// ShareGroupHeartbeat: the first decided res and queued what must be
// stored (wait; nil when nothing is). It answers res once the store
// applied, the store's refusal as failed(code) if it was refused, and
// NOT_COORDINATOR when ctx or the coordinator ends first.
func awaitStored[R any](c *Coordinator, res R, wait <-chan *kerr.Error, failed func(code int16) R) func(context.Context) R {
	return func(ctx context.Context) R {
		if wait == nil {
			return res
		}
		select {
		case e := <-wait:
			if e != nil {
				return failed(e.Code)
			}
			return res
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
		return failed(kerr.NotCoordinator.Code)
	}
}

// consumerHeartbeatLocked returns the answer and, if a store was queued,
// the wait for it; or the error to answer with.
func (g *group) consumerHeartbeatLocked(cl Client, req *ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, <-chan *kerr.Error, *kerr.Error, string) {
	var none ConsumerHeartbeatResult
	switch {
	case g.state == stateDead:
		return none, nil, kerr.CoordinatorNotAvailable, ""
	case g.kind == meta.GroupShare:
		// One id, one kind: even an empty share group keeps its id.
		return none, nil, kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", g.name)
	case g.kind != meta.GroupConsumer && (len(g.members) > 0 || len(g.awaitingJoin) > 0 || g.state != stateEmpty):
		return none, nil, kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", g.name)
	}
	if g.kind != meta.GroupConsumer || g.cg == nil {
		// An empty classic group (or a new one) becomes a consumer
		// group; its offsets stay.
		g.kind = meta.GroupConsumer
		g.protocolType = consumerProtocolType
		g.protocol, g.leader = "", ""
		g.cg = newConsumerGroup()
	}
	cg := g.cg
	cv := g.c.store.View()
	cg.sessionTimeout, cg.heartbeatInterval = groupTimeouts(cv, g.name,
		meta.GroupConsumerSessionTimeoutMs, g.c.cfg.ConsumerSessionTimeout,
		meta.GroupConsumerHeartbeatIntervalMs, g.c.cfg.ConsumerHeartbeatInterval)
	cv.Close()
	res := ConsumerHeartbeatResult{HeartbeatInterval: cg.heartbeatInterval}

	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave {
		id := req.MemberID
		if req.InstanceID != nil {
			owner, ok := cg.static[*req.InstanceID]
			switch {
			case !ok:
				return none, nil, kerr.UnknownMemberID, ""
			case owner != id:
				return none, nil, kerr.FencedInstanceID, ""
			}
		}
		m := cg.members[id]
		if m == nil {
			return none, nil, kerr.UnknownMemberID, ""
		}
		g.c.log.Debug("group: consumer member leaves", "group", g.name, "member", id, "epoch", req.MemberEpoch)
		g.removeConsumerMemberLocked(m)
		res.MemberID, res.MemberEpoch = id, req.MemberEpoch
		return res, g.storeConsumerLocked(), nil, ""
	}

	v := g.c.store.View()
	defer v.Close()
	m := cg.members[req.MemberID]
	joined := false
	if req.MemberEpoch == epochJoin {
		if req.InstanceID != nil {
			if owner, ok := cg.static[*req.InstanceID]; ok && owner != req.MemberID {
				// A static member restarting with a new member id
				// takes over once the old one left.
				if old := cg.members[owner]; old != nil {
					return none, nil, kerr.UnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s is still in the group.", owner, *req.InstanceID)
				}
				delete(cg.static, *req.InstanceID)
			}
		}
		if m == nil {
			if len(cg.members) >= g.c.cfg.MaxGroupSize {
				return none, nil, kerr.GroupMaxSizeReached, ""
			}
			id := req.MemberID
			if id == "" { // the coordinator names the member
				id = newMemberID(cl.ID)
			}
			m = &consumerMember{id: id, assigned: make(assignment), revoking: make(assignment)}
			cg.members[id] = m
			if req.InstanceID != nil {
				m.instanceID = *req.InstanceID
				cg.static[m.instanceID] = id
			}
			joined = true
		} else {
			// A rejoin: the member dropped whatever it had.
			cg.releaseLocked(m, m.assigned)
			cg.releaseLocked(m, m.revoking)
			m.assigned, m.revoking = make(assignment), make(assignment)
			m.epoch, m.prevEpoch, m.state = 0, 0, memberStable
			m.revokeDeadline = time.Time{}
		}
	} else {
		if m == nil {
			return none, nil, kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.name)
		}
		if req.InstanceID != nil && *req.InstanceID != m.instanceID {
			return none, nil, kerr.FencedInstanceID, ""
		}
		if e := m.checkEpoch(req, cg.ids); e != nil {
			return none, nil, e, fmt.Sprintf("Member %s epoch %d does not match the expected %d.", m.id, req.MemberEpoch, m.epoch)
		}
	}

	m.clientID, m.clientHost = cl.ID, cl.Host
	subsChanged := joined
	if req.RebalanceTimeoutMs >= 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMs) * time.Millisecond
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Sorted(slices.Values(req.SubscribedTopicNames))
		names = slices.Compact(names)
		if !slices.Equal(names, m.names) {
			m.names, subsChanged = names, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re = *req.SubscribedTopicRegex, nil
		if m.regex != "" {
			m.re, _ = compileSubscription(m.regex) // validated
		}
		subsChanged = true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.serverAssignor {
		m.serverAssignor, subsChanged = *req.ServerAssignor, true
	}
	g.touchConsumerLocked(m)

	loaded := cg.partitions == nil
	topicsChanged, err := cg.refreshTopicsLocked(v)
	if err != nil {
		g.c.log.Warn("group: reading topics", "group", g.name, "err", err)
		return none, nil, kerr.CoordinatorNotAvailable, ""
	}
	if loaded && !subsChanged {
		// Just loaded: the stored epoch stands if the target computed
		// again is what the members hold.
		topicsChanged = false
		g.computeTargetLocked()
		if !cg.targetHeldLocked() {
			topicsChanged = true
		}
	}
	if subsChanged || topicsChanged {
		g.generation++
	}
	if cg.assignmentEpoch < g.generation {
		g.computeTargetLocked()
	}

	owned, err := ownedFromRequest(req.Owned, cg.ids, v)
	if err != nil {
		return none, nil, kerr.CoordinatorNotAvailable, ""
	}
	before := m.assigned.clone()
	g.reconcileLocked(m, owned)

	res.MemberID, res.MemberEpoch = m.id, m.epoch
	if req.MemberEpoch == epochJoin || !before.equal(m.assigned) || (owned != nil && !owned.equal(m.assigned)) {
		res.Assignment = cg.consumerTopics(m.assigned)
	}
	return res, g.storeConsumerLocked(), nil, ""
}

// checkEpoch is KIP-848's epoch validation: an epoch ahead of the
// member's is fenced; one behind is accepted only as the previous epoch
// from a member that owns no more than it is assigned (it lost the
// answer that moved it on).
func (m *consumerMember) checkEpoch(req *ConsumerHeartbeatRequest, ids map[string]meta.TopicID) *kerr.Error {
	switch {
	case req.MemberEpoch == m.epoch:
		return nil
	case req.MemberEpoch > m.epoch || req.MemberEpoch != m.prevEpoch || req.Owned == nil:
		return kerr.FencedMemberEpoch
	}
	names := make(map[meta.TopicID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	for _, t := range req.Owned {
		n, ok := names[t.TopicID]
		if !ok {
			return kerr.FencedMemberEpoch
		}
		for _, p := range t.Partitions {
			if !m.assigned.has(n, p) {
				return kerr.FencedMemberEpoch
			}
		}
	}
	return nil
}

// ownedFromRequest is what the member says it owns, by topic name; nil
// when it did not say (Topics null: unchanged). Topics it names that no
// longer exist are dropped.
func ownedFromRequest(ts []ConsumerTopic, ids map[string]meta.TopicID, v *meta.View) (assignment, error) {
	if ts == nil {
		return nil, nil
	}
	names := make(map[meta.TopicID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	out := make(assignment)
	for _, t := range ts {
		id := t.TopicID
		n, ok := names[id]
		if !ok {
			tp, found, err := v.TopicByID(id)
			if err != nil {
				return nil, err
			}
			if !found {
				continue
			}
			n = tp.Name
		}
		for _, p := range t.Partitions {
			out.add(n, p)
		}
	}
	return out, nil
}

// consumerCommitCheckLocked validates an offset commit to a consumer
// group: the member epoch stands in for the generation. A commit from an
// older epoch is accepted for partitions the member still owns (it
// committed what it processed before its epoch moved).
func (g *group) consumerCommitCheckLocked(memberID string, epoch int32, offsets []meta.OffsetCommitPartition) *kerr.Error {
	cg := g.cg
	if epoch < 0 && memberID == "" && len(cg.members) == 0 {
		return nil
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case epoch == m.epoch:
		return nil
	case epoch > m.epoch:
		return kerr.StaleMemberEpoch
	}
	for _, o := range offsets {
		if !m.assigned.has(o.Topic, o.Partition) && !m.revoking.has(o.Topic, o.Partition) {
			return kerr.StaleMemberEpoch
		}
	}
	return nil
}

// consumerTopics is a, sorted by topic, with the topics' ids; never nil.
func (cg *consumerGroup) consumerTopics(a assignment) []ConsumerTopic {
	out := make([]ConsumerTopic, 0, len(a))
	for _, t := range a.sortedTopics() {
		out = append(out, ConsumerTopic{TopicID: cg.ids[t], Topic: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

// DescribedConsumerGroup is a KIP-848 group as ConsumerGroupDescribe
// shows it.
type DescribedConsumerGroup struct {
	Group string
	// Code is a Kafka error code, 0 for success; Message may explain it.
	Code            int16
	Message         string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []DescribedConsumerMember
}

// DescribedConsumerMember is a KIP-848 group's member.
type DescribedConsumerMember struct {
	MemberID    string
	InstanceID  string // empty if not static
	RackID      string // empty if not given
	MemberEpoch int32
	ClientID    string
	ClientHost  string
	// SubscribedTopics are the names the member subscribed to, sorted.
	SubscribedTopics     []string
	SubscribedTopicRegex string // empty if none
	Assignment           []ConsumerTopic
	TargetAssignment     []ConsumerTopic
}

// ConsumerGroupDescribe describes each named group. A group that does not
// exist, or is a classic group, is GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, names []string) []DescribedConsumerGroup {
	out := make([]DescribedConsumerGroup, 0, len(names))
	for _, name := range names {
		dg := DescribedConsumerGroup{Group: name}
		if !c.Owns(name) {
			dg.Code = kerr.NotCoordinator.Code
			out = append(out, dg)
			continue
		}
		g, e := c.lockGroup(ctx, name, false)
		switch {
		case e != nil:
			dg.Code = e.Code
		case g == nil:
			dg.Code = kerr.GroupIDNotFound.Code
			dg.Message = fmt.Sprintf("Group %s not found.", name)
		default:
			g.describeConsumerLocked(&dg)
			g.mu.Unlock()
		}
		out = append(out, dg)
	}
	return out
}

func (g *group) describeConsumerLocked(dg *DescribedConsumerGroup) {
	if g.kind != meta.GroupConsumer || g.cg == nil || g.state == stateDead {
		dg.Code = kerr.GroupIDNotFound.Code
		dg.Message = fmt.Sprintf("Group %s is not a consumer group.", g.name)
		return
	}
	cg := g.cg
	dg.State = g.consumerStateLocked()
	dg.Epoch = g.generation
	dg.AssignmentEpoch = max(cg.assignmentEpoch, 0)
	dg.Assignor = cg.assignor
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		dg.Members = append(dg.Members, DescribedConsumerMember{
			MemberID:             m.id,
			InstanceID:           m.instanceID,
			RackID:               m.rackID,
			MemberEpoch:          m.epoch,
			ClientID:             m.clientID,
			ClientHost:           m.clientHost,
			SubscribedTopics:     slices.Clone(m.names),
			SubscribedTopicRegex: m.regex,
			Assignment:           cg.consumerTopics(m.assigned),
			TargetAssignment:     cg.consumerTopics(cg.target[m.id]),
		})
	}
}
