package group

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// guard bounds every wait; nothing waits it out on purpose.
const guard = 20 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// newFakeClock is the clock the tests move by hand, at a fixed start.
func newFakeClock() *clock.Fake { return clock.NewFake(time.UnixMilli(1_700_000_000_000)) }

// env is a coordinator over a real replica (memory log, Pebble in a temp
// dir) whose entry timestamps follow the fake clock.
type env struct {
	t     *testing.T
	clock *clock.Fake
	log   *gatedLog
	dir   string
	cfg   Config
	rep   *replica.Replica
	c     *Coordinator
	// session overrides joinReq's session timeout in e.req.
	session time.Duration
}

// testConfig is the coordinator config of tests: the defaults but for a
// session floor low enough for short sessions, and no sweep unless a test
// asks.
func testConfig() Config {
	return Config{
		NodeID:                       1,
		MinSessionTimeout:            time.Millisecond,
		OffsetRetentionCheckInterval: -1,
		Logger:                       quiet,
	}
}

func newEnv(t *testing.T, opts ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, clock: newFakeClock(), log: &gatedLog{Loglet: memlog.New()}, dir: t.TempDir()}
	t.Cleanup(func() { e.log.Close() })
	e.cfg = testConfig()
	for _, o := range opts {
		o(&e.cfg)
	}
	e.open()
	return e
}

// open starts the replica and the coordinator on e's log and dir.
func (e *env) open() {
	t := e.t
	t.Helper()
	ctx := testCtx(t)
	rep, err := replica.Open(ctx, replica.Config{Dir: e.dir, Log: e.log, WriterID: "agent-1", Logger: quiet, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.Meta, cfg.Clock = rep, e.clock
	c, err := New(ctx, cfg)
	if err != nil {
		rep.Close()
		t.Fatal(err)
	}
	e.rep, e.c = rep, c
	t.Cleanup(e.close)
}

// close stops the coordinator, then the replica. Idempotent.
func (e *env) close() {
	if e.c != nil {
		e.c.Close()
		e.c = nil
	}
	if e.rep != nil {
		e.rep.Close()
		e.rep = nil
	}
}

// restart closes everything and opens it again on the same log and dir.
func (e *env) restart() {
	e.t.Helper()
	e.close()
	e.open()
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) createTopic(name string, partitions int32) {
	e.t.Helper()
	res, err := e.rep.Propose(testCtx(e.t), meta.CreateTopic{Name: name, Partitions: partitions})
	if err != nil || res.Code != 0 {
		e.t.Fatalf("CreateTopic(%s): %v, %v", name, err, res.Err())
	}
}

// consumerMeta is a consumer protocol subscription to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

// joinReq is a JoinGroup of a consumer with the range protocol, from a
// client that knows MEMBER_ID_REQUIRED and SkipAssignment (JoinGroup
// v9).
func joinReq(group, memberID string, topics ...string) JoinRequest {
	return JoinRequest{
		Group:                     group,
		MemberID:                  memberID,
		SessionTimeout:            10 * time.Second,
		RebalanceTimeout:          30 * time.Second,
		ProtocolType:              consumerProtocolType,
		Protocols:                 []Protocol{{Name: "range", Metadata: consumerMeta(topics...)}},
		RequireKnownMemberID:      true,
		SupportSkippingAssignment: true,
	}
}

// req is joinReq with e's session timeout.
func (e *env) req(group, memberID string, topics ...string) JoinRequest {
	r := joinReq(group, memberID, topics...)
	if e.session > 0 {
		r.SessionTimeout = e.session
	}
	return r
}

func withInstance(req JoinRequest, id string) JoinRequest {
	req.InstanceID = &id
	return req
}

// join calls JoinGroup in a goroutine; the answer arrives on the channel.
func (e *env) join(req JoinRequest) <-chan JoinResult {
	ch := make(chan JoinResult, 1)
	c := e.c
	go func() {
		ctx := context.Background()
		ch <- c.JoinGroup(ctx, Client{ID: "client", Host: "/127.0.0.1"}, req)(ctx)
	}()
	return ch
}

// joinNow is a join answered without waiting for a phase to complete.
func (e *env) joinNow(req JoinRequest) JoinResult {
	e.t.Helper()
	return recv(e.t, e.join(req), "JoinGroup")
}

// newMember joins a new member the KIP-394 way and returns the id
// MEMBER_ID_REQUIRED handed out, with the second join in flight.
func (e *env) newMember(group string, topics ...string) (string, <-chan JoinResult) {
	e.t.Helper()
	resp := e.joinNow(e.req(group, "", topics...))
	if resp.Code != kerr.MemberIDRequired.Code || resp.MemberID == "" {
		e.t.Fatalf("first join: code %d, member %q; want MEMBER_ID_REQUIRED", resp.Code, resp.MemberID)
	}
	return resp.MemberID, e.join(e.req(group, resp.MemberID, topics...))
}

func (e *env) sync(group, member string, gen int32, assign map[string][]byte) <-chan SyncResult {
	req := SyncRequest{Group: group, MemberID: member, Generation: gen}
	for _, id := range slices.Sorted(mapKeys(assign)) {
		req.Assignments = append(req.Assignments, SyncAssignment{MemberID: id, Assignment: assign[id]})
	}
	ch := make(chan SyncResult, 1)
	c := e.c
	go func() {
		ctx := context.Background()
		ch <- c.SyncGroup(ctx, req)(ctx)
	}()
	return ch
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (e *env) heartbeat(group, member string, gen int32) int16 {
	return e.c.Heartbeat(testCtx(e.t), HeartbeatRequest{Group: group, MemberID: member, Generation: gen})
}

// commitReq is a commit of one partition's offset.
func commitReq(group, member string, gen int32, topic string, partition int32, offset int64) CommitRequest {
	return CommitRequest{
		Group: group, MemberID: member, Generation: gen, RetentionMs: -1,
		Topics: []CommitTopic{{Topic: topic, Partitions: []CommitPartition{{
			Partition: partition, Offset: offset, LeaderEpoch: -1, Timestamp: -1,
		}}}},
	}
}

func (e *env) commit(group, member string, gen int32, topic string, partition int32, offset int64) int16 {
	e.t.Helper()
	ctx := testCtx(e.t)
	return e.c.OffsetCommit(ctx, commitReq(group, member, gen, topic, partition, offset))(ctx)[0]
}

// fetchOne is a group's committed offset of one partition (-1 if none),
// and the group's error code.
func fetchOne(ctx context.Context, c *Coordinator, group, topic string, partition int32) (int64, int16) {
	res := c.OffsetFetch(ctx, []FetchRequest{{Group: group, Topics: []TopicPartitions{{Topic: topic, Partitions: []int32{partition}}}}})[0]
	if res.Code != 0 {
		return -1, res.Code
	}
	return res.Topics[0].Partitions[0].Offset, 0
}

// fetched is a group's committed offset of one partition, -1 if none.
func (e *env) fetched(group, topic string, partition int32) int64 {
	e.t.Helper()
	off, code := fetchOne(testCtx(e.t), e.c, group, topic, partition)
	if code != 0 {
		e.t.Fatalf("OffsetFetch: group error %d", code)
	}
	return off
}

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// noRecv fails if ch already holds a value.
func noRecv[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s answered early: %+v", what, v)
	default:
	}
}

// snap is a group's state for assertions.
type snap struct {
	exists     bool
	state      groupState
	generation int32
	leader     string
	members    []string
	joining    int // members waiting in JoinGroup
	syncing    int // members waiting in SyncGroup
	pending    int
	storing    int
}

func (c *Coordinator) snapshot(name string) snap {
	c.mu.Lock()
	g := c.mu.groups[name]
	c.mu.Unlock()
	if g == nil {
		return snap{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return snap{}
	}
	s := snap{exists: true, state: g.state, generation: g.generation, leader: g.leader,
		pending: len(g.awaitingJoin), storing: g.storing}
	for _, m := range g.sortedMembersLocked() {
		s.members = append(s.members, m.id)
		if m.join != nil {
			s.joining++
		}
		if m.sync != nil {
			s.syncing++
		}
	}
	return s
}

// waitFor waits until cond holds for group's snapshot.
func (e *env) waitFor(group string, what string, cond func(snap) bool) snap {
	e.t.Helper()
	deadline := time.After(guard)
	for {
		ch := e.c.Changed()
		s := e.c.snapshot(group)
		if cond(s) {
			return s
		}
		select {
		case <-ch:
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s; group %s is %+v", what, group, s)
		}
	}
}

// stored reads the group's stored state.
func (e *env) stored(group string) (meta.Group, bool) {
	e.t.Helper()
	v := e.rep.View()
	defer v.Close()
	g, ok, err := v.Group(group)
	if err != nil {
		e.t.Fatal(err)
	}
	return g, ok
}

// gatedLog holds appends while its gate is armed, and counts them.
type gatedLog struct {
	*memlog.Loglet
	mu      sync.Mutex
	gate    chan struct{} // nil when open
	entered chan struct{}
	appends int
}

func (l *gatedLog) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	l.mu.Lock()
	gate, entered := l.gate, l.entered
	l.appends++
	l.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return l.Loglet.Append(ctx, entry)
}

func (l *gatedLog) arm() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gate, l.entered = make(chan struct{}), make(chan struct{}, 1024)
	return l.entered
}

func (l *gatedLog) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate != nil {
		close(l.gate)
		l.gate = nil
	}
}

func (l *gatedLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appends
}
