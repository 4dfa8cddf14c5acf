package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share-group acceptance test of issue 32: 8 consumer processes in
// one share group on a 2-partition topic, each taking a random 0-200 ms
// per record and killed with SIGKILL now and then (and restarted), while
// the agent serving the share partitions is killed too. From the history
// of acquisitions and broker-confirmed acknowledgements
// (share_check_test.go): every record accepted exactly once or archived
// after the delivery limit, none lost, none held by two consumers at
// once. Records whose number is a multiple of sharePoisonEvery are always
// released, so the delivery limit and archiving are exercised too.
//
// The short form (about a minute) runs in the normal suite; the long one:
//
//	STRAND_SHARE_CHAOS=1 go test -count=1 -timeout 60m -v -run 'TestShareChaos' ./e2e/
//
// TestShareChaosKfake runs the same against franz-go's kfake (Kafka 4.2's
// share groups in process), killing consumers only: it checks the test
// and its checker against a reference broker.

const (
	shareChaosTopic  = "share-chaos"
	shareChaosGroup  = "share-chaos-group"
	shareConsumers   = 8
	sharePoisonEvery = 97
	// shareDeliveryLimit is Kafka's default group.share.delivery.count.limit.
	shareDeliveryLimit = 5
	// shareMaxRecords caps one poll's acquisitions: at up to 200 ms a
	// record a consumer finishes its poll well within the lock.
	shareMaxRecords = 4
)

// shareChaosOpts sizes one run.
type shareChaosOpts struct {
	records int
	// consumerKillEvery: one consumer is killed every [1, 2] times this.
	consumerKillEvery time.Duration
	// agentKillEvery: the agent leading a share partition is killed every
	// [1, 2] times this; 0 kills no agent.
	agentKillEvery time.Duration
	// deadline bounds the run: every record done by then.
	deadline time.Duration
}

func shareChaosSize(t *testing.T) shareChaosOpts {
	if os.Getenv("STRAND_SHARE_CHAOS") != "" {
		return shareChaosOpts{records: envInt(t, "STRAND_SHARE_CHAOS_RECORDS", 20000), consumerKillEvery: 2 * time.Second,
			agentKillEvery: 20 * time.Second, deadline: 25 * time.Minute}
	}
	// About 40 s of work for 8 consumers at 100 ms a record on average.
	return shareChaosOpts{records: 2500, consumerKillEvery: 2 * time.Second, agentKillEvery: 15 * time.Second, deadline: 3 * time.Minute}
}

func TestShareChaosKfake(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of consumer processes")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(2, shareChaosTopic),
		kfake.BrokerConfigs(map[string]string{
			"group.share.delivery.count.limit":    strconv.Itoa(shareDeliveryLimit),
			"group.share.record.lock.duration.ms": "15000",
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	o := shareChaosSize(t)
	o.agentKillEvery = 0
	runShareChaos(t, c.ListenAddrs(), nil, o)
}

// shareAgentKiller kills the agent leading partition p (returning the
// partitions it led, for the history) and restarts it.
type shareAgentKiller func(t *testing.T, p int32, before func(led []int32))

func runShareChaos(t *testing.T, brokers []string, killAgent shareAgentKiller, o shareChaosOpts) {
	dir := t.TempDir()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	if err := setShareAutoOffsetReset(ctx, admCl, shareChaosGroup, "earliest"); err != nil {
		t.Fatal(err)
	}
	records := produceShareRecords(t, brokers, o.records)
	ends, err := adm.ListEndOffsets(ctx, shareChaosTopic)
	if err != nil {
		t.Fatal(err)
	}

	testLog, err := openEventWriter(filepath.Join(dir, "test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	procs := make([]*shareProc, shareConsumers)
	incarnation := make([]int, shareConsumers)
	start := func(i int) {
		incarnation[i]++
		name := fmt.Sprintf("c%d.%d", i, incarnation[i])
		procs[i] = startShareProc(t, shareConsumerConfig{
			Brokers: brokers, Topic: shareChaosTopic, Group: shareChaosGroup, Name: name,
			LogPath: filepath.Join(dir, name+".jsonl"), MaxDelay: 200 * time.Millisecond,
			MaxRecords: shareMaxRecords, PoisonEvery: sharePoisonEvery,
		})
	}
	for i := range procs {
		start(i)
	}
	began := time.Now()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	kills, agentKills := 0, 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(o.consumerKillEvery + rand.N(o.consumerKillEvery)):
			}
			i := rand.N(shareConsumers)
			mu.Lock()
			p := procs[i]
			// Logged before the kill: the process may still act until
			// the signal lands, but the broker frees its records only
			// after its death.
			testLog.write(shareEvent{T: monoNow(), Ev: evKill, Consumer: p.name})
			p.kill()
			kills++
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(100*time.Millisecond + rand.N(400*time.Millisecond)):
			}
			mu.Lock()
			start(i)
			mu.Unlock()
		}
	})
	if killAgent != nil && o.agentKillEvery > 0 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(o.agentKillEvery + rand.N(o.agentKillEvery)):
				}
				killAgent(t, int32(rand.N(2)), func(led []int32) {
					for _, p := range led {
						testLog.write(shareEvent{T: monoNow(), Ev: evLost, Partition: p})
					}
				})
				agentKills++
			}
		})
	}

	// Done when every record is acknowledged or archived: each share
	// partition's start offset reached the log end.
	var last kadm.DescribedShareGroupsOffsets
	done := false
	for deadline := time.Now().Add(o.deadline); !done && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		c, cancel := context.WithTimeout(t.Context(), opTimeout)
		d, err := adm.DescribeShareGroupOffsets(c, shareChaosGroup)
		cancel()
		if err != nil {
			continue // an agent may be down
		}
		last = d
		done = true
		for p, end := range ends[shareChaosTopic] {
			so, ok := d[shareChaosGroup].Offsets.Lookup(shareChaosTopic, p)
			if !ok || so.Err != nil || so.StartOffset < end.Offset {
				done = false
			}
		}
	}
	elapsed := time.Since(began)
	close(stop)
	wg.Wait()
	mu.Lock()
	for _, p := range procs {
		testLog.write(shareEvent{T: monoNow(), Ev: evKill, Consumer: p.name})
		p.kill()
	}
	mu.Unlock()

	events := readShareHistory(t, dir)
	v := checkShareHistory(records, events, shareDeliveryLimit)
	t.Logf("%d records in %v, %d consumer kills, %d agent kills: %v", len(records), elapsed.Round(time.Millisecond), kills, agentKills, v)
	for _, e := range v.Errs {
		t.Error(e)
	}
	if !done {
		t.Errorf("not every record acknowledged or archived after %v: share offsets %+v", o.deadline, last)
	}
	wantArchived := 0
	for _, r := range records {
		if r.Poison {
			wantArchived++
		}
	}
	if v.Archived+v.ArchivedUnseen < wantArchived {
		t.Errorf("%d records archived, want at least the %d always released", v.Archived, wantArchived)
	}
}

// produceShareRecords writes n records "r-<i>" round robin over the
// topic's partitions and returns where each landed.
func produceShareRecords(t *testing.T, brokers []string, n int) []shareRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(shareChaosTopic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	out := make([]shareRecord, n)
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		id := shareRecordID(i + 1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(id)}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = cmpOr(firstErr, err)
				return
			}
			out[i] = shareRecord{ID: id, Partition: r.Partition, Offset: r.Offset, Poison: (i+1)%sharePoisonEvery == 0}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	return out
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// readShareHistory reads every history file of a run.
func readShareHistory(t *testing.T, dir string) []shareEvent {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var all []shareEvent
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := readShareEvents(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		all = append(all, evs...)
	}
	return all
}

// TestShareChaos is the acceptance run against Strand: three agents on
// one shared log (PostgreSQL), the agent leading a share partition
// killed and restarted now and then (and the consumers, as above).
func TestShareChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and three agents")
	}
	logURL := pgLogletURL(t, "e2e-share-chaos")
	objURL := "file://" + t.TempDir()
	type node struct {
		id              int32
		kafka, httpAddr string
		dataDir         string
		proc            *agentProcess
	}
	nodes := make([]*node, 3)
	startNode := func(n *node) {
		n.proc = startProcess(t, n.httpAddr,
			"--data-dir", n.dataDir, "--node-id", strconv.Itoa(int(n.id)),
			"--kafka-listen", n.kafka, "--http-listen", n.httpAddr,
			"--objstore", objURL, "--log", logURL,
			"--lease", clusterLease.String(), "--snapshot-interval", "0")
	}
	var brokers []string
	for i := range nodes {
		n := &node{id: int32(i + 1), kafka: freeAddr(t), httpAddr: freeAddr(t), dataDir: t.TempDir()}
		startNode(n)
		nodes[i] = n
		brokers = append(brokers, n.kafka)
	}
	for _, n := range nodes {
		waitBrokers(t, n.kafka, []int32{1, 2, 3})
	}
	requireShareGroups(t, brokers[0])
	createTopic(t, brokers[0], shareChaosTopic, 2)

	killAgent := func(t *testing.T, p int32, before func(led []int32)) {
		// Ask a live agent who leads p; kill it; restart it on its data
		// dir and ports once the others dropped it.
		var leader int32 = -1
		var led []int32
		for _, n := range nodes {
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka))
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			m, err := kadm.NewClient(cl).Metadata(ctx, shareChaosTopic)
			cancel()
			cl.Close()
			if err != nil {
				continue
			}
			for _, pd := range m.Topics[shareChaosTopic].Partitions {
				if pd.Partition == p {
					leader = pd.Leader
				}
			}
			for _, pd := range m.Topics[shareChaosTopic].Partitions {
				if pd.Leader == leader {
					led = append(led, pd.Partition)
				}
			}
			break
		}
		if leader < 1 || int(leader) > len(nodes) {
			return
		}
		victim := nodes[leader-1]
		before(led)
		victim.proc.kill()
		var alive []int32
		for _, n := range nodes {
			if n != victim {
				alive = append(alive, n.id)
			}
		}
		waitBrokers(t, nodes[alive[0]-1].kafka, alive)
		startNode(victim)
		waitBrokers(t, victim.kafka, []int32{1, 2, 3})
	}
	runShareChaos(t, brokers, killAgent, shareChaosSize(t))
}

// requireShareGroups fails unless the agent at addr serves the share
// group APIs (76-79, 90), naming those missing, before any consumer
// starts.
func requireShareGroups(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, k := range []int16{76, 77, 78, 79, 90} {
		if !slices.ContainsFunc(resp.ApiKeys, func(a kmsg.ApiVersionsResponseApiKey) bool { return a.ApiKey == k }) {
			missing = append(missing, kmsg.NameForKey(k))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the agent does not serve %s", strings.Join(missing, ", "))
	}
}
