package compact_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// The kill -9 loop: a parent produces acknowledged batches into a file
// log and store, then starts a child that compacts them and kills it
// (SIGKILL) at a random moment, or, every third round, right after an
// upload whose swap it never proposes. After every kill the parent
// checks that each partition reads exactly what was acknowledged, and
// that the index is consistent; at the end the reconciler and janitor
// collect every object the children left behind.

const (
	crashDirEnv   = "COMPACT_CRASH_DIR"
	crashStallEnv = "COMPACT_CRASH_STALL" // stall at this swap (1-based), 0: never
	crashRounds   = 6
	crashParts    = 3
)

// aheadClock is the wall clock moved forward by offset.
type aheadClock struct{ offset atomic.Int64 }

func (c *aheadClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

func (c *aheadClock) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(d, f) }

// openCrash opens the log, the store and writer's copy under dir; close
// closes the log and the copy (one process at a time holds the log).
func openCrash(t *testing.T, dir, writer string, clk clock.Clock) (store *fileobj.Store, r *replica.Replica, close func()) {
	t.Helper()
	log, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	store, err = fileobj.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	r, err = replica.Open(testCtx(t), replica.Config{Dir: filepath.Join(dir, "meta-"+writer), Log: log, WriterID: writer, Clock: clk, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	close = func() {
		if !closed {
			closed = true
			r.Close()
			log.Close()
		}
	}
	t.Cleanup(close)
	return store, r, close
}

// stallSwaps proposes through r until the stall-th SwapIndex, which it
// reports and never proposes: the process dies between its upload and
// its swap.
type stallSwaps struct {
	*replica.Replica
	stall, n int
}

func (s *stallSwaps) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	if sw, ok := c.(meta.SwapIndex); ok {
		s.n++
		if s.n == s.stall {
			fmt.Printf("uploaded %s\n", sw.Objects[0].Key) // os.Stdout is unbuffered
			select {}
		}
	}
	res, err := s.Replica.Propose(ctx, c)
	if err == nil && res.Code == 0 {
		fmt.Println("swapped")
	}
	return res, err
}

// TestCompactCrashChild is the process TestKillCompactorLoop kills: it
// compacts every level-0 entry it finds, two entries per object, pass
// after pass.
func TestCompactCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only runs as a child of TestKillCompactorLoop")
	}
	stall, _ := strconv.Atoi(os.Getenv(crashStallEnv))
	store, r, _ := openCrash(t, dir, "child", nil)
	c, err := compact.New(compact.Config{Store: store, Meta: &stallSwaps{Replica: r, stall: stall},
		AgentID: "child-" + strconv.FormatUint(r.Incarnation(), 10), TargetBytes: 600,
		MinAge: time.Nanosecond, MaxLag: time.Nanosecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	for {
		if _, err := c.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKillCompactorLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills child processes")
	}
	dir := t.TempDir()
	clk := new(aheadClock)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	seed := rng.Uint64()
	t.Logf("seed %d", seed)
	rng = rand.New(rand.NewPCG(seed, 13))

	store, r, closeParent := openCrash(t, dir, "parent", clk)
	ctx := testCtx(t)
	if _, err := r.Propose(ctx, meta.FinalizeFeatures{Bootstrap: true,
		Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4}}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Propose(ctx, meta.CreateTopic{Name: "t", Partitions: crashParts})
	if err != nil || res.Code != 0 {
		t.Fatalf("CreateTopic: %v, %v", res.Err(), err)
	}
	id := res.TopicID

	// want is what a read of each partition returns: every acknowledged
	// batch once, in order.
	want := make([][]byte, crashParts)
	var orphans []string
	swaps := 0
	for round := range crashRounds {
		p, err := produce.New(produce.Config{Store: store, Replica: r, AgentID: "parent-" + strconv.FormatUint(r.Incarnation(), 10), Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			var bs []produce.Batch
			for part := range int32(crashParts) {
				b, err := produce.BatchFrom(id, part, batchtest.Build(t, batchtest.Options{
					Records: 1 + rng.IntN(3), ValueBytes: 40, Seed: uint64(round*1000 + i*10 + int(part))}))
				if err != nil {
					t.Fatal(err)
				}
				bs = append(bs, b)
			}
			if res, err := p.Produce(ctx, bs); err != nil || res[0].Code != 0 {
				t.Fatalf("produce: %v, %+v", err, res)
			}
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for part := range int32(crashParts) {
			want[part] = readCrash(t, store, r, id, part)
		}
		closeParent()

		stall := 0
		if round%3 == 2 {
			stall = 1 + rng.IntN(3)
		}
		k, n := runChild(t, dir, stall, time.Duration(rng.IntN(80))*time.Millisecond)
		if k != "" {
			orphans = append(orphans, k)
		}
		swaps += n

		store, r, closeParent = openCrash(t, dir, "parent", clk)
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for part := range int32(crashParts) {
			if got := readCrash(t, store, r, id, part); string(got) != string(want[part]) {
				t.Fatalf("round %d: partition %d reads %d bytes, want the %d acknowledged", round, part, len(got), len(want[part]))
			}
		}
		checkIndex(t, r, id)
	}
	if len(orphans) == 0 || swaps == 0 {
		t.Fatalf("%d swaps, %d stalls between an upload and its swap: the loop tested nothing", swaps, len(orphans))
	}
	t.Logf("%d swaps seen before the kills, %d stalled uploads", swaps, len(orphans))

	// Time passes: the log clock goes past the grace period and the key
	// buckets; the janitor and the reconciler collect everything the
	// index no longer points into.
	janitor, err := gc.New(gc.Config{Store: store, Meta: r, Grace: time.Second, Logger: quiet(), MaxBuckets: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := janitor.Step(ctx); err != nil { // sets the grace
		t.Fatal(err)
	}
	clk.offset.Store(int64(3 * time.Minute))
	if _, err := r.Propose(ctx, meta.AlterConfigs{Name: "tick"}); err != nil {
		t.Fatal(err)
	}
	var orphansDeleted int
	for range 10 {
		st, err := janitor.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		orphansDeleted += st.Orphans
	}
	if orphansDeleted < len(orphans) {
		t.Fatalf("the reconciler deleted %d orphans, the children left at least %d", orphansDeleted, len(orphans))
	}
	// Every object left is one the index points into.
	infos, err := store.List(ctx, "data/")
	if err != nil {
		t.Fatal(err)
	}
	v := r.View()
	defer v.Close()
	for _, o := range infos {
		if n, err := v.ObjectRefs(o.Key); err != nil || n == 0 {
			t.Errorf("object %s is left in the store with %d index entries (%v)", o.Key, n, err)
		}
	}
	for part := range int32(crashParts) {
		if got := readCrash(t, store, r, id, part); string(got) != string(want[part]) {
			t.Fatalf("after collection: partition %d reads %d bytes, want %d", part, len(got), len(want[part]))
		}
	}
}

// runChild starts a compacting child and kills it: once it reports a
// stalled upload (returned), or after wait from its start.
func runChild(t *testing.T, dir string, stall int, wait time.Duration) (orphan string, swaps int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCompactCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashStallEnv+"="+strconv.Itoa(stall))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	var seen []string
	var killAt <-chan time.Time
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break read
			}
			seen = append(seen, line)
			switch k, stalled := strings.CutPrefix(line, "uploaded "); {
			case line == "swapped":
				swaps++
			case stalled:
				orphan = k
				break read
			case line == "started" && stall == 0:
				killAt = time.After(wait)
			}
		case <-killAt:
			break read
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if stall > 0 && orphan == "" {
		t.Fatalf("the child never stalled at swap %d; it said:\n%s", stall, strings.Join(seen, "\n"))
	}
	return orphan, swaps
}

// readCrash reads a whole partition from its log start, cold.
func readCrash(t *testing.T, store *fileobj.Store, r *replica.Replica, id meta.TopicID, part int32) []byte {
	t.Helper()
	v := r.View()
	defer v.Close()
	st, _, err := v.Partition(id, part)
	if err != nil {
		t.Fatal(err)
	}
	rd := fetch.NewReader(store, nil)
	var out []byte
	for off := st.LogStartOffset; ; {
		res, err := rd.Read(testCtx(t), v, id, part, off, 1<<30)
		if err != nil || res.Err != 0 {
			t.Fatalf("read partition %d at %d: %v, %d", part, off, err, res.Err)
		}
		if len(res.Records) == 0 {
			return out
		}
		out = append(out, res.Records...)
		off = nextOffset(t, res.Records)
	}
}

// checkIndex checks the topic's index: each partition's entries tile
// the offsets from its log start to its high watermark, and every object
// the index points into counts exactly its entries.
func checkIndex(t *testing.T, r *replica.Replica, id meta.TopicID) {
	t.Helper()
	v := r.View()
	defer v.Close()
	refs := map[string]int64{}
	for part := range int32(crashParts) {
		st, _, err := v.Partition(id, part)
		if err != nil {
			t.Fatal(err)
		}
		it, err := v.Seek(id, part, 0)
		if err != nil {
			t.Fatal(err)
		}
		next := st.LogStartOffset
		first := true
		for it.Next() {
			e := it.Entry()
			if (first && e.BaseOffset > next) || (!first && e.BaseOffset != next) {
				t.Fatalf("partition %d: entry at %d, want %d", part, e.BaseOffset, next)
			}
			first = false
			next = e.BaseOffset + int64(e.Records)
			refs[e.ObjectKey]++
		}
		it.Close()
		if next != st.HighWatermark() {
			t.Fatalf("partition %d: entries end at %d, high watermark %d", part, next, st.HighWatermark())
		}
	}
	for k, n := range refs {
		if got, err := v.ObjectRefs(k); err != nil || got != n {
			t.Fatalf("object %s: %d references counted, %d entries (%v)", k, got, n, err)
		}
	}
}
