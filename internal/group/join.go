package group

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// JoinGroup serves JoinGroup v0-9. It returns when the member's join is
// answered: at once for an error, MEMBER_ID_REQUIRED (v4+, KIP-394) or a
// static member rejoining a stable group, otherwise when the join phase
// completes. If ctx ends first the answer is NOT_COORDINATOR (the server
// is draining, or nobody is listening).
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	fail := func(e *kerr.Error) *kmsg.JoinGroupResponse { return joinError(req.Version, req.MemberID, e) }
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		// v0 has no rebalance timeout: Kafka uses the session timeout.
		rebalance = session
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID)
	case !c.owns(req.Group):
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
	j := joinCall{g: g, cl: cl, req: req, session: session, rebalance: rebalance}
	resp, w := j.joinLocked()
	g.mu.Unlock()
	c.notify()
	if resp != nil {
		return resp
	}
	select {
	case resp := <-w.ch:
		return resp
	case <-ctx.Done():
		return fail(kerr.NotCoordinator)
	}
}

// joinCall is one JoinGroup being decided under the group's lock.
type joinCall struct {
	g         *group
	cl        Client
	req       *kmsg.JoinGroupRequest
	session   time.Duration
	rebalance time.Duration
}

func (j *joinCall) fail(e *kerr.Error) (*kmsg.JoinGroupResponse, *joinWait) {
	return joinError(j.req.Version, j.req.MemberID, e), nil
}

// joinLocked returns either an immediate answer or the wait for one.
func (j *joinCall) joinLocked() (*kmsg.JoinGroupResponse, *joinWait) {
	g, req := j.g, j.req
	switch {
	case g.state == stateDead:
		return j.fail(kerr.CoordinatorNotAvailable)
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
	return len(j.g.members)+len(j.g.pending) >= j.g.c.cfg.MaxGroupSize
}

// joinNewLocked handles a join without a member id.
func (j *joinCall) joinNewLocked() (*kmsg.JoinGroupResponse, *joinWait) {
	g, req := j.g, j.req
	id := newMemberID(j.cl.ID)
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok {
			return j.replaceStaticLocked(old, id)
		}
		if j.fullLocked() {
			return j.fail(kerr.GroupMaxSizeReached)
		}
		return nil, j.addMemberLocked(id)
	}
	if j.fullLocked() {
		return j.fail(kerr.GroupMaxSizeReached)
	}
	if req.Version >= 4 {
		// KIP-394: hand out the id and count the member as coming, so
		// a join phase waits for it, until its session timeout.
		g.pending[id] = g.c.clock.AfterFunc(j.session, func() { g.pendingExpired(id) })
		resp := joinError(req.Version, id, kerr.MemberIDRequired)
		return resp, nil
	}
	return nil, j.addMemberLocked(id)
}

func (g *group) pendingExpired(id string) {
	g.mu.Lock()
	defer g.c.notify()
	defer g.mu.Unlock()
	if g.gone {
		return
	}
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	g.tryCompleteJoinLocked()
}

// joinKnownLocked handles a join with a member id.
func (j *joinCall) joinKnownLocked() (*kmsg.JoinGroupResponse, *joinWait) {
	g, req := j.g, j.req
	id := req.MemberID
	if t, ok := g.pending[id]; ok {
		stopTimer(t)
		delete(g.pending, id)
		return nil, j.addMemberLocked(id)
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
		return nil, j.updateMemberLocked(m)
	case stateCompletingRebalance:
		if m.matches(req.Protocols) {
			// A retry of a join the member may not have seen answered.
			g.heartbeatLocked(m)
			return g.joinResponseLocked(m, req.Version), nil
		}
		return nil, j.updateMemberLocked(m)
	case stateStable:
		if m.id == g.leader || !m.matches(req.Protocols) {
			// The leader rejoins to reassign (metadata changed, say).
			return nil, j.updateMemberLocked(m)
		}
		g.heartbeatLocked(m)
		return g.joinResponseLocked(m, req.Version), nil
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
		join:             newJoinWait(req.Version),
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
	m.join = newJoinWait(req.Version)
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
func (j *joinCall) replaceStaticLocked(oldID, newID string) (*kmsg.JoinGroupResponse, *joinWait) {
	g, req := j.g, j.req
	m := g.members[oldID]
	if m == nil {
		delete(g.static, *req.InstanceID)
		return nil, j.addMemberLocked(newID)
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
	m.join = newJoinWait(req.Version)
	w := m.join
	g.heartbeatLocked(m)

	switch g.state {
	case stateStable:
		if g.selectProtocolLocked() != g.protocol {
			g.prepareRebalanceLocked("static member " + newID + " changed the protocol")
			return nil, w
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
				g.answerJoinLocked(m, joinError(w.version, "", e))
				return
			}
			resp := g.joinResponseLocked(m, w.version)
			resp.Members = nil
			// The old leader id makes a pre-v9 leader skip assigning: a
			// stable group would not pass a new assignment on. v9 says
			// so outright (KIP-814).
			resp.LeaderID = oldLeader
			if wasLeader && w.version >= 9 {
				resp.LeaderID = newID
				resp.SkipAssignment = true
				resp.Members = g.memberListLocked()
			}
			g.answerJoinLocked(m, resp)
		})
	case stateCompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.prepareRebalanceLocked("static member " + newID + " replaced during sync")
	case statePreparingRebalance:
		g.tryCompleteJoinLocked()
	}
	return nil, w
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

// SyncGroup serves SyncGroup v0-5: the leader's assignment is stored as
// the generation's GroupState, then every member gets its part.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	fail := func(e *kerr.Error) *kmsg.SyncGroupResponse { return syncError(req.Version, e) }
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID)
	case !c.owns(req.Group):
		return fail(kerr.NotCoordinator)
	}
	g, e := c.lockGroup(ctx, req.Group, false)
	if e != nil {
		return fail(e)
	}
	if g == nil {
		return fail(kerr.UnknownMemberID)
	}
	resp, w := g.syncLocked(req)
	g.mu.Unlock()
	c.notify()
	if resp != nil {
		return resp
	}
	select {
	case resp := <-w.ch:
		return resp
	case <-ctx.Done():
		return fail(kerr.NotCoordinator)
	}
}

func (g *group) syncLocked(req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, *syncWait) {
	m, e := g.memberCheckLocked(req.MemberID, req.InstanceID, req.Generation)
	if e == nil && ((req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol)) {
		e = kerr.InconsistentGroupProtocol
	}
	if e != nil {
		return syncError(req.Version, e), nil
	}
	switch g.state {
	case statePreparingRebalance:
		return syncError(req.Version, kerr.RebalanceInProgress), nil
	case stateStable:
		g.heartbeatLocked(m)
		delete(g.pendingSync, m.id)
		return g.syncResponseLocked(m, req.Version), nil
	case stateCompletingRebalance:
	default:
		return syncError(req.Version, kerr.UnknownMemberID), nil
	}
	g.answerSyncErrLocked(m, kerr.RebalanceInProgress)
	m.sync = newSyncWait(req.Version)
	w := m.sync
	g.heartbeatLocked(m)
	delete(g.pendingSync, m.id)
	if m.id != g.leader || (g.assigning && g.assigningGen == g.generation) {
		return nil, w
	}
	assignments := make(map[string][]byte, len(g.members))
	for _, a := range req.GroupAssignment {
		if _, ok := g.members[a.MemberID]; ok {
			assignments[a.MemberID] = bytes.Clone(a.MemberAssignment)
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
				g.answerSyncLocked(m, g.syncResponseLocked(m, m.sync.version))
			}
		}
		g.c.log.Debug("group: stable", "group", g.name, "generation", g.generation, "members", len(g.members))
	})
	return nil, w
}

// Heartbeat serves Heartbeat v0-4. REBALANCE_IN_PROGRESS tells a member
// to rejoin.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeat(ctx, req).Code
	return resp
}

func (c *Coordinator) heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kerr.Error {
	switch {
	case req.Group == "":
		return kerr.InvalidGroupID
	case !c.owns(req.Group):
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

// LeaveGroup serves LeaveGroup v0-5 (v3+: several members, by member id
// or by instance id).
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	top, codes := c.leave(ctx, req.Group, leaving)
	if req.Version < 3 {
		resp.ErrorCode = top.Code
		if top.Code == 0 && len(codes) > 0 {
			resp.ErrorCode = codes[0]
		}
		return resp
	}
	resp.ErrorCode = top.Code
	if top.Code != 0 {
		return resp
	}
	for i, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func (c *Coordinator) leave(ctx context.Context, name string, leaving []kmsg.LeaveGroupRequestMember) (*kerr.Error, []int16) {
	switch {
	case name == "":
		return kerr.InvalidGroupID, nil
	case !c.owns(name):
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

func (g *group) leaveOneLocked(l kmsg.LeaveGroupRequestMember) *kerr.Error {
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
		g.c.log.Debug("group: static member leaves", "group", g.name, "member", owner, "reason", strOr(l.Reason))
		g.removeMemberAndUpdateLocked(m)
		return errNone
	}
	if t, ok := g.pending[l.MemberID]; ok {
		stopTimer(t)
		delete(g.pending, l.MemberID)
		g.tryCompleteJoinLocked()
		return errNone
	}
	m := g.members[l.MemberID]
	if m == nil {
		return kerr.UnknownMemberID
	}
	g.c.log.Debug("group: member leaves", "group", g.name, "member", m.id, "reason", strOr(l.Reason))
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
