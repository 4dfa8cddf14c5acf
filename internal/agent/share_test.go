package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/share"
)

// earliestShares serves every group share.auto.offset.reset=earliest
// and share.isolation.level read_committed when set, Kafka's defaults
// otherwise.
type earliestShares struct{ readCommitted bool }

func (e earliestShares) ShareConfig(string) (share.Config, error) {
	c := share.DefaultConfig()
	c.AutoOffsetReset = "earliest"
	if e.readCommitted {
		c.IsolationLevel = "read_committed"
	}
	return c, nil
}

// startShareCluster starts two agents on one log and one store, with
// short leases so that a stopped one leaves Metadata soon.
func startShareCluster(t *testing.T, configs ...earliestShares) []*agent.Agent {
	t.Helper()
	shared, logURL := t.TempDir(), memLogURL(t)
	var agents []*agent.Agent
	cfgs := append(configs, earliestShares{})
	for i := range 2 {
		agents = append(agents, startWith(t, agent.Config{DataDir: t.TempDir(), NodeID: int32(i + 1), Log: logURL,
			ObjStore: "file://" + filepath.ToSlash(filepath.Join(shared, "objects")), Lease: 3 * time.Second,
			ShareConfigs: cfgs[0]}, nil))
	}
	return agents
}

// produceValues produces values from..to-1 (as decimal strings) spread
// over the topic's partitions.
func produceValues(t *testing.T, addr, topic string, from, to int) {
	t.Helper()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte(strconv.Itoa(i))})
	}
	produce(t, addr, rs)
}

// deliveries records what share consumers were given.
type deliveries struct {
	mu    sync.Mutex
	count map[string][]int32 // value -> delivery counts seen, in order
}

func (d *deliveries) add(r *kgo.Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count[string(r.Value)] = append(d.count[string(r.Value)], r.DeliveryCount())
}

func (d *deliveries) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.count)
}

// shareConsume runs a share consumer of group on topic that accepts
// everything it gets, until stop is closed.
func shareConsume(t *testing.T, seeds []string, group, topic string, d *deliveries, stop <-chan struct{}) *sync.WaitGroup {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryTimeout(opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cl.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				d.add(r)
				r.Ack(kgo.AckAccept)
			})
		}
	}()
	return &wg
}

// waitAcknowledged waits until a's copy shows every partition of topic
// with its share-partition start offset at the high watermark, and no
// record archived: every record accepted.
func waitAcknowledged(t *testing.T, a *agent.Agent, group, topic string) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		v := a.Replica().View()
		tp, _, _ := v.Topic(topic)
		done, why := true, ""
		for p := range int32(4) {
			st, ok, err := v.ShareState(group, tp.ID, p)
			ps, _, _ := v.Partition(tp.ID, p)
			if err != nil || !ok || st.StartOffset != ps.HighWatermark() {
				done, why = false, fmt.Sprintf("partition %d: state %+v (%v, %v), high watermark %d", p, st, ok, err, ps.HighWatermark())
				break
			}
		}
		v.Close()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every record acknowledged: %s", why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShareGroupTwoAgents: two share consumers, each seeded with both
// agents, take one topic's records through both; every record is
// delivered once and accepted, and each agent's copy shows every share
// partition acknowledged up to its high watermark.
func TestShareGroupTwoAgents(t *testing.T) {
	agents := startShareCluster(t)
	const topic, group, n = "shares", "workers", 400
	createTopic(t, agents[0].KafkaAddr(), topic, 4)
	produceValues(t, agents[1].KafkaAddr(), topic, 0, n)
	d := &deliveries{count: map[string][]int32{}}
	stop := make(chan struct{})
	seeds := []string{agents[0].KafkaAddr(), agents[1].KafkaAddr()}
	w1 := shareConsume(t, seeds, group, topic, d, stop)
	w2 := shareConsume(t, []string{agents[1].KafkaAddr(), agents[0].KafkaAddr()}, group, topic, d, stop)
	for deadline := time.Now().Add(opTimeout); d.distinct() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the consumers got %d of %d records", d.distinct(), n)
		}
	}
	waitAcknowledged(t, agents[0], group, topic)
	waitAcknowledged(t, agents[1], group, topic)
	close(stop)
	w1.Wait()
	w2.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	for v, counts := range d.count {
		if len(counts) != 1 || counts[0] != 1 {
			t.Errorf("record %s delivered with counts %v, want once, count 1", v, counts)
		}
	}
}

// rawShareFetch sends one ShareFetch of the topic's partitions to the
// agent of node id node, and returns the acquired offsets by partition.
func rawShareFetch(t *testing.T, cl *kgo.Client, node int, id meta.TopicID, member string, epoch int32, maxWait time.Duration, tweak ...func(*kmsg.ShareFetchRequest)) map[int32][]string {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr("raw"), kmsg.StringPtr(member), epoch
	req.MaxWaitMillis, req.MaxRecords, req.MaxBytes = int32(maxWait.Milliseconds()), 500, 1<<20
	for _, f := range tweak {
		f(req)
	}
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = id
	for p := range int32(4) {
		tp := kmsg.NewShareFetchRequestTopicPartition()
		tp.Partition = p
		rt.Partitions = append(rt.Partitions, tp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	kresp, err := cl.Broker(node).Request(ctx, req)
	if err != nil {
		t.Fatalf("ShareFetch: %v", err)
	}
	resp := kresp.(*kmsg.ShareFetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareFetch: %v", err)
	}
	out := map[int32][]string{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("ShareFetch partition %d: %v", p.Partition, err)
			}
			for _, a := range p.AcquiredRecords {
				out[p.Partition] = append(out[p.Partition], fmt.Sprintf("%d-%d/%d", a.FirstOffset, a.LastOffset, a.DeliveryCount))
			}
		}
	}
	return out
}

// TestShareConnectionDropRedelivers: a member's connection to one agent
// drops (a consumer killed with -9): the records it held are released
// through the log at once, and a member fetching through the other
// agent gets them again, with delivery count 2, long before their lock
// (30 s) would have ended.
func TestShareConnectionDropRedelivers(t *testing.T) {
	agents := startShareCluster(t)
	const topic = "drops"
	id := createTopicWith(t, agents[0].KafkaAddr(), topic, 4, nil)
	produceValues(t, agents[0].KafkaAddr(), topic, 0, 40)
	dial := func(a *agent.Agent) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	victim := dial(agents[1])
	got := rawShareFetch(t, victim, 2, id, "victim", 0, 0)
	if len(got) != 4 {
		t.Fatalf("the victim acquired %v, want records of all 4 partitions", got)
	}
	other := dial(agents[0])
	defer other.Close()
	if again := rawShareFetch(t, other, 1, id, "other", 0, 0); len(again) != 0 {
		t.Fatalf("while the victim holds them, another member got %v", again)
	}
	start := time.Now()
	victim.Close()
	again := map[int32][]string{}
	for epoch := int32(1); len(again) < 4 && time.Since(start) < 20*time.Second; epoch++ {
		for p, rs := range rawShareFetch(t, other, 1, id, "other", epoch, 2*time.Second) {
			again[p] = append(again[p], rs...)
		}
	}
	if len(again) != 4 {
		t.Fatalf("after the victim's connection dropped, the other member got %v in %v; want all 4 partitions redelivered", again, time.Since(start))
	}
	for p, rs := range again {
		want := got[p][0][:len(got[p][0])-2] + "/2"
		if len(rs) != 1 || rs[0] != want {
			t.Errorf("partition %d redelivered %v, want %s (the victim's %v with delivery count 2)", p, rs, want, got[p])
		}
	}
}

// TestShareAgentStops: a member holds records through agent 2 without
// acknowledging them, while a share consumer seeded with both agents
// takes the rest; agent 2 stops. The consumer carries on through agent
// 1: it gets the held records (released when agent 2 closed the
// member's connection) with delivery count 2, every record is accepted
// (the copy shows every share partition acknowledged to its high
// watermark), and no record is delivered twice with one count (held by
// two members at once).
func TestShareAgentStops(t *testing.T) {
	agents := startShareCluster(t)
	const topic, group, n = "survive", "survivors", 400
	id := createTopicWith(t, agents[0].KafkaAddr(), topic, 4, nil)
	produceValues(t, agents[0].KafkaAddr(), topic, 0, n/2)
	holder, err := kgo.NewClient(kgo.SeedBrokers(agents[1].KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	heldRanges := rawShareFetch(t, holder, 2, id, "holder", 0, 0, func(r *kmsg.ShareFetchRequest) {
		r.GroupID, r.MaxRecords, r.ShareAcquireMode = kmsg.StringPtr(group), 20, 1
	})
	held := map[string]bool{}
	for p, rs := range heldRanges {
		for _, r := range rs {
			var first, last int64
			var count int
			if _, err := fmt.Sscanf(r, "%d-%d/%d", &first, &last, &count); err != nil {
				t.Fatal(err)
			}
			for o := first; o <= last; o++ {
				held[strconv.Itoa(int(o)*4+int(p))] = true // produceValues' layout
			}
		}
	}
	if len(held) != 20 {
		t.Fatalf("the holder acquired %v, want 20 records", heldRanges)
	}
	d := &deliveries{count: map[string][]int32{}}
	quit := make(chan struct{})
	w := shareConsume(t, []string{agents[0].KafkaAddr(), agents[1].KafkaAddr()}, group, topic, d, quit)
	defer func() { close(quit); w.Wait() }()
	for deadline := time.Now().Add(opTimeout); d.distinct() < n/2-20; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer got %d records before the stop", d.distinct())
		}
	}
	stop1 := time.Now()
	stop(t, agents[1])
	produceValues(t, agents[0].KafkaAddr(), topic, n/2, n)
	for deadline := time.Now().Add(2 * opTimeout); d.distinct() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after agent 2 stopped the consumer got %d of %d records", d.distinct(), n)
		}
	}
	t.Logf("all %d records %v after agent 2 stopped", n, time.Since(stop1))
	waitAcknowledged(t, agents[0], group, topic)
	d.mu.Lock()
	defer d.mu.Unlock()
	for v, counts := range d.count {
		switch {
		case held[v] && (len(counts) != 1 || counts[0] != 2):
			t.Errorf("held record %s delivered to the consumer with counts %v, want once with count 2", v, counts)
		case !held[v] && counts[0] != 1:
			t.Errorf("record %s first delivered with count %d, want 1", v, counts[0])
		}
		for i := 1; i < len(counts); i++ {
			if counts[i] <= counts[i-1] {
				t.Errorf("record %s delivered with counts %v: two members held it at once", v, counts)
			}
		}
	}
}

// TestShareReadCommitted: with share.isolation.level read_committed, a
// share consumer gets the records of committed transactions only:
// neither an aborted transaction's records nor those past an open
// transaction (the last stable offset) until it commits; the aborted
// records and the markers are archived, so every share partition ends
// acknowledged to its high watermark.
func TestShareReadCommitted(t *testing.T) {
	agents := startShareCluster(t, earliestShares{readCommitted: true})
	const topic, group = "txn-shares", "txn-workers"
	createTopic(t, agents[0].KafkaAddr(), topic, 4)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	txn := client(t, agents[0].KafkaAddr(), kgo.TransactionalID("share-txn"), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	run := func(prefix string, n int, end kgo.TransactionEndTry) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "%s%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	run("aborted-", 5, kgo.TryAbort)
	run("committed-", 5, kgo.TryCommit)
	// An open transaction, and a plain record after it.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("open-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(t, agents[0].KafkaAddr(), []*kgo.Record{{Topic: topic, Partition: 0, Value: []byte("after-open")}})

	d := &deliveries{count: map[string][]int32{}}
	quit := make(chan struct{})
	w := shareConsume(t, []string{agents[1].KafkaAddr(), agents[0].KafkaAddr()}, group, topic, d, quit)
	defer func() { close(quit); w.Wait() }()
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(opTimeout); d.distinct() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the consumer got %d records, want %d", d.distinct(), n)
			}
		}
	}
	waitFor(5)
	time.Sleep(time.Second) // time for anything past the open transaction to show up, wrongly
	check := func(want ...string) {
		t.Helper()
		d.mu.Lock()
		defer d.mu.Unlock()
		var got []string
		for v := range d.count {
			got = append(got, v)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("read_committed share consumer got %v, want %v", got, want)
		}
	}
	check("committed-0", "committed-1", "committed-2", "committed-3", "committed-4")
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(7)
	check("committed-0", "committed-1", "committed-2", "committed-3", "committed-4", "open-0", "after-open")
	waitAcknowledged(t, agents[0], group, topic)
}
