package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/meta"
)

// etlRecords is how many records run through each level of the chain.
const etlRecords = 3000

// etlLevel is one level of the chain: a group consuming from one topic
// and producing every record to the next, as in franz-go's TestGroupETL.
type etlLevel struct {
	t        *testing.T
	a        *testAgent
	from, to string
	group    string
	balancer func() kgo.GroupBalancer
	instance string // non-empty: static members, with this prefix
	opts     []kgo.Opt

	errs     chan<- error
	wg       sync.WaitGroup
	consumed atomic.Int64
	nextID   atomic.Int64
	// progress is closed once a quarter of the records went through.
	progress     chan struct{}
	progressOnce sync.Once

	mu       sync.Mutex
	seen     map[[2]int64]bool
	part2key map[int32][]int
}

func (l *etlLevel) fail(err error) {
	select {
	case l.errs <- fmt.Errorf("%s: %w", l.group, err):
	default:
	}
}

// goRun starts a consumer that runs until the level is done, or, with
// etlsBeforeQuit >= 0, quits after that many rounds without committing
// its last one.
func (l *etlLevel) goRun(etlsBeforeQuit int) {
	l.wg.Add(1)
	go l.run(etlsBeforeQuit)
}

func (l *etlLevel) run(etlsBeforeQuit int) {
	defer l.wg.Done()
	netls := 0
	opts := []kgo.Opt{
		kgo.SeedBrokers(l.a.addr),
		kgo.ConsumerGroup(l.group),
		kgo.ConsumeTopics(l.from),
		kgo.Balancers(l.balancer()),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.AutoCommitInterval(250 * time.Millisecond),
		kgo.BlockRebalanceOnPoll(),
		kgo.RetryTimeout(groupGuard),
		// Commit everything processed when partitions go, unless this
		// member is quitting: then its last round must be redone by
		// another member.
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if etlsBeforeQuit >= 0 && netls >= etlsBeforeQuit {
				return
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				l.fail(fmt.Errorf("commit on revoke: %w", err))
			}
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {}),
	}
	opts = append(opts, l.opts...)
	var instanceID string
	if l.instance != "" {
		instanceID = fmt.Sprintf("%s-%s-%d", l.instance, l.group, l.nextID.Add(1))
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		l.fail(err)
		return
	}
	defer l.leaveStatic(instanceID)
	defer cl.Close()
	defer func() {
		defer cl.LeaveGroup()
		if err := cl.Flush(context.Background()); err != nil {
			l.fail(fmt.Errorf("flush: %w", err))
		}
	}()
	defer cl.AllowRebalance()
	for {
		if etlsBeforeQuit > 0 {
			// Commit before polling, so that quitting leaves exactly the
			// last round uncommitted; and before allowing a rebalance,
			// while the member still owns every partition it processed
			// (what BlockRebalanceOnPoll is for). Once a rebalance is let
			// in, the revocation can reach the coordinator ahead of this
			// commit (the revoke callback of a member about to quit
			// commits nothing), and the commit would be refused, or land
			// after the partitions' next owner read the old offset.
			if err := cl.CommitUncommittedOffsets(context.Background()); err != nil {
				l.fail(fmt.Errorf("commit: %w", err))
			}
		}
		cl.AllowRebalance()
		for range 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			fs := cl.PollRecords(ctx, 25)
			cancel()
			if err := fs.Err(); errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				switch n := l.consumed.Load(); {
				case n == etlRecords:
					return
				case n > etlRecords:
					l.fail(fmt.Errorf("consumed %d records, more than %d", n, etlRecords))
					return
				}
				if fs.NumRecords() == 0 {
					continue
				}
				l.fail(fmt.Errorf("poll error %v with %d records", err, fs.NumRecords()))
				return
			}
			if errs := fs.Errors(); len(errs) > 0 {
				l.fail(fmt.Errorf("poll: %v", errs))
				return
			}
			if etlsBeforeQuit >= 0 && netls >= etlsBeforeQuit {
				return
			}
			for _, r := range fs.Records() {
				key, err := strconv.Atoi(string(r.Key))
				if err != nil {
					l.fail(err)
					return
				}
				l.mu.Lock()
				slot := [2]int64{int64(r.Partition), r.Offset}
				if l.seen[slot] {
					l.mu.Unlock()
					l.fail(fmt.Errorf("processed partition %d offset %d twice", r.Partition, r.Offset))
					return
				}
				l.seen[slot] = true
				l.part2key[r.Partition] = append(l.part2key[r.Partition], key)
				l.mu.Unlock()
				if l.consumed.Add(1) == etlRecords/4 {
					l.progressOnce.Do(func() { close(l.progress) })
				}
				cl.Produce(context.Background(), &kgo.Record{Topic: l.to, Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
					if err != nil {
						l.fail(fmt.Errorf("produce: %w", err))
					}
				})
			}
		}
		netls++
	}
}

// leaveStatic removes a static member for good once its client closed:
// kgo does not leave the group for a static member (a restart within the
// session keeps its partitions), and the level must not wait a session
// timeout for it.
func (l *etlLevel) leaveStatic(instanceID string) {
	if instanceID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupGuard)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = l.group
	m := kmsg.NewLeaveGroupRequestMember()
	m.InstanceID, m.Reason = &instanceID, kmsg.StringPtr("test cleanup")
	req.Members = append(req.Members, m)
	resp, err := req.RequestWith(ctx, l.a.Client)
	switch {
	case err != nil:
		l.fail(fmt.Errorf("leaving static member %s: %w", instanceID, err))
	case resp.ErrorCode != 0 || len(resp.Members) != 1:
		l.fail(fmt.Errorf("leaving static member %s: %+v", instanceID, resp))
	case resp.Members[0].ErrorCode != 0 && resp.Members[0].ErrorCode != kerr.UnknownMemberID.Code:
		// UNKNOWN_MEMBER_ID: it closed before its JoinGroup reached us.
		l.fail(fmt.Errorf("leaving static member %s: %v", instanceID, kerr.ErrorForCode(resp.Members[0].ErrorCode)))
	}
}

// TestGroupETL is franz-go's TestGroupETL against an agent: records flow
// through three levels of groups (t1 -> t2 -> t3 -> t4) while members
// join, leave, and quit without committing their last round. Every level
// must process every record exactly once, and each group's committed
// offsets must reach the end of its input.
func TestGroupETL(t *testing.T) {
	tests := []struct {
		name     string
		balancer func() kgo.GroupBalancer
		instance string
		opts     []kgo.Opt
	}{
		{"range", func() kgo.GroupBalancer { return kgo.RangeBalancer() }, "", nil},
		{"cooperative-sticky", func() kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() }, "", nil},
		{"cooperative-sticky/static", func() kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() }, "static", nil},
		// KIP-848: kgo asks for the server's uniform assignor with a
		// sticky balancer, and for range with the range balancer.
		{"kip848-uniform", func() kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() }, "", []kgo.Opt{kgo.ServerSideBalancer()}},
		{"kip848-range", func() kgo.GroupBalancer { return kgo.RangeBalancer() }, "", []kgo.Opt{kgo.ServerSideBalancer()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testChainETL(t, tt.balancer, tt.instance, tt.opts) })
	}
}

func testChainETL(t *testing.T, balancer func() kgo.GroupBalancer, instance string, opts []kgo.Opt) {
	const partitions = 6
	var coord *group.Coordinator
	a, _ := newDataAgent(t, nil, withProducerIDs(t), withGroups(t, &coord, tuneKIP848))
	topics := []string{"t1", "t2", "t3", "t4"}
	for _, tp := range topics {
		a.createTopic(t, tp, partitions, nil)
	}

	errs := make(chan error, 1)
	levels := make([]*etlLevel, 3)
	for i := range levels {
		levels[i] = &etlLevel{
			t: t, a: a, from: topics[i], to: topics[i+1], group: fmt.Sprintf("g%d", i+1),
			balancer: balancer, instance: instance, opts: opts, errs: errs,
			progress: make(chan struct{}),
			seen:     make(map[[2]int64]bool),
			part2key: make(map[int32][]int),
		}
	}
	l1, l2, l3 := levels[0], levels[1], levels[2]
	for range 3 {
		l1.goRun(-1)
		l2.goRun(-1)
		l3.goRun(-1)
	}
	l1.goRun(0) // quits at once
	l1.goRun(2) // quits after two rounds
	l2.goRun(2)
	// Half the records now, half once the second wave of members has
	// joined, so that wave rebalances every level mid-run.
	a.produceRange(t, "t1", partitions, 0, etlRecords/2)

	select {
	case <-l1.progress:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(groupGuard):
		t.Fatal("no progress")
	}
	for range 3 {
		l1.goRun(-1)
		l2.goRun(-1)
		l3.goRun(-1)
	}
	l2.goRun(0)
	l1.goRun(1)
	a.produceRange(t, "t1", partitions, etlRecords/2, etlRecords)

	done := make(chan struct{})
	go func() {
		for _, l := range levels {
			l.wg.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(2 * groupGuard):
		t.Fatalf("consumed %d, %d, %d of %d", l1.consumed.Load(), l2.consumed.Load(), l3.consumed.Load(), etlRecords)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	for i, l := range levels {
		var keys []int
		for p, ks := range l.part2key {
			if i == 0 && !slices.IsSorted(ks) {
				t.Errorf("level 1 partition %d: keys out of order", p)
			}
			keys = append(keys, ks...)
		}
		slices.Sort(keys)
		if len(keys) != etlRecords {
			t.Fatalf("level %d processed %d records, want %d", i+1, len(keys), etlRecords)
		}
		for k := range etlRecords {
			if keys[k] != k {
				t.Fatalf("level %d: key %d missing", i+1, k)
			}
		}
	}

	// Each group's commits reach the end of its input, and members
	// joining and leaving moved every group through several
	// generations.
	ctx := groupCtx(t)
	for _, l := range levels {
		g, ok, err := storedEmpty(ctx, a, coord, l.group)
		if err != nil || !ok || g.Generation < 3 {
			t.Errorf("group %s: stored generation %d (%v, %v), want several rebalances", l.group, g.Generation, ok, err)
		}
		// Every opt these cases pass opts into KIP-848: the group must
		// not have fallen back to the classic protocol.
		if len(opts) > 0 && g.Kind != meta.GroupConsumer {
			t.Errorf("group %s: stored kind %v, want consumer (KIP-848)", l.group, g.Kind)
		}
		ends, err := a.Admin.ListEndOffsets(ctx, l.from)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := a.Admin.FetchOffsets(ctx, l.group)
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(e kadm.ListedOffset) {
			c, ok := committed.Lookup(e.Topic, e.Partition)
			if !ok || c.At != e.Offset {
				t.Errorf("group %s: %s[%d] committed %d, end %d", l.group, e.Topic, e.Partition, c.At, e.Offset)
			}
		})
	}
}

// storedEmpty returns name's stored state once it has no members. Every
// member has left when the chain is done, but a classic group's last
// LeaveGroup is answered before the coordinator stores the empty
// generation (as in Kafka), so the stored state may still be catching up.
func storedEmpty(ctx context.Context, a *testAgent, coord *group.Coordinator, name string) (meta.Group, bool, error) {
	for {
		// Taken before the read, so a store that lands after it wakes us.
		changed := coord.Changed()
		v := a.Replica.View()
		g, ok, err := v.Group(name)
		v.Close()
		if err != nil || (ok && len(g.Members) == 0) {
			return g, ok, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return g, ok, ctx.Err()
		}
	}
}

// produceRange produces the records with keys [from, to) to topic, key i
// to partition i%partitions, and waits for their acks.
func (a *testAgent) produceRange(t *testing.T, topic string, partitions int32, from, to int) {
	t.Helper()
	pr := a.kgoClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(groupGuard))
	rs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Partition: int32(i % int(partitions)), Key: []byte(strconv.Itoa(i)), Value: []byte("etl")})
	}
	if err := pr.ProduceSync(groupCtx(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}
