package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ackedRecord is a record the agent acknowledged.
type ackedRecord struct {
	partition int32
	offset    int64
	value     string
}

// ackLog collects a producer's acknowledgements and wakes those waiting
// for a count of them.
type ackLog struct {
	mu struct {
		sync.Mutex
		acked   []ackedRecord
		failed  int
		waiters []ackWaiter
	}
}

type ackWaiter struct {
	n    int
	done chan struct{}
}

func (l *ackLog) record(r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.mu.failed++
		return
	}
	l.mu.acked = append(l.mu.acked, ackedRecord{r.Partition, r.Offset, string(r.Value)})
	n := len(l.mu.acked)
	kept := l.mu.waiters[:0]
	for _, w := range l.mu.waiters {
		if n >= w.n {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	l.mu.waiters = kept
}

// count returns the acknowledged and failed records so far.
func (l *ackLog) count() (acked, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.acked), l.mu.failed
}

// reached returns a channel closed once n records are acknowledged.
func (l *ackLog) reached(n int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	done := make(chan struct{})
	if len(l.mu.acked) >= n {
		close(done)
		return done
	}
	l.mu.waiters = append(l.mu.waiters, ackWaiter{n, done})
	return done
}

func (l *ackLog) snapshot() []ackedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ackedRecord(nil), l.mu.acked...)
}

// TestCrashDuringProduce kills the agent process with SIGKILL several
// times while a producer sends continuously with acks=all, restarting it
// on the same data dir and ports each time. Afterwards every acknowledged
// record must be readable at its acknowledged offset with its value, and
// each partition's offsets must be dense, each holding one record.
//
// The producer is not idempotent: the agent does not serve InitProducerID
// yet, and without sequence checks in apply an idempotent producer would
// get no more than this one. A batch whose reply died with the agent is
// retried, so a record may be stored twice (its first copy unacknowledged);
// the test counts those but does not fail on them.
//
// STRAND_CRASH_SEED replays a run's kill points.
func TestCrashDuringProduce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the strand binary")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STRAND_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STRAND_CRASH_SEED: %v", err)
		}
	}
	t.Logf("STRAND_CRASH_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	const (
		topic      = "crash"
		partitions = 4
		kills      = 4
		// Each run is killed after at least minAcksPerRun new
		// acknowledgements, plus up to extraAcksPerRun more.
		minAcksPerRun   = 300
		extraAcksPerRun = 1200
		// maxBufferedRecords bounds the records in flight, and so
		// the unacknowledged ones a kill can leave behind.
		maxBufferedRecords = 2000
		maxKillDelay       = 20 * time.Millisecond
	)
	dataDir := t.TempDir()
	kafkaAddr, httpAddr := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dataDir, "--kafka-listen", kafkaAddr, "--http-listen", httpAddr}
	proc := startProcess(t, httpAddr, args...)
	createTopic(t, kafkaAddr, topic, partitions)

	producer := newClient(t, kafkaAddr,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		// Small batches and several requests in flight, so a kill
		// lands on requests in every stage: buffered, uploading,
		// committing, answered.
		kgo.ProducerBatchMaxBytes(4<<10),
		kgo.MaxProduceRequestsInflightPerBroker(4),
		// Reconnect to the restarted agent quickly; retries are
		// unbounded, so every record ends acknowledged or failed.
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
	)
	var acks ackLog
	stop := make(chan struct{})
	produced := make(chan int)
	go func() {
		seq := 0
		defer func() { produced <- seq }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Produce blocks while maxBufferedRecords are in flight,
			// which is the producer's backpressure during a restart.
			producer.Produce(context.Background(), &kgo.Record{Value: fmt.Appendf(nil, "v%09d", seq)}, acks.record)
			seq++
		}
	}()

	for kill := range kills + 1 {
		acked, _ := acks.count()
		target := acked + minAcksPerRun + rng.IntN(extraAcksPerRun)
		select {
		case <-acks.reached(target):
		case <-time.After(opTimeout):
			acked, failed := acks.count()
			t.Fatalf("run %d: %d acknowledged, %d failed, waiting for %d after %v", kill, acked, failed, target, opTimeout)
		}
		if kill == kills {
			break // the last run ends cleanly
		}
		// Acknowledgements come in bursts (a response answers many
		// records), so the kill waits a random few ms more to land
		// between bursts as often as right after one.
		<-time.After(time.Duration(rng.IntN(int(maxKillDelay))))
		proc.kill()
		acked, _ = acks.count()
		t.Logf("kill %d: SIGKILL after %d acknowledged records", kill+1, acked)
		proc = startProcess(t, httpAddr, args...)
	}
	close(stop)
	total := <-produced
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	acked, failed := acks.count()
	if acked+failed != total {
		t.Fatalf("%d records produced, %d acknowledged + %d failed", total, acked, failed)
	}

	ends := endOffsets(t, kafkaAddr, topic)
	stored := consumeAll(t, kafkaAddr, topic, ends)
	var storedCount int64
	for p, rs := range stored {
		for i, r := range rs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d at offset %d: offsets not dense from 0", p, i, r.Offset)
			}
		}
		storedCount += int64(len(rs))
	}

	ackedValues := make(map[string]bool, acked)
	for _, a := range acks.snapshot() {
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
			v := string(r.Value)
			var seq int
			if _, err := fmt.Sscanf(v, "v%09d", &seq); err != nil || seq < 0 || seq >= total {
				t.Errorf("stored value %q was never produced", v)
			}
			copies[v]++
		}
	}
	var unacked, duplicates int
	for v, n := range copies {
		if !ackedValues[v] {
			unacked++
		}
		duplicates += n - 1
	}
	t.Logf("%d kills; %d records produced, %d acknowledged, %d failed; %d stored: %d unacknowledged values present, %d extra copies of retried records",
		kills, total, acked, failed, storedCount, unacked, duplicates)
}
