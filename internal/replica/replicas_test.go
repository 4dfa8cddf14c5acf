package replica

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: random)")

// ackedBatch is a CommitBatch a proposer saw succeed.
type ackedBatch struct {
	part    partRef
	base    int64
	records int32
	object  string
}

// TestReplicasConverge: replicas proposing concurrently into one log that
// fails some appends and loses some replies end with identical state,
// every acknowledged offset range is in that state exactly once, and a
// copy built later from the log alone agrees.
//
// The run is a simulation under testing/synctest: a scheduler (schedule)
// decides, from the seed, which worker proposes next, which append lands
// next and which appends fail or lose their reply, at points where every
// goroutine is blocked, and the bubble's clock makes entry stamps and
// retry backoffs the same every time. So the printed seed replays the
// run: the same log, entry for entry (TestReplicasConvergeReplays).
func TestReplicasConverge(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %[1]d)", seed)
	synctest.Test(t, func(t *testing.T) {
		res := converge(t, seed, convergeSize{replicas: 3, workers: 4, ops: 100})
		t.Logf("%d log entries, trace %x, digest %x", res.entries, res.trace, res.digest)
	})
}

// TestReplicasConvergeReplays runs one seed twice: the log and the state
// must be the same.
func TestReplicasConvergeReplays(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	var runs [2]convergeResult
	for i := range runs {
		synctest.Test(t, func(t *testing.T) {
			runs[i] = converge(t, seed, convergeSize{replicas: 2, workers: 3, ops: 30})
		})
	}
	if runs[0] != runs[1] {
		t.Fatalf("seed %d: two runs differ: %+v, then %+v", seed, runs[0], runs[1])
	}
}

type convergeSize struct {
	replicas int
	workers  int // per replica
	ops      int // per worker
}

// convergeResult identifies a run: its log, entry for entry, and the
// state it leads to.
type convergeResult struct {
	entries int
	trace   [32]byte // SHA-256 over the entries in log order
	digest  [32]byte
}

// converge runs the simulation; t is a synctest bubble's.
func converge(t *testing.T, seed uint64, size convergeSize) convergeResult {
	const (
		topics     = 4
		partitions = 16
	)
	log := newSchedLog()
	rs := make([]*Replica, size.replicas)
	for i := range rs {
		rs[i] = openReplica(t, log, "", fmt.Sprintf("agent-%d", i))
	}
	var shared []partRef
	for i := range topics {
		id := mustOK(t, rs[0], meta.CreateTopic{Name: fmt.Sprintf("shared-%d", i), Partitions: partitions}).TopicID
		for p := range int32(partitions) {
			shared = append(shared, partRef{id, p})
		}
	}
	for _, r := range rs {
		mustSync(t, r)
	}

	var mu sync.Mutex
	var acked []ackedBatch
	turns := newTurnstile()
	errs := make(chan error, size.replicas*size.workers)
	var wg sync.WaitGroup
	for ri, r := range rs {
		for w := range size.workers {
			id := ri*size.workers + w
			turns.join()
			wg.Go(func() {
				defer turns.leave()
				rng := rand.New(rand.NewPCG(seed, uint64(id)))
				if err := runWorker(t, r, rng, fmt.Sprintf("own-%d-%d", ri, w), shared, size.ops, func() { turns.wait(id) }, &mu, &acked); err != nil {
					errs <- err
				}
			})
		}
	}
	log.gate()
	log.schedule(t, rand.New(rand.NewPCG(seed, math.MaxUint64)), turns)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every copy of every entry has landed (schedule drains the retries);
	// from here appends go straight through.
	log.open()
	for i, r := range rs {
		mustOK(t, r, meta.CreateTopic{Name: fmt.Sprintf("marker-%d", i), Partitions: 1})
	}
	for _, r := range rs {
		mustSync(t, r)
	}
	want := mustDigest(t, rs[0])
	for i, r := range rs[1:] {
		if got := mustDigest(t, r); got != want {
			t.Fatalf("replica %d digest %x, replica 0 %x", i+1, got, want)
		}
	}
	checkAcked(t, rs[0], shared, acked)

	// A copy opened now plays the whole log, in batches of one entry and
	// of the default size, and must agree.
	for _, batch := range []int{1, 0} {
		late := openReplica(t, log, "", fmt.Sprintf("late-%d", batch), func(c *Config) { c.applyBatchEntries = batch })
		if got := mustDigest(t, late); got != want {
			t.Fatalf("late replica (batch %d) at %d: digest %x, want %x at %d", batch, late.NextToApply(), got, want, rs[0].NextToApply())
		}
	}
	// And so does the state machine's reference store: Pebble behind
	// the adapters holds what meta.MemStore does.
	es := rawEntries(t, log)
	if _, got := memoryReplay(t, es); got != want {
		t.Fatalf("the log applied to a meta.MemStore: digest %x, Pebble %x", got, want)
	}
	h := sha256.New()
	for _, e := range es {
		h.Write(binary.AppendUvarint(nil, uint64(len(e.Data))))
		h.Write(e.Data)
	}
	res := convergeResult{entries: len(es), digest: want}
	h.Sum(res.trace[:0])
	return res
}

// schedLog is a memory log whose appends, between gate and open, wait
// at a gate for schedule, which decides their order and their faults.
type schedLog struct {
	sharedlog.Log

	mu struct {
		sync.Mutex
		gated   bool
		waiting []*gatedAppend
		// arrived is closed and replaced when an append reaches the
		// gate.
		arrived chan struct{}
	}
}

type gatedAppend struct {
	entry  []byte
	result chan gatedResult
}

type gatedResult struct {
	pos sharedlog.Pos
	err error
}

func newSchedLog() *schedLog {
	l := &schedLog{Log: memlog.New()}
	l.mu.arrived = make(chan struct{})
	return l
}

func (l *schedLog) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	l.mu.Lock()
	if !l.mu.gated {
		l.mu.Unlock()
		return l.Log.Append(ctx, entry)
	}
	a := &gatedAppend{entry: bytes.Clone(entry), result: make(chan gatedResult, 1)}
	l.mu.waiting = append(l.mu.waiting, a)
	close(l.mu.arrived)
	l.mu.arrived = make(chan struct{})
	l.mu.Unlock()
	// No timeout can end the wait: the bubble's clock stands still while
	// an append waits at the gate.
	r := <-a.result
	return r.pos, r.err
}

func (l *schedLog) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	return l.Log.(sharedlog.TailWaiter).WaitTail(ctx, after)
}

// gate makes appends wait for schedule.
func (l *schedLog) gate() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.gated = true
}

// open lets appends through without the scheduler.
func (l *schedLog) open() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.gated = false
}

// waiting returns the appends at the gate in a fixed order (their bytes
// name their writer, so no two compare equal), and the channel that
// reports the next arrival.
func (l *schedLog) waiting() ([]*gatedAppend, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ws := slices.Clone(l.mu.waiting)
	slices.SortFunc(ws, func(a, b *gatedAppend) int { return bytes.Compare(a.entry, b.entry) })
	return ws, l.mu.arrived
}

func (l *schedLog) remove(a *gatedAppend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.waiting = slices.DeleteFunc(l.mu.waiting, func(w *gatedAppend) bool { return w == a })
}

// schedule runs the simulation until every worker is done and every
// append has landed. At each step, with the bubble quiet, it lets one
// waiting worker propose or one waiting append through, chosen by rng;
// an append fails (not written) or loses its reply (written, then an
// error) as rng says, though never so often that its proposal turns
// ambiguous. When nothing waits, it blocks until an append retried after
// its backoff arrives; the bubble's clock moves to it.
func (l *schedLog) schedule(t *testing.T, rng *rand.Rand, turns *turnstile) {
	// tries counts the sends of an entry that has not landed yet; an
	// entry that failed or lost its reply is sent again, identically.
	tries := map[string]int{}
	var sent, failed, lost int
	for {
		synctest.Wait()
		ready := turns.ready()
		appends, arrived := l.waiting()
		if len(ready)+len(appends) == 0 {
			if turns.done() && len(tries) == 0 {
				t.Logf("%d appends: %d failed, %d lost their reply", sent, failed, lost)
				return
			}
			<-arrived
			continue
		}
		if i := rng.IntN(len(ready) + len(appends)); i < len(ready) {
			turns.grant(ready[i])
			continue
		} else {
			a := appends[i-len(ready)]
			l.remove(a)
			key := string(a.entry)
			tries[key]++
			n := rng.IntN(100)
			fail, lose := n < 3, n >= 95
			if tries[key] == maxAppendAttempts {
				fail, lose = false, false // or the proposal is ambiguous
			}
			sent++
			if fail {
				failed++
			} else if lose {
				lost++
			}
			var r gatedResult
			if fail {
				r.err = errInjected
			} else {
				r.pos, r.err = l.Log.Append(t.Context(), a.entry)
				if r.err != nil {
					t.Fatalf("memory log append: %v", r.err)
				}
				delete(tries, key)
				if lose {
					tries[key] = 0 // sent again until the reply arrives
					r = gatedResult{err: fmt.Errorf("reply lost: %w", errInjected)}
				}
			}
			// Let the replicas apply what landed, and the proposers it
			// answered queue their next commands, before the appender
			// hears back and cuts its next entry.
			synctest.Wait()
			a.result <- r
		}
	}
}

// turnstile holds each worker before each proposal until schedule lets
// it through, so proposals reach their replica's queue in an order the
// seed decides.
type turnstile struct {
	mu      sync.Mutex
	active  int
	waiting map[int]chan struct{}
}

func newTurnstile() *turnstile { return &turnstile{waiting: map[int]chan struct{}{}} }

func (ts *turnstile) join() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.active++
}

func (ts *turnstile) leave() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.active--
}

// wait blocks worker id until its turn.
func (ts *turnstile) wait(id int) {
	ch := make(chan struct{})
	ts.mu.Lock()
	ts.waiting[id] = ch
	ts.mu.Unlock()
	<-ch
}

// ready returns the waiting workers, ascending.
func (ts *turnstile) ready() []int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Sorted(maps.Keys(ts.waiting))
}

func (ts *turnstile) grant(id int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	close(ts.waiting[id])
	delete(ts.waiting, id)
}

func (ts *turnstile) done() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.active == 0
}

// runWorker proposes a random mix of commands on r and checks each
// result. It calls turn before each proposal.
func runWorker(t *testing.T, r *Replica, rng *rand.Rand, prefix string, shared []partRef, ops int, turn func(), mu *sync.Mutex, acked *[]ackedBatch) error {
	ctx := testCtx(t)
	var own []string // topics this worker created and has not deleted
	for i := range ops {
		turn()
		switch k := rng.IntN(10); {
		case k < 6: // commit to several shared partitions
			parts := make([]partRef, 1+rng.IntN(8))
			for j := range parts {
				parts[j] = shared[rng.IntN(len(shared))]
			}
			co := commitTo(int32(1+rng.IntN(20)), parts...)
			// Named by the worker, not a counter the workers share: the
			// keys are in the log, which a replay must reproduce.
			co.ObjectKey = fmt.Sprintf("%s-obj-%d", prefix, i)
			res, err := r.Propose(ctx, co)
			if err != nil {
				return err
			}
			if res.Code != 0 || len(res.Batches) != len(parts) {
				return fmt.Errorf("commit: %v, %d batches", res.Err(), len(res.Batches))
			}
			mu.Lock()
			for j, br := range res.Batches {
				if br.Code != 0 {
					mu.Unlock()
					return fmt.Errorf("commit batch %d: code %d", j, br.Code)
				}
				*acked = append(*acked, ackedBatch{parts[j], br.BaseOffset, co.Batches[j].Records, co.ObjectKey})
			}
			mu.Unlock()
		case k < 7:
			name := fmt.Sprintf("%s-%d", prefix, i)
			res, err := r.Propose(ctx, meta.CreateTopic{Name: name, Partitions: int32(1 + rng.IntN(4))})
			if err != nil || res.Code != 0 {
				return fmt.Errorf("create %s: %v, %v", name, err, res.Err())
			}
			own = append(own, name)
		case k < 8 && len(own) > 0:
			name := own[rng.IntN(len(own))]
			res, err := r.Propose(ctx, meta.AlterConfigs{Name: name, Set: map[string]string{"k": fmt.Sprint(i)}, Incremental: true})
			if err != nil || res.Code != 0 {
				return fmt.Errorf("alter %s: %v, %v", name, err, res.Err())
			}
		case k < 9 && len(own) > 0:
			j := rng.IntN(len(own))
			res, err := r.Propose(ctx, meta.DeleteTopic{Name: own[j]})
			if err != nil || res.Code != 0 {
				return fmt.Errorf("delete %s: %v, %v", own[j], err, res.Err())
			}
			own = slices.Delete(own, j, j+1)
		default:
			// Another worker's topic may vanish meanwhile: any of these
			// codes is a fine answer, so only check the call works.
			res, err := r.ProposeBatch(ctx, []meta.Command{
				meta.CreatePartitions{Name: fmt.Sprintf("%s-%d", prefix, rng.IntN(i+1)), NewTotal: 8},
				meta.AlterConfigs{Name: "shared-0", Set: map[string]string{"touched": prefix}, Incremental: true},
			})
			if err != nil || len(res) != 2 || res[1].Code != 0 {
				return fmt.Errorf("batch: %v, %v", err, res)
			}
		}
	}
	return nil
}

// checkAcked compares the acknowledged commits with r's index: each shared
// partition's index must be exactly the acked ranges, dense from 0.
func checkAcked(t *testing.T, r *Replica, shared []partRef, acked []ackedBatch) {
	t.Helper()
	byPart := make(map[partRef][]ackedBatch)
	for _, a := range acked {
		byPart[a.part] = append(byPart[a.part], a)
	}
	v := viewOf(t, r)
	for _, p := range shared {
		as := byPart[p]
		slices.SortFunc(as, func(x, y ackedBatch) int { return int(x.base - y.base) })
		var next int64
		for _, a := range as {
			if a.base != next {
				t.Fatalf("%v: acked range at %d, want %d (overlap or gap)", p, a.base, next)
			}
			next += int64(a.records)
		}
		st, _, err := v.Partition(p.id, p.partition)
		if err != nil || st.NextOffset != next {
			t.Fatalf("%v: next offset %d, acked up to %d (%v)", p, st.NextOffset, next, err)
		}
		it, err := v.Seek(p.id, p.partition, 0)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for ; it.Next(); i++ {
			e := it.Entry()
			if i >= len(as) || e.BaseOffset != as[i].base || e.Records != as[i].records || e.ObjectKey != as[i].object {
				t.Fatalf("%v: index entry %d %+v does not match acked", p, i, e)
			}
		}
		it.Close()
		if it.Err() != nil || i != len(as) {
			t.Fatalf("%v: %d index entries, %d acked (%v)", p, i, len(as), it.Err())
		}
	}
}

// TestSyncLinearizable: once a proposal returns on one replica, Sync on
// another sees it, even where the second one polls the log and its poll
// interval is far away.
func TestSyncLinearizable(t *testing.T) {
	for _, mode := range []string{"tail waiter", "polling"} {
		t.Run(mode, func(t *testing.T) {
			var log sharedlog.Log = memlog.New()
			if mode == "polling" {
				log = pollingLog{log}
			}
			slow := func(c *Config) { c.PollInterval = testTimeout * 10 }
			a := openReplica(t, log, "", "a", slow)
			b := openReplica(t, log, "", "b", slow)
			id := mustOK(t, a, meta.CreateTopic{Name: "t", Partitions: 1}).TopicID
			for range 50 {
				res := mustOK(t, a, commitTo(3, partRef{id, 0}))
				mustSync(t, b)
				if st := partitionState(t, b, id, 0); st.NextOffset < res.Batches[0].BaseOffset+3 {
					t.Fatalf("b sees next offset %d after a committed at %d", st.NextOffset, res.Batches[0].BaseOffset)
				}
			}
		})
	}
}
