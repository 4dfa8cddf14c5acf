package group

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// JoinRequest is a JoinGroup: a member asking to join, or rejoin, the
// group's next generation.
type JoinRequest struct {
	Group string
	// MemberID is empty on a member's first join.
	MemberID string
	// InstanceID makes the member static (KIP-345); nil if it is not,
	// and an empty one is INVALID_REQUEST.
	InstanceID   *string
	ProtocolType string
	// Protocols are the member's, most preferred first.
	Protocols []Protocol
	// SessionTimeout must be within the Config's bounds.
	SessionTimeout time.Duration
	// RebalanceTimeout bounds the join phase; zero or negative means
	// SessionTimeout.
	RebalanceTimeout time.Duration
	// RequireKnownMemberID: a first join without an instance id gets
	// MEMBER_ID_REQUIRED and the id to rejoin with (KIP-394), and the
	// join phase waits for it; otherwise it joins at once.
	RequireKnownMemberID bool
	// SupportSkippingAssignment: a static leader that rejoins a stable
	// group is told it leads but need not assign (KIP-814); otherwise
	// it is answered as a follower of its old id.
	SupportSkippingAssignment bool
}

// Protocol is one of a member's protocols and its subscription.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinResult answers a JoinRequest.
type JoinResult struct {
	// Code is a Kafka error code, 0 for success.
	Code int16
	// Generation is -1 with an error.
	Generation   int32
	ProtocolType string
	Protocol     string
	LeaderID     string
	// MemberID is the member's id, also with MEMBER_ID_REQUIRED.
	MemberID string
	// SkipAssignment tells a static leader rejoining a stable group to
	// keep the assignment it has (KIP-814).
	SkipAssignment bool
	// Members, the leader's only: every member with its subscription to
	// the group's protocol, by id.
	Members []JoinMember
}

// JoinMember is a member as its leader sees it.
type JoinMember struct {
	MemberID   string
	InstanceID string // empty if not static
	Metadata   []byte
}

// JoinGroup works in two steps, as OffsetCommit does: the call takes the
// member's join into the group (a new join phase, perhaps) and the
// returned function waits for the answer: at once for an error,
// MEMBER_ID_REQUIRED or a static member rejoining a stable group,
// otherwise when the join phase completes. If the wait's ctx ends first
// the answer is NOT_COORDINATOR (the server is draining, or nobody is
// listening). The first step's ctx bounds loading the group.
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, req JoinRequest) func(context.Context) JoinResult {
	fail := func(e *kerr.Error) func(context.Context) JoinResult {
		res := joinError(req.MemberID, e)
		return func(context.Context) JoinResult { return res }
	}
	session, rebalance := req.SessionTimeout, req.RebalanceTimeout
	if rebalance <= 0 {
		rebalance = session
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID)
	case !c.Owns(req.Group):
		return fail(kerr.NotCoordinator)
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout)
	case req.InstanceID != nil && *req.InstanceID == "":
		return fail(kerr.InvalidRequest)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(kerr.InconsistentGroupProtocol)
	}
	g, e := c.lockGroup(ctx, req.Group, true)
	if e != nil {
		return fail(e)
	}
	j := joinCall{g: g, cl: cl, req: &req, session: session, rebalance: rebalance}
	res, w := j.joinLocked()
	g.mu.Unlock()
	c.notify()
	return func(ctx context.Context) JoinResult {
		if w == nil {
			return res
		}
		select {
		case res := <-w.ch:
			return res
		case <-ctx.Done():
			return joinError(req.MemberID, kerr.NotCoordinator)
		}
	}
}

// joinCall is one JoinGroup being decided under the group's lock.
type joinCall struct {
	g         *group
	cl        Client
	req       *JoinRequest
	session   time.Duration
	rebalance time.Duration
}

func (j *joinCall) fail(e *kerr.Error) (JoinResult, *joinWait) {
	return joinError(j.req.MemberID, e), nil
}

// joinLocked returns either an immediate answer (a nil wait) or the wait
// for one.
func (j *joinCall) joinLocked() (JoinResult, *joinWait) {
	g, req := j.g, j.req
	switch {
	case g.state == stateDead:
		return j.fail(kerr.CoordinatorNotAvailable)
	case g.kind == meta.GroupShare:
		// Kafka: a share group's id is not a classic group's.
		return j.fail(kerr.GroupIDNotFound)
	case g.kind != meta.GroupClassic && g.consumerMembers() > 0:
		return j.fail(kerr.InconsistentGroupProtocol)
	case !g.supportsProtocolsLocked(req.ProtocolType, req.Protocols):
		return j.fail(kerr.InconsistentGroupProtocol)
	}
	if req.MemberID == "" {
		return j.joinNewLocked()
	}
	return j.joinKnownLocked()
}

func (j *joinCall) fullLocked() bool {
	return len(j.g.members)+len(j.g.awaitingJoin) >= j.g.c.cfg.MaxGroupSize
}

// joinNewLocked handles a join without a member id.
func (j *joinCall) joinNewLocked() (JoinResult, *joinWait) {
	g, req := j.g, j.req
	id := newMemberID(j.cl.ID)
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok {
			return j.replaceStaticLocked(old, id)
		}
		if j.fullLocked() {
			return j.fail(kerr.GroupMaxSizeReached)
		}
		return JoinResult{}, j.addMemberLocked(id)
	}
	if j.fullLocked() {
		return j.fail(kerr.GroupMaxSizeReached)
	}
	if req.RequireKnownMemberID {
		// KIP-394: hand out the id and count the member as coming, so
		// a join phase waits for it, until its session timeout.
		g.awaitingJoin[id] = g.c.clock.AfterFunc(j.session, func() { g.joinExpired(id) })
		return joinError(id, kerr.MemberIDRequired), nil
	}
	return JoinResult{}, j.addMemberLocked(id)
}

func (g *group) joinExpired(id string) {
	g.mu.Lock()
	defer g.c.notify()
	defer g.mu.Unlock()
	if g.gone {
		return
	}
	if _, ok := g.awaitingJoin[id]; !ok {
		return
	}
	delete(g.awaitingJoin, id)
	g.tryCompleteJoinLocked()
}

// joinKnownLocked handles a join with a member id.
func (j *joinCall) joinKnownLocked() (JoinResult, *joinWait) {
	g, req := j.g, j.req
	id := req.MemberID
	if t, ok := g.awaitingJoin[id]; ok {
		clock.Stop(t)
		delete(g.awaitingJoin, id)
		return JoinResult{}, j.addMemberLocked(id)
	}
	if req.InstanceID != nil {
		if owner, ok := g.static[*req.InstanceID]; ok && owner != id {
			return j.fail(kerr.FencedInstanceID)
		}
	}
	m := g.members[id]
	if m == nil {
		return j.fail(kerr.UnknownMemberID)
	}
	switch g.state {
	case statePreparingRebalance:
		return JoinResult{}, j.updateMemberLocked(m)
	case stateCompletingRebalance:
		if m.matches(req.Protocols) {
			// A retry of a join the member may not have seen answered.
			g.heartbeatLocked(m)
			return g.joinResultLocked(m), nil
		}
		return JoinResult{}, j.updateMemberLocked(m)
	case stateStable:
		if m.id == g.leader || !m.matches(req.Protocols) {
			// The leader rejoins to reassign (metadata changed, say).
			return JoinResult{}, j.updateMemberLocked(m)
		}
		g.heartbeatLocked(m)
		return g.joinResultLocked(m), nil
	}
	return j.fail(kerr.UnknownMemberID)
}

// addMemberLocked adds a member that joins now.
func (j *joinCall) addMemberLocked(id string) *joinWait {
	g, req := j.g, j.req
	if len(g.members) == 0 {
		g.kind = meta.GroupClassic
		g.cg = nil
		g.protocolType = req.ProtocolType
	}
	m := &member{
		id:               id,
		clientID:         j.cl.ID,
		clientHost:       j.cl.Host,
		sessionTimeout:   j.session,
		rebalanceTimeout: j.rebalance,
		protocolType:     req.ProtocolType,
		protocols:        copyProtocols(req.Protocols),
		join:             newJoinWait(req.SupportSkippingAssignment),
	}
	if req.InstanceID != nil {
		m.instanceID = *req.InstanceID
		g.static[m.instanceID] = id
	}
	g.members[id] = m
	if g.leader == "" {
		g.leader = id
	}
	g.newMemberAdded = true
	g.heartbeatLocked(m)
	// Completing the join answers m and clears m.join.
	w := m.join
	g.maybePrepareRebalanceLocked("new member " + id)
	g.tryCompleteJoinLocked()
	return w
}

// updateMemberLocked takes a known member's new subscription and joins it
// to the (possibly new) join phase.
func (j *joinCall) updateMemberLocked(m *member) *joinWait {
	g, req := j.g, j.req
	// A join still waiting is a request the client gave up on.
	g.answerJoinErrLocked(m, kerr.RebalanceInProgress)
	m.protocols = copyProtocols(req.Protocols)
	m.protocolType = req.ProtocolType
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.join = newJoinWait(req.SupportSkippingAssignment)
	w := m.join
	g.heartbeatLocked(m)
	g.maybePrepareRebalanceLocked("member " + m.id + " rejoined")
	g.tryCompleteJoinLocked()
	return w
}

// replaceStaticLocked gives a known instance id a new member id (KIP-345).
// The old id is fenced. A stable group whose protocol does not change
// keeps its generation and assignment: no rebalance, only a store of the
// new id, after which the member is answered.
func (j *joinCall) replaceStaticLocked(oldID, newID string) (JoinResult, *joinWait) {
	g, req := j.g, j.req
	m := g.members[oldID]
	if m == nil {
		delete(g.static, *req.InstanceID)
		return JoinResult{}, j.addMemberLocked(newID)
	}
	oldLeader := g.leader
	wasLeader := oldLeader == oldID
	oldProtocols, oldSession, oldRebalance := m.protocols, m.sessionTimeout, m.rebalanceTimeout
	g.answerJoinErrLocked(m, kerr.FencedInstanceID)
	g.answerSyncErrLocked(m, kerr.FencedInstanceID)
	g.renameMemberLocked(m, newID)
	m.protocols = copyProtocols(req.Protocols)
	m.protocolType = req.ProtocolType
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.join = newJoinWait(req.SupportSkippingAssignment)
	w := m.join
	g.heartbeatLocked(m)

	switch g.state {
	case stateStable:
		if g.selectProtocolLocked() != g.protocol {
			g.prepareRebalanceLocked("static member " + newID + " changed the protocol")
			return JoinResult{}, w
		}
		gen := g.generation
		g.storeStateLocked(func(res meta.Result, err error) {
			if m.join != w {
				return // answered or superseded meanwhile
			}
			if e := g.storeErrorCode(res, err); e != nil {
				if g.members[newID] == m && g.generation == gen {
					g.renameMemberLocked(m, oldID)
					m.protocols, m.sessionTimeout, m.rebalanceTimeout = oldProtocols, oldSession, oldRebalance
				}
				g.answerJoinLocked(m, joinError("", e))
				return
			}
			jr := g.joinResultLocked(m)
			jr.Members = nil
			// The old leader id makes a leader that cannot be told to
			// skip assigning do so anyway: a stable group would not pass
			// a new assignment on. SkipAssignment says so outright
			// (KIP-814).
			jr.LeaderID = oldLeader
			if wasLeader && w.skipAssignment {
				jr.LeaderID = newID
				jr.SkipAssignment = true
				jr.Members = g.memberListLocked()
			}
			g.answerJoinLocked(m, jr)
		})
	case stateCompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.prepareRebalanceLocked("static member " + newID + " replaced during sync")
	case statePreparingRebalance:
		g.tryCompleteJoinLocked()
	}
	return JoinResult{}, w
}

// renameMemberLocked moves m to a new id.
func (g *group) renameMemberLocked(m *member, id string) {
	old := m.id
	delete(g.members, old)
	m.id = id
	g.members[id] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = id
	}
	if g.leader == old {
		g.leader = id
	}
	if g.pendingSync[old] {
		delete(g.pendingSync, old)
		g.pendingSync[id] = true
	}
}

// memberCheck is the validation SyncGroup, Heartbeat and OffsetCommit share
// (Kafka's order: fenced instance, unknown member, generation).
func (g *group) memberCheckLocked(memberID string, instanceID *string, generation int32) (*member, *kerr.Error) {
	if g.state == stateDead {
		return nil, kerr.CoordinatorNotAvailable
	}
	if instanceID != nil {
		if owner, ok := g.static[*instanceID]; ok && owner != memberID {
			return nil, kerr.FencedInstanceID
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID
	}
	if generation != g.generation {
		return m, kerr.IllegalGeneration
	}
	return m, nil
}

// SyncRequest is a SyncGroup: a member of a generation asking for its
// assignment, the leader handing every member's in.
type SyncRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	Generation int32
	// ProtocolType and Protocol, if not nil, must be the group's
	// (INCONSISTENT_GROUP_PROTOCOL otherwise).
	ProtocolType *string
	Protocol     *string
	// Assignments is the leader's assignment, one per member; the
	// followers send none.
	Assignments []SyncAssignment
}

// SyncAssignment is one member's part of the leader's assignment.
type SyncAssignment struct {
	MemberID   string
	Assignment []byte
}

// SyncResult answers a SyncRequest.
type SyncResult struct {
	// Code is a Kafka error code, 0 for success.
	Code         int16
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// SyncGroup stores the leader's assignment as the generation's
// GroupState, then answers every member with its part. It works in two
// steps, as JoinGroup does: the call takes the member's SyncGroup in (the
// leader's assignment is queued for the log), the returned function waits
// for the answer, NOT_COORDINATOR if its ctx ends first.
func (c *Coordinator) SyncGroup(ctx context.Context, req SyncRequest) func(context.Context) SyncResult {
	fail := func(e *kerr.Error) func(context.Context) SyncResult {
		res := syncError(e)
		return func(context.Context) SyncResult { return res }
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID)
	case !c.Owns(req.Group):
		return fail(kerr.NotCoordinator)
	}
	g, e := c.lockGroup(ctx, req.Group, false)
	if e != nil {
		return fail(e)
	}
	if g == nil {
		return fail(kerr.UnknownMemberID)
	}
	res, w := g.syncLocked(&req)
	g.mu.Unlock()
	c.notify()
	return func(ctx context.Context) SyncResult {
		if w == nil {
			return res
		}
		select {
		case res := <-w.ch:
			return res
		case <-ctx.Done():
			return syncError(kerr.NotCoordinator)
		}
	}
}

// syncLocked returns either an immediate answer (a nil wait) or the wait
// for one.
func (g *group) syncLocked(req *SyncRequest) (SyncResult, *syncWait) {
	m, e := g.memberCheckLocked(req.MemberID, req.InstanceID, req.Generation)
	if e == nil && ((req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol)) {
		e = kerr.InconsistentGroupProtocol
	}
	if e != nil {
		return syncError(e), nil
	}
	switch g.state {
	case statePreparingRebalance:
		return syncError(kerr.RebalanceInProgress), nil
	case stateStable:
		g.heartbeatLocked(m)
		delete(g.pendingSync, m.id)
		return g.syncResultLocked(m), nil
	case stateCompletingRebalance:
	default:
		return syncError(kerr.UnknownMemberID), nil
	}
	g.answerSyncErrLocked(m, kerr.RebalanceInProgress)
	m.sync = newSyncWait()
	w := m.sync
	g.heartbeatLocked(m)
	delete(g.pendingSync, m.id)
	if m.id != g.leader || (g.assigning && g.assigningGen == g.generation) {
		return SyncResult{}, w
	}
	assignments := make(map[string][]byte, len(g.members))
	for _, a := range req.Assignments {
		if _, ok := g.members[a.MemberID]; ok {
			assignments[a.MemberID] = bytes.Clone(a.Assignment)
		}
	}
	gen := g.generation
	g.assigning, g.assigningGen = true, gen
	g.storeLocked(g.stateCommandLocked(assignments), func(res meta.Result, err error) {
		if g.assigningGen == gen {
			g.assigning = false
		}
		if g.generation != gen || g.state != stateCompletingRebalance {
			return
		}
		if e := g.storeErrorCode(res, err); e != nil {
			for _, m := range g.members {
				g.answerSyncErrLocked(m, e)
				m.assignment = nil
			}
			if e == kerr.NotCoordinator {
				g.unloadLocked(e)
				return
			}
			g.prepareRebalanceLocked("storing the assignment failed")
			return
		}
		for _, m := range g.members {
			m.assignment = assignments[m.id]
		}
		g.state = stateStable
		for _, m := range g.sortedMembersLocked() {
			if m.sync != nil {
				g.answerSyncLocked(m, g.syncResultLocked(m))
			}
		}
		g.c.log.Debug("group: stable", "group", g.name, "generation", g.generation, "members", len(g.members))
	})
	return SyncResult{}, w
}

// HeartbeatRequest is a Heartbeat: a member keeping its session.
type HeartbeatRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	Generation int32
}

// Heartbeat restarts the member's session and returns a Kafka error code:
// REBALANCE_IN_PROGRESS tells the member to rejoin.
func (c *Coordinator) Heartbeat(ctx context.Context, req HeartbeatRequest) int16 {
	return c.heartbeat(ctx, &req).Code
}

func (c *Coordinator) heartbeat(ctx context.Context, req *HeartbeatRequest) *kerr.Error {
	switch {
	case req.Group == "":
		return kerr.InvalidGroupID
	case !c.Owns(req.Group):
		return kerr.NotCoordinator
	}
	g, e := c.lockGroup(ctx, req.Group, false)
	if e != nil {
		return e
	}
	if g == nil {
		return kerr.UnknownMemberID
	}
	defer g.mu.Unlock()
	m, e := g.memberCheckLocked(req.MemberID, req.InstanceID, req.Generation)
	if e != nil {
		return e
	}
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.heartbeatLocked(m)
		return errNone
	case statePreparingRebalance:
		g.heartbeatLocked(m)
		return kerr.RebalanceInProgress
	}
	return kerr.UnknownMemberID
}

// LeaveMember is one member leaving: by member id, or by instance id (a
// static member leaves for good only this way).
type LeaveMember struct {
	MemberID string
	// InstanceID, if not nil, names the member; MemberID, if not empty,
	// must then be the instance's (FENCED_INSTANCE_ID otherwise).
	InstanceID *string
	// Reason is logged.
	Reason string
}

// LeaveResult answers LeaveGroup.
type LeaveResult struct {
	// Code is the group's Kafka error code, 0 for success.
	Code int16
	// Codes, when Code is 0, answer each leaving member, in order.
	Codes []int16
}

// LeaveGroup removes members from the group, which rebalances.
func (c *Coordinator) LeaveGroup(ctx context.Context, group string, leaving []LeaveMember) LeaveResult {
	top, codes := c.leave(ctx, group, leaving)
	return LeaveResult{Code: top.Code, Codes: codes}
}

func (c *Coordinator) leave(ctx context.Context, name string, leaving []LeaveMember) (*kerr.Error, []int16) {
	switch {
	case name == "":
		return kerr.InvalidGroupID, nil
	case !c.Owns(name):
		return kerr.NotCoordinator, nil
	}
	codes := make([]int16, len(leaving))
	g, e := c.lockGroup(ctx, name, false)
	if e != nil {
		return e, nil
	}
	if g == nil {
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
		return errNone, codes
	}
	defer c.notify()
	defer g.mu.Unlock()
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable, nil
	}
	for i, l := range leaving {
		codes[i] = g.leaveOneLocked(l).Code
	}
	return errNone, codes
}

func (g *group) leaveOneLocked(l LeaveMember) *kerr.Error {
	if l.InstanceID != nil {
		owner, ok := g.static[*l.InstanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID
		case l.MemberID != "" && l.MemberID != owner:
			return kerr.FencedInstanceID
		}
		m := g.members[owner]
		if m == nil {
			delete(g.static, *l.InstanceID)
			return kerr.UnknownMemberID
		}
		g.c.log.Debug("group: static member leaves", "group", g.name, "member", owner, "reason", l.Reason)
		g.removeMemberAndUpdateLocked(m)
		return errNone
	}
	if t, ok := g.awaitingJoin[l.MemberID]; ok {
		clock.Stop(t)
		delete(g.awaitingJoin, l.MemberID)
		g.tryCompleteJoinLocked()
		return errNone
	}
	m := g.members[l.MemberID]
	if m == nil {
		return kerr.UnknownMemberID
	}
	g.c.log.Debug("group: member leaves", "group", g.name, "member", m.id, "reason", l.Reason)
	g.removeMemberAndUpdateLocked(m)
	return errNone
}

// errNone is success where a *kerr.Error is expected.
var errNone = &kerr.Error{Message: "NONE"}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
