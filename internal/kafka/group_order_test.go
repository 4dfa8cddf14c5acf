package kafka

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

// heldCommits is the group coordinator with one group's commits held:
// OffsetCommit waits, inside its connection's turn, until release is
// closed. The group's calls are recorded in the order they arrive.
type heldCommits struct {
	GroupCoordinator
	group   string
	held    chan struct{} // closed once a commit is held
	release chan struct{}

	mu    sync.Mutex
	calls []string
}

func (h *heldCommits) record(group, call string) {
	if group != h.group {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
}

func (h *heldCommits) OffsetCommit(ctx context.Context, req group.CommitRequest) func(context.Context) []int16 {
	h.record(req.Group, "OffsetCommit")
	if req.Group == h.group {
		close(h.held)
		<-h.release
	}
	return h.GroupCoordinator.OffsetCommit(ctx, req)
}

func (h *heldCommits) JoinGroup(ctx context.Context, cl group.Client, req group.JoinRequest) func(context.Context) group.JoinResult {
	h.record(req.Group, "JoinGroup")
	return h.GroupCoordinator.JoinGroup(ctx, cl, req)
}

func (h *heldCommits) SyncGroup(ctx context.Context, req group.SyncRequest) func(context.Context) group.SyncResult {
	h.record(req.Group, "SyncGroup")
	return h.GroupCoordinator.SyncGroup(ctx, req)
}

func (h *heldCommits) Heartbeat(ctx context.Context, req group.HeartbeatRequest) int16 {
	h.record(req.Group, "Heartbeat")
	return h.GroupCoordinator.Heartbeat(ctx, req)
}

func (h *heldCommits) LeaveGroup(ctx context.Context, name string, leaving []group.LeaveMember) group.LeaveResult {
	h.record(name, "LeaveGroup")
	return h.GroupCoordinator.LeaveGroup(ctx, name, leaving)
}

func (h *heldCommits) ConsumerGroupHeartbeat(ctx context.Context, cl group.Client, req group.ConsumerHeartbeatRequest) func(context.Context) group.ConsumerHeartbeatResult {
	h.record(req.Group, "ConsumerGroupHeartbeat")
	return h.GroupCoordinator.ConsumerGroupHeartbeat(ctx, cl, req)
}

// A group request pipelined behind an OffsetCommit on one connection
// reaches the coordinator only after the commit did, as on a Kafka
// broker. kgo sends a KIP-848 member's commit and its next heartbeat on
// one connection: a heartbeat handing partitions back that overtook the
// commit moved the member's epoch first, the commit of what the member
// had processed was STALE_MEMBER_EPOCH, and the partitions' next owner
// processed those records again (TestGroupETL's flaky duplicates).
//
// The commit is held inside its turn; then the client closes its side,
// which ends the connection once the server has read the request behind
// the commit. A request that waits for its turn gives up when the
// connection ends, without reaching the coordinator; one that does not
// wait reaches it before the commit is released, ahead of the commit or
// while it is held.
func TestGroupRequestsKeepConnectionOrder(t *testing.T) {
	const g, member = "ordered", "m-1"
	tests := []struct {
		name string
		req  kmsg.Request
	}{
		{"ConsumerGroupHeartbeat", func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Version, r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = 1, g, member, 1, -1
			return r
		}()},
		{"Heartbeat", func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Version, r.Group, r.MemberID, r.Generation = 4, g, member, 1
			return r
		}()},
		{"LeaveGroup", func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Version, r.Group = 5, g
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = member
			r.Members = append(r.Members, m)
			return r
		}()},
		{"JoinGroup", consumerJoin(9, g, member, 10_000, "t")},
		{"SyncGroup", func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Version, r.Group, r.MemberID, r.Generation = 5, g, member, 1
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &heldCommits{group: g, held: make(chan struct{}), release: make(chan struct{})}
			// returned is closed when the handler of the request behind
			// the commit has returned.
			returned := make(chan struct{})
			handlerReturned := sync.OnceFunc(func() { close(returned) })
			a := newTestAgent(t, withGroups(t, nil, nil), func(c *agentConfig) {
				h.GroupCoordinator = c.Server.Deps.Groups
				c.Server.Deps.Groups = h
				reg := DefaultRegistry()
				key := tt.req.Key()
				e := reg.lookup(key)
				if err := reg.Register(key, e.minVersion, e.maxVersion, func(ctx context.Context, r *Request) (kmsg.Response, error) {
					defer handlerReturned()
					return e.handler(ctx, r)
				}); err != nil {
					t.Fatal(err)
				}
				c.Server.Registry = reg
			})
			// Before the server's Shutdown, which waits for the held commit.
			free := sync.OnceFunc(func() { close(h.release) })
			t.Cleanup(free)

			commit := kmsg.NewPtrOffsetCommitRequest()
			commit.Version, commit.Group, commit.MemberID, commit.Generation = 8, g, member, 1
			ct := kmsg.NewOffsetCommitRequestTopic()
			ct.Topic = "t"
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Offset = 5
			ct.Partitions = append(ct.Partitions, cp)
			commit.Topics = append(commit.Topics, ct)

			c := dial(t, a.addr)
			write(t, c, append(frameFor(1, commit), frameFor(2, tt.req)...))
			waitClosed(t, h.held, "the commit to be held")
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, returned, "the "+tt.name+" handler to return")
			free()

			// The request behind the commit never had its turn: the
			// connection ended while the commit was held.
			h.mu.Lock()
			defer h.mu.Unlock()
			if !slices.Equal(h.calls, []string{"OffsetCommit"}) {
				t.Fatalf("the coordinator saw %v; want only the OffsetCommit, sent first and held", h.calls)
			}
		})
	}
}

// waitClosed waits for ch to be closed, failing the test after the
// deadlock guard.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// slowCommits is the group coordinator with one group's commits slow to
// apply: a commit is handed to the coordinator only once release is
// closed, inside the wait the handler runs outside its turn. It records
// whether each OffsetFetch of the group came after a commit was answered.
type slowCommits struct {
	GroupCoordinator
	group   string
	release chan struct{}

	mu              sync.Mutex
	answered        bool
	fetchesTooEarly int
}

func (s *slowCommits) OffsetCommit(ctx context.Context, req group.CommitRequest) func(context.Context) []int16 {
	if req.Group != s.group {
		return s.GroupCoordinator.OffsetCommit(ctx, req)
	}
	return func(ctx context.Context) []int16 {
		<-s.release
		codes := s.GroupCoordinator.OffsetCommit(ctx, req)(ctx)
		s.mu.Lock()
		s.answered = true
		s.mu.Unlock()
		return codes
	}
}

func (s *slowCommits) OffsetFetch(ctx context.Context, reqs []group.FetchRequest) []group.FetchResult {
	s.mu.Lock()
	if len(reqs) == 1 && reqs[0].Group == s.group && !s.answered {
		s.fetchesTooEarly++
	}
	s.mu.Unlock()
	return s.GroupCoordinator.OffsetFetch(ctx, reqs)
}

// An OffsetFetch pipelined behind an OffsetCommit on one connection
// reads that commit, as from a Kafka broker, which answers a
// connection's requests in turn: the commit's wait runs outside the
// connection's order, and the fetch must wait for it. The commit is
// released once the fetch's handler has started.
func TestOffsetFetchReadsEarlierCommits(t *testing.T) {
	const g = "reads-own-commit"
	s := &slowCommits{group: g, release: make(chan struct{})}
	fetchStarted := make(chan struct{})
	startFetch := sync.OnceFunc(func() { close(fetchStarted) })
	a := newTestAgent(t, withGroups(t, nil, nil), func(c *agentConfig) {
		s.GroupCoordinator = c.Server.Deps.Groups
		c.Server.Deps.Groups = s
		reg := DefaultRegistry()
		e := reg.lookup(9)
		if err := reg.Register(9, e.minVersion, e.maxVersion, func(ctx context.Context, r *Request) (kmsg.Response, error) {
			startFetch()
			return e.handler(ctx, r)
		}); err != nil {
			t.Fatal(err)
		}
		c.Server.Registry = reg
	})
	a.createTopic(t, "t", 1, nil)
	free := sync.OnceFunc(func() { close(s.release) })
	t.Cleanup(free)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, g, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 5
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 7, g
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "t", []int32{0}
	fetch.Topics = append(fetch.Topics, ft)

	c := dial(t, a.addr)
	write(t, c, append(frameFor(1, commit), frameFor(2, fetch)...))
	waitClosed(t, fetchStarted, "the OffsetFetch handler to start")
	free()

	cresp := kmsg.NewPtrOffsetCommitResponse()
	decodeResponse(t, readFrame(t, c), cresp, commit.Version)
	if code := cresp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	fresp := kmsg.NewPtrOffsetFetchResponse()
	decodeResponse(t, readFrame(t, c), fresp, fetch.Version)
	if got := fresp.Topics[0].Partitions[0].Offset; got != 5 {
		t.Errorf("OffsetFetch behind the commit of 5 on its connection answered %d", got)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetchesTooEarly > 0 {
		t.Errorf("the OffsetFetch reached the coordinator before the commit sent ahead of it was answered")
	}
}
