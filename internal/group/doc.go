// Package group owns Strand's consumer group coordinator: membership,
// rebalances and committed offsets of the groups that FindCoordinator
// maps to this agent (package placement), served to the Kafka layer as
// one method per API key (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups,
// DeleteGroups, ConsumerGroupHeartbeat, ConsumerGroupDescribe,
// ShareGroupHeartbeat, ShareGroupDescribe).
//
// The methods take and return this package's types (JoinRequest,
// JoinResult, CommitRequest, ...), which hold what the coordinator needs
// and nothing of the wire: package kafka's handler files convert each
// API version's request and answer to and from them. Where versions
// differ in behaviour, not only in encoding, a request says what its
// client can take (JoinRequest.RequireKnownMemberID,
// SupportSkippingAssignment; ConsumerHeartbeatRequest.RequireMemberID).
// Errors are Kafka error codes (kerr), the vocabulary of group outcomes.
// JoinGroup, SyncGroup, OffsetCommit and ConsumerGroupHeartbeat work in
// two steps: the call takes the request into the group's state, the
// function it returns waits for the answer (a join phase, a store). The
// Kafka layer makes the first step in each connection's request order,
// as a broker would, and waits outside it.
//
// # Memory and the log
//
// Membership is in memory on the coordinating agent: who is in a group,
// who is waiting in JoinGroup or SyncGroup, every session and rebalance
// timer. Every durable fact goes through the shared log as a meta
// command, queued under the group's lock so a group's commands apply in
// the order the coordinator decided them:
//
//   - GroupState when a generation's assignment is settled (the leader's
//     SyncGroup), when a group becomes empty, and when a static member is
//     replaced;
//   - OffsetCommit for every commit (commits of all groups share log
//     entries: meta's proposer cuts one entry from whatever is queued
//     while the previous append is in flight);
//   - DeleteGroup, OffsetDelete, and ExpireOffsets from a periodic sweep
//     (offsets.retention.minutes, with time taken from the log).
//
// Apply fences a coordinator that lost a group: a GroupState or group
// OffsetCommit whose generation is below the stored one is refused, and
// the coordinator that gets the refusal unloads the group
// (NOT_COORDINATOR to its members).
//
// A group missing from memory is loaded from its stored state after the
// replica catches up with the log: Stable with the stored members, ids,
// generation and assignments, or Empty. Members carry on with
// heartbeats; those that do not come back within their session are
// removed and the group rebalances, as after a Kafka coordinator moves.
// New loads every owned group that has stored members, so their sessions
// start running at once.
//
// Memory is bounded: at most MaxGroupSize members (and member ids handed
// out) per group, at most MaxGroups groups. An empty group with nothing in
// flight is dropped from memory by the expiry sweep, or when room is
// needed; its stored state brings it back on the next request.
//
// # The classic state machine
//
//	Empty --join--> PreparingRebalance --all joined or rebalance timeout--> CompletingRebalance
//	CompletingRebalance --leader's SyncGroup stored--> Stable
//	Stable | CompletingRebalance --join, leave, session expiry, late sync--> PreparingRebalance
//	PreparingRebalance --nobody left--> Empty (generation+1, stored)
//	Empty --DeleteGroups--> Dead (gone from memory once the delete applies)
//
// The first rebalance of an empty group waits InitialRebalanceDelay for
// more members (group.initial.rebalance.delay.ms). A join without a
// member id from a client that requires a known one (JoinGroup v4+) gets
// MEMBER_ID_REQUIRED and the id to rejoin with (KIP-394). A member with an instance id (KIP-345) that rejoins replaces
// its old member id; the old id is FENCED_INSTANCE_ID, and a stable group
// keeps its generation and assignment.
//
// # Time
//
// Every timeout is a timer from the Clock in Config (package clock), so
// tests drive time by hand with a clock.Fake. Timer callbacks lock the group and check a sequence number (or
// a member's deadline) before acting, so a timer that lost a race with a
// request does nothing.
//
// # Kinds
//
// A group has a kind (meta.GroupKind). KIP-848 "consumer" groups
// (ConsumerGroupHeartbeat, ConsumerGroupDescribe: consumer.go) share the
// lookup, loading, placement, stores and offsets with classic groups,
// with their own membership state: epochs, server-side assignment
// (assignor.go: uniform, range) and revoke-before-assign reconciliation
// (reconcile.go).
// A classic JoinGroup to a non-empty consumer group is
// INCONSISTENT_GROUP_PROTOCOL; a consumer heartbeat to a non-empty
// classic group is GROUP_ID_NOT_FOUND. An empty group of either kind
// becomes the kind of its next member.
//
// KIP-932 "share" groups (ShareGroupHeartbeat, ShareGroupDescribe:
// share.go) are stored as ShareGroupState, with the simple assignor
// (share_assignor.go) and no revocation phase. Their id is theirs even
// when empty: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit
// and ConsumerGroupHeartbeat on it are GROUP_ID_NOT_FOUND, and a share
// heartbeat on a classic or consumer group's id is too.
package group
