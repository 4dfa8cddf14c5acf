package group

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// groupState is a classic group's phase (Kafka's GroupState).
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	// stateDead: being deleted. Requests get COORDINATOR_NOT_AVAILABLE
	// (retriable) until the group is gone from memory.
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	case stateDead:
		return "Dead"
	}
	return "Unknown"
}

// consumerProtocolType is the protocol type of Kafka consumers, whose
// subscriptions the coordinator can read.
const consumerProtocolType = "consumer"

// group is one group's in-memory state. Everything below mu is guarded by
// it. A request takes the group with lockGroup; timers' callbacks lock it
// themselves and check that what they were armed for still holds.
type group struct {
	c    *Coordinator
	name string

	mu sync.Mutex
	// gone: dropped from the coordinator's map (deleted, unloaded or
	// evicted). A holder of a stale pointer looks the group up again.
	gone bool

	kind         meta.GroupKind
	state        groupState
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	// static maps instance ids to member ids (KIP-345).
	static map[string]string
	// awaitingJoin holds member ids handed out with MEMBER_ID_REQUIRED
	// (KIP-394) that have not joined yet, with their expiry timers.
	awaitingJoin map[string]clock.Timer

	// The join phase: joinTimer ends it; joinSeq tells a stale timer
	// from the current one. During the initial delay the phase cannot
	// end early, and each new member buys another delay until
	// initialRemaining runs out.
	joinTimer        clock.Timer
	joinSeq          uint64
	initialDelay     bool
	initialRemaining time.Duration
	newMemberAdded   bool

	// The sync phase: members of the new generation that have not sent
	// SyncGroup by syncTimer are removed.
	syncTimer   clock.Timer
	syncSeq     uint64
	pendingSync map[string]bool
	// assigning: the leader's assignment of generation assigningGen is
	// being stored. A store of an older generation may still be in
	// flight when the next generation's leader syncs.
	assigning    bool
	assigningGen int32

	subscribedKnown bool
	subscribed      []string // sorted

	// storing counts stores in flight; an idle group has none.
	storing int

	// cg is the KIP-848 state of a group of kind consumer (consumer.go).
	cg *consumerGroup
	// sg is the KIP-932 state of a group of kind share (share.go).
	sg *shareGroup
}

// member is one member of a classic group.
type member struct {
	id         string
	instanceID string
	clientID   string
	clientHost string

	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []Protocol
	assignment       []byte

	// join and sync are the member's waiting JoinGroup and SyncGroup
	// calls, nil when none.
	join *joinWait
	sync *syncWait

	// deadline is when the session ends without a heartbeat; hbTimer
	// fires at or before it and re-arms itself lazily.
	deadline time.Time
	hbTimer  clock.Timer
}

// joinWait and syncWait carry one answer each; the channel has room for
// it, so answering never blocks under the lock.
type joinWait struct {
	ch chan JoinResult
	// skipAssignment: the member can be told to skip assigning
	// (JoinRequest.SupportSkippingAssignment).
	skipAssignment bool
}

type syncWait struct {
	ch chan SyncResult
}

func newJoinWait(skipAssignment bool) *joinWait {
	return &joinWait{ch: make(chan JoinResult, 1), skipAssignment: skipAssignment}
}

func newSyncWait() *syncWait {
	return &syncWait{ch: make(chan SyncResult, 1)}
}

func newGroup(c *Coordinator, name string) *group {
	return &group{
		c:            c,
		name:         name,
		members:      make(map[string]*member),
		static:       make(map[string]string),
		awaitingJoin: make(map[string]clock.Timer),
		pendingSync:  make(map[string]bool),
	}
}

// loadGroup builds a group from its stored state: Stable with the stored
// members and assignments, or Empty. Members keep their ids and
// generation, so after a coordinator restart they carry on with
// heartbeats; those that do not come back within their session are
// removed and the group rebalances, as after a Kafka coordinator moves.
func (c *Coordinator) loadGroup(s *meta.Group) *group {
	g := newGroup(c, s.Name)
	g.kind = s.Kind
	g.protocolType = s.ProtocolType
	g.generation = s.Generation
	if s.Kind == meta.GroupShare {
		g.protocol = s.Protocol
		g.subscribedKnown = s.SubscribedKnown
		g.subscribed = s.Subscribed
		g.mu.Lock()
		g.loadShareLocked(s)
		g.mu.Unlock()
		return g
	}
	if s.Kind == meta.GroupConsumer {
		g.subscribedKnown = s.SubscribedKnown
		g.subscribed = s.Subscribed
		g.mu.Lock()
		g.loadConsumerLocked(s)
		g.mu.Unlock()
		return g
	}
	if len(s.Members) == 0 {
		return g
	}
	g.state = stateStable
	g.protocol = s.Protocol
	g.leader = s.Leader
	g.subscribedKnown = s.SubscribedKnown
	g.subscribed = s.Subscribed
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, sm := range s.Members {
		m := &member{
			id:               sm.MemberID,
			instanceID:       sm.InstanceID,
			clientID:         sm.ClientID,
			clientHost:       sm.ClientHost,
			sessionTimeout:   time.Duration(sm.SessionTimeoutMs) * time.Millisecond,
			rebalanceTimeout: time.Duration(sm.RebalanceTimeoutMs) * time.Millisecond,
			protocolType:     s.ProtocolType,
			protocols:        []Protocol{{Name: s.Protocol, Metadata: sm.Metadata}},
			assignment:       sm.Assignment,
		}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
		g.heartbeatLocked(m)
	}
	return g
}

// idleLocked: empty with nothing in flight, so dropping it from memory
// loses nothing the store does not have.
func (g *group) idleLocked() bool {
	return g.state == stateEmpty && len(g.members) == 0 && len(g.awaitingJoin) == 0 && g.storing == 0 && g.consumerMembers() == 0 && g.shareMembers() == 0
}

// activeLocked: the group has members of either kind, or is rebalancing.
func (g *group) activeLocked() bool {
	return g.state != stateEmpty || len(g.members) > 0 || g.consumerMembers() > 0 || g.shareMembers() > 0
}

func (g *group) stopTimersLocked() {
	clock.Stop(g.joinTimer)
	clock.Stop(g.syncTimer)
	g.joinTimer, g.syncTimer = nil, nil
	g.joinSeq++
	g.syncSeq++
	for _, t := range g.awaitingJoin {
		clock.Stop(t)
	}
	for _, m := range g.members {
		clock.Stop(m.hbTimer)
		m.hbTimer = nil
	}
	if g.cg != nil {
		for _, m := range g.cg.members {
			clock.Stop(m.timer)
			m.timer = nil
		}
	}
	if g.sg != nil {
		for _, m := range g.sg.members {
			clock.Stop(m.timer)
			m.timer = nil
		}
	}
}

// unloadLocked drops g from memory, answering waiting members with e.
func (g *group) unloadLocked(e *kerr.Error) {
	if g.gone {
		return
	}
	for _, m := range g.members {
		g.answerJoinErrLocked(m, e)
		g.answerSyncErrLocked(m, e)
	}
	g.gone = true
	g.stopTimersLocked()
	g.c.forget(g)
}

// newMemberID is Kafka's: the client id, a dash and a random UUID.
func newMemberID(clientID string) string {
	if len(clientID) > maxMemberIDBytes {
		clientID = clientID[:maxMemberIDBytes]
	}
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// heartbeatLocked restarts m's session.
func (g *group) heartbeatLocked(m *member) {
	m.deadline = g.c.clock.Now().Add(m.sessionTimeout)
	if m.hbTimer == nil {
		g.armHeartbeatLocked(m, m.sessionTimeout)
	}
}

func (g *group) armHeartbeatLocked(m *member, d time.Duration) {
	m.hbTimer = g.c.clock.AfterFunc(d, func() { g.heartbeatExpired(m) })
}

// heartbeatExpired runs when m's timer fires: the session may have been
// extended since (re-arm), or m may be waiting in JoinGroup or SyncGroup,
// which keeps it alive (the rebalance timeout governs it then).
func (g *group) heartbeatExpired(m *member) {
	g.mu.Lock()
	defer g.c.notify()
	defer g.mu.Unlock()
	if g.gone || g.members[m.id] != m {
		return
	}
	m.hbTimer = nil
	now := g.c.clock.Now()
	if now.Before(m.deadline) {
		g.armHeartbeatLocked(m, m.deadline.Sub(now))
		return
	}
	if m.join != nil || m.sync != nil {
		g.heartbeatLocked(m)
		return
	}
	g.c.log.Info("group: member session expired", "group", g.name, "member", m.id, "generation", g.generation)
	g.removeMemberAndUpdateLocked(m)
}

// matches reports whether ps are m's current protocols, byte for byte.
func (m *member) matches(ps []Protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

func copyProtocols(ps []Protocol) []Protocol {
	out := make([]Protocol, len(ps))
	for i, p := range ps {
		out[i] = Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

// sortedMembersLocked returns the members by id, for answers that must not
// depend on map order.
func (g *group) sortedMembersLocked() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return ms
}

// candidateProtocolsLocked are the protocols every member supports.
func (g *group) candidateProtocolsLocked() map[string]int {
	counts := make(map[string]int)
	for _, m := range g.members {
		for _, p := range m.protocols {
			counts[p.Name]++
		}
	}
	for name, n := range counts {
		if n != len(g.members) {
			delete(counts, name)
		}
	}
	return counts
}

// supportsProtocolsLocked is Kafka's check that a joining member can be
// part of the group.
func (g *group) supportsProtocolsLocked(protocolType string, ps []Protocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	cands := g.candidateProtocolsLocked()
	for _, p := range ps {
		if _, ok := cands[p.Name]; ok {
			return true
		}
	}
	return false
}

// selectProtocolLocked picks the protocol of the next generation: each
// member votes for its most preferred candidate; ties go to the earliest
// in the first member's (by id) preference order.
func (g *group) selectProtocolLocked() string {
	cands := g.candidateProtocolsLocked()
	if len(cands) == 0 {
		return ""
	}
	ms := g.sortedMembersLocked()
	votes := make(map[string]int)
	for _, m := range ms {
		for _, p := range m.protocols {
			if _, ok := cands[p.Name]; ok {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, p := range ms[0].protocols {
		if _, ok := cands[p.Name]; ok && votes[p.Name] > bestVotes {
			best, bestVotes = p.Name, votes[p.Name]
		}
	}
	return best
}

// computeSubscriptionsLocked reads the members' topics when the group runs
// the consumer protocol, for offset expiry and OffsetDelete.
func (g *group) computeSubscriptionsLocked() {
	g.subscribedKnown, g.subscribed = false, nil
	if g.protocolType != consumerProtocolType || g.protocol == "" {
		return
	}
	var topics []string
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return
		}
		topics = append(topics, md.Topics...)
	}
	slices.Sort(topics)
	g.subscribed = slices.Compact(topics)
	g.subscribedKnown = true
}

func (g *group) subscribedToLocked(topic string) bool {
	_, ok := slices.BinarySearch(g.subscribed, topic)
	return ok
}

// maxRebalanceTimeoutLocked is how long a join phase may wait.
func (g *group) maxRebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// hasAllMembersJoinedLocked: every member is waiting in JoinGroup and no
// member id handed out is still to come.
func (g *group) hasAllMembersJoinedLocked() bool {
	if len(g.awaitingJoin) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

func (g *group) maybePrepareRebalanceLocked(reason string) {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		g.prepareRebalanceLocked(reason)
	}
}

// prepareRebalanceLocked starts a join phase.
func (g *group) prepareRebalanceLocked(reason string) {
	if g.state == stateCompletingRebalance {
		// Assignments of the generation that never settled are void.
		for _, m := range g.members {
			g.answerSyncErrLocked(m, kerr.RebalanceInProgress)
			m.assignment = nil
		}
	}
	clock.Stop(g.syncTimer)
	g.syncTimer = nil
	g.syncSeq++
	clear(g.pendingSync)

	var delay time.Duration
	if g.state == stateEmpty && g.c.cfg.InitialRebalanceDelay > 0 {
		rebalance := g.maxRebalanceTimeoutLocked()
		delay = min(g.c.cfg.InitialRebalanceDelay, rebalance)
		g.initialDelay = true
		g.initialRemaining = max(rebalance-delay, 0)
		g.newMemberAdded = false
	} else {
		delay = g.maxRebalanceTimeoutLocked()
		g.initialDelay = false
	}
	g.c.log.Debug("group: preparing rebalance", "group", g.name, "generation", g.generation, "reason", reason)
	g.state = statePreparingRebalance
	g.armJoinTimerLocked(delay)
	g.tryCompleteJoinLocked()
}

func (g *group) armJoinTimerLocked(d time.Duration) {
	clock.Stop(g.joinTimer)
	g.joinSeq++
	seq := g.joinSeq
	g.joinTimer = g.c.clock.AfterFunc(d, func() { g.joinTimerFired(seq) })
}

func (g *group) joinTimerFired(seq uint64) {
	g.mu.Lock()
	defer g.c.notify()
	defer g.mu.Unlock()
	if g.gone || seq != g.joinSeq || g.state != statePreparingRebalance {
		return
	}
	g.joinTimer = nil
	if g.initialDelay {
		if g.newMemberAdded && g.initialRemaining > 0 {
			delay := min(g.c.cfg.InitialRebalanceDelay, g.initialRemaining)
			g.initialRemaining -= delay
			g.newMemberAdded = false
			g.armJoinTimerLocked(delay)
			return
		}
		g.initialDelay = false
	}
	g.completeJoinLocked()
}

func (g *group) tryCompleteJoinLocked() {
	if g.state == statePreparingRebalance && !g.initialDelay && g.hasAllMembersJoinedLocked() {
		g.completeJoinLocked()
	}
}

// completeJoinLocked ends the join phase: members that did not rejoin are
// dropped (static ones are kept, KIP-345: they may be restarting), and the
// next generation starts.
func (g *group) completeJoinLocked() {
	clock.Stop(g.joinTimer)
	g.joinTimer = nil
	g.joinSeq++
	for _, m := range g.sortedMembersLocked() {
		if m.join == nil && m.instanceID == "" {
			g.removeMemberLocked(m)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeaderLocked() {
		// Only static members that have not rejoined are left: wait
		// for them, or for their sessions to run out.
		g.c.log.Warn("group: no member rejoined; waiting another rebalance timeout", "group", g.name)
		g.armJoinTimerLocked(g.maxRebalanceTimeoutLocked())
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.state = stateEmpty
		g.protocol = ""
		g.leader = ""
		g.subscribedKnown, g.subscribed = false, nil
		g.storeStateLocked(nil)
		return
	}
	g.state = stateCompletingRebalance
	g.protocol = g.selectProtocolLocked()
	g.computeSubscriptionsLocked()
	g.c.log.Debug("group: join complete", "group", g.name, "generation", g.generation,
		"protocol", g.protocol, "members", len(g.members), "leader", g.leader)
	for _, m := range g.sortedMembersLocked() {
		if m.join != nil {
			g.answerJoinLocked(m, g.joinResultLocked(m))
		}
		g.heartbeatLocked(m)
		g.pendingSync[m.id] = true
	}
	g.armSyncTimerLocked()
}

// electJoinedLeaderLocked keeps the leader if it rejoined, else picks a
// member that did; false when none did.
func (g *group) electJoinedLeaderLocked() bool {
	if m := g.members[g.leader]; m != nil && m.join != nil {
		return true
	}
	for _, m := range g.sortedMembersLocked() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// joinResultLocked is a successful JoinGroup answer for m in the current
// generation: the leader also gets every member's subscription.
func (g *group) joinResultLocked(m *member) JoinResult {
	res := JoinResult{
		Generation:   g.generation,
		ProtocolType: g.protocolType,
		Protocol:     g.protocol,
		LeaderID:     g.leader,
		MemberID:     m.id,
	}
	if m.id == g.leader {
		res.Members = g.memberListLocked()
	}
	return res
}

func (g *group) memberListLocked() []JoinMember {
	ms := g.sortedMembersLocked()
	out := make([]JoinMember, len(ms))
	for i, m := range ms {
		out[i] = JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadataFor(g.protocol)}
	}
	return out
}

func (g *group) answerJoinLocked(m *member, res JoinResult) {
	if m.join == nil {
		return
	}
	m.join.ch <- res
	m.join = nil
}

// answerJoinErrLocked fails m's waiting JoinGroup with e.
func (g *group) answerJoinErrLocked(m *member, e *kerr.Error) {
	if m.join == nil {
		return
	}
	g.answerJoinLocked(m, joinError(m.id, e))
}

// joinError is a failed JoinGroup: no generation, and the member id to
// rejoin with if there is one.
func joinError(memberID string, e *kerr.Error) JoinResult {
	return JoinResult{Code: e.Code, Generation: -1, MemberID: memberID}
}

func (g *group) answerSyncLocked(m *member, res SyncResult) {
	if m.sync == nil {
		return
	}
	m.sync.ch <- res
	m.sync = nil
}

func (g *group) answerSyncErrLocked(m *member, e *kerr.Error) {
	if m.sync == nil {
		return
	}
	g.answerSyncLocked(m, syncError(e))
}

func syncError(e *kerr.Error) SyncResult { return SyncResult{Code: e.Code} }

func (g *group) syncResultLocked(m *member) SyncResult {
	return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
}

// armSyncTimerLocked bounds the sync phase: members of the generation
// that have not sent SyncGroup within the rebalance timeout are removed
// (Kafka's pending-sync timeout).
func (g *group) armSyncTimerLocked() {
	clock.Stop(g.syncTimer)
	g.syncSeq++
	seq, gen := g.syncSeq, g.generation
	g.syncTimer = g.c.clock.AfterFunc(g.maxRebalanceTimeoutLocked(), func() { g.syncTimerFired(seq, gen) })
}

func (g *group) syncTimerFired(seq uint64, gen int32) {
	g.mu.Lock()
	defer g.c.notify()
	defer g.mu.Unlock()
	if g.gone || seq != g.syncSeq || gen != g.generation ||
		(g.state != stateCompletingRebalance && g.state != stateStable) {
		return
	}
	g.syncTimer = nil
	var late []*member
	for _, m := range g.sortedMembersLocked() {
		if g.pendingSync[m.id] {
			late = append(late, m)
		}
	}
	if len(late) == 0 {
		return
	}
	for _, m := range late {
		g.c.log.Info("group: member did not sync in time", "group", g.name, "member", m.id, "generation", gen)
		g.removeMemberLocked(m)
	}
	g.maybePrepareRebalanceLocked("members did not sync")
}

// removeMemberLocked drops m, answering its waiting calls with
// UNKNOWN_MEMBER_ID, and moves the leadership if m had it.
func (g *group) removeMemberLocked(m *member) {
	if m.join != nil {
		g.answerJoinLocked(m, joinError("", kerr.UnknownMemberID))
	}
	g.answerSyncErrLocked(m, kerr.UnknownMemberID)
	clock.Stop(m.hbTimer)
	m.hbTimer = nil
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		for _, o := range g.sortedMembersLocked() {
			if g.leader == "" || (o.join != nil && g.members[g.leader].join == nil) {
				g.leader = o.id
			}
		}
	}
}

// removeMemberAndUpdateLocked removes m and moves the group along: a
// settled group rebalances, a join phase may now be complete.
func (g *group) removeMemberAndUpdateLocked(m *member) {
	g.removeMemberLocked(m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.maybePrepareRebalanceLocked("member " + m.id + " left")
	case statePreparingRebalance:
		g.tryCompleteJoinLocked()
	}
}

// stateCommandLocked is the GroupState of the current generation, with
// assignments overriding the members' own when given.
func (g *group) stateCommandLocked(assignments map[string][]byte) meta.GroupState {
	cmd := meta.GroupState{
		Group:           g.name,
		Kind:            g.kind,
		ProtocolType:    g.protocolType,
		Protocol:        g.protocol,
		Generation:      g.generation,
		Leader:          g.leader,
		SubscribedKnown: g.subscribedKnown,
		Subscribed:      g.subscribed,
	}
	for _, m := range g.sortedMembersLocked() {
		a := m.assignment
		if assignments != nil {
			a = assignments[m.id]
		}
		cmd.Members = append(cmd.Members, meta.GroupMember{
			MemberID:           m.id,
			InstanceID:         m.instanceID,
			ClientID:           m.clientID,
			ClientHost:         m.clientHost,
			SessionTimeoutMs:   int32(m.sessionTimeout / time.Millisecond),
			RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond),
			Metadata:           m.metadataFor(g.protocol),
			Assignment:         a,
		})
	}
	return cmd
}

// storeStateLocked stores the current state, with done (may be nil)
// called under the lock afterwards. A store fenced by a newer generation
// means another coordinator has the group: it is unloaded.
func (g *group) storeStateLocked(done func(meta.Result, error)) {
	g.storeLocked(g.stateCommandLocked(nil), func(res meta.Result, err error) {
		if done != nil {
			done(res, err)
		}
		if !g.gone && g.storeErrorCode(res, err) == kerr.NotCoordinator {
			g.c.log.Warn("group: a newer generation is stored; unloading", "group", g.name, "generation", g.generation)
			g.unloadLocked(kerr.NotCoordinator)
		}
	})
}
