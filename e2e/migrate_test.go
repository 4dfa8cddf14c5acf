package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/etcdtest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// ackClock records when each acknowledgement arrived, in arrival order,
// to measure the pauses clients see.
type ackClock struct {
	mu struct {
		sync.Mutex
		at []time.Time
	}
}

func (c *ackClock) tick() {
	c.mu.Lock()
	c.mu.at = append(c.mu.at, time.Now())
	c.mu.Unlock()
}

// longestGap returns the longest time between consecutive
// acknowledgements that spans any part of [from, to]: the pause a
// producer saw around an event that ran from `from` to `to`.
func (c *ackClock) longestGap(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var longest time.Duration
	for i := 1; i < len(c.mu.at); i++ {
		prev, next := c.mu.at[i-1], c.mu.at[i]
		if next.Before(from) || prev.After(to) {
			continue
		}
		longest = max(longest, next.Sub(prev))
	}
	return longest
}

// liveConsumer reads topic from offset 0 while the test runs, and stops
// once it has read up to the ends it is given.
type liveConsumer struct {
	cl   *kgo.Client
	done chan struct{}

	// cancelPoll wakes a poll blocked at the end of the topic once the
	// ends are known.
	cancelPoll context.CancelFunc

	mu struct {
		sync.Mutex
		ends map[int32]int64
		got  map[int32][]*kgo.Record
		errs []error
	}
}

func startConsumer(t *testing.T, addr, topic string, partitions int32) *liveConsumer {
	t.Helper()
	starts := make(map[int32]kgo.Offset)
	for p := range partitions {
		starts[p] = kgo.NewOffset().At(0)
	}
	c := &liveConsumer{
		cl: newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
			kgo.FetchMaxWait(100*time.Millisecond)),
		done: make(chan struct{}),
	}
	c.mu.got = make(map[int32][]*kgo.Record)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pollCtx, cancelPoll := context.WithCancel(ctx)
	c.cancelPoll = cancelPoll
	go func() {
		defer close(c.done)
		for {
			c.mu.Lock()
			ends, reached := c.mu.ends, c.reachedLocked()
			c.mu.Unlock()
			if reached || ctx.Err() != nil {
				return
			}
			pctx := pollCtx
			if ends != nil {
				pctx = ctx // the ends lie ahead: polls return with records
			}
			fs := c.cl.PollFetches(pctx)
			c.mu.Lock()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					c.mu.errs = append(c.mu.errs, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
				}
			})
			fs.EachRecord(func(r *kgo.Record) { c.mu.got[r.Partition] = append(c.mu.got[r.Partition], r) })
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *liveConsumer) reachedLocked() bool {
	if c.mu.ends == nil {
		return false
	}
	for p, end := range c.mu.ends {
		rs := c.mu.got[p]
		if end > 0 && (len(rs) == 0 || rs[len(rs)-1].Offset < end-1) {
			return false
		}
	}
	return true
}

// finish waits until the consumer has read up to ends and returns what
// it read.
func (c *liveConsumer) finish(t *testing.T, ends map[int32]int64) map[int32][]*kgo.Record {
	t.Helper()
	c.mu.Lock()
	c.mu.ends = ends
	c.mu.Unlock()
	c.cancelPoll()
	select {
	case <-c.done:
	case <-time.After(opTimeout):
		t.Fatalf("live consumer did not reach the ends %v within %v", ends, opTimeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range c.mu.errs {
		t.Errorf("live consumer: %v", err)
	}
	return c.mu.got
}

// checkAcked checks stored records (a full read of the topic up to its
// ends) the way TestCrashDuringProduce does: offsets dense from 0, each
// holding one record, and every acknowledged record at its offset with
// its value. It returns how many stored values were never acknowledged
// and how many extra copies of a value are stored.
func checkAcked(t *testing.T, stored map[int32][]*kgo.Record, acked []ackedRecord) (unacked, duplicates int) {
	t.Helper()
	for p, rs := range stored {
		for i, r := range rs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d at offset %d: offsets not dense from 0", p, i, r.Offset)
			}
		}
	}
	ackedValues := make(map[string]bool, len(acked))
	for _, a := range acked {
		ackedValues[a.value] = true
		rs := stored[a.partition]
		switch {
		case a.offset < 0 || a.offset >= int64(len(rs)):
			t.Errorf("acknowledged %s at %d/%d, but the partition ends at %d", a.value, a.partition, a.offset, len(rs))
		case string(rs[a.offset].Value) != a.value:
			t.Errorf("acknowledged %s at %d/%d, which holds %s", a.value, a.partition, a.offset, rs[a.offset].Value)
		}
	}
	copies := make(map[string]int)
	for _, rs := range stored {
		for _, r := range rs {
			copies[string(r.Value)]++
		}
	}
	for v, n := range copies {
		if !ackedValues[v] {
			unacked++
		}
		duplicates += n - 1
	}
	return unacked, duplicates
}

// pgLogletURL is a new loglet on the test PostgreSQL server.
func pgLogletURL(t *testing.T, name string) string {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("log", fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))
	u.RawQuery = q.Encode()
	return u.String()
}

func logStatus(t *testing.T, httpAddr string) agent.LogStatus {
	t.Helper()
	var st agent.LogStatus
	out := runStrand(t, "log", "status", "--json", "--http", httpAddr)
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("strand log status --json: %v\n%s", err, out)
	}
	return st
}

// TestMigrateUnderLoad runs the real binary on its embedded file log,
// keeps a producer (acks=all) and a consumer running, and moves the log
// with `strand log migrate`, first onto PostgreSQL and then onto etcd.
// No acknowledged record may be lost and no offset reused, the live
// consumer must read exactly what is stored, and the longest pause
// between acknowledgements around each migration is logged.
//
// The producer is not idempotent, as in TestCrashDuringProduce; here no
// produce request may fail at all.
func TestMigrateUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts PostgreSQL and etcd")
	}
	const (
		topic      = "migrate"
		partitions = 4
		// acksPerStep are awaited before the first migration and
		// after each one, so each runs under load and the log grows on
		// every backend.
		acksPerStep        = 2000
		maxBufferedRecords = 1000
	)
	targets := []struct{ name, to string }{
		{"postgres", pgLogletURL(t, "e2e-migrate")},
		{"etcd", fmt.Sprintf("etcd://%s/e2e-migrate-%d/seg", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())},
	}

	dataDir := t.TempDir()
	kafkaAddr, httpAddr := freeAddr(t), freeAddr(t)
	startProcess(t, httpAddr, "--data-dir", dataDir, "--kafka-listen", kafkaAddr, "--http-listen", httpAddr)
	createTopic(t, kafkaAddr, topic, partitions)

	producer := newClient(t, kafkaAddr,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.ProducerBatchMaxBytes(4<<10),
		kgo.MaxProduceRequestsInflightPerBroker(4),
	)
	consumer := startConsumer(t, kafkaAddr, topic, partitions)
	var (
		acks  ackLog
		clock ackClock
	)
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopProducing := func() { stopOnce.Do(func() { close(stop) }) }
	t.Cleanup(stopProducing) // before the client closes, on a failure
	produced := make(chan int, 1)
	go func() {
		seq := 0
		defer func() { produced <- seq }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			producer.Produce(context.Background(), &kgo.Record{Value: fmt.Appendf(nil, "v%09d", seq)}, func(r *kgo.Record, err error) {
				if err == nil {
					clock.tick()
				}
				acks.record(r, err)
			})
			seq++
		}
	}()
	await := func(n int) {
		t.Helper()
		select {
		case <-acks.reached(n):
		case <-time.After(opTimeout):
			acked, failed := acks.count()
			t.Fatalf("%d acknowledged, %d failed, waiting for %d after %v", acked, failed, n, opTimeout)
		}
	}

	// The gaps after the client's first requests are the baseline.
	await(acksPerStep / 4)
	steadyFrom := time.Now()
	await(acksPerStep)
	steady := clock.longestGap(steadyFrom, time.Now())
	type pause struct {
		name              string
		took, cli, ackGap time.Duration
	}
	var pauses []pause
	for _, tg := range targets {
		acked, _ := acks.count()
		from := time.Now()
		out := runStrand(t, "log", "migrate", "--to", tg.to, "--http", httpAddr, "--json")
		to := time.Now()
		var res agent.MigrateResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("strand log migrate --json: %v\n%s", err, out)
		}
		if act := res.NewChain.Segments[len(res.NewChain.Segments)-1]; act.URL != agent.RedactURL(tg.to) || act.Start != res.SealedTail {
			t.Fatalf("migrated onto %+v, want %s from %d", act, tg.to, res.SealedTail)
		}
		await(acked + acksPerStep)
		// Acknowledgements can all be of records committed before the
		// seal (a large batch answered just after it): the new segment
		// must hold entries before the next migration seals it.
		for deadline := time.Now().Add(opTimeout); logStatus(t, httpAddr).Tail <= res.SealedTail; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no entry appended to %s after %v", tg.name, opTimeout)
			}
		}
		p := pause{name: tg.name, took: res.DurationNS, cli: to.Sub(from), ackGap: clock.longestGap(from, to)}
		pauses = append(pauses, p)
		t.Logf("migration to %s under load: sealed at %d; agent took %v, the CLI %v; longest gap between acknowledgements around it %v",
			tg.name, res.SealedTail, p.took.Round(time.Microsecond), p.cli.Round(time.Millisecond), p.ackGap.Round(time.Microsecond))
	}
	stopProducing()
	total := <-produced
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	acked, failed := acks.count()
	if failed != 0 || acked != total {
		t.Fatalf("%d records produced: %d acknowledged, %d failed; a migration must fail none", total, acked, failed)
	}

	st := logStatus(t, httpAddr)
	segs := st.Chain.Segments
	if len(segs) != 3 || segs[2].Sealed || segs[2].URL != agent.RedactURL(targets[1].to) || segs[1].URL != agent.RedactURL(targets[0].to) {
		t.Fatalf("chain after both migrations: %+v", st.Chain)
	}
	for i := range 2 {
		if !segs[i].Sealed || segs[i].End <= segs[i].Start {
			t.Errorf("segment %d %+v: want sealed and holding entries", i, segs[i])
		}
	}

	ends := endOffsets(t, kafkaAddr, topic)
	stored := consumeAll(t, kafkaAddr, topic, ends)
	unacked, duplicates := checkAcked(t, stored, acks.snapshot())
	live := consumer.finish(t, ends)
	for p, rs := range stored {
		got := live[p]
		if len(got) < len(rs) {
			t.Errorf("partition %d: the live consumer read %d records, %d are stored", p, len(got), len(rs))
			continue
		}
		for i, r := range rs {
			if got[i].Offset != r.Offset || string(got[i].Value) != string(r.Value) {
				t.Errorf("partition %d: the live consumer read %s at %d, stored is %s at %d", p, got[i].Value, got[i].Offset, r.Value, r.Offset)
				break
			}
		}
	}
	t.Logf("%d records acknowledged over 3 backends (%d unacknowledged values stored, %d extra copies); longest gap between acknowledgements with no migration: %v",
		acked, unacked, duplicates, steady.Round(time.Microsecond))
	for _, p := range pauses {
		t.Logf("pause %s: %v (migration %v)", p.name, p.ackGap.Round(time.Microsecond), p.took.Round(time.Microsecond))
	}
}

// stopProcess stops an agent process gracefully (SIGTERM) and waits for
// it to exit.
func (p *agentProcess) stopGracefully(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(opTimeout):
		t.Fatalf("strand serve still running %v after SIGTERM", opTimeout)
	}
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("strand serve exited with %v after SIGTERM:\n%s", p.cmd.ProcessState, p.stderr.String())
	}
}

// TestWipedAgentRestores runs the binary with its object store and log
// outside its data dir, produces, snapshots (`strand log snapshot`),
// produces more, stops it and deletes the data dir. Restarted on the
// empty dir, it must restore the snapshot, play the log's tail and serve
// every acknowledged record; the time to ready is logged.
func TestWipedAgentRestores(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary")
	}
	const (
		topic      = "wiped"
		partitions = 4
		// Records are produced in rounds, each flushed before the
		// next, so the snapshot and the log's tail both span many log
		// entries.
		recordsPerRound = 100
		roundsBefore    = 20 // covered by the snapshot
		roundsAfter     = 10 // in the log's tail
	)
	shared := t.TempDir()
	dataDir := filepath.Join(t.TempDir(), "data")
	kafkaAddr, httpAddr := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dataDir, "--kafka-listen", kafkaAddr, "--http-listen", httpAddr,
		"--objstore", "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
		"--log", "file://" + filepath.ToSlash(filepath.Join(shared, "log")),
		"--snapshot-interval", "1h"}
	proc := startProcess(t, httpAddr, args...)
	createTopic(t, kafkaAddr, topic, partitions)

	var acks ackLog
	producer := newClient(t, kafkaAddr, kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.DisableIdempotentWrite())
	seq := 0
	produceRounds := func(rounds int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		for range rounds {
			for range recordsPerRound {
				producer.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%09d", seq)}, acks.record)
				seq++
			}
			if err := producer.Flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
		}
		if acked, failed := acks.count(); failed != 0 || acked != seq {
			t.Fatalf("%d acknowledged, %d failed, want %d", acked, failed, seq)
		}
	}
	produceRounds(roundsBefore)
	var snap agent.SnapshotTakenStatus
	out := runStrand(t, "log", "snapshot", "--json", "--http", httpAddr)
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("strand log snapshot --json: %v\n%s", err, out)
	}
	produceRounds(roundsAfter)
	tail := logStatus(t, httpAddr).Tail
	if tail < snap.Snapshot.Pos+roundsAfter {
		t.Fatalf("log tail %d, snapshot at %d: want at least %d entries after it", tail, snap.Snapshot.Pos, roundsAfter)
	}
	proc.stopGracefully(t)

	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	restartAt := time.Now()
	proc = startProcess(t, httpAddr, args...)
	ready := time.Since(restartAt)
	if logs := proc.stderr.String(); !strings.Contains(logs, "restored the newest metadata snapshot") {
		t.Errorf("restarted agent's log does not tell of a restore:\n%s", logs)
	}
	st := logStatus(t, httpAddr)
	if st.TrimPoint != snap.Snapshot.Pos || st.Agent.Applied < tail {
		t.Errorf("status after the restore: trim point %d, applied %d; want %d and at least the tail %d",
			st.TrimPoint, st.Agent.Applied, snap.Snapshot.Pos, tail)
	}

	ends := endOffsets(t, kafkaAddr, topic)
	stored := consumeAll(t, kafkaAddr, topic, ends)
	if unacked, duplicates := checkAcked(t, stored, acks.snapshot()); unacked != 0 || duplicates != 0 {
		t.Errorf("%d unacknowledged values and %d extra copies stored, want none", unacked, duplicates)
	}
	checkRoundTrip(t, kafkaAddr, topic)
	t.Logf("wiped agent: snapshot at %d (%d files, %d bytes) plus %d tail entries; ready %v after the restart",
		snap.Snapshot.Pos, snap.Snapshot.Files, snap.Snapshot.Bytes, tail-snap.Snapshot.Pos, ready.Round(time.Millisecond))
}
