package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// lsoIdleFetches is how many Fetch responses a read_committed consumer
// must have been answered, while a transaction is open, without
// returning a record past the last stable offset.
const lsoIdleFetches = 3

// lsoConsumer is a read_committed kgo consumer of one partition whose
// records the test inspects between steps.
type lsoConsumer struct {
	t       *testing.T
	cl      *kgo.Client
	fetches *fetchCounter
	got     []string // "offset:value", in the order returned
}

// newLSOConsumer starts a consumer of partition 0 of topic at offset.
func newLSOConsumer(t *testing.T, addr, topic string, offset int64) *lsoConsumer {
	t.Helper()
	c := &lsoConsumer{t: t, fetches: new(fetchCounter)}
	c.cl = newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.WithHooks(c.fetches),
	)
	return c
}

// poll polls until stop is closed, collecting records, and fails the
// test if it is not closed within opTimeout.
func (c *lsoConsumer) poll(stop <-chan struct{}, what string) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timedOut := make(chan struct{})
	go func() {
		select {
		case <-stop:
		case <-time.After(opTimeout):
			close(timedOut)
		}
		cancel()
	}()
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.t.Errorf("%s: fetch %s/%d: %v", what, topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { c.got = append(c.got, fmt.Sprintf("%d:%s", r.Offset, r.Value)) })
	}
	select {
	case <-timedOut:
		c.t.Fatalf("%s: not done after %v; records so far %v", what, opTimeout, c.got)
	default:
	}
}

// idle polls until the consumer has been answered lsoIdleFetches more
// Fetch responses. kgo sends a partition's next Fetch only once the
// records of the previous one were polled, so every record those
// responses but the last carried is in got when this returns.
func (c *lsoConsumer) idle(what string) {
	c.t.Helper()
	c.poll(c.fetches.after(lsoIdleFetches), what)
}

// until polls until the consumer has returned n records in all.
func (c *lsoConsumer) until(n int, what string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for len(c.got) < n {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("%s: %d records, want %d, after %v: %v", what, len(c.got), n, opTimeout, c.got)
		}
		fs.EachError(func(topic string, p int32, err error) { c.t.Errorf("%s: fetch %s/%d: %v", what, topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { c.got = append(c.got, fmt.Sprintf("%d:%s", r.Offset, r.Value)) })
	}
}

func (c *lsoConsumer) expect(want []string, what string) {
	c.t.Helper()
	if !slices.Equal(c.got, want) {
		c.t.Fatalf("%s: read_committed consumer returned %v, want %v", what, c.got, want)
	}
}

// listedOffsets lists topic's partition 0 under both isolation levels:
// the high watermark and the last stable offset.
func listedOffsets(t *testing.T, adm *kadm.Client, topic string) (hwm, lso int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	one := func(what string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) int64 {
		lo, err := list(ctx, topic)
		if err != nil {
			t.Fatalf("list %s offsets: %v", what, err)
		}
		o, ok := lo.Lookup(topic, 0)
		if !ok || o.Err != nil {
			t.Fatalf("list %s offsets of %s/0: found %v, %v", what, topic, ok, o.Err)
		}
		return o.Offset
	}
	return one("end", adm.ListEndOffsets), one("committed", adm.ListCommittedOffsets)
}

// TestTxnLastStableOffset is issue 5's acceptance test for the last
// stable offset: while a transaction is open, a read_committed consumer
// stops at its first record even though non-transactional records keep
// arriving after it, and moves on when the transaction commits; after an
// aborted one it skips the aborted record and returns the plain ones.
// ListOffsets answers the last stable offset under read_committed and
// the high watermark under read_uncommitted, and a raw read_committed
// Fetch carries both and the aborted transaction.
func TestTxnLastStableOffset(t *testing.T) {
	t.Run("regional", func(t *testing.T) { testTxnLastStableOffset(t, agent.Config{}) })
	// The low-latency tier (issue 34) changes where a flush is written,
	// not what its commit means: the same transactions, the same LSO.
	t.Run("express", func(t *testing.T) {
		dir := t.TempDir()
		testTxnLastStableOffset(t, agent.Config{Compaction: true,
			ObjStoreExpress: "a=" + filepath.Join(dir, "a") + ",b=" + filepath.Join(dir, "b") + ",c=" + filepath.Join(dir, "c")})
		objects := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".strd") {
				objects++
			}
			return err
		})
		if err != nil || objects == 0 {
			t.Fatalf("the zone directories hold %d data objects (%v): the flushes did not go through the tier", objects, err)
		}
	})
}

func testTxnLastStableOffset(t *testing.T, cfg agent.Config) {
	a := startAgent(t, cfg)
	addr := a.KafkaAddr()
	const topic = "txn-lso"
	createTopic(t, addr, topic, 1)
	adm := kadm.NewClient(newClient(t, addr))

	plain := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	txn := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("txn-lso-producer"),
		kgo.TransactionTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	produce := func(cl *kgo.Client, wantOffset int64, values ...string) *kgo.Record {
		t.Helper()
		var rs []*kgo.Record
		for _, v := range values {
			rs = append(rs, &kgo.Record{Value: []byte(v)})
		}
		res := cl.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %v: %v", values, err)
		}
		for i, r := range res {
			if r.Record.Offset != wantOffset+int64(i) {
				t.Fatalf("%s at offset %d, want %d", r.Record.Value, r.Record.Offset, wantOffset+int64(i))
			}
		}
		return res[0].Record
	}
	checkListed := func(wantHWM, wantLSO int64, what string) {
		t.Helper()
		hwm, lso := listedOffsets(t, adm, topic)
		if hwm != wantHWM || lso != wantLSO {
			t.Fatalf("%s: ListOffsets read_uncommitted %d, read_committed %d; want %d, %d", what, hwm, lso, wantHWM, wantLSO)
		}
	}

	produce(plain, 0, "plain-0", "plain-1")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(txn, 2, "txn-0")
	produce(plain, 3, "plain-2", "plain-3", "plain-4")

	// Open transaction from offset 2; records up to 5.
	checkListed(6, 2, "open transaction")
	sp, batches := rawFetch(t, addr, topic, 0, 0, readCommitted)
	if sp.HighWatermark != 6 || sp.LastStableOffset != 2 {
		t.Errorf("read_committed fetch: high watermark %d, last stable offset %d; want 6, 2", sp.HighWatermark, sp.LastStableOffset)
	}
	for _, b := range batches {
		if last := b.FirstOffset + int64(b.LastOffsetDelta); last >= 2 {
			t.Errorf("read_committed fetch returned a batch %d-%d past the last stable offset 2", b.FirstOffset, last)
		}
	}
	if _, batches := rawFetch(t, addr, topic, 0, 0, readUncommitted); len(batches) == 0 ||
		batches[len(batches)-1].FirstOffset+int64(batches[len(batches)-1].LastOffsetDelta) != 5 {
		t.Errorf("read_uncommitted fetch: %d batches, want them to end at offset 5", len(batches))
	}

	c := newLSOConsumer(t, addr, topic, 0)
	c.until(2, "records below the last stable offset")
	c.idle("open transaction")
	c.expect([]string{"0:plain-0", "1:plain-1"}, "while the transaction is open")

	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The commit marker takes offset 6.
	checkListed(7, 7, "after commit")
	c.until(6, "after commit")
	c.expect([]string{"0:plain-0", "1:plain-1", "2:txn-0", "3:plain-2", "4:plain-3", "5:plain-4"}, "after commit")

	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// The second transaction straddles a plain record and is aborted.
	aborted := produce(txn, 7, "txn-aborted-0")
	produce(plain, 8, "plain-5")
	produce(txn, 9, "txn-aborted-1")
	checkListed(10, 7, "second open transaction")
	c.idle("second open transaction")
	if len(c.got) != 6 {
		t.Fatalf("while the second transaction is open: read_committed consumer returned %v", c.got)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
	// The abort marker takes offset 10.
	checkListed(11, 11, "after abort")
	c.until(7, "after abort")
	c.expect([]string{"0:plain-0", "1:plain-1", "2:txn-0", "3:plain-2", "4:plain-3", "5:plain-4", "8:plain-5"}, "after abort")

	// A consumer starting inside the aborted transaction, past its
	// first record, must still skip the rest of it: the fetch names
	// every aborted transaction that overlaps what it returns.
	sp, _ = rawFetch(t, addr, topic, 0, 9, readCommitted)
	if len(sp.AbortedTransactions) != 1 || sp.AbortedTransactions[0].ProducerID != aborted.ProducerID || sp.AbortedTransactions[0].FirstOffset != 7 {
		t.Errorf("read_committed fetch at 9: aborted transactions %+v, want producer %d from offset 7", sp.AbortedTransactions, aborted.ProducerID)
	}
	late := newLSOConsumer(t, addr, topic, 9)
	late.idle("consumer starting inside the aborted transaction")
	late.expect(nil, "consumer starting inside the aborted transaction")
	produce(plain, 11, "plain-6")
	late.until(1, "consumer starting inside the aborted transaction")
	late.expect([]string{"11:plain-6"}, "consumer starting inside the aborted transaction")
	checkListed(12, 12, "after the last plain record")

	// The wire: the aborted transaction is named, and the markers are
	// control batches at offsets 6 and 10.
	sp, batches = rawFetch(t, addr, topic, 0, 0, readCommitted)
	if sp.HighWatermark != 12 || sp.LastStableOffset != 12 {
		t.Errorf("read_committed fetch at 0: high watermark %d, last stable offset %d; want 12, 12", sp.HighWatermark, sp.LastStableOffset)
	}
	if len(sp.AbortedTransactions) != 1 || sp.AbortedTransactions[0].ProducerID != aborted.ProducerID || sp.AbortedTransactions[0].FirstOffset != 7 {
		t.Errorf("read_committed fetch at 0: aborted transactions %+v, want producer %d from offset 7", sp.AbortedTransactions, aborted.ProducerID)
	}
	var controls []string
	for _, b := range batches {
		if b.Attributes&batchControl != 0 {
			if b.Attributes&batchTransactional == 0 || b.ProducerID != aborted.ProducerID {
				t.Errorf("control batch at %d: attributes %#x, producer %d", b.FirstOffset, b.Attributes, b.ProducerID)
			}
			controls = append(controls, fmt.Sprintf("%d:%d", b.FirstOffset, markerType(t, b)))
		}
	}
	if want := []string{fmt.Sprintf("6:%d", markerCommit), fmt.Sprintf("10:%d", markerAbort)}; !slices.Equal(controls, want) {
		t.Errorf("control batches (offset:type) %v, want %v", controls, want)
	}
}

// TestTxnTimeoutAbort leaves a transaction open past its timeout: the
// agent aborts it by the log's clock (internal/agent's transaction
// sweep), the read_committed consumer that stopped at its first record
// moves on without it, and the producer's late commit is refused rather
// than committing the aborted records.
func TestTxnTimeoutAbort(t *testing.T) {
	a := startAgent(t, agent.Config{})
	addr := a.KafkaAddr()
	const topic, timeout = "txn-timeout", time.Second
	createTopic(t, addr, topic, 1)
	adm := kadm.NewClient(newClient(t, addr))

	plain := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	txn := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("txn-timeout-producer"),
		kgo.TransactionTimeout(timeout))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("hung")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("plain produce: %v", err)
	}
	if hwm, lso := listedOffsets(t, adm, topic); hwm != 2 || lso != 0 {
		// A sweep this early would be a bug too: the timeout is 1 s.
		t.Fatalf("open transaction: ListOffsets read_uncommitted %d, read_committed %d; want 2, 0", hwm, lso)
	}

	c := newLSOConsumer(t, addr, topic, 0)
	c.until(1, "after the transaction timed out")
	waited := time.Since(began)
	c.expect([]string{"1:after"}, "after the transaction timed out")
	if waited < timeout {
		t.Errorf("read_committed consumer passed the open transaction after %v, before its %v timeout", waited, timeout)
	}
	t.Logf("transaction aborted by the agent %v after it began (timeout %v)", waited.Round(time.Millisecond), timeout)
	// The abort marker takes offset 2.
	if hwm, lso := listedOffsets(t, adm, topic); hwm != 3 || lso != 3 {
		t.Fatalf("after the timeout: ListOffsets read_uncommitted %d, read_committed %d; want 3, 3", hwm, lso)
	}

	if err := txn.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Errorf("commit after the agent aborted the transaction succeeded")
	} else {
		t.Logf("late commit refused: %v", err)
	}
	sp, batches := rawFetch(t, addr, topic, 0, 0, readCommitted)
	if len(sp.AbortedTransactions) != 1 || sp.AbortedTransactions[0].FirstOffset != 0 {
		t.Errorf("read_committed fetch: aborted transactions %+v, want one from offset 0", sp.AbortedTransactions)
	}
	var markers []string
	for _, b := range batches {
		if b.Attributes&batchControl != 0 {
			markers = append(markers, fmt.Sprintf("%d:%d", b.FirstOffset, markerType(t, b)))
		}
	}
	if want := []string{fmt.Sprintf("2:%d", markerAbort)}; !slices.Equal(markers, want) {
		t.Errorf("control batches (offset:type) %v, want %v", markers, want)
	}
	cons := newLSOConsumer(t, addr, topic, 0)
	cons.until(1, "after the late commit")
	cons.idle("after the late commit")
	cons.expect([]string{"1:after"}, "after the late commit")
}
