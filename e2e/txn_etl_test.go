package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Shape and bounds of the consume-transform-produce runs.
const (
	etlPartitions = 4
	// etlRecordsPerTxn is how many records an input transaction
	// carries and the most a worker's transaction carries, so a run
	// has many transactions for a kill to land in.
	etlRecordsPerTxn = 50
	// etlInputTxns is how many transactions fill the input; every
	// fourth is aborted: 40 committed, 2000 records.
	etlInputTxns = 53
	// etlInputAheadRecords bounds how far the input producer runs
	// ahead of the first level's commits, so input transactions are
	// open while the workers read (and the agent is killed).
	etlInputAheadRecords = 400
	// etlTxnTimeout is the transaction.timeout.ms of every producer:
	// longer than a transaction takes across an agent restart and a
	// rebalance, short enough that one the cluster must abort (its
	// client gave up on it) does not hold up the run for long: until
	// then the partitions it wrote stop at their last stable offset and
	// the group offsets it holds are unstable.
	etlTxnTimeout = 10 * time.Second
	// etlRetryBackoff and etlRequestRetries make the clients retry a
	// request for 5 s: longer than an agent restart takes.
	etlRetryBackoff   = 50 * time.Millisecond
	etlRequestRetries = 100
	// etlMaxSessions bounds how often a worker or the input producer
	// starts a new client after its last one failed.
	etlMaxSessions = 5
	// etlRunTimeout bounds a whole run, kills and rebalances included.
	etlRunTimeout = 2 * time.Minute
	// etlCheckInterval is how often a level's end is looked for in its
	// group's committed offsets when no transaction reports in: they
	// are state in another process, with nothing to wait on.
	etlCheckInterval = 200 * time.Millisecond
)

// TestTxnEtl runs franz-go's transactional consume-transform-produce
// chain (in the style of its TestTxnEtl) against the strand binary. A
// transactional producer fills the input topic, aborting every fourth
// transaction, while two levels of GroupTransactSession workers run:
// each reads its input read_committed with stable offsets, writes each
// record transformed to its output on the same partition and commits
// the input offsets in the same transaction. In each level two workers
// run throughout, one commits two transactions, aborts its third and
// leaves, and one joins halfway, so partitions move between
// transactional ids mid-run. Each level's output, read read_committed,
// must hold every record of its input exactly once, in input order per
// partition.
//
// It runs with the classic group protocol (cooperative-sticky, assigned
// by a member) and with KIP-848's (assigned by the agent), both with
// transaction.version 2 (KIP-890 part 2: kgo adds partitions with
// Produce v12 and the group with TxnOffsetCommit v5, and every EndTxn
// bumps the epoch).
func TestTxnEtl(t *testing.T) {
	for _, run := range []etlRun{
		{name: "classic", txnVersion: 2, txns: etlInputTxns},
		{name: "kip848", kip848: true, txnVersion: 2, txns: etlInputTxns},
	} {
		t.Run(run.name, func(t *testing.T) { runTxnEtl(t, run) })
	}
}

// TestTxnEtlKill is TestTxnEtl with the agent killed by SIGKILL mid-run
// and restarted on the same data dir and ports, twice per run. With
// transaction.version 2: once while a worker's transaction is open with
// its records written (the worker ends it against the restarted agent),
// once as a worker sends EndTxn (the agent may die before, while or
// after applying it, and the worker retries it). With transaction.version
// 1, where kgo sends AddPartitionsToTxn and AddOffsetsToTxn: as a
// transaction begins and as its offsets are added. Exactly once must
// hold all the same.
//
// STRAND_E2E_LONG=1 runs four times the records, kills the agent seven
// times per run at every kill point, and runs KIP-848 groups too.
func TestTxnEtlKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the strand binary")
	}
	runs := []etlRun{
		{name: "v2", txnVersion: 2, txns: etlInputTxns, kills: []killPoint{killMidTxn, killAtEndTxn}},
		{name: "v1", txnVersion: 1, txns: etlInputTxns, kills: []killPoint{killAtTxnStart, killAtOffsets}},
	}
	if os.Getenv("STRAND_E2E_LONG") != "" {
		all := []killPoint{killMidTxn, killAtEndTxn, killAtTxnStart, killAtOffsets, killAtEndTxn, killMidTxn, killAtEndTxn}
		runs = nil
		for _, kip848 := range []bool{false, true} {
			for _, tv := range []int16{2, 1} {
				name := fmt.Sprintf("v%d", tv)
				if kip848 {
					name += "-kip848"
				}
				runs = append(runs, etlRun{name: name, kip848: kip848, txnVersion: tv, txns: 4 * etlInputTxns, kills: all})
			}
		}
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) { runTxnEtl(t, run) })
	}
}

// etlRun is one configuration of the chain.
type etlRun struct {
	name string
	// kip848 runs the workers' groups on KIP-848's protocol, assigned
	// by the agent, instead of the classic one.
	kip848 bool
	// txnVersion is the agent's --transaction-version.
	txnVersion int16
	// txns is how many transactions fill the input.
	txns int
	// kills are where the agent is killed, in turn.
	kills []killPoint
}

// groupOpts are the workers' group protocol options.
func (r etlRun) groupOpts() []kgo.Opt {
	if r.kip848 {
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	}
	return nil
}

// killPoint is where in a worker's transaction the agent is killed.
type killPoint int8

const (
	// killMidTxn: after the transaction's records were acknowledged,
	// before its offsets are sent; the worker waits for the restart.
	killMidTxn killPoint = iota + 1
	// killAtTxnStart: as the transaction's first request is written,
	// AddPartitionsToTxn, or Produce under KIP-890 part 2.
	killAtTxnStart
	// killAtOffsets: as the offsets are sent, AddOffsetsToTxn, or
	// TxnOffsetCommit under KIP-890 part 2.
	killAtOffsets
	// killAtEndTxn: as EndTxn is written.
	killAtEndTxn
)

func (k killPoint) String() string {
	return [...]string{"none", "mid-transaction", "at the transaction's first request", "at the offsets' first request", "at EndTxn"}[k]
}

// at reports whether a request with this key written by a worker is the
// kill point.
func (k killPoint) at(key int16) bool {
	switch k {
	case killAtTxnStart:
		return key == 24 || key == 0
	case killAtOffsets:
		return key == 25 || key == 28
	case killAtEndTxn:
		return key == 26
	}
	return false
}

// killSwitch tells the test when a worker reaches the armed kill point.
// It is a kgo hook on every worker's client: the first request of the
// armed kind written fires it.
type killSwitch struct {
	armed atomic.Int32 // a killPoint, or 0
	// fired gets one value per firing; the test kills the agent then.
	fired chan killPoint
	// resume lets a worker stopped at killMidTxn go on.
	resume chan struct{}
}

var _ kgo.HookBrokerWrite = (*killSwitch)(nil)

func newKillSwitch() *killSwitch {
	return &killSwitch{fired: make(chan killPoint, 1), resume: make(chan struct{})}
}

func (k *killSwitch) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if p := killPoint(k.armed.Load()); err == nil && p.at(key) && k.armed.CompareAndSwap(int32(p), 0) {
		k.fired <- p
	}
}

// midTxn is called by a worker with a transaction open and its records
// acknowledged; if killMidTxn is armed it fires and waits for resume.
func (k *killSwitch) midTxn(ctx context.Context) {
	if !k.armed.CompareAndSwap(int32(killMidTxn), 0) {
		return
	}
	k.fired <- killMidTxn
	select {
	case <-k.resume:
	case <-ctx.Done():
	}
}

// etlErrors collects what the clients met.
type etlErrors struct {
	mu struct {
		sync.Mutex
		errs []string
	}
}

func (e *etlErrors) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.errs = append(e.mu.errs, fmt.Sprintf(format, args...))
}

func (e *etlErrors) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.mu.errs)
}

// etlProgress counts the records of the transactions a level's workers
// saw committed and wakes those waiting for a count.
type etlProgress struct {
	changed chan struct{} // one pending wake-up is enough
	mu      struct {
		sync.Mutex
		committed, commits, aborts, sessions int
		waiters                              []ackWaiter
	}
}

func newEtlProgress() *etlProgress {
	return &etlProgress{changed: make(chan struct{}, 1)}
}

func (p *etlProgress) ended(records int, committed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !committed {
		p.mu.aborts++
		return
	}
	p.mu.commits++
	p.mu.committed += records
	kept := p.mu.waiters[:0]
	for _, w := range p.mu.waiters {
		if p.mu.committed >= w.n {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	p.mu.waiters = kept
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// reached returns a channel closed once n records were seen committed.
func (p *etlProgress) reached(n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := make(chan struct{})
	if p.mu.committed >= n {
		close(done)
		return done
	}
	p.mu.waiters = append(p.mu.waiters, ackWaiter{n, done})
	return done
}

func (p *etlProgress) sessionStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.sessions++
}

func (p *etlProgress) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d records in %d committed transactions, %d aborted, %d sessions",
		p.mu.committed, p.mu.commits, p.mu.aborts, p.mu.sessions)
}

// etlLevel is one stage of the chain: a group of workers reading in and
// writing out, each output value the input value behind prefix.
type etlLevel struct {
	name, group, in, out, prefix string
	addr                         string
	opts                         []kgo.Opt // the group protocol's
	kill                         *killSwitch
	errs                         *etlErrors
	progress                     *etlProgress
	ctx                          context.Context
	cancel                       context.CancelFunc
	wg                           sync.WaitGroup
}

func newEtlLevel(addr string, opts []kgo.Opt, name, group, in, out, prefix string, kill *killSwitch, errs *etlErrors) *etlLevel {
	l := &etlLevel{name: name, group: group, in: in, out: out, prefix: prefix, addr: addr, opts: opts,
		kill: kill, errs: errs, progress: newEtlProgress()}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// start runs a worker with transactional id txnID once after has
// closed; txnsBeforeQuit >= 0 makes it abort its transaction after that
// many commits and leave.
func (l *etlLevel) start(txnID string, txnsBeforeQuit int, after <-chan struct{}) {
	l.wg.Go(func() {
		select {
		case <-after:
		case <-l.ctx.Done():
			return
		}
		for range etlMaxSessions {
			err := l.session(txnID, txnsBeforeQuit)
			if err == nil || l.ctx.Err() != nil {
				return
			}
			l.errs.add("%s %s: session failed: %v", l.name, txnID, err)
		}
		l.errs.add("%s %s: gave up after %d failed sessions", l.name, txnID, etlMaxSessions)
	})
}

// stop ends the workers between transactions and waits for them.
func (l *etlLevel) stop() {
	l.cancel()
	l.wg.Wait()
}

// session runs one GroupTransactSession until the level stops or the
// worker quits (nil) or the session fails.
func (l *etlLevel) session(txnID string, txnsBeforeQuit int) error {
	ctx := l.ctx
	sess, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(l.addr),
		kgo.ClientID(txnID),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(etlTxnTimeout),
		kgo.ConsumerGroup(l.group),
		kgo.ConsumeTopics(l.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(groupSession),
		kgo.HeartbeatInterval(groupHeartbeat),
		kgo.FetchMaxWait(groupFetchMaxWait),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Reconnect quickly to a restarted agent, and keep trying
		// for as long as a restart takes.
		kgo.RetryBackoffFn(func(int) time.Duration { return etlRetryBackoff }),
		kgo.RequestRetries(etlRequestRetries),
		kgo.WithHooks(l.kill),
	}, l.opts...)...)
	if err != nil {
		return err
	}
	l.progress.sessionStarted()
	defer sess.Close()
	commits := 0
	for {
		fs := sess.PollRecords(ctx, etlRecordsPerTxn)
		if ctx.Err() != nil {
			// Stopping; no transaction is open between polls.
			return nil
		}
		if fs.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		fs.EachError(func(topic string, p int32, err error) {
			l.errs.add("%s %s: fetch %s/%d: %v", l.name, txnID, topic, p, err)
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			out := &kgo.Record{Topic: l.out, Partition: r.Partition, Value: append([]byte(l.prefix), r.Value...)}
			// Not ctx: a record canceled mid-transaction fails the
			// transaction, and the level stops only between them.
			sess.Produce(context.Background(), out, func(r *kgo.Record, err error) {
				// A failed produce makes End abort; an aborted
				// transaction's records fail with ErrAborting.
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					l.errs.add("%s %s: produce %s: %v", l.name, txnID, r.Value, err)
				}
			})
		})
		commit := txnsBeforeQuit < 0 || commits < txnsBeforeQuit
		// The records of a transaction about to abort are flushed so
		// that the next level has aborted records to skip.
		if !commit || l.kill.armed.Load() == int32(killMidTxn) {
			fctx, cancel := context.WithTimeout(ctx, opTimeout)
			err := sess.Client().Flush(fctx)
			cancel()
			if err == nil && commit {
				l.kill.midTxn(ctx)
			}
		}
		endCtx, cancel := context.WithTimeout(context.Background(), opTimeout)
		committed, err := sess.End(endCtx, kgo.TransactionEndTry(commit))
		cancel()
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		l.progress.ended(n, committed)
		if !commit {
			return nil
		}
		if committed {
			commits++
		}
	}
}

// etlInput fills the input topic in transactions of etlRecordsPerTxn
// records spread over the partitions, aborting every fourth (values
// "in-a-<seq>") and committing the others ("in-c-<seq>"), each flushed
// before it ends. It keeps at most etlInputAheadRecords ahead of the
// first level's commits. After a failed transaction it starts a new
// client, which aborts the failed one if it is still open.
type etlInput struct {
	addr, topic string
	txns        int
	level1      *etlProgress
	errs        *etlErrors
	// stages holds back the transaction at each key until its channel
	// closes: the test releases the next part of the input once the
	// next kill is armed, so the workers cannot run out of work before
	// a worker reaches the kill point.
	stages map[int]<-chan struct{}

	ended atomic.Int32 // transactions ended, for progress reports
	// Written by run, read after done closes.
	committed map[string]bool // values of transactions committed
	uncertain map[string]int  // values of commits that failed: their transaction
	done      chan struct{}
}

func (in *etlInput) run(ctx context.Context) {
	defer close(in.done)
	in.committed, in.uncertain = make(map[string]bool), make(map[string]int)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	sessions := 0
	for txn := 0; txn < in.txns; txn++ {
		if release, ok := in.stages[txn]; ok {
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-in.level1.reached(len(in.committed) - etlInputAheadRecords):
		case <-ctx.Done():
			return
		}
		if cl == nil {
			if sessions++; sessions > etlMaxSessions {
				in.errs.add("input producer: gave up after %d failed clients", etlMaxSessions)
				return
			}
			var err error
			cl, err = kgo.NewClient(
				kgo.SeedBrokers(in.addr),
				kgo.TransactionalID("etl-input"),
				kgo.TransactionTimeout(etlTxnTimeout),
				kgo.DefaultProduceTopic(in.topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RetryBackoffFn(func(int) time.Duration { return etlRetryBackoff }),
				kgo.RequestRetries(etlRequestRetries),
			)
			if err != nil {
				in.errs.add("input producer: %v", err)
				return
			}
		}
		commit := txn%4 != 3
		var values []string
		var rs []*kgo.Record
		for i := range etlRecordsPerTxn {
			seq := txn*etlRecordsPerTxn + i
			v := fmt.Sprintf("in-c-%06d", seq)
			if !commit {
				v = fmt.Sprintf("in-a-%06d", seq)
			}
			values = append(values, v)
			rs = append(rs, &kgo.Record{Partition: int32(seq % etlPartitions), Value: []byte(v)})
		}
		tctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := cl.BeginTransaction()
		if err == nil {
			err = cl.ProduceSync(tctx, rs...).FirstErr()
		}
		if err == nil {
			err = cl.EndTransaction(tctx, kgo.TransactionEndTry(commit))
		}
		cancel()
		in.ended.Add(1)
		switch {
		case err == nil && commit:
			for _, v := range values {
				in.committed[v] = true
			}
		case err != nil:
			in.errs.add("input producer: transaction %d (commit %v): %v", txn, commit, err)
			if commit {
				for _, v := range values {
					in.uncertain[v] = txn
				}
			}
			cl.Close()
			cl = nil
		}
	}
}

// runTxnEtl runs the chain over an input of txns transactions, killing
// the agent at each of kills in turn.
func runTxnEtl(t *testing.T, run etlRun) {
	txns, kills := run.txns, run.kills
	a := &groupAgent{addr: freeAddr(t), httpAddr: freeAddr(t)}
	a.args = []string{"--data-dir", t.TempDir(), "--kafka-listen", a.addr, "--http-listen", a.httpAddr,
		"--transaction-version", fmt.Sprint(run.txnVersion)}
	a.proc = startProcess(t, a.httpAddr, a.args...)
	const in, mid, out = "etl-in", "etl-mid", "etl-out"
	for _, topic := range []string{in, mid, out} {
		createTopic(t, a.addr, topic, etlPartitions)
	}
	total := (txns - txns/4) * etlRecordsPerTxn

	start := time.Now()
	kill := newKillSwitch()
	errs := new(etlErrors)
	levels := []*etlLevel{
		newEtlLevel(a.addr, run.groupOpts(), "level 1", "etl-g1", in, mid, "l1:", kill, errs),
		newEtlLevel(a.addr, run.groupOpts(), "level 2", "etl-g2", mid, out, "l2:", kill, errs),
	}
	now := make(chan struct{})
	close(now)
	for i, l := range levels {
		t.Cleanup(l.stop)
		id := func(name string) string { return fmt.Sprintf("etl-l%d-%s", i+1, name) }
		l.start(id("a"), -1, now)
		l.start(id("b"), -1, now)
		l.start(id("quitter"), 2, now)
		l.start(id("joiner"), -1, l.progress.reached(total/2))
	}
	// The input comes in len(kills)+1 stages; kill i is armed halfway
	// through stage i's records, and arming it releases stage i+1.
	stageStart := func(i int) int { return i * txns / (len(kills) + 1) }
	committedBefore := func(txn int) int { return (txn - txn/4) * etlRecordsPerTxn }
	stages := make(map[int]<-chan struct{})
	releases := make([]chan struct{}, len(kills))
	for i := range kills {
		releases[i] = make(chan struct{})
		stages[stageStart(i+1)] = releases[i]
	}
	input := &etlInput{addr: a.addr, topic: in, txns: txns, level1: levels[0].progress, errs: errs,
		stages: stages, done: make(chan struct{})}
	ictx, icancel := context.WithCancel(context.Background())
	go input.run(ictx)
	t.Cleanup(func() {
		icancel()
		<-input.done
	})

	// status says where the run stands, for a failure message.
	status := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "input: %d transactions of %d ended", input.ended.Load(), txns)
		for _, l := range levels {
			fmt.Fprintf(&b, "; %s: %s", l.name, l.progress)
		}
		fmt.Fprintf(&b, "; errors: %v", errs.list())
		// Offsets too, best effort: the agent may be what is stuck.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		adm := kadm.NewClient(newClient(t, a.addr))
		for _, topic := range []string{in, mid, out} {
			hwm, err1 := adm.ListEndOffsets(ctx, topic)
			lso, err2 := adm.ListCommittedOffsets(ctx, topic)
			fmt.Fprintf(&b, "\n%s: high watermarks %v (%v), last stable offsets %v (%v)", topic, offsetsOf(hwm, topic), err1, offsetsOf(lso, topic), err2)
		}
		for _, l := range levels {
			got, err := tryCommittedOffsets(ctx, adm, l.group, l.in)
			d, derr := adm.DescribeGroups(ctx, l.group)
			var members []string
			if derr == nil {
				for _, m := range d[l.group].Members {
					members = append(members, m.ClientID)
				}
			}
			fmt.Fprintf(&b, "\n%s: committed %v (%v), state %s, members %v (%v)", l.group, got, err, d[l.group].State, members, derr)
		}
		return b.String()
	}
	deadline := time.After(etlRunTimeout)
	last := levels[len(levels)-1]
	for i, point := range kills {
		select {
		case <-last.progress.reached(committedBefore((stageStart(i) + stageStart(i+1)) / 2)):
		case <-deadline:
			t.Fatalf("kill %d: not reached after %v: %s", i+1, etlRunTimeout, status())
		}
		kill.armed.Store(int32(point))
		close(releases[i])
		select {
		case <-kill.fired:
		case <-deadline:
			t.Fatalf("kill %d: no worker %v after %v: %s", i+1, point, etlRunTimeout, status())
		}
		a.crash(t)
		t.Logf("kill %d: SIGKILL %v at %v; %s: %s", i+1, point, time.Since(start).Round(time.Millisecond), last.name, last.progress)
		if point == killMidTxn {
			kill.resume <- struct{}{}
		}
	}

	select {
	case <-input.done:
	case <-deadline:
		t.Fatalf("input producer not done after %v: %s", etlRunTimeout, status())
	}
	records := readTopic(t, a.addr, in)
	checkEtlInput(t, input, records)
	for _, l := range levels {
		waitConsumed(t, a.addr, l, records, deadline, status)
		l.stop()
		t.Logf("%s done at %v: %s", l.name, time.Since(start).Round(time.Millisecond), l.progress)
		output := readTopic(t, a.addr, l.out)
		checkExactlyOnce(t, l, records, output)
		records = output
	}
	for _, e := range errs.list() {
		// With the agent killed, requests in flight fail and clients
		// may have to start over: worth a look, but the exactly-once
		// checks are the verdict.
		if len(kills) > 0 {
			t.Logf("client error: %s", e)
		} else {
			t.Errorf("client error: %s", e)
		}
	}
}

// offsetsOf is the offset of each partition of topic in lo.
func offsetsOf(lo kadm.ListedOffsets, topic string) map[int32]int64 {
	out := make(map[int32]int64)
	for p, o := range lo[topic] {
		out[p] = o.Offset
	}
	return out
}

// etlRecord is a data record of a partition.
type etlRecord struct {
	offset int64
	value  string
}

// readTopic reads every partition of topic to its end read_committed
// and returns the data records in offset order. It reads them
// read_uncommitted too, to check that every offset below the high
// watermark is a record or a marker.
func readTopic(t *testing.T, addr, topic string) map[int32][]etlRecord {
	t.Helper()
	ends := endOffsets(t, addr, topic)
	committed, _ := readToEnd(t, addr, topic, ends, kgo.ReadCommitted())
	all, offsets := readToEnd(t, addr, topic, ends, kgo.ReadUncommitted())
	var nCommitted, nAll, markers int64
	for p, end := range ends {
		if offsets[p] != end {
			t.Errorf("%s/%d: read_uncommitted returned %d offsets (records and markers), high watermark %d", topic, p, offsets[p], end)
		}
		nCommitted += int64(len(committed[p]))
		nAll += int64(len(all[p]))
		markers += offsets[p] - int64(len(all[p]))
	}
	t.Logf("%s: %d records read_committed, %d read_uncommitted (%d aborted), %d markers",
		topic, nCommitted, nAll, nAll-nCommitted, markers)
	return committed
}

// readToEnd reads every partition of topic from offset 0 until it has
// returned the offset before the partition's end in ends. It keeps
// control records, so that the last offset, a marker once every
// transaction ended, is returned; under read_committed an aborted
// transaction's records are skipped but the marker that aborted them is
// not. It returns the data records and, per partition, how many offsets
// (records and markers) were returned.
func readToEnd(t *testing.T, addr, topic string, ends map[int32]int64, isolation kgo.IsolationLevel) (map[int32][]etlRecord, map[int32]int64) {
	t.Helper()
	starts := make(map[int32]kgo.Offset)
	for p, end := range ends {
		if end > 0 {
			starts[p] = kgo.NewOffset().At(0)
		}
	}
	out := make(map[int32][]etlRecord)
	seen := make(map[int32]int64)
	if len(starts) == 0 {
		return out, seen
	}
	cl := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchIsolationLevel(isolation),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	next := make(map[int32]int64)
	left := len(starts)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s to %v: at %v after %v", topic, ends, next, opTimeout)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next[r.Partition] {
				t.Errorf("%s/%d: offset %d returned after %d", topic, r.Partition, r.Offset, next[r.Partition]-1)
			}
			if r.Offset >= ends[r.Partition] {
				return // the marker of a transaction ended since
			}
			seen[r.Partition]++
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], etlRecord{r.Offset, string(r.Value)})
			}
			next[r.Partition] = r.Offset + 1
			if r.Offset == ends[r.Partition]-1 {
				left--
			}
		})
	}
	return out, seen
}

// checkEtlInput checks the input topic read read_committed against what
// the input producer knows: every committed transaction's records once,
// in production order per partition, no aborted transaction's, and from
// a commit that failed all or nothing.
func checkEtlInput(t *testing.T, input *etlInput, records map[int32][]etlRecord) {
	t.Helper()
	isUncertain := func(v string) bool {
		_, ok := input.uncertain[v]
		return ok
	}
	seen := make(map[string]int)
	for p, rs := range records {
		for i, r := range rs {
			seen[r.value]++
			switch {
			case strings.HasPrefix(r.value, "in-a-"):
				t.Errorf("input %d/%d: %s of an aborted transaction read read_committed", p, r.offset, r.value)
			case !input.committed[r.value] && !isUncertain(r.value):
				t.Errorf("input %d/%d: %s was never produced in a commit", p, r.offset, r.value)
			}
			if i > 0 && r.value[len("in-c-"):] <= rs[i-1].value[len("in-c-"):] {
				t.Errorf("input %d/%d: %s after %s", p, r.offset, r.value, rs[i-1].value)
			}
		}
	}
	var missing []string
	for v := range input.committed {
		if seen[v] == 0 {
			missing = append(missing, v)
		}
	}
	for v, n := range seen {
		if n > 1 {
			t.Errorf("input: %s read %d times", v, n)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("input: %d committed records missing read_committed: %v", len(missing), head(missing, 20))
	}
	// A transaction whose commit failed for the producer is visible
	// whole or not at all.
	read := make(map[int]int)
	for v, txn := range input.uncertain {
		if seen[v] > 0 {
			read[txn]++
		}
	}
	for txn, n := range read {
		if n != etlRecordsPerTxn {
			t.Errorf("input: %d of the %d records of transaction %d (its commit failed for the producer) read read_committed", n, etlRecordsPerTxn, txn)
		}
	}
}

// waitConsumed waits until the level's group has committed, on every
// partition of its input, the offset after the last record of input.
func waitConsumed(t *testing.T, addr string, l *etlLevel, input map[int32][]etlRecord, deadline <-chan time.Time, status func() string) {
	t.Helper()
	want := make(map[int32]int64)
	for p, rs := range input {
		if len(rs) > 0 {
			want[p] = rs[len(rs)-1].offset + 1
		}
	}
	adm := kadm.NewClient(newClient(t, addr))
	tick := time.NewTicker(etlCheckInterval)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		got, err := tryCommittedOffsets(ctx, adm, l.group, l.in)
		cancel()
		done := err == nil
		for p, o := range want {
			done = done && got[p] >= o
		}
		if done {
			return
		}
		select {
		case <-l.progress.changed:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: group %s committed %v (err %v), want %v after %v: %s", l.name, l.group, got, err, want, etlRunTimeout, status())
		}
	}
}

// checkExactlyOnce checks that the level's output holds each input
// record transformed exactly once, on the input's partition and in its
// order.
func checkExactlyOnce(t *testing.T, l *etlLevel, input, output map[int32][]etlRecord) {
	t.Helper()
	type at struct {
		partition int32
		offset    int64
	}
	where := make(map[string]at)
	for p, rs := range input {
		for _, r := range rs {
			where[r.value] = at{p, r.offset}
		}
	}
	copies := make(map[string]int)
	for p, rs := range output {
		lastOffset := int64(-1)
		for _, r := range rs {
			orig, ok := strings.CutPrefix(r.value, l.prefix)
			in, known := where[orig]
			if !ok || !known {
				t.Errorf("%s: %s/%d: %q is no transformed record of %s", l.name, l.out, r.offset, r.value, l.in)
				continue
			}
			copies[orig]++
			if in.partition != p {
				t.Errorf("%s: %s/%d: %q from %s partition %d", l.name, l.out, r.offset, r.value, l.in, in.partition)
			}
			if in.offset <= lastOffset {
				t.Errorf("%s: %s/%d: %q (input offset %d) after the record of input offset %d", l.name, l.out, r.offset, r.value, in.offset, lastOffset)
			}
			lastOffset = in.offset
		}
	}
	var lost, dups []string
	for v := range where {
		switch n := copies[v]; {
		case n == 0:
			lost = append(lost, v)
		case n > 1:
			dups = append(dups, fmt.Sprintf("%s x%d", v, n))
		}
	}
	slices.Sort(lost)
	slices.Sort(dups)
	if len(lost) > 0 || len(dups) > 0 {
		t.Errorf("%s: %s read_committed: %d of %d records of %s lost %v, %d duplicated %v",
			l.name, l.out, len(lost), len(where), l.in, head(lost, 20), len(dups), head(dups, 20))
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}
