// KIP-848 consumer groups, the state: members and their epochs, the
// target assignment, reconciliation toward it, session and revocation
// timers, and the GroupState stored for the group. The requests that
// drive it are in consumer.go.
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

package group

import (
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

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
	// sessionTimeout and heartbeatInterval are the group's
	// (consumer.session.timeout.ms, consumer.heartbeat.interval.ms),
	// read at each heartbeat; zero: the coordinator's.
	sessionTimeout    time.Duration
	heartbeatInterval time.Duration
}

// consumerSession is the consumer group's session timeout.
func (g *group) consumerSession() time.Duration {
	if g.cg != nil && g.cg.sessionTimeout > 0 {
		return g.cg.sessionTimeout
	}
	return g.c.cfg.ConsumerSessionTimeout
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
	timer          clock.Timer
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
	clock.Stop(m.timer)
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
	m.deadline = g.c.clock.Now().Add(g.consumerSession())
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
	clock.Stop(m.timer)
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
			SessionTimeoutMs:   int32(min(g.consumerSession()/time.Millisecond, math.MaxInt32)),
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
	return g.storeAndWaitLocked(cmd)
}

// storeAndWaitLocked queues a group's state command. The channel gets nil
// once it applied, or the code to answer with; a failed store unloads
// the group, so the next request loads what the log has.
func (g *group) storeAndWaitLocked(cmd meta.Command) <-chan *kerr.Error {
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
			c.log.Warn("group: storing group state failed; unloading", "group", g.name, "err", err, "code", res.Code)
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
