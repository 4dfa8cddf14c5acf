package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/history"
)

// The history tests' workload: idempotent producers, transactional
// producers and consumer groups at both isolation levels, every
// operation recorded for internal/history to check. Values are unique:
// the producer's name and a sequence number.

const (
	// histPlainTopic is written by idempotent producers only, so every
	// offset holds a data record (the drop-acked planted bug aims
	// there); histTxnTopic by transactional producers and idempotent
	// ones, interleaved.
	histPlainTopic = "h-plain"
	histTxnTopic   = "h-txn"
	histPartitions = 3
	// histTxnTimeout is the transactional producers' transaction.timeout:
	// the cluster aborts a transaction its producer gave up on within a
	// fault's length, not the default minute.
	histTxnTimeout = 10 * time.Second
	// histAbortShare is the share of transactions aborted on purpose.
	histAbortShare = 0.25
	// histMaxTxnRecords bounds the records of one transaction.
	histMaxTxnRecords = 6
	// histDeliveryTimeout bounds how long a record is retried: a send
	// that outlives a fault ends indeterminate rather than blocking the
	// producer for good.
	histDeliveryTimeout = 20 * time.Second
)

// recorder is the history being written: safe for concurrent use, one
// monotonic clock for every operation.
type recorder struct {
	start time.Time
	mu    struct {
		sync.Mutex
		ops []history.Op
	}
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() time.Duration { return time.Since(r.start) }

func (r *recorder) add(op history.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.ops = append(r.mu.ops, op)
}

func (r *recorder) ops() []history.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.ops)
}

// clientOpts are the options every workload client shares: bootstrap
// from every proxy, retry through a fault's length, log warnings to
// w.clientLog stamped with the history's clock and the client's name.
func (w *workload) clientOpts(name string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(w.seeds...),
		kgo.ClientID(name),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RetryTimeout(30 * time.Second),
	}
	if w.clientLog != nil {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(w.clientLog, kgo.LogLevelWarn, func() string {
			return fmt.Sprintf("%8.3fs %s ", w.rec.now().Seconds(), name)
		})))
	}
	return opts
}

// workload runs the producers and consumers of one history test.
type workload struct {
	t     *testing.T
	rec   *recorder
	seeds []string
	seed  uint64
	// rate is how many records per second each idempotent producer
	// sends, and how many transactions each transactional producer
	// starts.
	rate int

	stopping atomic.Bool
	wg       sync.WaitGroup
	mu       struct {
		sync.Mutex
		// members are the running group members by name; next
		// numbers the members of each group.
		members map[string]*member
		next    map[history.Isolation]int
		// groupRead is the highest offset each group read per
		// partition, for the drain.
		groupRead map[string]map[history.TP]int64
		// errs counts the errors clients reported, by kind, and
		// errFirst is when each kind was first reported.
		errs     map[string]int
		errFirst map[string]time.Duration
	}
	// clientLog is where the clients log their warnings, nil for
	// nowhere.
	clientLog io.Writer
}

func newWorkload(t *testing.T, seeds []string, seed uint64, rate int) *workload {
	w := &workload{t: t, rec: newRecorder(), seeds: seeds, seed: seed, rate: rate}
	w.mu.members = make(map[string]*member)
	w.mu.next = make(map[history.Isolation]int)
	w.mu.errs = make(map[string]int)
	w.mu.errFirst = make(map[string]time.Duration)
	w.mu.groupRead = make(map[string]map[history.TP]int64)
	return w
}

// clientErr counts an error a client reported, by kind, for the summary.
func (w *workload) clientErr(what string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	k := what + ": " + msg
	if w.mu.errs[k] == 0 {
		w.mu.errFirst[k] = w.rec.now()
	}
	w.mu.errs[k]++
	if w.clientLog != nil {
		// Whole, with its time: kgo reports data loss (and the offset
		// it reset to) only here.
		fmt.Fprintf(w.clientLog, "%8.3fs %s: %v\n", w.rec.now().Seconds(), what, err)
	}
}

// rng returns the random source of the workload's n-th actor.
func (w *workload) rng(n uint64) *rand.Rand { return rand.New(rand.NewPCG(w.seed, n)) }

// pick chooses a partition of a topic; the idempotent producers write
// both topics.
func pick(rng *rand.Rand, topics ...string) history.TP {
	return history.TP{Topic: topics[rng.IntN(len(topics))], Partition: int32(rng.IntN(histPartitions))}
}

// start starts n idempotent producers, n transactional ones, and
// members per isolation level of two groups.
func (w *workload) start(producers, members int) {
	for i := range producers {
		w.wg.Go(func() { w.idempotent(fmt.Sprintf("idem-%d", i), uint64(10+i)) })
		w.wg.Go(func() { w.transactional(fmt.Sprintf("txn-%d", i), uint64(20+i)) })
	}
	for range members {
		w.addMember(history.ReadCommitted)
		w.addMember(history.ReadUncommitted)
	}
}

// stopProducers makes the producers finish what they sent (or give up
// on it) and return.
func (w *workload) stopProducers() {
	w.stopping.Store(true)
	w.wg.Wait()
}

// idempotent sends records at w.rate a second until stopped, then
// flushes; every record ends acknowledged or indeterminate.
func (w *workload) idempotent(name string, n uint64) {
	rng := w.rng(n)
	cl, err := kgo.NewClient(append(w.clientOpts(name),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(500),
		kgo.RecordDeliveryTimeout(histDeliveryTimeout),
	)...)
	if err != nil {
		w.t.Errorf("%s: %v", name, err)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(time.Second / time.Duration(max(1, w.rate)))
	defer tick.Stop()
	for seq := 0; !w.stopping.Load(); seq++ {
		<-tick.C
		tp := pick(rng, histPlainTopic, histTxnTopic)
		s := &history.Send{Process: name, TP: tp, Value: fmt.Sprintf("%s-%d", name, seq), Offset: -1}
		s.Invoke = w.rec.now()
		cl.Produce(context.Background(), &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(s.Value)}, func(r *kgo.Record, err error) {
			s.Complete = w.rec.now()
			if err == nil {
				s.Outcome, s.Offset = history.OK, r.Offset
			} else {
				w.clientErr(name+" produce", err)
			}
			w.rec.add(s)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), histDeliveryTimeout+10*time.Second)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		w.clientErr(name+" flush", err)
	}
}

// transactional runs transactions of 1 to histMaxTxnRecords records
// until stopped, committing most and aborting histAbortShare; a client
// that fails to end one is replaced (its successor's InitProducerID
// fences it and settles the transaction).
func (w *workload) transactional(name string, n uint64) {
	rng := w.rng(n)
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(append(w.clientOpts(name),
			kgo.TransactionalID("h-"+name),
			kgo.TransactionTimeout(histTxnTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordDeliveryTimeout(histDeliveryTimeout),
		)...)
		if err != nil {
			w.t.Errorf("%s: %v", name, err)
		}
		return cl
	}
	cl := newClient()
	if cl == nil {
		return
	}
	defer func() { cl.Close() }()
	// A tenth of the idempotent producers' rate: transactions carry a
	// few records each and wait for their end.
	tick := time.NewTicker(time.Second / time.Duration(max(1, w.rate/10)))
	defer tick.Stop()
	var seq int
	for txn := 0; !w.stopping.Load(); txn++ {
		<-tick.C
		id := fmt.Sprintf("%s#%d", name, txn)
		if err := cl.BeginTransaction(); err != nil {
			w.clientErr(name+" begin", err)
			cl.Close()
			if cl = newClient(); cl == nil {
				return
			}
			continue
		}
		var failed atomic.Bool
		var sent sync.WaitGroup
		for range 1 + rng.IntN(histMaxTxnRecords) {
			tp := pick(rng, histTxnTopic)
			s := &history.Send{Process: name, Txn: id, TP: tp, Value: fmt.Sprintf("%s-%d", name, seq), Offset: -1}
			seq++
			s.Invoke = w.rec.now()
			sent.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(s.Value)}, func(r *kgo.Record, err error) {
				defer sent.Done()
				s.Complete = w.rec.now()
				if err == nil {
					s.Outcome, s.Offset = history.OK, r.Offset
				} else {
					failed.Store(true)
					w.clientErr(name+" produce", err)
				}
				w.rec.add(s)
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), histDeliveryTimeout+10*time.Second)
		if err := cl.Flush(ctx); err != nil {
			failed.Store(true)
			w.clientErr(name+" flush", err)
		}
		cancel()
		sent.Wait()
		ok := w.endTxn(cl, name, id, !failed.Load() && rng.Float64() >= histAbortShare)
		if !ok {
			cl.Close()
			if cl = newClient(); cl == nil {
				return
			}
		}
	}
}

// endTxn commits or aborts transaction id and records each attempt; a
// commit whose outcome is not learned is followed by an abort, as kgo
// documents. It reports whether the client can go on.
func (w *workload) endTxn(cl *kgo.Client, name, id string, commit bool) bool {
	end := func(commit bool) error {
		op := &history.EndTxn{Process: name, Txn: id, Commit: commit, Invoke: w.rec.now()}
		try := kgo.TryAbort
		if commit {
			try = kgo.TryCommit
		} else if err := cl.AbortBufferedRecords(context.Background()); err != nil {
			w.clientErr(name+" abort buffered", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.EndTransaction(ctx, try)
		cancel()
		op.Complete = w.rec.now()
		// An error leaves the outcome unknown: even a refusal may come
		// from a retry of a request the cluster applied.
		if err == nil {
			op.Outcome = history.OK
		} else {
			w.clientErr(name+" end", err)
		}
		w.rec.add(op)
		return err
	}
	if commit {
		if end(true) == nil {
			return true
		}
	}
	return end(false) == nil
}

// member is one running consumer group member.
type member struct {
	name   string
	iso    history.Isolation
	cancel context.CancelFunc
	done   chan struct{}
}

func groupOf(iso history.Isolation) string {
	if iso == history.ReadCommitted {
		return "h-rc"
	}
	return "h-ru"
}

// addMember starts a new member of iso's group.
func (w *workload) addMember(iso history.Isolation) {
	w.mu.Lock()
	w.mu.next[iso]++
	name := fmt.Sprintf("%s-%d", groupOf(iso), w.mu.next[iso])
	w.mu.Unlock()
	m := &member{name: name, iso: iso, done: make(chan struct{})}
	level := kgo.ReadUncommitted()
	if iso == history.ReadCommitted {
		level = kgo.ReadCommitted()
	}
	tps := func(ps map[string][]int32) []history.TP {
		var out []history.TP
		for topic, parts := range ps {
			for _, p := range parts {
				out = append(out, history.TP{Topic: topic, Partition: p})
			}
		}
		return out
	}
	assign := func(added, removed []history.TP) {
		if len(added)+len(removed) > 0 {
			w.rec.add(&history.Assign{Process: name, At: w.rec.now(), Isolation: iso, Added: added, Removed: removed, From: -1})
		}
	}
	cl, err := kgo.NewClient(append(w.clientOpts(name),
		kgo.ConsumerGroup(groupOf(iso)),
		kgo.ConsumeTopics(histPlainTopic, histTxnTopic),
		kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.AutoCommitInterval(500*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
		// Polls and rebalance callbacks take turns, so the history
		// lists a member's assignment changes between its polls, in
		// the order they happened.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { assign(tps(ps), nil) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { assign(nil, tps(ps)) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { assign(nil, tps(ps)) }),
	)...)
	if err != nil {
		w.t.Errorf("%s: %v", name, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	w.mu.Lock()
	w.mu.members[name] = m
	w.mu.Unlock()
	go func() {
		defer close(m.done)
		defer cl.CloseAllowingRebalance()
		for ctx.Err() == nil {
			w.poll(ctx, cl, name, groupOf(iso), iso)
			cl.AllowRebalance()
		}
	}()
}

// poll runs one poll of cl and records it.
func (w *workload) poll(ctx context.Context, cl *kgo.Client, name, group string, iso history.Isolation) []history.Record {
	p := &history.Poll{Process: name, Group: group, Isolation: iso, Invoke: w.rec.now()}
	fs := cl.PollFetches(ctx)
	p.Complete = w.rec.now()
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.Canceled) {
			w.clientErr(name+" fetch", err)
		}
	})
	fs.EachRecord(func(r *kgo.Record) {
		p.Records = append(p.Records, history.Record{TP: history.TP{Topic: r.Topic, Partition: r.Partition}, Offset: r.Offset, Value: string(r.Value)})
	})
	if len(p.Records) == 0 {
		return nil
	}
	w.rec.add(p)
	if group != "" {
		w.mu.Lock()
		read := w.mu.groupRead[group]
		if read == nil {
			read = make(map[history.TP]int64)
			w.mu.groupRead[group] = read
		}
		for _, r := range p.Records {
			read[r.TP] = max(read[r.TP], r.Offset)
		}
		w.mu.Unlock()
	}
	return p.Records
}

// restartMember stops one member of iso's group (the oldest) and starts
// a new one, so the group rebalances and hands partitions over.
func (w *workload) restartMember(iso history.Isolation) string {
	w.mu.Lock()
	var oldest *member
	for _, m := range w.mu.members {
		if m.iso == iso && (oldest == nil || m.name < oldest.name) {
			oldest = m
		}
	}
	if oldest != nil {
		delete(w.mu.members, oldest.name)
	}
	w.mu.Unlock()
	if oldest != nil {
		oldest.cancel()
		<-oldest.done
	}
	w.addMember(iso)
	if oldest == nil {
		return ""
	}
	return oldest.name
}

// groupRead returns the highest offset iso's group read per partition.
func (w *workload) groupRead(iso history.Isolation) map[history.TP]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.mu.groupRead[groupOf(iso)])
}

// stopMembers stops every member.
func (w *workload) stopMembers() {
	w.mu.Lock()
	ms := slices.Collect(maps.Values(w.mu.members))
	w.mu.members = make(map[string]*member)
	w.mu.Unlock()
	for _, m := range ms {
		m.cancel()
	}
	for _, m := range ms {
		<-m.done
	}
}
