package gc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// aheadClock is the wall clock plus an offset the test moves forward:
// timers run in real time, and the log clock (entry stamps) jumps.
type aheadClock struct{ offset atomic.Int64 }

func (c *aheadClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

func (c *aheadClock) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(d, f) }

// randAgent is one agent of the randomized test: a copy on the shared
// log, a produce pipeline, a fetch reader without a cache (so reads
// reach the store) and a collector.
type randAgent struct {
	id        int32
	inc       int
	replica   *replica.Replica
	pipeline  *produce.Pipeline
	reader    *fetch.Reader
	collector *gc.Collector
	// alone makes the agent think it is the only live one, so it
	// collects alongside the real janitor.
	alone atomic.Bool
}

type randRecord struct {
	topic     meta.TopicID
	partition int32
	offset    int64
	value     []byte
}

// heldFetch is a fetch that planned (took its View) and has not read
// yet.
type heldFetch struct {
	view *meta.View
	at   time.Time
	rec  randRecord
	a    *randAgent
}

// TestRandomizedLifecycle interleaves, on three agents sharing a log and
// a store, produce (some uploads losing their replies, some commits
// lost), fetches (some holding their plan across later operations),
// DeleteRecords, topic deletion, garbage collection steps (sometimes on
// two agents at once) and kills of agents with uploads in flight. No
// fetch may fail on a missing object, and at the end every acknowledged
// record not deleted reads back on every agent, and the store holds
// exactly the objects the index points into.
//
// STRAND_GC_SEED replays a run; STRAND_E2E_LONG runs 20x the operations.
func TestRandomizedLifecycle(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STRAND_GC_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("STRAND_GC_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ops, timeout := 400, time.Minute
	if os.Getenv("STRAND_E2E_LONG") != "" {
		ops, timeout = ops*20, 20*time.Minute
	}
	const (
		grace      = time.Second
		partitions = 2
	)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	clk := new(aheadClock)
	log := memlog.New()
	mem := memobj.New()
	faults := objstore.NewFaults(seed)
	store := objstore.WithFaults(mem, faults)
	if os.Getenv("STRAND_GC_DEBUG") != "" {
		store = tracingStore{store}
	}

	agents := make([]*randAgent, 3)
	liveIDs := func() []int32 {
		var ids []int32
		for _, a := range agents {
			if a.replica != nil {
				ids = append(ids, a.id)
			}
		}
		return ids
	}
	start := func(a *randAgent) {
		a.inc++
		r, err := replica.Open(ctx, replica.Config{Dir: t.TempDir(), Log: log, WriterID: fmt.Sprintf("agent-%d", a.id),
			Incarnation: uint64(a.inc), Clock: clk, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		a.replica = r
		a.pipeline, err = produce.New(produce.Config{Store: store, Replica: r, AgentID: fmt.Sprintf("agent-%d-%d", a.id, a.inc),
			Clock: clk, Logger: quiet(), UploadAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		a.reader = fetch.NewReader(store, fetch.NewCache(0))
		a.collector, err = gc.New(gc.Config{Store: store, Meta: r, Grace: grace, Logger: gcLogger(), Clock: clk,
			Placement: placement.Ring{Self: a.id, Live: func() []int32 {
				if a.alone.Load() {
					return []int32{a.id}
				}
				return liveIDs()
			}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// kill abandons what is in flight, as SIGKILL would: uploads and
	// commits may or may not land.
	var held []heldFetch
	kill := func(a *randAgent) {
		// A View must close before its copy: the agent's fetches die
		// with it.
		held = slices.DeleteFunc(held, func(h heldFetch) bool {
			if h.a == a {
				h.view.Close()
			}
			return h.a == a
		})
		dead, cancel := context.WithCancel(ctx)
		cancel()
		a.pipeline.Close(dead)
		a.replica.Close()
		a.replica = nil
	}
	for i := range agents {
		agents[i] = &randAgent{id: int32(i + 1)}
		start(agents[i])
	}
	t.Cleanup(func() {
		for _, a := range agents {
			if a.replica != nil {
				a.pipeline.Close(ctx)
				a.replica.Close()
			}
		}
	})
	propose := func(a *randAgent, c meta.Command) meta.Result {
		t.Helper()
		res, err := a.replica.Propose(ctx, c)
		if err != nil {
			t.Fatalf("%v: %v", c.Type(), err)
		}
		return res
	}
	propose(agents[0], meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel3}}})

	type topic struct {
		name string
		id   meta.TopicID
	}
	var topics []topic
	nextTopic := 0
	newTopic := func(a *randAgent) {
		nextTopic++
		name := fmt.Sprintf("t%d", nextTopic)
		res := propose(a, meta.CreateTopic{Name: name, Partitions: partitions})
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		topics = append(topics, topic{name, res.TopicID})
	}
	for range 3 {
		newTopic(agents[0])
	}

	var records []randRecord // acknowledged and not deleted
	var valueSeq uint64
	counts := map[string]int{}
	liveAgent := func() *randAgent {
		for {
			if a := agents[rng.IntN(len(agents))]; a.replica != nil {
				return a
			}
		}
	}
	read := func(a *randAgent, v *meta.View, rec randRecord, what string) {
		t.Helper()
		res, err := a.reader.Read(ctx, v, rec.topic, rec.partition, rec.offset, 1<<20)
		if err != nil {
			t.Fatalf("seed %d: %s of %v/%d@%d on agent %d: %v", seed, what, rec.topic, rec.partition, rec.offset, a.id, err)
		}
		if res.Err != 0 || len(res.Records) == 0 {
			t.Fatalf("seed %d: %s of %v/%d@%d on agent %d: code %d, %d bytes", seed, what, rec.topic, rec.partition, rec.offset, a.id, res.Err, len(res.Records))
		}
		batch, _, err := recordbatch.Next(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		rb, rs := batchtest.Decode(t, batch)
		if rb.FirstOffset != rec.offset || len(rs) != 1 || !bytes.Equal(rs[0].Value, rec.value) {
			t.Fatalf("seed %d: %s of %v/%d@%d read offset %d value %q, want %q", seed, what, rec.topic, rec.partition, rec.offset, rb.FirstOffset, rs[0].Value, rec.value)
		}
	}
	sync := func(a *randAgent) {
		if err := a.replica.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}

	for range ops {
		// Fetches planned before grace/2 ago read now: the object may
		// have died meanwhile.
		now := clk.Now()
		for len(held) > 0 && (now.Sub(held[0].at) > grace/2 || rng.IntN(3) == 0) {
			h := held[0]
			held = held[1:]
			if now.Sub(h.at) <= grace/2 {
				read(h.a, h.view, h.rec, "held fetch")
				counts["held fetch read"]++
			}
			h.view.Close()
		}
		a := liveAgent()
		switch op := rng.IntN(100); {
		case op < 35: // produce, one record per batch
			n := 1 + rng.IntN(4)
			batches := make([]produce.Batch, n)
			opts := make([]batchtest.Options, n)
			for i := range batches {
				valueSeq++
				tp := topics[rng.IntN(len(topics))]
				opts[i] = batchtest.Options{Records: 1, ValueBytes: 20, Seed: valueSeq}
				b, err := produce.BatchFrom(tp.id, int32(rng.IntN(partitions)), batchtest.Build(t, opts[i]))
				if err != nil {
					t.Fatal(err)
				}
				batches[i] = b
			}
			lossy := rng.IntN(10) == 0
			if lossy {
				faults.FailNext(2, objstore.FaultAfter, objstore.OpPut) // every attempt's reply lost
			}
			res, err := a.pipeline.Produce(ctx, batches)
			if lossy {
				faults.Reset()
			}
			if err != nil {
				counts["produce failed"]++
				continue
			}
			for i, r := range res {
				if r.Code == 0 {
					records = append(records, randRecord{batches[i].TopicID, batches[i].Partition, r.BaseOffset, batchtest.Value(opts[i], 0)})
				}
			}
			counts["produce"]++
		case op < 55: // fetch now, or plan and read later
			if len(records) == 0 {
				continue
			}
			rec := records[rng.IntN(len(records))]
			sync(a)
			v := a.replica.View()
			if rng.IntN(2) == 0 {
				held = append(held, heldFetch{v, clk.Now(), rec, a})
				continue
			}
			read(a, v, rec, "fetch")
			v.Close()
			counts["fetch"]++
		case op < 62: // DeleteRecords
			tp := topics[rng.IntN(len(topics))]
			p := int32(rng.IntN(partitions))
			sync(a)
			v := a.replica.View()
			st, _, err := v.Partition(tp.id, p)
			v.Close()
			if err != nil {
				t.Fatal(err)
			}
			to := st.LogStartOffset + rng.Int64N(st.HighWatermark()-st.LogStartOffset+1)
			res := propose(a, meta.DeleteRecords{Partitions: []meta.DeleteRecordsPartition{{TopicID: tp.id, Partition: p, Offset: to}}})
			if res.Batches[0].Code != 0 {
				t.Fatalf("DeleteRecords: code %d", res.Batches[0].Code)
			}
			records = slices.DeleteFunc(records, func(r randRecord) bool {
				return r.topic == tp.id && r.partition == p && r.offset < res.Batches[0].LogStartOffset
			})
			counts["delete records"]++
		case op < 66: // delete a topic, create another
			i := rng.IntN(len(topics))
			tp := topics[i]
			if err := propose(a, meta.DeleteTopic{Name: tp.name}).Err(); err != nil {
				t.Fatal(err)
			}
			topics = slices.Delete(topics, i, i+1)
			records = slices.DeleteFunc(records, func(r randRecord) bool { return r.topic == tp.id })
			newTopic(a)
			counts["delete topic"]++
		case op < 85: // a GC step, on the janitor or on one that thinks it is alone
			sync(a)
			a.alone.Store(rng.IntN(4) == 0)
			if _, err := a.collector.Step(ctx); err != nil {
				t.Fatalf("seed %d: gc step on agent %d: %v", seed, a.id, err)
			}
			a.alone.Store(false)
			counts["gc step"]++
		case op < 97: // time passes
			clk.offset.Add(int64(rng.Int64N(int64(grace / 3))))
			if _, err := a.replica.Propose(ctx, meta.AlterConfigs{Name: "tick"}); err != nil {
				t.Fatal(err)
			}
		default: // kill an agent with produce calls in flight, restart it
			if len(liveIDs()) < 2 {
				continue
			}
			tp := topics[rng.IntN(len(topics))]
			b, err := produce.BatchFrom(tp.id, 0, batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 20, Seed: 1 << 40}))
			if err != nil {
				t.Fatal(err)
			}
			for range 1 + rng.IntN(3) {
				if _, err := a.pipeline.Submit(ctx, []produce.Batch{b}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			kill(a)
			start(a)
			counts["kill"]++
		}
	}
	for _, h := range held {
		h.view.Close()
	}

	// Let the grace and the key bucket of everything pass; the janitor
	// finishes the queue and the reconciler the orphans.
	clk.offset.Add(int64(grace + time.Duration(2*meta.OrphanBucketMs)*time.Millisecond))
	janitor := agents[0]
	for _, a := range agents {
		if placement.OwnerOf(gc.JanitorKey, liveIDs()) == a.id {
			janitor = a
		}
	}
	for i := 0; ; i++ {
		propose(janitor, meta.AlterConfigs{Name: "tick"})
		st, err := janitor.collector.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Deleted == 0 && st.Buckets <= 1 && i > 2 {
			break
		}
		if i > 1000 {
			t.Fatal("the collector does not finish")
		}
	}
	for _, a := range agents {
		sync(a)
		v := a.replica.View()
		for _, rec := range records {
			read(a, v, rec, "final fetch")
		}
		v.Close()
	}
	// The store holds exactly the objects the index points into.
	v := janitor.replica.View()
	defer v.Close()
	infos, err := mem.List(ctx, "data/")
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, info := range infos {
		n, err := v.ObjectRefs(info.Key)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("seed %d: %s is still in the store, and no index entry points into it", seed, info.Key)
		}
		stored = append(stored, info.Key)
	}
	g, _, err := v.GC()
	if err != nil {
		t.Fatal(err)
	}
	if g.DeadObjects != 0 || g.LiveObjects != int64(len(stored)) {
		t.Errorf("seed %d: GC state %+v, store holds %d objects", seed, g, len(stored))
	}
	for _, tp := range topics {
		for p := range int32(partitions) {
			it, err := v.Seek(tp.id, p, 0)
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				if _, found := slices.BinarySearch(stored, it.Entry().ObjectKey); !found {
					t.Errorf("seed %d: committed object %s was deleted", seed, it.Entry().ObjectKey)
				}
			}
			it.Close()
		}
	}
	t.Logf("ops %v; %d records readable; %d objects stored; deleted %d dead, %d orphans", counts, len(records), len(stored), g.DeletedObjects, g.Orphans)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
}

func gcLogger() *slog.Logger {
	if os.Getenv("STRAND_GC_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return quiet()
}

// tracingStore prints every delete, for STRAND_GC_DEBUG.
type tracingStore struct{ objstore.Store }

func (s tracingStore) Delete(ctx context.Context, key string) error {
	fmt.Fprintf(os.Stderr, "DELETE %s\n", key)
	return s.Store.Delete(ctx, key)
}
