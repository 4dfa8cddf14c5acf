// KIP-932 share groups, the membership half: ShareGroupHeartbeat,
// ShareGroupDescribe and the state behind them. ShareFetch and
// ShareAcknowledge (the share partitions) are package share's.
//
// A share group's members name themselves (a client-made UUID), join
// with epoch 0, leave with -1, and otherwise heartbeat with their epoch.
// The coordinator assigns the subscribed topics' partitions with the
// simple assignor (share_assignor.go); a partition may go to several
// members. There is no revocation phase: a member's assignment is
// replaced at once, and its epoch moves to the group epoch at its own
// next heartbeat (Kafka's ShareGroupAssignmentBuilder). The group epoch
// moves when a member joins, leaves or is removed, when a subscription
// changes, and when a subscribed topic appears, goes or changes its
// partition count.
//
// Every change of a durable fact (members, epochs, assignments) is
// stored as a meta.ShareGroupState before the heartbeat that made it is
// answered; a coordinator that loads the group has all of it, and the
// members carry on with their epochs. Sessions (share.session.timeout.ms,
// the group's config, else the coordinator's default) are in memory: a
// member that does not heartbeat within its session is removed and the
// others are assigned its partitions.

package group

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// maxShareMemberIDBytes is the longest member id a share member may
// choose: a UUID in its 36-character form, as Kafka checks.
const maxShareMemberIDBytes = 36

// ShareHeartbeatRequest is a ShareGroupHeartbeat (KIP-932). A nil field
// leaves what the member said before unchanged.
type ShareHeartbeatRequest struct {
	Group    string
	MemberID string
	// MemberEpoch is the member's epoch: 0 joins, -1 leaves.
	MemberEpoch          int32
	RackID               *string
	SubscribedTopicNames []string
}

// ShareHeartbeatResult answers a ShareHeartbeatRequest.
type ShareHeartbeatResult struct {
	// Code is a Kafka error code, 0 for success; Message may explain it.
	Code              int16
	Message           string
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment, if not nil, is the member's assignment: on a join, on
	// a full request (subscribed topics given) and when it changed.
	Assignment []ConsumerTopic
}

// shareGroup is the KIP-932 state of a group of kind share. The group
// epoch is group.generation, so the stored generation fence works as
// for the other kinds.
type shareGroup struct {
	members map[string]*shareMember
	// partitions and ids are the subscribed topics that exist, as of
	// the last heartbeat; nil partitions: not resolved since loading.
	partitions map[string]int32
	ids        map[string]meta.TopicID
	// sessionTimeout and heartbeatInterval are the group's, read from
	// its configs at each heartbeat.
	sessionTimeout    time.Duration
	heartbeatInterval time.Duration
	// stored is the last ShareGroupState queued for the log.
	stored *meta.ShareGroupState
}

type shareMember struct {
	id         string
	rackID     string
	clientID   string
	clientHost string

	epoch     int32
	prevEpoch int32
	names     []string // subscribed topic names, sorted
	// assigned is the member's assignment; the target and the
	// current assignment are one in a share group.
	assigned assignment

	deadline time.Time
	timer    clock.Timer
	timerAt  time.Time
}

func newShareGroup(c *Coordinator) *shareGroup {
	return &shareGroup{
		members:           make(map[string]*shareMember),
		partitions:        make(map[string]int32),
		ids:               make(map[string]meta.TopicID),
		sessionTimeout:    c.cfg.ShareSessionTimeout,
		heartbeatInterval: c.cfg.ShareHeartbeatInterval,
	}
}

// shareMembers is how many share members g has.
func (g *group) shareMembers() int {
	if g.sg == nil {
		return 0
	}
	return len(g.sg.members)
}

// shareStateLocked is the state ShareGroupDescribe and ListGroups show:
// Empty, Stable, or Dead while being deleted. Kafka's share groups have
// no other states (no revocation phase).
func (g *group) shareStateLocked() string {
	switch {
	case g.state == stateDead:
		return "Dead"
	case g.shareMembers() == 0:
		return "Empty"
	}
	return "Stable"
}

// validateShareHeartbeat is Kafka's request validation.
func validateShareHeartbeat(req *ShareHeartbeatRequest) (*kerr.Error, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidRequest, "GroupId can't be empty."
	case req.MemberID == "":
		return kerr.InvalidRequest, "MemberId can't be empty."
	case len(req.MemberID) > maxShareMemberIDBytes:
		return kerr.InvalidRequest, fmt.Sprintf("MemberId can't be longer than %d characters.", maxShareMemberIDBytes)
	case req.MemberEpoch < epochLeave:
		return kerr.InvalidRequest, "MemberEpoch is invalid."
	case req.RackID != nil && *req.RackID == "":
		return kerr.InvalidRequest, "RackId can't be empty."
	case req.MemberEpoch == epochJoin && len(req.SubscribedTopicNames) == 0:
		return kerr.InvalidRequest, "SubscribedTopicNames must be set in first request."
	}
	return nil, ""
}

// ShareGroupHeartbeat serves a KIP-932 member. It works in two steps, as
// ConsumerGroupHeartbeat does: the call decides the heartbeat and queues
// what must be stored, the returned function waits for that and answers.
func (c *Coordinator) ShareGroupHeartbeat(ctx context.Context, cl Client, req ShareHeartbeatRequest) func(context.Context) ShareHeartbeatResult {
	fail := func(e *kerr.Error, msg string) func(context.Context) ShareHeartbeatResult {
		res := ShareHeartbeatResult{Code: e.Code, Message: msg}
		return func(context.Context) ShareHeartbeatResult { return res }
	}
	if e, msg := validateShareHeartbeat(&req); e != nil {
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
		return fail(kerr.GroupIDNotFound, fmt.Sprintf("Group %s not found.", req.Group))
	}
	res, wait, e, msg := g.shareHeartbeatLocked(cl, &req)
	g.mu.Unlock()
	c.notify()
	if e != nil {
		return fail(e, msg)
	}
	return awaitStored(c, res, wait, func(code int16) ShareHeartbeatResult { return ShareHeartbeatResult{Code: code} })
}

// becomeShareLocked makes g a share group if it is one already or has
// never been anything: a classic or consumer group, even an empty one
// with only offsets, keeps its id (one id, one kind, as Kafka).
func (g *group) becomeShareLocked(v *meta.View) (*kerr.Error, string) {
	if g.kind == meta.GroupShare && g.sg != nil {
		return nil, ""
	}
	notShare := fmt.Sprintf("Group %s is not a share group.", g.name)
	if g.kind != meta.GroupShare {
		if len(g.members) > 0 || len(g.awaitingJoin) > 0 || g.state != stateEmpty || g.consumerMembers() > 0 {
			return kerr.GroupIDNotFound, notShare
		}
		st, stored, err := v.Group(g.name)
		if err != nil {
			return kerr.CoordinatorNotAvailable, ""
		}
		if stored && st.Kind == meta.GroupShare {
			// Stored as a share group since g was loaded (an
			// AlterShareGroupOffsets made it): take that.
			g.kind, g.protocolType, g.generation = meta.GroupShare, meta.ShareProtocolType, st.Generation
			g.subscribedKnown, g.subscribed = st.SubscribedKnown, st.Subscribed
			g.protocol, g.leader, g.cg = "", "", nil
			g.loadShareLocked(&st)
			return nil, ""
		}
		if stored {
			return kerr.GroupIDNotFound, notShare
		}
	}
	g.kind = meta.GroupShare
	g.protocolType = meta.ShareProtocolType
	g.protocol, g.leader, g.cg = "", "", nil
	g.sg = newShareGroup(g.c)
	return nil, ""
}

// shareHeartbeatLocked returns the answer and, if a store was queued,
// the wait for it; or the error to answer with.
func (g *group) shareHeartbeatLocked(cl Client, req *ShareHeartbeatRequest) (ShareHeartbeatResult, <-chan *kerr.Error, *kerr.Error, string) {
	var none ShareHeartbeatResult
	if g.state == stateDead {
		return none, nil, kerr.CoordinatorNotAvailable, ""
	}
	v := g.c.store.View()
	defer v.Close()
	f, err := v.Features()
	if err != nil {
		return none, nil, kerr.CoordinatorNotAvailable, ""
	}
	if level := f.MetadataLevel(); !meta.ShareGroupsAt(level) {
		return none, nil, kerr.UnsupportedVersion, fmt.Sprintf("share groups are stored from %s 9; the log is at %d (strand features upgrade raises it)", meta.FeatureMetadata, level)
	}
	if e, msg := g.becomeShareLocked(v); e != nil {
		return none, nil, e, msg
	}
	sg := g.sg
	g.readShareConfigsLocked(v)
	res := ShareHeartbeatResult{HeartbeatInterval: sg.heartbeatInterval}
	m := sg.members[req.MemberID]

	if req.MemberEpoch == epochLeave {
		if m == nil {
			return none, nil, kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.name)
		}
		g.c.log.Debug("group: share member leaves", "group", g.name, "member", m.id)
		g.removeShareMemberLocked(m)
		res.MemberID, res.MemberEpoch = m.id, epochLeave
		return res, g.storeShareLocked(), nil, ""
	}

	subsChanged := false
	if m == nil {
		if req.MemberEpoch != epochJoin {
			return none, nil, kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.name)
		}
		if len(sg.members) >= g.c.cfg.MaxGroupSize {
			return none, nil, kerr.GroupMaxSizeReached, fmt.Sprintf("The share group has reached its maximum capacity of %d members.", g.c.cfg.MaxGroupSize)
		}
		m = &shareMember{id: req.MemberID, assigned: make(assignment)}
		sg.members[m.id] = m
		subsChanged = true
	} else if req.MemberEpoch != epochJoin && req.MemberEpoch != m.epoch && req.MemberEpoch != m.prevEpoch {
		// The current epoch, or the previous one from a member that
		// lost the answer that moved it on.
		return none, nil, kerr.FencedMemberEpoch, fmt.Sprintf("Member %s epoch %d does not match the expected %d.", m.id, req.MemberEpoch, m.epoch)
	}
	m.clientID, m.clientHost = cl.ID, cl.Host
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
		if !slices.Equal(names, m.names) {
			m.names, subsChanged = names, true
		}
	}
	g.touchShareLocked(m)

	loaded := sg.partitions == nil
	var topicsChanged bool
	topicsChanged, err = sg.refreshTopicsLocked(v)
	if err != nil {
		g.c.log.Warn("group: reading topics", "group", g.name, "err", err)
		return none, nil, kerr.CoordinatorNotAvailable, ""
	}
	if loaded && !subsChanged {
		// Just loaded: the stored epoch stands if assigning again
		// gives what the members hold (the assignor is sticky and
		// deterministic).
		topicsChanged = !sg.assignmentHeldLocked()
	}
	if subsChanged || topicsChanged {
		g.generation++
		g.assignShareLocked()
	}
	before := m.epoch
	if m.epoch != g.generation {
		m.prevEpoch, m.epoch = m.epoch, g.generation
	}
	res.MemberID, res.MemberEpoch = m.id, m.epoch
	if req.MemberEpoch == epochJoin || req.SubscribedTopicNames != nil || m.epoch != before {
		res.Assignment = sg.shareTopics(m.assigned)
	}
	return res, g.storeShareLocked(), nil, ""
}

// readShareConfigsLocked takes the group's session timeout and heartbeat
// interval from its configs (share.session.timeout.ms,
// share.heartbeat.interval.ms), the coordinator's defaults otherwise.
func (g *group) readShareConfigsLocked(v *meta.View) {
	g.sg.sessionTimeout, g.sg.heartbeatInterval = groupTimeouts(v, g.name,
		meta.GroupShareSessionTimeoutMs, g.c.cfg.ShareSessionTimeout,
		meta.GroupShareHeartbeatIntervalMs, g.c.cfg.ShareHeartbeatInterval)
}

// groupTimeouts reads a session timeout and a heartbeat interval from
// group's configs (GROUP config resources), each its default when unset
// or unreadable.
func groupTimeouts(v *meta.View, group, sessionName string, session time.Duration, intervalName string, interval time.Duration) (time.Duration, time.Duration) {
	cfg, err := v.GroupConfigs(group)
	if err != nil {
		return session, interval
	}
	ms := func(name string, def time.Duration) time.Duration {
		if s, ok := cfg[name]; ok {
			if n, err := strconv.ParseInt(s, 10, 32); err == nil && n > 0 {
				return time.Duration(n) * time.Millisecond
			}
		}
		return def
	}
	return ms(sessionName, session), ms(intervalName, interval)
}

// refreshTopicsLocked resolves the members' subscriptions against the
// topics that exist; true if a subscribed topic appeared, went, or
// changed its partition count.
func (sg *shareGroup) refreshTopicsLocked(v *meta.View) (bool, error) {
	names := make(map[string]bool)
	for _, m := range sg.members {
		for _, n := range m.names {
			names[n] = true
		}
	}
	parts := make(map[string]int32, len(names))
	ids := make(map[string]meta.TopicID, len(names))
	for _, n := range sortedKeys(names) {
		t, ok, err := v.Topic(n)
		if err != nil {
			return false, err
		}
		if ok {
			parts[n], ids[n] = t.Partitions, t.ID
		}
	}
	changed := sg.partitions == nil || !mapsEqual(parts, sg.partitions)
	sg.partitions, sg.ids = parts, ids
	return changed, nil
}

func mapsEqual(a, b map[string]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// shareAssignMembersLocked is the assignor's input.
func (sg *shareGroup) assignMembersLocked() []assignMember {
	ms := make([]assignMember, 0, len(sg.members))
	for _, m := range sg.members {
		var topics []string
		for _, n := range m.names {
			if _, ok := sg.partitions[n]; ok {
				topics = append(topics, n)
			}
		}
		ms = append(ms, assignMember{id: m.id, topics: topics, previous: m.assigned})
	}
	return ms
}

// assignShareLocked gives every member its assignment of the group
// epoch, at once: share groups do not revoke first.
func (g *group) assignShareLocked() {
	sg := g.sg
	out := assignShare(sg.assignMembersLocked(), sg.partitions)
	for id, m := range sg.members {
		m.assigned = out[id]
	}
	g.subscribedKnown = true
	g.subscribed = sortedKeys(sg.partitions)
}

// assignmentHeldLocked: assigning again gives what every member holds.
func (sg *shareGroup) assignmentHeldLocked() bool {
	out := assignShare(sg.assignMembersLocked(), sg.partitions)
	for id, m := range sg.members {
		if !m.assigned.equal(out[id]) {
			return false
		}
	}
	return true
}

// shareTopics is a, sorted by topic, with the topics' ids; never nil.
// Topics whose id is unknown (deleted) are left out.
func (sg *shareGroup) shareTopics(a assignment) []ConsumerTopic {
	out := make([]ConsumerTopic, 0, len(a))
	for _, t := range a.sortedTopics() {
		id, ok := sg.ids[t]
		if !ok {
			continue
		}
		out = append(out, ConsumerTopic{TopicID: id, Topic: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

// removeShareMemberLocked drops m and assigns its partitions to the
// others at a new group epoch.
func (g *group) removeShareMemberLocked(m *shareMember) {
	sg := g.sg
	clock.Stop(m.timer)
	m.timer = nil
	delete(sg.members, m.id)
	g.generation++
	g.assignShareLocked()
}

// touchShareLocked restarts m's session.
func (g *group) touchShareLocked(m *shareMember) {
	m.deadline = g.c.clock.Now().Add(g.sg.sessionTimeout)
	if m.timer != nil && !m.timerAt.After(m.deadline) {
		return
	}
	clock.Stop(m.timer)
	m.timerAt = m.deadline
	m.timer = g.c.clock.AfterFunc(max(m.deadline.Sub(g.c.clock.Now()), 0), func() { g.shareTimerFired(m) })
}

// shareTimerFired removes m if its session ran out. A timer that fires
// early (the session was extended) re-arms itself.
func (g *group) shareTimerFired(m *shareMember) {
	g.mu.Lock()
	defer g.c.notify()
	defer g.mu.Unlock()
	if g.gone || g.sg == nil || g.sg.members[m.id] != m {
		return
	}
	m.timer = nil
	now := g.c.clock.Now()
	if now.Before(m.deadline) {
		m.timerAt = m.deadline
		m.timer = g.c.clock.AfterFunc(m.deadline.Sub(now), func() { g.shareTimerFired(m) })
		return
	}
	g.c.log.Info("group: share member session expired", "group", g.name, "member", m.id, "epoch", g.generation)
	g.removeShareMemberLocked(m)
	g.storeShareLocked()
}

// shareStateCommandLocked is the group's ShareGroupState: per member its
// subscription, epoch and rack (metadata, as a ConsumerMemberMetadata)
// and its assignment (a ConsumerMemberAssignment).
func (g *group) shareStateCommandLocked() meta.ShareGroupState {
	sg := g.sg
	cmd := meta.ShareGroupState{Group: g.name, Generation: g.generation, Subscribed: slices.Clone(g.subscribed)}
	for _, id := range sortedKeys(sg.members) {
		m := sg.members[id]
		md := kmsg.NewConsumerMemberMetadata()
		md.Version = 3
		md.Topics = m.names
		md.Generation = m.epoch
		if m.rackID != "" {
			md.Rack = kmsg.StringPtr(m.rackID)
		}
		ma := kmsg.NewConsumerMemberAssignment()
		for _, t := range m.assigned.sortedTopics() {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t, m.assigned[t]
			ma.Topics = append(ma.Topics, at)
		}
		cmd.Members = append(cmd.Members, meta.GroupMember{
			MemberID:         m.id,
			ClientID:         m.clientID,
			ClientHost:       m.clientHost,
			SessionTimeoutMs: int32(min(sg.sessionTimeout/time.Millisecond, math.MaxInt32)),
			Metadata:         md.AppendTo(nil),
			Assignment:       ma.AppendTo(nil),
		})
	}
	return cmd
}

// loadShareLocked fills g's share state from its stored state. Members
// get a full session from now.
func (g *group) loadShareLocked(s *meta.Group) {
	sg := newShareGroup(g.c)
	g.sg = sg
	sg.partitions = nil // resolved at the next heartbeat
	for _, sm := range s.Members {
		m := &shareMember{id: sm.MemberID, clientID: sm.ClientID, clientHost: sm.ClientHost, assigned: make(assignment)}
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(sm.Metadata); err == nil {
			m.names = md.Topics
			m.epoch, m.prevEpoch = md.Generation, md.Generation
			if md.Rack != nil {
				m.rackID = *md.Rack
			}
		}
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(sm.Assignment); err == nil {
			for _, t := range ma.Topics {
				m.assigned[t.Topic] = slices.Sorted(slices.Values(t.Partitions))
			}
		}
		if sm.SessionTimeoutMs > 0 {
			sg.sessionTimeout = time.Duration(sm.SessionTimeoutMs) * time.Millisecond
		}
		sg.members[m.id] = m
	}
	for _, m := range sg.members {
		g.touchShareLocked(m)
	}
	cmd := g.shareStateCommandLocked()
	sg.stored = &cmd
}

// storeShareLocked queues the group's state if it differs from what was
// last queued; see storeConsumerLocked.
func (g *group) storeShareLocked() <-chan *kerr.Error {
	cmd := g.shareStateCommandLocked()
	if g.sg.stored != nil && reflect.DeepEqual(*g.sg.stored, cmd) {
		return nil
	}
	g.sg.stored = &cmd
	return g.storeAndWaitLocked(cmd)
}

// DescribedShareGroup is a share group as ShareGroupDescribe shows it.
type DescribedShareGroup struct {
	Group string
	// Code is a Kafka error code, 0 for success; Message may explain it.
	Code            int16
	Message         string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []DescribedShareMember
}

// DescribedShareMember is a share group's member.
type DescribedShareMember struct {
	MemberID    string
	RackID      string // empty if not given
	MemberEpoch int32
	ClientID    string
	ClientHost  string
	// SubscribedTopics are the names the member subscribed to, sorted.
	SubscribedTopics []string
	Assignment       []ConsumerTopic
}

// ShareGroupDescribe describes each named group. A group that does not
// exist, or is not a share group, is GROUP_ID_NOT_FOUND.
func (c *Coordinator) ShareGroupDescribe(ctx context.Context, names []string) []DescribedShareGroup {
	out := make([]DescribedShareGroup, 0, len(names))
	for _, name := range names {
		dg := DescribedShareGroup{Group: name}
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
			g.describeShareLocked(&dg)
			g.mu.Unlock()
		}
		out = append(out, dg)
	}
	return out
}

func (g *group) describeShareLocked(dg *DescribedShareGroup) {
	v := g.c.store.View()
	defer v.Close()
	if g.kind != meta.GroupShare || g.sg == nil || g.state == stateDead {
		dg.Code = kerr.GroupIDNotFound.Code
		dg.Message = fmt.Sprintf("Group %s is not a share group.", g.name)
		return
	}
	sg := g.sg
	dg.State = g.shareStateLocked()
	dg.Epoch = g.generation
	dg.AssignmentEpoch = g.generation
	dg.Assignor = meta.SimpleAssignor
	for _, id := range sortedKeys(sg.members) {
		m := sg.members[id]
		dg.Members = append(dg.Members, DescribedShareMember{
			MemberID:         m.id,
			RackID:           m.rackID,
			MemberEpoch:      m.epoch,
			ClientID:         m.clientID,
			ClientHost:       m.clientHost,
			SubscribedTopics: slices.Clone(m.names),
			Assignment:       sg.shareTopicsResolved(v, m.assigned),
		})
	}
}

// shareTopicsResolved is shareTopics that reads the ids it does not
// know (a group just loaded has resolved none), without touching what
// the next heartbeat compares against.
func (sg *shareGroup) shareTopicsResolved(v *meta.View, a assignment) []ConsumerTopic {
	out := make([]ConsumerTopic, 0, len(a))
	for _, t := range a.sortedTopics() {
		id, ok := sg.ids[t]
		if !ok {
			tp, found, err := v.Topic(t)
			if err != nil || !found {
				continue
			}
			id = tp.ID
		}
		out = append(out, ConsumerTopic{TopicID: id, Topic: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

// CreateShareGroup makes group an empty share group and stores it, if
// it is not one already, as Kafka creates the group on
// AlterShareGroupOffsets. A classic or consumer group's id is
// kerr.GroupIDNotFound; kerr.NotCoordinator when this agent does not
// coordinate the group; kerr.UnsupportedVersion on a log below level 9.
func (c *Coordinator) CreateShareGroup(ctx context.Context, group string) error {
	if !c.Owns(group) {
		return kerr.NotCoordinator
	}
	g, e := c.lockGroup(ctx, group, true)
	if e != nil {
		return e
	}
	v := c.store.View()
	f, err := v.Features()
	switch {
	case err != nil:
		e = kerr.CoordinatorNotAvailable
	case !meta.ShareGroupsAt(f.MetadataLevel()):
		e = kerr.UnsupportedVersion
	case g.state == stateDead:
		e = kerr.CoordinatorNotAvailable
	default:
		e, _ = g.becomeShareLocked(v)
	}
	v.Close()
	var wait <-chan *kerr.Error
	if e == nil {
		wait = g.storeShareLocked()
	}
	g.mu.Unlock()
	c.notify()
	if e != nil {
		return e
	}
	if wait == nil {
		return nil
	}
	select {
	case e := <-wait:
		if e != nil {
			return e
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ShareGroupState reports whether group exists, whether it is a share
// group, and how many members it has, for the share partitions' admin
// APIs (Describe/Alter/DeleteShareGroupOffsets). err is
// kerr.NotCoordinator when this agent does not coordinate the group, or
// another kerr error when the group cannot be loaded now.
func (c *Coordinator) ShareGroupState(ctx context.Context, group string) (exists, isShare bool, members int, err error) {
	if !c.Owns(group) {
		return false, false, 0, kerr.NotCoordinator
	}
	g, e := c.lockGroup(ctx, group, false)
	switch {
	case e != nil:
		return false, false, 0, e
	case g == nil:
		// Share state without a group record (AlterShareGroupOffsets
		// before any member joined) is an empty share group.
		only := c.shareStateOnly(group)
		return only, only, 0, nil
	}
	defer g.mu.Unlock()
	if g.state == stateDead {
		return false, false, 0, nil
	}
	if g.kind != meta.GroupShare {
		return true, false, len(g.members) + g.consumerMembers(), nil
	}
	return true, true, g.shareMembers(), nil
}
