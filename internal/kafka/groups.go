package kafka

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/group"
)

// GroupCoordinator serves the group APIs. *group.Coordinator implements
// it in its own types: the handler files (JoinGroup, SyncGroup, ...)
// document the versions and convert each version's request and answer
// to and from them, so the group semantics live in package group and the
// wire in this one.
//
// A connection's group requests reach the coordinator in request order,
// as on a Kafka broker, which reads a connection's next request only once
// it answered the last: each group handler hands its request to the
// coordinator inside Request.InOrder and waits for the answer outside it.
// Clients rely on it: kgo pipelines a KIP-848 member's OffsetCommit and
// ConsumerGroupHeartbeat on one connection, and a heartbeat that overtook
// the commit could hand partitions back and move the member's epoch
// first; the commit of what the member processed would then be
// STALE_MEMBER_EPOCH, and the partitions' next owner would process it
// again. Likewise a LeaveGroup or JoinGroup overtaking a commit would get
// it refused (UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS).
type GroupCoordinator interface {
	// Coordinator is the node id of the agent coordinating key (a group
	// id or a transactional id).
	Coordinator(key string) int32
	// JoinGroup, SyncGroup, OffsetCommit and ConsumerGroupHeartbeat take
	// the request in and return the wait for its answer, so a handler
	// hands the request over in its connection's order and waits outside
	// it. Heartbeat and LeaveGroup answer at once.
	JoinGroup(ctx context.Context, cl group.Client, req group.JoinRequest) func(context.Context) group.JoinResult
	SyncGroup(ctx context.Context, req group.SyncRequest) func(context.Context) group.SyncResult
	Heartbeat(ctx context.Context, req group.HeartbeatRequest) int16
	LeaveGroup(ctx context.Context, name string, leaving []group.LeaveMember) group.LeaveResult
	// OffsetCommit queues the commit and returns the wait for its
	// outcome, a code per partition in request order; commits queued in
	// sequence apply in sequence.
	OffsetCommit(ctx context.Context, req group.CommitRequest) func(context.Context) []int16
	OffsetFetch(ctx context.Context, reqs []group.FetchRequest) []group.FetchResult
	OffsetDelete(ctx context.Context, name string, topics []group.TopicPartitions) group.OffsetDeleteResult
	ListGroups(ctx context.Context, states, types []string) ([]group.ListedGroup, int16)
	DescribeGroups(ctx context.Context, names []string) []group.DescribedGroup
	DeleteGroups(ctx context.Context, names []string) []int16
	// KIP-848 consumer groups.
	ConsumerGroupHeartbeat(ctx context.Context, cl group.Client, req group.ConsumerHeartbeatRequest) func(context.Context) group.ConsumerHeartbeatResult
	ConsumerGroupDescribe(ctx context.Context, names []string) []group.DescribedConsumerGroup
	// KIP-932 share groups: ShareGroupHeartbeat works in two steps, as
	// ConsumerGroupHeartbeat does.
	ShareGroupHeartbeat(ctx context.Context, cl group.Client, req group.ShareHeartbeatRequest) func(context.Context) group.ShareHeartbeatResult
	ShareGroupDescribe(ctx context.Context, names []string) []group.DescribedShareGroup
}

var _ GroupCoordinator = (*group.Coordinator)(nil)

// groups returns Deps.Groups, or ErrMissingDeps.
func (d *Deps) groups() (GroupCoordinator, error) {
	if d == nil || d.Groups == nil {
		return nil, ErrMissingDeps
	}
	return d.Groups, nil
}

// groupClient is who sent r, as JoinGroup records it: the header's client
// id and the peer's address the way Kafka prints it ("/127.0.0.1").
func (r *Request) groupClient() group.Client {
	var cl group.Client
	if r.ClientID != nil {
		cl.ID = *r.ClientID
	}
	if r.Conn != nil {
		if a := r.Conn.RemoteAddr(); a != nil {
			host := a.String()
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			cl.Host = "/" + host
		}
	}
	return cl
}

// groupAuthorizedOps is what an authorizer-less Kafka allows on a group,
// answered when a describe asks: READ, DELETE and DESCRIBE.
const groupAuthorizedOps int32 = 1<<3 | 1<<6 | 1<<8

// millis is a duration given in milliseconds on the wire.
func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// strOr is *s, or "" for null.
func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// commitsInFlight are a connection's OffsetCommits whose waits have not
// returned. An OffsetFetch waits for those its connection sent before it:
// a Kafka broker answers a connection's requests one at a time, so a
// client that pipelines a commit and a fetch of the same offsets reads
// its own commit, but here a commit's wait runs outside the connection's
// order. Bounded by the connection's requests in flight.
type commitsInFlight struct {
	mu      sync.Mutex
	commits map[chan struct{}]struct{}
}

// start registers a commit handed to the coordinator; the caller calls
// finish once the commit's wait has returned.
func (c *commitsInFlight) start() (finish func()) {
	done := make(chan struct{})
	c.mu.Lock()
	if c.commits == nil {
		c.commits = make(map[chan struct{}]struct{})
	}
	c.commits[done] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.commits, done)
		c.mu.Unlock()
		close(done)
	}
}

// snapshot returns the commits in flight now.
func (c *commitsInFlight) snapshot() []chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]chan struct{}, 0, len(c.commits))
	for done := range c.commits {
		out = append(out, done)
	}
	return out
}

// awaitEarlierCommits waits, in r's turn on its connection, for the
// OffsetCommits the connection sent before r to be answered.
func (r *Request) awaitEarlierCommits(ctx context.Context) error {
	if r.Conn == nil {
		return nil
	}
	var earlier []chan struct{}
	if err := r.InOrder(ctx, func() { earlier = r.Conn.commits.snapshot() }); err != nil {
		return err
	}
	for _, done := range earlier {
		select {
		case <-done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}
