package replica

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

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
func TestReplicasConverge(t *testing.T) {
	const (
		replicas     = 3
		workers      = 4 // goroutines per replica
		opsPerWorker = 100
		topics       = 4
		partitions   = 16
	)
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %[1]d)", seed)
	log := newFaultLog()
	var faultMu sync.Mutex
	faultRng := rand.New(rand.NewPCG(seed, 0))
	var faultsOn atomic.Bool
	faultsOn.Store(true)
	log.inject = func() (fail, lose bool) {
		if !faultsOn.Load() {
			return false, false
		}
		// Rare enough that five failures in a row (an ambiguous
		// proposal, which the checks below cannot account for) do not
		// happen.
		faultMu.Lock()
		defer faultMu.Unlock()
		n := faultRng.IntN(100)
		return n < 3, n >= 95
	}
	rs := make([]*Replica, replicas)
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
	var wg sync.WaitGroup
	errs := make(chan error, replicas*workers)
	for ri, r := range rs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(ri*workers+w)))
				if err := runWorker(t, r, rng, fmt.Sprintf("own-%d-%d", ri, w), shared, opsPerWorker, &mu, &acked); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	faultsOn.Store(false)
	// A proposal returns once its first copy applied, while the appender
	// may still be retrying; appenders are serial, so one more proposal
	// each means no copy is still on its way.
	for i, r := range rs {
		mustOK(t, r, meta.CreateTopic{Name: fmt.Sprintf("marker-%d", i), Partitions: 1})
	}
	for _, r := range rs {
		mustSync(t, r)
	}
	want := mustDigest(t, rs[0])
	if es := rawEntries(t, log); len(es) > 0 {
		t.Logf("%d log entries", len(es))
	}
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
	if _, got := memoryReplay(t, rawEntries(t, log)); got != want {
		t.Fatalf("the log applied to a meta.MemStore: digest %x, Pebble %x", got, want)
	}
}

// runWorker proposes a random mix of commands on r and checks each result.
func runWorker(t *testing.T, r *Replica, rng *rand.Rand, prefix string, shared []partRef, ops int, mu *sync.Mutex, acked *[]ackedBatch) error {
	ctx := testCtx(t)
	var own []string // topics this worker created and has not deleted
	for i := range ops {
		switch k := rng.IntN(10); {
		case k < 6: // commit to several shared partitions
			parts := make([]partRef, 1+rng.IntN(8))
			for j := range parts {
				parts[j] = shared[rng.IntN(len(shared))]
			}
			co := commitTo(int32(1+rng.IntN(20)), parts...)
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
