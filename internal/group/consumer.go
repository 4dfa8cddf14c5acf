package group

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe.
//
// Three epochs drive a consumer group. The group epoch moves whenever what
// the assignment depends on changes (members, their subscriptions, the
// partition counts of subscribed topics). The assignment epoch is the
// group epoch the current target assignment was computed at (here always
// at once, in the heartbeat that moved the group epoch). Each member's
// epoch reaches the assignment epoch once it holds its target: a member
// first gives up (revokes) partitions its target no longer has, keeping
// its epoch, then gets the target's partitions that no other member
// still owns, at the new epoch. A partition is thus never owned by two
// members at once.
//
// Membership, deadlines and the reconciliation state are in memory. The
// group epoch, the assignor and every member with its subscription, epoch
// and current assignment are stored as a GroupState (Kind consumer) when
// they change, and the heartbeat that changed them is answered once the
// store applied. The target assignment is not stored: the assignors are
// deterministic and sticky, so a coordinator that loads the group
// computes it again from the members' current assignments.

// memberState is a consumer group member's reconciliation state.
type memberState int8

const (
	// memberStable: the member holds its target at the assignment epoch,
	// or is still to be told about a new target.
	memberStable memberState = iota
	// memberUnrevoked: the member must give partitions up before it moves
	// to the assignment epoch.
	memberUnrevoked
	// memberUnreleased: the member is at the assignment epoch, but some
	// of its target partitions are still owned by others.
	memberUnreleased
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

// consumerGroup is the KIP-848 state of a group of kind consumer. The
// group epoch is group.generation, so the stored generation fence works
// for both kinds.
type consumerGroup struct {
	assignmentEpoch int32
	// assignor is the server assignor the group runs: the one most
	// members named, uniform by default.
	assignor string
	members  map[string]*consumerMember
	// static maps instance ids to member ids.
	static map[string]string
	target map[string]assignment
	// partitions and ids are the subscribed topics that exist, with
	// their partition counts and ids, as of the last heartbeat.
	partitions map[string]int32
	ids        map[string]meta.TopicID
	// owners is who owns each partition: in its assignment or still
	// revoking it.
	owners map[tp]string
	// stored is the last GroupState queued for the log.
	stored *meta.GroupState
}

type consumerMember struct {
	id         string
	instanceID string
	rackID     string
	clientID   string
	clientHost string

	epoch     int32
	prevEpoch int32
	state     memberState

	rebalanceTimeout time.Duration
	names            []string // subscribed topic names, sorted
	regex            string
	re               *regexp.Regexp
	serverAssignor   string

	assigned assignment
	revoking assignment

	deadline       time.Time
	revokeDeadline time.Time // zero unless unrevoked
	timer          Timer
	timerAt        time.Time
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		assignor:   UniformAssignor,
		members:    make(map[string]*consumerMember),
		static:     make(map[string]string),
		target:     make(map[string]assignment),
		partitions: make(map[string]int32),
		ids:        make(map[string]meta.TopicID),
		owners:     make(map[tp]string),
	}
}

// consumerMembers is how many KIP-848 members g has.
func (g *group) consumerMembers() int {
	if g.cg == nil {
		return 0
	}
	return len(g.cg.members)
}

// consumerStateLocked is the group state ConsumerGroupDescribe and
// ListGroups show.
func (g *group) consumerStateLocked() string {
	cg := g.cg
	switch {
	case g.state == stateDead:
		return "Dead"
	case cg == nil || len(cg.members) == 0:
		return "Empty"
	case cg.assignmentEpoch < g.generation:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// loadConsumerLocked fills g's consumer state from its stored state.
func (g *group) loadConsumerLocked(s *meta.Group) {
	cg := newConsumerGroup()
	g.cg = cg
	if s.Protocol != "" {
		cg.assignor = s.Protocol
	}
	// The target is computed again at the next heartbeat; nil
	// partitions say the topics are not resolved yet.
	cg.assignmentEpoch = -1
	cg.partitions = nil
	for _, sm := range s.Members {
		m := &consumerMember{
			id:               sm.MemberID,
			instanceID:       sm.InstanceID,
			clientID:         sm.ClientID,
			clientHost:       sm.ClientHost,
			rebalanceTimeout: time.Duration(sm.RebalanceTimeoutMs) * time.Millisecond,
			assigned:         make(assignment),
			revoking:         make(assignment),
		}
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(sm.Metadata); err == nil {
			m.names = md.Topics
			m.epoch = md.Generation
			m.prevEpoch = md.Generation
			m.regex = string(md.UserData)
			if md.Rack != nil {
				m.rackID = *md.Rack
			}
			for _, o := range md.OwnedPartitions {
				m.revoking[o.Topic] = slices.Sorted(slices.Values(o.Partitions))
			}
		}
		if m.regex != "" {
			m.re, _ = compileSubscription(m.regex)
		}
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(sm.Assignment); err == nil {
			for _, t := range ma.Topics {
				m.assigned[t.Topic] = slices.Sorted(slices.Values(t.Partitions))
			}
		}
		if m.revoking.count() > 0 {
			m.state = memberUnrevoked
		}
		cg.members[m.id] = m
		if m.instanceID != "" {
			cg.static[m.instanceID] = m.id
		}
		cg.ownLocked(m)
		cg.target[m.id] = m.assigned.clone()
		g.touchConsumerLocked(m)
	}
	cmd := g.consumerStateCommandLocked()
	cg.stored = &cmd
}

// ownLocked records m as the owner of what it holds.
func (cg *consumerGroup) ownLocked(m *consumerMember) {
	for _, a := range []assignment{m.assigned, m.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				cg.owners[tp{t, p}] = m.id
			}
		}
	}
}

// releaseLocked frees everything m holds.
func (cg *consumerGroup) releaseLocked(m *consumerMember, a assignment) {
	for t, ps := range a {
		for _, p := range ps {
			if cg.owners[tp{t, p}] == m.id {
				delete(cg.owners, tp{t, p})
			}
		}
	}
}

func compileSubscription(expr string) (*regexp.Regexp, error) {
	if len(expr) > maxRegexBytes {
		return nil, fmt.Errorf("regex is longer than %d bytes", maxRegexBytes)
	}
	// Kafka matches the whole topic name (RE2/J); Go's regexp is RE2.
	return regexp.Compile("^(?:" + expr + ")$")
}

// validateConsumerHeartbeat is KIP-848's request validation.
func validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (*kerr.Error, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidGroupID, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return kerr.InvalidRequest, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return kerr.InvalidRequest, "RackId can't be empty."
	case req.Version >= 1 && req.MemberID == "":
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
		case req.RebalanceTimeoutMillis == -1:
			return kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case len(req.Topics) > 0 || req.Topics == nil:
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

// ConsumerGroupHeartbeat serves ConsumerGroupHeartbeat v0-1 (KIP-848): a
// member joins (epoch 0), heartbeats with its epoch and what it owns,
// and leaves (epoch -1, or -2 for a static member). The answer carries
// the member's epoch, the heartbeat interval and, when it changed or the
// member's view differs, its assignment. A heartbeat that changed a
// durable fact is answered once the group's state applied.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	fail := func(e *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if e, msg := validateConsumerHeartbeat(req); e != nil {
		return fail(e, msg)
	}
	if !c.owns(req.Group) {
		return fail(kerr.NotCoordinator, "")
	}
	g, e := c.lockGroup(ctx, req.Group, req.MemberEpoch == epochJoin)
	if e != nil {
		return fail(e, "")
	}
	if g == nil {
		return fail(kerr.GroupIDNotFound, fmt.Sprintf("Consumer group %s not found.", req.Group))
	}
	resp, wait, e, msg := g.consumerHeartbeatLocked(cl, req)
	g.mu.Unlock()
	c.notify()
	if e != nil {
		return fail(e, msg)
	}
	if wait == nil {
		return resp
	}
	select {
	case e := <-wait:
		if e != nil {
			return fail(e, "")
		}
		return resp
	case <-ctx.Done():
		return fail(kerr.NotCoordinator, "")
	case <-c.ctx.Done():
		return fail(kerr.NotCoordinator, "")
	}
}

func (g *group) consumerHeartbeatLocked(cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, <-chan *kerr.Error, *kerr.Error, string) {
	switch {
	case g.state == stateDead:
		return nil, nil, kerr.CoordinatorNotAvailable, ""
	case g.kind != meta.GroupConsumer && (len(g.members) > 0 || len(g.pending) > 0 || g.state != stateEmpty):
		return nil, nil, kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", g.name)
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
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.HeartbeatIntervalMillis = int32(g.c.cfg.ConsumerHeartbeatInterval / time.Millisecond)

	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave {
		id := req.MemberID
		if req.InstanceID != nil {
			owner, ok := cg.static[*req.InstanceID]
			switch {
			case !ok:
				return nil, nil, kerr.UnknownMemberID, ""
			case owner != id:
				return nil, nil, kerr.FencedInstanceID, ""
			}
		}
		m := cg.members[id]
		if m == nil {
			return nil, nil, kerr.UnknownMemberID, ""
		}
		g.c.log.Debug("group: consumer member leaves", "group", g.name, "member", id, "epoch", req.MemberEpoch)
		g.removeConsumerMemberLocked(m)
		resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(id), req.MemberEpoch
		return resp, g.storeConsumerLocked(), nil, ""
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
					return nil, nil, kerr.UnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s is still in the group.", owner, *req.InstanceID)
				}
				delete(cg.static, *req.InstanceID)
			}
		}
		if m == nil {
			if len(cg.members) >= g.c.cfg.MaxGroupSize {
				return nil, nil, kerr.GroupMaxSizeReached, ""
			}
			id := req.MemberID
			if id == "" { // v0: the coordinator names the member
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
			return nil, nil, kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.name)
		}
		if req.InstanceID != nil && *req.InstanceID != m.instanceID {
			return nil, nil, kerr.FencedInstanceID, ""
		}
		if e := m.checkEpoch(req, cg.ids); e != nil {
			return nil, nil, e, fmt.Sprintf("Member %s epoch %d does not match the expected %d.", m.id, req.MemberEpoch, m.epoch)
		}
	}

	m.clientID, m.clientHost = cl.ID, cl.Host
	subsChanged := joined
	if req.RebalanceTimeoutMillis >= 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
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
		return nil, nil, kerr.CoordinatorNotAvailable, ""
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

	owned, err := ownedFromRequest(req.Topics, cg.ids, v)
	if err != nil {
		return nil, nil, kerr.CoordinatorNotAvailable, ""
	}
	before := m.assigned.clone()
	g.reconcileLocked(m, owned)

	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(m.id), m.epoch
	if req.MemberEpoch == epochJoin || !before.equal(m.assigned) || (owned != nil && !owned.equal(m.assigned)) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range m.assigned.sortedTopics() {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID = [16]byte(cg.ids[t])
			at.Partitions = slices.Clone(m.assigned[t])
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp, g.storeConsumerLocked(), nil, ""
}

// checkEpoch is KIP-848's epoch validation: an epoch ahead of the
// member's is fenced; one behind is accepted only as the previous epoch
// from a member that owns no more than it is assigned (it lost the
// answer that moved it on).
func (m *consumerMember) checkEpoch(req *kmsg.ConsumerGroupHeartbeatRequest, ids map[string]meta.TopicID) *kerr.Error {
	switch {
	case req.MemberEpoch == m.epoch:
		return nil
	case req.MemberEpoch > m.epoch || req.MemberEpoch != m.prevEpoch || req.Topics == nil:
		return kerr.FencedMemberEpoch
	}
	names := make(map[meta.TopicID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	for _, t := range req.Topics {
		n, ok := names[meta.TopicID(t.TopicID)]
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
func ownedFromRequest(ts []kmsg.ConsumerGroupHeartbeatRequestTopic, ids map[string]meta.TopicID, v *meta.View) (assignment, error) {
	if ts == nil {
		return nil, nil
	}
	names := make(map[meta.TopicID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	out := make(assignment)
	for _, t := range ts {
		id := meta.TopicID(t.TopicID)
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

// refreshTopicsLocked resolves the members' subscriptions against the
// topics that exist; true if a subscribed topic appeared, went, or
// changed its partition count.
func (cg *consumerGroup) refreshTopicsLocked(v *meta.View) (bool, error) {
	parts := make(map[string]int32)
	ids := make(map[string]meta.TopicID)
	var res []*regexp.Regexp
	names := make(map[string]bool)
	for _, m := range cg.members {
		for _, n := range m.names {
			names[n] = true
		}
		if m.re != nil {
			res = append(res, m.re)
		}
	}
	if len(res) > 0 {
		ts, err := v.Topics()
		if err != nil {
			return false, err
		}
		for _, t := range ts {
			if names[t.Name] || slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(t.Name) }) {
				parts[t.Name], ids[t.Name] = t.Partitions, t.ID
			}
		}
	} else {
		for n := range names {
			t, ok, err := v.Topic(n)
			if err != nil {
				return false, err
			}
			if ok {
				parts[n], ids[n] = t.Partitions, t.ID
			}
		}
	}
	// Keep the ids of topics members still own, for their answers.
	for k := range cg.owners {
		if _, ok := ids[k.topic]; !ok {
			if id, ok := cg.ids[k.topic]; ok {
				ids[k.topic] = id
			}
		}
	}
	changed := !maps.Equal(parts, cg.partitions)
	cg.partitions, cg.ids = parts, ids
	return changed, nil
}

// topicsOf is m's resolved subscription, sorted.
func (cg *consumerGroup) topicsOf(m *consumerMember) []string {
	var out []string
	for t := range cg.partitions {
		if _, ok := slices.BinarySearch(m.names, t); ok || (m.re != nil && m.re.MatchString(t)) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// computeTargetLocked computes the target assignment of the group epoch.
func (g *group) computeTargetLocked() {
	cg := g.cg
	votes := make(map[string]int)
	for _, m := range cg.members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	cg.assignor = UniformAssignor
	best := 0
	for _, name := range sortedKeys(votes) {
		if votes[name] > best {
			cg.assignor, best = name, votes[name]
		}
	}
	ms := make([]assignMember, 0, len(cg.members))
	for _, m := range cg.members {
		ms = append(ms, assignMember{id: m.id, topics: cg.topicsOf(m), previous: cg.target[m.id]})
	}
	cg.target = assign(cg.assignor, ms, cg.partitions)
	cg.assignmentEpoch = g.generation
	g.subscribedKnown = true
	g.subscribed = sortedKeys(cg.partitions)
}

// targetHeldLocked: every member holds exactly its target.
func (cg *consumerGroup) targetHeldLocked() bool {
	for id, m := range cg.members {
		if m.revoking.count() > 0 || !m.assigned.equal(cg.target[id]) {
			return false
		}
	}
	return true
}

// reconcileLocked moves m toward its target: revocation first, then the
// target's partitions nobody else owns. owned is what m says it owns (nil
// when it did not say).
func (g *group) reconcileLocked(m *consumerMember, owned assignment) {
	cg := g.cg
	target := cg.target[m.id]
	if target == nil {
		target = make(assignment)
	}
	if m.state == memberUnrevoked {
		if owned == nil || owned.intersect(m.revoking).count() > 0 {
			return
		}
		cg.releaseLocked(m, m.revoking)
		m.revoking = make(assignment)
		m.revokeDeadline = time.Time{}
		m.state = memberStable
	}
	if m.epoch == cg.assignmentEpoch && m.state == memberStable {
		return
	}
	if revoke := m.assigned.minus(target); revoke.count() > 0 {
		m.assigned = m.assigned.intersect(target)
		m.revoking = revoke
		m.state = memberUnrevoked
		m.revokeDeadline = g.c.clock.Now().Add(m.rebalanceTimeout)
		g.armConsumerTimerLocked(m)
		return
	}
	pending := false
	for t, ps := range target {
		for _, p := range ps {
			switch owner := cg.owners[tp{t, p}]; owner {
			case "", m.id:
				m.assigned.add(t, p)
				cg.owners[tp{t, p}] = m.id
			default:
				pending = true
			}
		}
	}
	if m.epoch != cg.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
	}
	m.state = memberStable
	if pending {
		m.state = memberUnreleased
	}
}

// removeConsumerMemberLocked drops m, frees its partitions and moves the
// group epoch so the others' targets take them over.
func (g *group) removeConsumerMemberLocked(m *consumerMember) {
	cg := g.cg
	stopTimer(m.timer)
	m.timer = nil
	cg.releaseLocked(m, m.assigned)
	cg.releaseLocked(m, m.revoking)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
	g.generation++
	g.computeTargetLocked()
}

// touchConsumerLocked restarts m's session.
func (g *group) touchConsumerLocked(m *consumerMember) {
	m.deadline = g.c.clock.Now().Add(g.c.cfg.ConsumerSessionTimeout)
	g.armConsumerTimerLocked(m)
}

// armConsumerTimerLocked makes sure m's timer fires by its next deadline.
// A timer that fires early re-arms itself, so a heartbeat does not need
// to replace it.
func (g *group) armConsumerTimerLocked(m *consumerMember) {
	at := m.deadline
	if !m.revokeDeadline.IsZero() && m.revokeDeadline.Before(at) {
		at = m.revokeDeadline
	}
	if m.timer != nil && !m.timerAt.After(at) {
		return
	}
	stopTimer(m.timer)
	m.timerAt = at
	m.timer = g.c.clock.AfterFunc(max(at.Sub(g.c.clock.Now()), 0), func() { g.consumerTimerFired(m) })
}

// consumerTimerFired removes m if its session ran out or it did not
// revoke within its rebalance timeout.
func (g *group) consumerTimerFired(m *consumerMember) {
	g.mu.Lock()
	defer g.c.notify()
	defer g.mu.Unlock()
	if g.gone || g.cg == nil || g.cg.members[m.id] != m {
		return
	}
	m.timer = nil
	now := g.c.clock.Now()
	expired := !now.Before(m.deadline)
	lateRevoke := !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline)
	if !expired && !lateRevoke {
		g.armConsumerTimerLocked(m)
		return
	}
	g.c.log.Info("group: consumer member removed", "group", g.name, "member", m.id,
		"session_expired", expired, "revocation_timed_out", lateRevoke)
	g.removeConsumerMemberLocked(m)
	g.storeConsumerLocked()
}

// consumerStateCommandLocked is the GroupState of a consumer group: the
// group epoch as the generation, the assignor as the protocol, and per
// member its subscription, epoch and partitions being revoked (metadata)
// and its current assignment.
func (g *group) consumerStateCommandLocked() meta.GroupState {
	cg := g.cg
	cmd := meta.GroupState{
		Group:           g.name,
		Kind:            meta.GroupConsumer,
		ProtocolType:    consumerProtocolType,
		Generation:      g.generation,
		SubscribedKnown: true,
		Subscribed:      slices.Clone(g.subscribed),
	}
	if len(cg.members) > 0 {
		cmd.Protocol = cg.assignor
	}
	ids := sortedKeys(cg.members)
	for _, id := range ids {
		m := cg.members[id]
		md := kmsg.NewConsumerMemberMetadata()
		md.Version = 3
		md.Topics = m.names
		md.Generation = m.epoch
		if m.regex != "" {
			md.UserData = []byte(m.regex)
		}
		if m.rackID != "" {
			md.Rack = kmsg.StringPtr(m.rackID)
		}
		for _, t := range m.revoking.sortedTopics() {
			o := kmsg.NewConsumerMemberMetadataOwnedPartition()
			o.Topic, o.Partitions = t, m.revoking[t]
			md.OwnedPartitions = append(md.OwnedPartitions, o)
		}
		ma := kmsg.NewConsumerMemberAssignment()
		for _, t := range m.assigned.sortedTopics() {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t, m.assigned[t]
			ma.Topics = append(ma.Topics, at)
		}
		cmd.Members = append(cmd.Members, meta.GroupMember{
			MemberID:           m.id,
			InstanceID:         m.instanceID,
			ClientID:           m.clientID,
			ClientHost:         m.clientHost,
			SessionTimeoutMs:   int32(min(g.c.cfg.ConsumerSessionTimeout/time.Millisecond, math.MaxInt32)),
			RebalanceTimeoutMs: int32(min(m.rebalanceTimeout/time.Millisecond, math.MaxInt32)),
			Metadata:           md.AppendTo(nil),
			Assignment:         ma.AppendTo(nil),
		})
	}
	return cmd
}

// storeConsumerLocked queues the group's state if it differs from what
// was last queued. The channel (nil when nothing was queued) gets nil
// once it applied, or the code to answer with; a failed store unloads
// the group, so the next request loads what the log has.
func (g *group) storeConsumerLocked() <-chan *kerr.Error {
	cmd := g.consumerStateCommandLocked()
	if g.cg.stored != nil && reflect.DeepEqual(*g.cg.stored, cmd) {
		return nil
	}
	g.cg.stored = &cmd
	ch := make(chan *kerr.Error, 1)
	c := g.c
	p, err := c.store.Submit(c.ctx, []meta.Command{cmd})
	g.storing++
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var res meta.Result
		if err == nil {
			var rs []meta.Result
			if rs, err = p.Wait(c.ctx); err == nil {
				res = rs[0]
			}
		}
		e := g.storeErrorCode(res, err)
		g.mu.Lock()
		g.storing--
		if e != nil && !g.gone {
			c.log.Warn("group: storing consumer group state failed; unloading", "group", g.name, "err", err, "code", res.Code)
			g.unloadLocked(kerr.NotCoordinator)
		}
		if e == nil && g.gone {
			e = kerr.NotCoordinator
		}
		g.mu.Unlock()
		ch <- e
		c.notify()
	}()
	return ch
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

// ConsumerGroupDescribe serves ConsumerGroupDescribe v0-1. A group that
// does not exist, or is a classic group, is GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = name
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupAuthorizedOps
		}
		if !c.owns(name) {
			dg.ErrorCode = kerr.NotCoordinator.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g, e := c.lockGroup(ctx, name, false)
		switch {
		case e != nil:
			dg.ErrorCode = e.Code
		case g == nil:
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			dg.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Group %s not found.", name))
		default:
			g.describeConsumerLocked(&dg, req.Version)
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *group) describeConsumerLocked(dg *kmsg.ConsumerGroupDescribeResponseGroup, version int16) {
	if g.kind != meta.GroupConsumer || g.cg == nil || g.state == stateDead {
		dg.ErrorCode = kerr.GroupIDNotFound.Code
		dg.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Group %s is not a consumer group.", g.name))
		return
	}
	cg := g.cg
	dg.State = g.consumerStateLocked()
	dg.Epoch = g.generation
	dg.AssignmentEpoch = max(cg.assignmentEpoch, 0)
	dg.AssignorName = cg.assignor
	toKmsg := func(a assignment) kmsg.Assignment {
		var out kmsg.Assignment
		for _, t := range a.sortedTopics() {
			at := kmsg.NewAssignmentTopicPartition()
			at.TopicID, at.Topic = [16]byte(cg.ids[t]), t
			at.Partitions = slices.Clone(a[t])
			out.TopicPartitions = append(out.TopicPartitions, at)
		}
		return out
	}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch = m.id, m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		if m.instanceID != "" {
			dm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		if m.rackID != "" {
			dm.RackID = kmsg.StringPtr(m.rackID)
		}
		dm.SubscribedTopics = slices.Clone(m.names)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			dm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		}
		dm.Assignment = toKmsg(m.assigned)
		dm.TargetAssignment = toKmsg(cg.target[m.id])
		if version >= 1 {
			dm.MemberType = 1 // a KIP-848 consumer
		}
		dg.Members = append(dg.Members, dm)
	}
}
