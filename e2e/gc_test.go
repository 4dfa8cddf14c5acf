package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/planted"
	"github.com/strandkafka/strand/internal/segment"
)

// gcGrace is --gc-grace in these tests: short, so they take seconds. It
// is far below the floor a real agent accepts (meta.MinGCGraceMs), which
// only a test build lowers (package planted): startGCProcess runs one.
const gcGrace = time.Second

// startGCProcess is startProcess on the test build, with the grace's
// floor lowered to gcGrace.
func startGCProcess(t *testing.T, httpAddr string, args ...string) *agentProcess {
	t.Helper()
	return startBinaryEnv(t, plantedBinary(t), []string{planted.EnvGCGraceFloor + "=" + gcGrace.String()}, httpAddr, args...)
}

// storeKeys lists the data objects in a file object store.
func storeKeys(t *testing.T, dir string) map[string]bool {
	t.Helper()
	s, err := fileobj.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(context.Background(), "data/")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, i := range infos {
		keys[i.Key] = true
	}
	return keys
}

// metricSum sums an agent's metric over the series whose labels hold
// every name=value of match.
func metricSum(t *testing.T, httpAddr, name string, match ...string) float64 {
	t.Helper()
	var sum float64
	for _, m := range scrape(t, httpAddr)[name].GetMetric() {
		ok := true
		for _, kv := range match {
			k, v, _ := strings.Cut(kv, "=")
			ok = ok && label(m, k) == v
		}
		if !ok {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

// eventually polls cond until it holds or opTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", opTimeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func deleteTopic(t *testing.T, addr, topic string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
}

// waitGone waits until none of keys is in the store.
func waitGone(t *testing.T, objDir string, keys map[string]bool, what string) {
	t.Helper()
	eventually(t, what+" are still in the store", func() bool {
		stored := storeKeys(t, objDir)
		for k := range keys {
			if stored[k] {
				return false
			}
		}
		return true
	})
}

// without returns the keys of a not in b.
func without(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		if !b[k] {
			out[k] = true
		}
	}
	return out
}

// TestGCPostgres: three agents on a PostgreSQL log and one shared
// store. Deleting a topic frees its objects after the grace period, and
// only the janitor placement names deletes; killed (SIGKILL) with
// objects queued, another agent takes over and finishes the queue; no
// delete fails anywhere, and the topic that stays reads back whole.
func TestGCPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts PostgreSQL")
	}
	logURL, objDir := pgLogletURL(t, "e2e-gc"), t.TempDir()
	agents := make([]*clusterAgent, 3)
	all := []int32{1, 2, 3}
	for i := range agents {
		a := &clusterAgent{nodeID: int32(i + 1), kafka: freeAddr(t), httpAddr: freeAddr(t)}
		a.proc = startGCProcess(t, a.httpAddr,
			"--data-dir", t.TempDir(), "--node-id", strconv.Itoa(int(a.nodeID)),
			"--kafka-listen", a.kafka, "--http-listen", a.httpAddr,
			"--objstore", "file://"+objDir, "--log", logURL,
			"--lease", clusterLease.String(), "--snapshot-interval", "0", "--gc-grace", gcGrace.String())
		agents[i] = a
	}
	for _, a := range agents {
		waitBrokers(t, a.kafka, all)
	}
	t.Logf("%v: cluster up", time.Now().Format("15:04:05.000"))
	addr := agents[0].kafka
	for _, topic := range []string{"keep", "drop", "drop2"} {
		createTopic(t, addr, topic, 1)
	}
	base := storeKeys(t, objDir)
	produceN(t, addr, "drop", "drop", 20)
	afterDrop := storeKeys(t, objDir)
	dropKeys := without(afterDrop, base)
	produceN(t, addr, "keep", "keep", 20)
	keepKeys := without(storeKeys(t, objDir), afterDrop)
	if len(dropKeys) == 0 || len(keepKeys) == 0 {
		t.Fatalf("%d objects of drop, %d of keep", len(dropKeys), len(keepKeys))
	}

	t.Logf("%v: produced", time.Now().Format("15:04:05.000"))
	deleteTopic(t, addr, "drop")
	waitGone(t, objDir, dropKeys, "the deleted topic's objects")
	t.Logf("%v: drop's objects deleted", time.Now().Format("15:04:05.000"))
	janitor := placement.OwnerOf(gc.JanitorKey, all)
	for _, a := range agents {
		deletes := metricSum(t, a.httpAddr, "strand_objstore_requests_total", "op=delete")
		if (a.nodeID == janitor) != (deletes > 0) {
			t.Fatalf("agent %d made %v deletes; the janitor is agent %d", a.nodeID, deletes, janitor)
		}
	}

	// Objects queued, then the janitor dies before their grace ends.
	produceN(t, addr, "drop2", "drop2", 20)
	drop2Keys := without(storeKeys(t, objDir), afterDrop)
	for k := range keepKeys {
		delete(drop2Keys, k)
	}
	var survivor *clusterAgent
	for _, a := range agents {
		if a.nodeID != janitor {
			survivor = a
		}
	}
	deleteTopic(t, survivor.kafka, "drop2")
	agents[janitor-1].proc.kill()
	t.Logf("killed the janitor, agent %d, with %d objects queued", janitor, len(drop2Keys))
	waitGone(t, objDir, drop2Keys, "the objects queued when the janitor died")
	t.Logf("%v: drop2's objects deleted", time.Now().Format("15:04:05.000"))
	rest := slices.DeleteFunc(slices.Clone(all), func(id int32) bool { return id == janitor })
	next := placement.OwnerOf(gc.JanitorKey, rest)
	for _, a := range agents {
		if a.nodeID == janitor {
			continue
		}
		deletes := metricSum(t, a.httpAddr, "strand_objstore_requests_total", "op=delete")
		if (a.nodeID == next) != (deletes > 0) {
			t.Fatalf("agent %d made %v deletes; the next janitor is agent %d", a.nodeID, deletes, next)
		}
		if errs := metricSum(t, a.httpAddr, "strand_objstore_requests_total", "op=delete", "result=error"); errs != 0 {
			t.Fatalf("agent %d: %v failed deletes", a.nodeID, errs)
		}
		if missing := metricSum(t, a.httpAddr, "strand_fetch_damaged_reads_total", "kind=missing"); missing != 0 {
			t.Fatalf("agent %d: %v reads failed on a missing object", a.nodeID, missing)
		}
		if out := a.proc.stderr.String(); strings.Contains(out, "gc: step failed") {
			t.Fatalf("agent %d logged a failed GC step:\n%s", a.nodeID, out)
		}
	}
	if keys := storeKeys(t, objDir); !keysHold(keys, keepKeys) {
		t.Fatal("an object of the topic that stays was deleted")
	}
	stored := consumeAll(t, survivor.kafka, "keep", endOffsets(t, survivor.kafka, "keep"))
	if n := len(stored[0]); n != 20 {
		t.Fatalf("keep reads back %d records, want 20", n)
	}
	g := metricSum(t, survivor.httpAddr, "strand_gc_deleted_objects_total")
	t.Logf("deleted %v objects; stored %v bytes in %v live objects", g,
		metricSum(t, survivor.httpAddr, "strand_data_stored_bytes"), metricSum(t, survivor.httpAddr, "strand_gc_objects", "state=live"))
}

func keysHold(keys, want map[string]bool) bool {
	for k := range want {
		if !keys[k] {
			return false
		}
	}
	return true
}

// TestGCOrphansAfterKill: an agent killed with SIGKILL while producing
// leaves objects uploaded and never committed, and so does a writer that
// died before this agent started (an object planted in the store). Once
// the grace period has passed the reconciler deletes them all: the store
// ends holding exactly the objects the database knows, and every
// acknowledged record reads back.
func TestGCOrphansAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the strand binary")
	}
	const (
		topic = "orphans"
		kills = 3
	)
	dataDir, objDir := t.TempDir(), t.TempDir()
	kafkaAddr, httpAddr := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dataDir, "--kafka-listen", kafkaAddr, "--http-listen", httpAddr,
		"--objstore", "file://" + objDir, "--gc-grace", gcGrace.String()}
	proc := startGCProcess(t, httpAddr, args...)
	createTopic(t, kafkaAddr, topic, 2)

	// A writer that uploaded and died before committing.
	s, err := fileobj.Open(objDir)
	if err != nil {
		t.Fatal(err)
	}
	planted := segment.ObjectKey("gone-1", 1, time.Now().UnixMilli())
	if err := s.Put(context.Background(), planted, []byte("never committed")); err != nil {
		t.Fatal(err)
	}

	producer := newClient(t, kafkaAddr,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchMaxBytes(4<<10),
		kgo.MaxProduceRequestsInflightPerBroker(4),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	var acks ackLog
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			producer.Produce(context.Background(), &kgo.Record{Value: fmt.Appendf(nil, "v%09d", seq)}, acks.record)
		}
	}()
	for kill := range kills {
		acked, _ := acks.count()
		select {
		case <-acks.reached(acked + 500):
		case <-time.After(opTimeout):
			t.Fatalf("run %d: no progress", kill)
		}
		proc.kill()
		proc = startGCProcess(t, httpAddr, args...)
	}
	close(stop)
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The store ends holding exactly what the database knows.
	eventually(t, "orphans left in the store", func() bool {
		keys := storeKeys(t, objDir)
		known := metricSum(t, httpAddr, "strand_gc_objects", "state=live") + metricSum(t, httpAddr, "strand_gc_objects", "state=dead")
		return !keys[planted] && float64(len(keys)) == known
	})
	if missing := metricSum(t, httpAddr, "strand_fetch_damaged_reads_total", "kind=missing"); missing != 0 {
		t.Fatalf("%v reads failed on a missing object", missing)
	}
	orphans := metricSum(t, httpAddr, "strand_gc_orphans_total")
	if orphans < 1 {
		t.Fatalf("%v orphans deleted, want at least the planted one", orphans)
	}
	stored := consumeAll(t, kafkaAddr, topic, endOffsets(t, kafkaAddr, topic))
	for _, a := range acks.snapshot() {
		rs := stored[a.partition]
		if a.offset >= int64(len(rs)) || string(rs[a.offset].Value) != a.value {
			t.Fatalf("acknowledged %s at %d/%d does not read back", a.value, a.partition, a.offset)
		}
	}
	acked, _ := acks.count()
	t.Logf("%d kills, %d acknowledged records read back; %v orphans deleted (one planted), %d objects stored",
		kills, acked, orphans, len(storeKeys(t, objDir)))
}

// TestGCRetentionFreesObjects: a topic with retention.ms of a second
// loses its records to retention, and its object files leave the store
// once the grace period has passed; a topic without that retention keeps
// its objects and its records.
func TestGCRetentionFreesObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary")
	}
	objDir := t.TempDir()
	kafkaAddr, httpAddr := freeAddr(t), freeAddr(t)
	startGCProcess(t, httpAddr, "--data-dir", t.TempDir(), "--kafka-listen", kafkaAddr, "--http-listen", httpAddr,
		"--objstore", "file://"+objDir, "--gc-grace", gcGrace.String(), "--log-retention-check-interval-ms", "100")
	adm := kadm.NewClient(newClient(t, kafkaAddr))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	second := "1000"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &second}, "ttl"); err != nil || resp.Err != nil {
		t.Fatalf("create ttl: %v, %v", err, resp.Err)
	}
	createTopic(t, kafkaAddr, "kept", 1)

	base := storeKeys(t, objDir)
	produceN(t, kafkaAddr, "ttl", "ttl", 20)
	afterTTL := storeKeys(t, objDir)
	produceN(t, kafkaAddr, "kept", "kept", 20)
	keptKeys := without(storeKeys(t, objDir), afterTTL)
	ttlKeys := without(afterTTL, base)
	if len(ttlKeys) == 0 || len(keptKeys) == 0 {
		t.Fatalf("%d objects of ttl, %d of kept", len(ttlKeys), len(keptKeys))
	}
	waitGone(t, objDir, ttlKeys, "the objects retention expired")
	if !keysHold(storeKeys(t, objDir), keptKeys) {
		t.Fatal("an object of the topic without retention was deleted")
	}
	starts, err := adm.ListStartOffsets(ctx, "ttl")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("ttl", 0); o.Offset != 20 {
		t.Fatalf("ttl starts at %d, want 20 (all expired)", o.Offset)
	}
	if n := len(consumeAll(t, kafkaAddr, "kept", endOffsets(t, kafkaAddr, "kept"))[0]); n != 20 {
		t.Fatalf("kept reads back %d records, want 20", n)
	}
	t.Logf("%d objects of ttl deleted; %v bytes stored", len(ttlKeys), metricSum(t, httpAddr, "strand_data_stored_bytes"))
}
