package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
	"github.com/strandkafka/strand/internal/testservers/etcdtest"
)

// clusterLease is the agents' --lease in the cluster tests: short, so a
// killed agent drops out of Metadata within the test's time.
const clusterLease = 2 * time.Second

// TestClusterPostgres is the scale-out acceptance scenario on a PostgreSQL
// log; TestClusterEtcd and TestClusterDynalite run it on the other shared
// logs:
//
//	go test ./e2e -run 'TestCluster(Postgres|Etcd|Dynalite)' -v
func TestClusterPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts PostgreSQL")
	}
	runCluster(t, pgLogletURL(t, "e2e-cluster"))
}

func TestClusterEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts etcd")
	}
	runCluster(t, fmt.Sprintf("etcd://%s/e2e-cluster-%d/seg", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano()))
}

func TestClusterDynalite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts dynalite")
	}
	// It was once kept out of every run for a timeout under load waiting
	// for the group to read every acknowledged record; that was the
	// test's own wait (consumeLog.covers returned a nil channel when the
	// group had read everything already), not the cluster.
	srv := dynalitetest.Start(t)
	// The agents inherit these: the AWS SDK wants credentials, which
	// dynalite does not check.
	t.Setenv("AWS_ACCESS_KEY_ID", "e2e")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "e2e")
	runCluster(t, fmt.Sprintf("dynamodb://strand-e2e/cluster-%d?endpoint=%s&region=%s", time.Now().UnixNano(), srv.Endpoint, dynalitetest.Region))
}

// clusterAgent is one `strand serve` of a cluster test.
type clusterAgent struct {
	nodeID          int32
	kafka, httpAddr string
	proc            *agentProcess
}

// runCluster runs the scenario of runClusterOn with a shared directory as
// the object store.
func runCluster(t *testing.T, logURL string) {
	runClusterOn(t, logURL, "file://"+t.TempDir())
}

// runClusterOn starts three agents on one shared log (logURL) and one
// shared object store (objURL, as --objstore takes it). A producer
// (seeded with agent 1) writes continuously; a consumer group of two
// members (seeded with agents 2 and 3) reads. Metadata spreads partitions
// over all agents, so every agent produces and serves fetches. Once both
// members hold partitions and have committed offsets, the group's
// coordinator is killed with SIGKILL mid-run; the clients must
// carry on, the dead agent must drop out of Metadata, and every
// acknowledged record must be consumed at its offset with its value, in
// offset order per partition. A non-idempotent producer may store a
// retried batch twice, and the group may redeliver what was not
// committed; neither fails the test, but both are counted.
func runClusterOn(t *testing.T, logURL, objURL string) {
	const (
		topic      = "cluster"
		groupID    = "cluster-group"
		partitions = 6
		// acksBeforeKill and acksAfterKill are awaited around the kill,
		// so both halves run under load.
		acksBeforeKill     = 2000
		acksAfterKill      = 2000
		maxBufferedRecords = 500
	)
	agents := make([]*clusterAgent, 3)
	for i := range agents {
		a := &clusterAgent{nodeID: int32(i + 1), kafka: freeAddr(t), httpAddr: freeAddr(t)}
		// Debug logs the group coordinator's rebalances (a few lines a
		// run), which a failure's stderr dump needs.
		a.proc = startProcess(t, a.httpAddr,
			"--data-dir", t.TempDir(), "--node-id", strconv.Itoa(int(a.nodeID)),
			"--kafka-listen", a.kafka, "--http-listen", a.httpAddr,
			"--objstore", objURL, "--log", logURL,
			"--lease", clusterLease.String(), "--snapshot-interval", "0", "--log-level", "debug",
			// The group forms within ~0.5 s instead of 3-6 s, so the kill
			// comes sooner and fewer records pile up before it.
			"--group-initial-rebalance-delay", "500ms")
		agents[i] = a
	}
	all := []int32{1, 2, 3}
	var clusterID string
	for _, a := range agents {
		id := waitBrokers(t, a.kafka, all)
		if clusterID == "" {
			clusterID = id
		} else if id != clusterID {
			t.Fatalf("agent %d reports cluster id %q, agent 1 %q", a.nodeID, id, clusterID)
		}
	}
	createTopic(t, agents[0].kafka, topic, partitions)

	acks := new(ackLog)
	producer := newClient(t, agents[0].kafka,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.ProducerLinger(time.Millisecond),
	)
	ackTimes := new(ackClock)
	prodErrs := newErrCounts()
	// The loop stops at a flag, not by cancelling Produce's context,
	// which would fail the records still buffered.
	var stopped atomic.Bool
	stopProducing := func() { stopped.Store(true) }
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; !stopped.Load(); i++ {
			producer.Produce(context.Background(), &kgo.Record{Value: []byte("v-" + strconv.Itoa(i))}, func(r *kgo.Record, err error) {
				if err == nil {
					ackTimes.tick()
				} else {
					prodErrs.add(err)
				}
				acks.record(r, err)
			})
		}
	}()
	// A test that fails while the producer's buffer is full leaves the
	// loop blocked in Produce, which only closing the client ends.
	t.Cleanup(func() { stopProducing(); producer.Close(); <-prodDone })

	seen := newConsumeLog()
	members := []string{"c2", "c3"}
	startGroupConsumer(t, agents[1].kafka, topic, groupID, members[0], seen)
	startGroupConsumer(t, agents[2].kafka, topic, groupID, members[1], seen)

	waitFor(t, acks.reached(acksBeforeKill), "acks before the kill")
	// The producer reaches acksBeforeKill in well under a second, before
	// the group's first generation (InitialRebalanceDelay is 3 s): the
	// kill must find a group that runs, with both members holding
	// partitions and offsets committed, or it tests a coordinator that
	// only had a pending JoinGroup.
	waitFor(t, seen.running(members), "both members to hold partitions and commit")
	victim := placement.OwnerOf(groupID, all)
	var alive []int32
	for _, id := range all {
		if id != victim {
			alive = append(alive, id)
		}
	}
	t.Logf("killing agent %d, the coordinator of %s", victim, groupID)
	killedAt := time.Now()
	agents[victim-1].proc.kill()
	survivor := agents[alive[0]-1]
	waitBrokers(t, survivor.kafka, alive)
	t.Logf("agent %d dropped out of Metadata %v after the kill (lease %v)", victim, time.Since(killedAt).Round(time.Millisecond), clusterLease)

	n, _ := acks.count()
	waitFor(t, acks.reached(n+acksAfterKill), "acks after the kill")
	stopProducing()
	<-prodDone
	flushCtx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := producer.Flush(flushCtx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	acked, failed := acks.count()
	if failed > 0 {
		t.Errorf("%d records failed to produce: %s", failed, prodErrs)
	}
	t.Logf("%d records acknowledged, %d failed; longest gap between acknowledgements after the kill: %v",
		acked, failed, ackTimes.longestGap(killedAt, time.Now()).Round(time.Millisecond))

	want := acks.snapshot()
	select {
	case <-seen.covers(want):
	case <-time.After(2 * opTimeout):
		t.Fatalf("timed out waiting for the group to read every acknowledged record:\n%s", seen.diagnose(want))
	}
	dups, redelivered, errs := seen.check(want)
	for _, e := range errs {
		t.Error(e)
	}
	// The producer is idempotent: a batch retried after the kill (its
	// partition's agent died with the request in flight) is stored once.
	if dups > 0 {
		t.Errorf("%d stored duplicates of retried batches from an idempotent producer", dups)
	}
	t.Logf("group read every acknowledged record once; %d redelivered records", redelivered)
}

// waitBrokers asks addr itself (not whichever broker a client picks) for
// Metadata until it lists exactly nodes, and returns the cluster id it
// reports. The dead agent's lease has to run out first, so this polls;
// the bound is a deadlock guard.
func waitBrokers(t *testing.T, addr string, nodes []int32) string {
	t.Helper()
	seed := newClient(t, addr).SeedBrokers()[0]
	deadline := time.Now().Add(opTimeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := seed.Request(ctx, kmsg.NewPtrMetadataRequest())
		cancel()
		if err == nil {
			md := resp.(*kmsg.MetadataResponse)
			var ids []int32
			for _, b := range md.Brokers {
				ids = append(ids, b.NodeID)
			}
			slices.Sort(ids)
			last = fmt.Sprint(ids)
			if slices.Equal(ids, nodes) {
				if md.ClusterID == nil || *md.ClusterID == "" {
					t.Fatalf("%s: Metadata has no cluster id", addr)
				}
				return *md.ClusterID
			}
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: Metadata brokers %s, want %v after %v", addr, last, nodes, opTimeout)
	return ""
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * opTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// consumeLog collects what a group's members read. Per member and
// partition it checks order as records arrive: each record follows the
// previous one by one offset, or goes back to an offset already read
// (redelivery after a rebalance), or jumps only right after the
// partition was assigned anew.
type consumeLog struct {
	mu struct {
		sync.Mutex
		byOffset map[int32]map[int64]string
		// next is each member's expected next offset per partition;
		// absent right after an assignment.
		next        map[string]map[int32]int64
		redelivered int
		errs        []string
		// events is the members' assignments and fetch errors, for a
		// failure's message; the latest maxEvents are kept.
		events   []string
		want     []ackedRecord
		wantDone chan struct{}
		// owned is the partitions each member holds; committed counts
		// each member's successful commits since its assignment last
		// changed. running waits on them.
		owned       map[string]map[int32]bool
		committed   map[string]int
		runningFor  []string
		runningDone chan struct{}
	}
}

func newConsumeLog() *consumeLog {
	l := new(consumeLog)
	l.mu.byOffset = make(map[int32]map[int64]string)
	l.mu.next = make(map[string]map[int32]int64)
	l.mu.owned = make(map[string]map[int32]bool)
	l.mu.committed = make(map[string]int)
	return l
}

func (l *consumeLog) assigned(member string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	owned := l.mu.owned[member]
	if owned == nil {
		owned = make(map[int32]bool)
		l.mu.owned[member] = owned
	}
	for _, p := range ps {
		delete(l.mu.next[member], p)
		owned[p] = true
	}
	if len(ps) > 0 {
		l.mu.committed[member] = 0
	}
	l.eventLocked("%s assigned %v", member, ps)
}

// dropped is a member's revoked or lost partitions (how says which).
func (l *consumeLog) dropped(member, how string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		delete(l.mu.owned[member], p)
	}
	if len(ps) > 0 {
		l.mu.committed[member] = 0
	}
	l.eventLocked("%s %s %v", member, how, ps)
}

// commit records the outcome of a member's offset commit: failures are
// events, successes count towards running.
func (l *consumeLog) commit(member string, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					err = kerr.ErrorForCode(rp.ErrorCode)
				}
			}
		}
	}
	if err != nil {
		l.eventLocked("%s commit (generation %d): %v", member, req.Generation, err)
		return
	}
	l.mu.committed[member]++
	l.checkRunningLocked()
}

// running returns a channel closed once every one of members holds
// partitions and has committed offsets since its assignment last changed.
func (l *consumeLog) running(members []string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	done := make(chan struct{})
	l.mu.runningFor, l.mu.runningDone = members, done
	l.checkRunningLocked()
	return done
}

func (l *consumeLog) checkRunningLocked() {
	if l.mu.runningDone == nil {
		return
	}
	for _, m := range l.mu.runningFor {
		if len(l.mu.owned[m]) == 0 || l.mu.committed[m] == 0 {
			return
		}
	}
	close(l.mu.runningDone)
	l.mu.runningDone = nil
}

// maxEvents bounds consumeLog.events.
const maxEvents = 200

func (l *consumeLog) event(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.eventLocked(format, args...)
}

func (l *consumeLog) eventLocked(format string, args ...any) {
	if len(l.mu.events) == maxEvents {
		l.mu.events = l.mu.events[1:]
	}
	l.mu.events = append(l.mu.events, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

// diagnose says, per partition, which acknowledged records were not read,
// and lists the members' recent events.
func (l *consumeLog) diagnose(want []ackedRecord) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type gap struct {
		missing     int
		first, last int64
	}
	gaps := make(map[int32]*gap)
	var parts []int32
	for _, w := range want {
		if _, ok := l.mu.byOffset[w.partition][w.offset]; ok {
			continue
		}
		g := gaps[w.partition]
		if g == nil {
			g = &gap{first: w.offset}
			gaps[w.partition] = g
			parts = append(parts, w.partition)
		}
		g.missing++
		g.last = w.offset
	}
	slices.Sort(parts)
	var b strings.Builder
	for _, p := range parts {
		g := gaps[p]
		highest := int64(-1)
		for off := range l.mu.byOffset[p] {
			highest = max(highest, off)
		}
		fmt.Fprintf(&b, "partition %d: %d acknowledged records unread, offsets %d..%d; highest read %d\n", p, g.missing, g.first, g.last, highest)
	}
	if len(parts) == 0 {
		b.WriteString("every acknowledged record was read\n")
	}
	members := slices.Sorted(maps.Keys(l.mu.owned))
	for _, m := range members {
		fmt.Fprintf(&b, "%s holds %v\n", m, slices.Sorted(maps.Keys(l.mu.owned[m])))
	}
	for _, e := range l.mu.events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

func (l *consumeLog) add(member string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	offs := l.mu.byOffset[r.Partition]
	if offs == nil {
		offs = make(map[int64]string)
		l.mu.byOffset[r.Partition] = offs
	}
	prev, dup := offs[r.Offset]
	switch {
	case dup && prev != string(r.Value):
		l.mu.errs = append(l.mu.errs, fmt.Sprintf("partition %d offset %d read as %q and as %q", r.Partition, r.Offset, prev, r.Value))
	case dup:
		l.mu.redelivered++
	}
	offs[r.Offset] = string(r.Value)
	next := l.mu.next[member]
	if next == nil {
		next = make(map[int32]int64)
		l.mu.next[member] = next
	}
	if want, ok := next[r.Partition]; ok && r.Offset != want && !dup {
		l.mu.errs = append(l.mu.errs, fmt.Sprintf("%s: partition %d read offset %d, want %d", member, r.Partition, r.Offset, want))
	}
	next[r.Partition] = r.Offset + 1
	l.checkCoveredLocked()
}

// covers returns a channel closed once every record of want was read.
// The group may have read them all already (it often has by the time the
// producer's Flush returns): the channel is then closed at once, so it is
// kept here rather than read back from l.mu.wantDone, which
// checkCoveredLocked has cleared by then.
func (l *consumeLog) covers(want []ackedRecord) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	done := make(chan struct{})
	l.mu.want, l.mu.wantDone = want, done
	l.checkCoveredLocked()
	return done
}

func (l *consumeLog) checkCoveredLocked() {
	if l.mu.wantDone == nil {
		return
	}
	for len(l.mu.want) > 0 {
		w := l.mu.want[0]
		if _, ok := l.mu.byOffset[w.partition][w.offset]; !ok {
			return
		}
		l.mu.want = l.mu.want[1:]
	}
	close(l.mu.wantDone)
	l.mu.wantDone = nil
}

// check compares what was read with the acknowledgements: each acked
// record at its offset with its value, each partition read densely from
// 0. Values read at more than one offset are retried batches.
func (l *consumeLog) check(want []ackedRecord) (dups, redelivered int, errs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs = append(errs, l.mu.errs...)
	for _, w := range want {
		if got := l.mu.byOffset[w.partition][w.offset]; got != w.value {
			errs = append(errs, fmt.Sprintf("acked %q at %d/%d, read %q", w.value, w.partition, w.offset, got))
		}
	}
	count := make(map[string]int)
	for p, offs := range l.mu.byOffset {
		for o := int64(0); o < int64(len(offs)); o++ {
			v, ok := offs[o]
			if !ok {
				errs = append(errs, fmt.Sprintf("partition %d: offset %d never read though %d offsets were", p, o, len(offs)))
				break
			}
			count[v]++
		}
	}
	for _, n := range count {
		dups += n - 1
	}
	return dups, l.mu.redelivered, errs
}

// startGroupConsumer runs a group member until cleanup, feeding log.
func startGroupConsumer(t *testing.T, seed, topic, groupID, name string, log *consumeLog) {
	t.Helper()
	cl := newClient(t, seed,
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.AutoCommitInterval(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			log.assigned(name, m[topic])
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			log.dropped(name, "revoked", m[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			log.dropped(name, "lost", m[topic])
		}),
		kgo.AutoCommitCallback(func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			log.commit(name, req, resp, err)
		}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(_ string, p int32, err error) {
				if ctx.Err() == nil {
					log.event("%s fetch partition %d: %v", name, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) { log.add(name, r) })
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// errCounts counts errors by message.
type errCounts struct {
	mu struct {
		sync.Mutex
		n map[string]int
	}
}

func newErrCounts() *errCounts {
	c := new(errCounts)
	c.mu.n = make(map[string]int)
	return c
}

func (c *errCounts) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.n[err.Error()]++
}

func (c *errCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.mu.n)
}
