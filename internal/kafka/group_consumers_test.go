package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tracker runs kgo group consumers against an agent and records what
// each was assigned, what was delivered and what was committed. Every
// change wakes waitFor. A consumer polls with rebalances blocked, commits
// what it polled, then allows a rebalance: so a record whose commit
// succeeded must never be delivered again, to anyone.
type tracker struct {
	mu       sync.Mutex
	changed  chan struct{}
	assigned map[string]map[int32]bool
	// assigns and revokes count the callbacks per consumer.
	assigns map[string]int
	revokes map[string]int
	// delivered counts deliveries per (partition, offset).
	delivered map[[2]int64]int
	// committed is each partition's committed offset (the next to read).
	committed map[int32]int64
	problems  []string
	runs      map[string]*consumerRun
}

type consumerRun struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func newTracker() *tracker {
	return &tracker{
		changed:   make(chan struct{}),
		assigned:  make(map[string]map[int32]bool),
		assigns:   make(map[string]int),
		revokes:   make(map[string]int),
		delivered: make(map[[2]int64]int),
		committed: make(map[int32]int64),
		runs:      make(map[string]*consumerRun),
	}
}

// changeLocked wakes waiters.
func (tr *tracker) changeLocked() {
	close(tr.changed)
	tr.changed = make(chan struct{})
}

func (tr *tracker) problem(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.problems = append(tr.problems, fmt.Sprintf(format, args...))
	tr.changeLocked()
}

func (tr *tracker) onAssigned(name string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.assigned[name] == nil {
			tr.assigned[name] = make(map[int32]bool)
		}
		for _, ps := range m {
			for _, p := range ps {
				tr.assigned[name][p] = true
			}
		}
		tr.assigns[name]++
		tr.changeLocked()
	}
}

func (tr *tracker) onRevoked(name string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, ps := range m {
			for _, p := range ps {
				delete(tr.assigned[name], p)
			}
		}
		tr.revokes[name]++
		tr.changeLocked()
	}
}

// start runs a group consumer of topic named name.
func (tr *tracker) start(t testing.TB, a *testAgent, name, groupID, topic string, balancer kgo.GroupBalancer, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := a.kgoClient(t, append([]kgo.Opt{
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(tr.onAssigned(name)),
		kgo.OnPartitionsRevoked(tr.onRevoked(name)),
		kgo.OnPartitionsLost(tr.onRevoked(name)),
	}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	run := &consumerRun{cl: cl, cancel: cancel, done: make(chan struct{})}
	tr.mu.Lock()
	tr.runs[name] = run
	tr.mu.Unlock()
	go tr.poll(ctx, name, run)
	t.Cleanup(func() { tr.stop(name) })
	return cl
}

func (tr *tracker) poll(ctx context.Context, name string, run *consumerRun) {
	defer close(run.done)
	cl := run.cl
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollRecords(pctx, 500)
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			cl.AllowRebalance()
			return
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				tr.problem("%s: fetch %s[%d]: %v", name, fe.Topic, fe.Partition, fe.Err)
			}
		}
		recs := fs.Records()
		if len(recs) > 0 {
			tr.deliver(name, recs)
			cctx, cancel := context.WithTimeout(ctx, groupGuard)
			err := cl.CommitRecords(cctx, recs...)
			cancel()
			if err == nil {
				tr.commit(recs)
			}
		}
		cl.AllowRebalance()
	}
}

func (tr *tracker) deliver(name string, recs []*kgo.Record) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, r := range recs {
		if r.Offset < tr.committed[r.Partition] {
			tr.problems = append(tr.problems, fmt.Sprintf("%s: offset %d of partition %d delivered after offset %d was committed",
				name, r.Offset, r.Partition, tr.committed[r.Partition]))
		}
		tr.delivered[[2]int64{int64(r.Partition), r.Offset}]++
	}
	tr.changeLocked()
}

func (tr *tracker) commit(recs []*kgo.Record) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, r := range recs {
		tr.committed[r.Partition] = max(tr.committed[r.Partition], r.Offset+1)
	}
	tr.changeLocked()
}

// stop ends a consumer's poll loop and closes its client, which leaves
// the group (unless it is static). Idempotent.
func (tr *tracker) stop(name string) {
	tr.mu.Lock()
	run := tr.runs[name]
	delete(tr.runs, name)
	tr.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
	run.cl.Close()
}

// waitFor waits until cond (called with the tracker locked) holds, and
// fails on any problem seen meanwhile.
func (tr *tracker) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(groupGuard)
	for {
		tr.mu.Lock()
		ch := tr.changed
		problems := tr.problems
		ok := cond()
		tr.mu.Unlock()
		if len(problems) > 0 {
			t.Fatalf("waiting for %s: %v", what, problems)
		}
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			tr.mu.Lock()
			msg := fmt.Sprintf("assigned %v, committed %v", tr.assigned, tr.committed)
			tr.mu.Unlock()
			t.Fatalf("timed out waiting for %s; %s", what, msg)
		}
	}
}

// committedUpTo reports whether every partition [0, n) has committed off.
func (tr *tracker) committedUpTo(n int32, off int64) bool {
	for p := range n {
		if tr.committed[p] != off {
			return false
		}
	}
	return true
}

// Three consumers of a 6-partition topic get two partitions each; when
// one leaves, the other two take three each, and no record committed
// before is delivered again.
func TestGroupThreeConsumersRange(t *testing.T) {
	a, _ := newDataAgent(t, nil, withProducerIDs(t), withGroups(t, nil, nil))
	const topic, parts, perPart = "six", 6, 50
	a.createTopic(t, topic, parts, nil)
	a.produceSpread(t, topic, parts, 0, parts*perPart)
	tr := newTracker()
	for _, name := range []string{"c1", "c2", "c3"} {
		tr.start(t, a, name, "g", topic, kgo.RangeBalancer())
	}
	tr.waitFor(t, "two partitions each, everything committed", func() bool {
		union := make(map[int32]bool)
		for _, name := range []string{"c1", "c2", "c3"} {
			if len(tr.assigned[name]) != 2 {
				return false
			}
			for p := range tr.assigned[name] {
				union[p] = true
			}
		}
		return len(union) == parts && tr.committedUpTo(parts, perPart)
	})

	tr.stop("c3")
	tr.waitFor(t, "the other two to take three each", func() bool {
		return len(tr.assigned["c1"]) == 3 && len(tr.assigned["c2"]) == 3
	})
	a.produceSpread(t, topic, parts, parts*perPart, parts*perPart)
	tr.waitFor(t, "everything delivered and committed", func() bool { return tr.committedUpTo(parts, 2*perPart) })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for p := range int64(parts) {
		for o := range int64(2 * perPart) {
			if tr.delivered[[2]int64{p, o}] == 0 {
				t.Fatalf("partition %d offset %d never delivered", p, o)
			}
		}
	}
}

// A static member that restarts within its session gets its partitions
// back without a rebalance: same generation, the other member untouched.
func TestGroupStaticRejoin(t *testing.T) {
	a, _ := newDataAgent(t, nil, withProducerIDs(t), withGroups(t, nil, nil))
	const topic, parts = "st", 4
	a.createTopic(t, topic, parts, nil)
	tr := newTracker()
	tr.start(t, a, "a", "static", topic, kgo.RangeBalancer(), kgo.InstanceID("ia"))
	tr.start(t, a, "b", "static", topic, kgo.RangeBalancer(), kgo.InstanceID("ib"))
	tr.waitFor(t, "two partitions each", func() bool { return len(tr.assigned["a"]) == 2 && len(tr.assigned["b"]) == 2 })

	stored := func() (int32, map[string]string) {
		v := a.Replica.View()
		defer v.Close()
		g, ok, err := v.Group("static")
		if err != nil || !ok {
			t.Fatalf("stored group: %v, %v", ok, err)
		}
		ids := make(map[string]string)
		for _, m := range g.Members {
			ids[m.InstanceID] = m.MemberID
		}
		return g.Generation, ids
	}
	gen, before := stored()
	tr.mu.Lock()
	assignsA, revokesA := tr.assigns["a"], tr.revokes["a"]
	bParts := sortedParts(tr.assigned["b"])
	tr.mu.Unlock()

	// A static member's Close does not leave the group.
	tr.stop("b")
	b2 := tr.start(t, a, "b2", "static", topic, kgo.RangeBalancer(), kgo.InstanceID("ib"))
	tr.waitFor(t, "the restarted member's partitions", func() bool { return len(tr.assigned["b2"]) == 2 })
	tr.mu.Lock()
	gotParts := sortedParts(tr.assigned["b2"])
	gotAssigns, gotRevokes := tr.assigns["a"], tr.revokes["a"]
	tr.mu.Unlock()
	if fmt.Sprint(gotParts) != fmt.Sprint(bParts) {
		t.Fatalf("restarted member got %v, had %v", gotParts, bParts)
	}
	genAfter, after := stored()
	memberID, memberGen := b2.GroupMetadata()
	if genAfter != gen || memberGen != gen {
		t.Fatalf("generation %d (client %d), want %d: the rejoin rebalanced", genAfter, memberGen, gen)
	}
	if after["ib"] != memberID || after["ib"] == before["ib"] || after["ia"] != before["ia"] {
		t.Fatalf("stored members %v, before %v; the new id is %s", after, before, memberID)
	}
	if gotAssigns != assignsA || gotRevokes != revokesA {
		t.Fatalf("the other member saw callbacks: assigns %d->%d, revokes %d->%d", assignsA, gotAssigns, revokesA, gotRevokes)
	}
}

// A member that stops heartbeating is removed when its session runs out,
// and a live consumer takes its partitions.
func TestGroupSessionExpiry(t *testing.T) {
	a, _ := newDataAgent(t, nil, withProducerIDs(t), withGroups(t, nil, nil))
	const topic, parts = "ex", 4
	a.createTopic(t, topic, parts, nil)
	join := a.rawRequest(t, consumerJoin(2, "exp", "", 300, topic)).(*kmsg.JoinGroupResponse)
	if join.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(join.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 1, "exp", join.MemberID, join.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: join.MemberID, MemberAssignment: assignAll(topic, 0, 1, 2, 3)}}
	if resp := a.rawRequest(t, sync).(*kmsg.SyncGroupResponse); resp.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// The raw member never heartbeats.
	tr := newTracker()
	tr.start(t, a, "live", "exp", topic, kgo.RangeBalancer())
	tr.waitFor(t, "the live consumer to own every partition", func() bool { return len(tr.assigned["live"]) == parts })
	d, err := a.Admin.DescribeGroups(groupCtx(t), "exp")
	if err != nil {
		t.Fatal(err)
	}
	if ms := d["exp"].Members; len(ms) != 1 || ms[0].MemberID == join.MemberID {
		t.Fatalf("members %+v", ms)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 1, "exp", join.MemberID, join.Generation
	if code := a.rawRequest(t, hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member's heartbeat: %v", kerr.ErrorForCode(code))
	}
}
