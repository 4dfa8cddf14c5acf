package gc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
)

const grace = 10 * time.Second

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// env is one copy in memory at metadata level 3, its store and a fake
// proposer clock (the log clock follows it, as entries apply).
type env struct {
	t     *testing.T
	now   atomic.Int64 // unix ms
	db    *metatest.DB
	store objstore.Store
	mem   *memobj.Store
	// agents numbers the pipelines, as incarnations would.
	agents int
}

func newEnv(t *testing.T) *env { return newEnvAt(t, meta.MetadataLevel3) }

func newEnvAt(t *testing.T, level int16) *env {
	e := &env{t: t, mem: memobj.New()}
	e.store = e.mem
	e.now.Store(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC).UnixMilli())
	e.db = metatest.New(func() time.Time { return time.UnixMilli(e.now.Load()) })
	e.propose(meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: level}}})
	return e
}

func (e *env) propose(c meta.Command) meta.Result {
	e.t.Helper()
	return e.db.MustPropose(e.t, c)
}

// advance moves the clock and applies an entry, so the log clock moves.
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	e.now.Add(d.Milliseconds())
	if _, err := e.db.Propose(testCtx(e.t), meta.AlterConfigs{Name: "no-such-topic"}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) topic(name string) meta.TopicID {
	e.t.Helper()
	return e.propose(meta.CreateTopic{Name: name, Partitions: 1}).TopicID
}

func (e *env) pipeline(cfg produce.Config) *produce.Pipeline {
	e.t.Helper()
	if cfg.Store == nil {
		cfg.Store = e.store
	}
	if cfg.Replica == nil {
		cfg.Replica = e.db
	}
	e.agents++
	cfg.AgentID = fmt.Sprintf("agent-1-%d", e.agents)
	cfg.Logger = quiet()
	if cfg.KeyTime == nil {
		cfg.KeyTime = e.now.Load
	}
	p, err := produce.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// produce produces batches through p, which must succeed.
func (e *env) produce(p *produce.Pipeline, batches ...produce.Batch) {
	e.t.Helper()
	if _, err := p.Produce(testCtx(e.t), batches); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) batch(id meta.TopicID, seed uint64) produce.Batch {
	e.t.Helper()
	b, err := produce.BatchFrom(id, 0, batchtest.Build(e.t, batchtest.Options{Records: 3, ValueBytes: 50, Seed: seed}))
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) collector(self int32, live func() []int32) *gc.Collector {
	e.t.Helper()
	c, err := gc.New(gc.Config{Store: e.store, Meta: e.db, Grace: grace, Logger: quiet(),
		Placement: placement.Ring{Self: self, Live: live}})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) step(c *gc.Collector) gc.Step {
	e.t.Helper()
	st, err := c.Step(testCtx(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) keys() []string {
	e.t.Helper()
	infos, err := e.mem.List(testCtx(e.t), "data/")
	if err != nil {
		e.t.Fatal(err)
	}
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	return ks
}

func (e *env) gcState() meta.GCState {
	e.t.Helper()
	v := e.db.View()
	defer v.Close()
	g, ok, err := v.GC()
	if err != nil || !ok {
		e.t.Fatalf("GC state: %v, %v", ok, err)
	}
	return g
}

// sweepOrphans runs c's steps until the reconciler has listed every
// bucket due and checks that it deleted want orphans and left the
// committed objects alone.
func (e *env) sweepOrphans(c *gc.Collector, want int, committed []string) {
	e.t.Helper()
	var orphans int
	for range 3 {
		orphans += e.step(c).Orphans
	}
	if orphans != want {
		e.t.Fatalf("deleted %d orphans, want %d", orphans, want)
	}
	if got := e.keys(); !slices.Equal(got, committed) {
		e.t.Fatalf("store holds %v, want only the committed %v", got, committed)
	}
}

// entryKeys returns the object keys the partition's index points at.
func (e *env) entryKeys(id meta.TopicID) []string {
	e.t.Helper()
	v := e.db.View()
	defer v.Close()
	it, err := v.Seek(id, 0, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer it.Close()
	var ks []string
	for it.Next() {
		ks = append(ks, it.Entry().ObjectKey)
	}
	return ks
}

// Deleting a topic frees its objects once the grace period has passed;
// an object shared with another topic stays until that one lets go too.
func TestTopicDeletionFreesObjectsAfterGrace(t *testing.T) {
	e := newEnv(t)
	a, b := e.topic("a"), e.topic("b")
	p := e.pipeline(produce.Config{})
	// One object holding both topics, then one of a alone.
	e.produce(p, e.batch(a, 1), e.batch(b, 2))
	e.produce(p, e.batch(a, 3))
	shared, own := e.entryKeys(b)[0], e.entryKeys(a)[1]
	if got := e.keys(); !slices.Equal(got, []string{shared, own}) {
		t.Fatalf("store holds %v", got)
	}
	c := e.collector(1, nil)

	e.propose(meta.DeleteTopic{Name: "a"})
	e.advance(grace - time.Millisecond)
	if st := e.step(c); st.Deleted != 0 {
		t.Fatalf("deleted %d objects within the grace period", st.Deleted)
	}
	e.advance(time.Millisecond)
	if st := e.step(c); st.Deleted != 1 {
		t.Fatalf("deleted %d objects after the grace period, want 1", st.Deleted)
	}
	if got := e.keys(); !slices.Equal(got, []string{shared}) {
		t.Fatalf("after deleting a, the store holds %v, want the shared object only", got)
	}

	e.propose(meta.DeleteTopic{Name: "b"})
	e.advance(grace)
	if st := e.step(c); st.Deleted != 1 {
		t.Fatalf("deleted %d objects, want the shared one", st.Deleted)
	}
	if got := e.keys(); len(got) != 0 {
		t.Fatalf("the store still holds %v", got)
	}
	g := e.gcState()
	if g.StoredBytes() != 0 || g.LiveObjects != 0 || g.DeadObjects != 0 || g.DeletedObjects != 2 || g.DeletedBytes == 0 {
		t.Fatalf("GC state %+v", g)
	}
}

// A fetch plans its reads from a View, then reads. The object may lose
// its last index entry in between: the grace period is what keeps it
// readable. Here the fetch holds its view while the topic is deleted and
// the janitor runs: within the grace the read succeeds; the same read
// after the grace fails, which is why grace must exceed any fetch.
func TestFetchHoldingViewWhileGCRuns(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a")
	p := e.pipeline(produce.Config{})
	e.produce(p, e.batch(a, 1))
	r := fetch.NewReader(e.store, fetch.NewCache(0))
	c := e.collector(1, nil)

	plan := e.db.View() // the fetch's view, before the object dies
	defer plan.Close()
	e.propose(meta.DeleteTopic{Name: "a"})
	e.advance(grace - time.Millisecond)
	e.step(c)
	res, err := r.Read(testCtx(t), plan, a, 0, 0, 1<<20)
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("a fetch planned before the topic's deletion failed within the grace period: %v (%d bytes)", err, len(res.Records))
	}

	e.advance(time.Millisecond)
	if st := e.step(c); st.Deleted != 1 {
		t.Fatalf("deleted %d, want 1", st.Deleted)
	}
	if _, err := fetch.NewReader(e.store, fetch.NewCache(0)).Read(testCtx(t), plan, a, 0, 0, 1<<20); !errors.Is(err, fetch.ErrMissing) {
		t.Fatalf("a read past the grace period = %v, want ErrMissing (else this test shows nothing)", err)
	}
}

// dropCommits is a proposer whose CommitObject never reaches the log:
// the agent died between upload and commit, or the append failed.
type dropCommits struct{}

func (dropCommits) ProposeBatch(context.Context, []meta.Command) ([]meta.Result, error) {
	return nil, replica.ErrAmbiguous
}

// Orphans: an upload whose every reply was lost (the producer was told
// it failed, the object is in the store) and an upload whose commit never
// reached the log. The reconciler deletes both once their key time is
// below the orphan horizon, and never a committed object.
func TestReconcilerDeletesOrphans(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a")
	faults := objstore.NewFaults(1).FailNext(5, objstore.FaultAfter, objstore.OpPut)
	lossy := e.pipeline(produce.Config{Store: objstore.WithFaults(e.store, faults), UploadAttempts: 5})
	if _, err := lossy.Produce(testCtx(t), []produce.Batch{e.batch(a, 1)}); !errors.Is(err, produce.ErrUpload) {
		t.Fatalf("produce with every reply lost = %v, want ErrUpload", err)
	}
	dead := e.pipeline(produce.Config{Replica: dropCommits{}})
	if _, err := dead.Produce(testCtx(t), []produce.Batch{e.batch(a, 2)}); !errors.Is(err, produce.ErrCommit) {
		t.Fatalf("produce with the commit lost = %v, want ErrCommit", err)
	}
	ok := e.pipeline(produce.Config{})
	e.produce(ok, e.batch(a, 3))
	committed := e.entryKeys(a)
	if n := len(e.keys()); n != 3 {
		t.Fatalf("store holds %d objects, want 2 orphans and 1 committed", n)
	}
	c := e.collector(1, nil)

	// Young orphans may still commit: they stay.
	e.advance(grace)
	if st := e.step(c); st.Orphans != 0 {
		t.Fatalf("deleted %d orphans younger than the grace period", st.Orphans)
	}
	// Past the grace and the end of their minute bucket.
	e.advance(2 * time.Minute)
	e.sweepOrphans(c, 2, committed)
	if g := e.gcState(); g.Orphans != 2 || g.OrphanBytes == 0 || g.LiveObjects != 1 {
		t.Fatalf("GC state %+v", g)
	}
}

// A commit that arrives after its object's key time fell below the
// orphan horizon is refused, so the reconciler can never delete a
// committed object; the refused object is queued dead and deleted.
func TestLateCommitRefused(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a")
	e.propose(meta.GCProgress{GraceMs: grace.Milliseconds()})
	old := e.now.Load() - grace.Milliseconds() - 1
	late := e.pipeline(produce.Config{KeyTime: func() int64 { return old }})
	res, err := late.Produce(testCtx(t), []produce.Batch{e.batch(a, 1)})
	if err != nil || res[0].Code != kerr.KafkaStorageError.Code {
		t.Fatalf("late commit = %v, %v; want KAFKA_STORAGE_ERROR", res, err)
	}
	if ks := e.entryKeys(a); len(ks) != 0 {
		t.Fatalf("a refused commit is in the index: %v", ks)
	}
	c := e.collector(1, nil)
	e.advance(grace)
	e.step(c)
	if got := e.keys(); len(got) != 0 {
		t.Fatalf("refused objects left in the store: %v", got)
	}
}

// Only the agent placement names deletes; when it is no longer live, the
// next owner finishes the queue.
func TestJanitorTakeover(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a")
	p := e.pipeline(produce.Config{})
	for i := range 3 {
		e.produce(p, e.batch(a, uint64(i)))
	}
	var live atomic.Pointer[[]int32]
	all := []int32{1, 2, 3}
	live.Store(&all)
	nodes := func() []int32 { return *live.Load() }
	cs := map[int32]*gc.Collector{1: e.collector(1, nodes), 2: e.collector(2, nodes), 3: e.collector(3, nodes)}
	owner := placement.OwnerOf(gc.JanitorKey, all)
	e.step(cs[owner]) // proposes its grace, shorter than the log's default

	e.propose(meta.DeleteTopic{Name: "a"})
	e.advance(grace)
	for id, c := range cs {
		if st := e.step(c); st.Owner != (id == owner) || (id == owner) != (st.Deleted == 3) {
			t.Fatalf("agent %d: %+v (owner %d)", id, st, owner)
		}
	}
	if got := e.keys(); len(got) != 0 {
		t.Fatalf("owner left %v", got)
	}

	// The owner dies with objects queued: another takes over.
	e.produce(p, e.batch(e.topic("b"), 9))
	e.propose(meta.DeleteTopic{Name: "b"})
	rest := slices.DeleteFunc(slices.Clone(all), func(id int32) bool { return id == owner })
	live.Store(&rest)
	next := placement.OwnerOf(gc.JanitorKey, rest)
	e.advance(grace)
	if st := e.step(cs[next]); !st.Owner || st.Deleted != 1 {
		t.Fatalf("new owner %d: %+v", next, st)
	}
	if g := e.gcState(); g.DeletedObjects != 4 || g.DeadObjects != 0 {
		t.Fatalf("GC state %+v", g)
	}
}

// The metrics follow the log: stored bytes, live and dead objects,
// deletions, orphans and how overdue the queue is.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a")
	p := e.pipeline(produce.Config{})
	for i := range 2 {
		e.produce(p, e.batch(a, uint64(i)))
	}
	m := gc.NewMetrics(e.db)
	size := e.gcState().LiveBytes / 2
	want := func(name string, v float64) {
		t.Helper()
		got := gather(t, m, name)
		if got != v {
			t.Fatalf("%s = %v, want %v", name, got, v)
		}
	}
	want("strand_data_stored_bytes", float64(2*size))
	e.propose(meta.DeleteRecords{Partitions: []meta.DeleteRecordsPartition{{TopicID: a, Offset: 3}}})
	e.advance(grace + 5*time.Second)
	want("strand_gc_lag_seconds", 0) // the log's grace is still the default: nothing due
	c := e.collector(1, nil)
	e.step(c) // sets the grace
	want("strand_gc_lag_seconds", 5)
	e.step(c)
	want("strand_gc_lag_seconds", 0)
	want("strand_gc_deleted_objects_total", 1)
	want("strand_gc_deleted_bytes_total", float64(size))
	want("strand_data_stored_bytes", float64(size))
}

// gather returns the value of a metric without labels.
func gather(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// An orphan goes about a grace period after it was written, not a whole
// key bucket later: the bucket the horizon is in is listed too.
func TestOrphanDeletedBeforeItsBucketEnds(t *testing.T) {
	e := newEnv(t)
	e.now.Add(-e.now.Load() % meta.OrphanBucketMs) // the start of a bucket
	a := e.topic("a")
	dead := e.pipeline(produce.Config{Replica: dropCommits{}})
	if _, err := dead.Produce(testCtx(t), []produce.Batch{e.batch(a, 2)}); !errors.Is(err, produce.ErrCommit) {
		t.Fatalf("produce with the commit lost = %v, want ErrCommit", err)
	}
	c := e.collector(1, nil)
	e.step(c) // sets the grace
	e.advance(grace + time.Millisecond)
	if st := e.step(c); st.Orphans != 1 {
		t.Fatalf("step %+v, want the orphan deleted", st)
	}
	if got := e.keys(); len(got) != 0 {
		t.Fatalf("store holds %v", got)
	}
}

// lateLander holds the first Put made while armed until land is closed,
// then writes it whatever its context says and reports the context's
// end: a request the client gave up on that the store still completed.
type lateLander struct {
	objstore.Store
	armed   atomic.Bool
	held    atomic.Bool
	entered chan string
	land    chan struct{}
}

func (s *lateLander) Put(ctx context.Context, key string, data []byte) error {
	if !s.armed.Load() || !s.held.CompareAndSwap(false, true) {
		return s.Store.Put(ctx, key, data)
	}
	s.entered <- key
	<-s.land
	if err := s.Store.Put(context.Background(), key, data); err != nil {
		return err
	}
	return ctx.Err()
}

// A hedged upload's loser is collected: the hedge wins and is committed,
// the cancelled primary still lands in the store and the pipeline's
// delete of it fails, so it is an orphan, and the reconciler deletes it
// after the grace and leaves the hedge's object.
func TestHedgeLoserCollected(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a")
	clk := clock.NewFake(time.UnixMilli(e.now.Load()))
	lander := &lateLander{Store: e.store, entered: make(chan string, 1), land: make(chan struct{})}
	noDeletes := objstore.FaultFunc(func(op objstore.Op, _ string) objstore.FaultMode {
		if op == objstore.OpDelete {
			return objstore.FaultBefore
		}
		return objstore.NoFault
	})
	p := e.pipeline(produce.Config{Store: objstore.WithFaults(lander, noDeletes), Clock: clk,
		HedgePercentile: 0.9, HedgeMaxRatio: 1, HedgeMinDelay: 50 * time.Millisecond})
	// Registered after the pipeline's Close, so it runs first: a failed
	// test must not leave the primary held and Close waiting for it.
	landNow := sync.OnceFunc(func() { close(lander.land) })
	t.Cleanup(landNow)
	// Upload times are timed on the fake clock: all 0, so the hedge
	// delay is the 50ms floor once 16 are known.
	for i := range 16 {
		e.produce(p, e.batch(a, uint64(i)))
	}
	lander.armed.Store(true)
	ack, err := p.Submit(testCtx(t), []produce.Batch{e.batch(a, 100)})
	if err != nil {
		t.Fatal(err)
	}
	primary := <-lander.entered
	clk.Advance(50 * time.Millisecond) // the hedge starts and wins
	if _, err := ack.Wait(testCtx(t)); err != nil {
		t.Fatalf("hedged produce: %v", err)
	}
	committed := e.entryKeys(a)
	if len(committed) != 17 || committed[16] == primary {
		t.Fatalf("committed %d objects, the last %s; want 17, not the held primary's", len(committed), committed[16])
	}
	landNow()
	if err := p.Close(testCtx(t)); err != nil { // waits for the loser
		t.Fatal(err)
	}
	if got := e.keys(); len(got) != 18 || !slices.Contains(got, primary) {
		t.Fatalf("store holds %d objects, want the 17 committed and the primary %s that landed late", len(got), primary)
	}

	c := e.collector(1, nil)
	e.advance(grace + 2*time.Minute)
	e.sweepOrphans(c, 1, committed) // the hedge's loser
}

// An agent whose apply stalled keeps renewing its lease with the position
// it reached, and keeps planning fetches from that view: the janitor
// waits for it to apply past an object's death, however long past the
// grace period, and deletes the object once it has (metadata level 5).
func TestJanitorWaitsForLaggingAgents(t *testing.T) {
	e := newEnvAt(t, meta.MetadataLevel5)
	const caughtUp = 1 << 62 // apply clamps it to the heartbeat's position
	beat := func(node int32, id string, applied uint64) {
		t.Helper()
		e.propose(meta.AgentHeartbeat{NodeID: node, AgentID: id, Host: "h", Port: 1, LeaseMs: time.Hour.Milliseconds(), Applied: applied})
	}
	// The proposer is metatest's one writer: as the agent "metatest" its
	// entries are its votes on the log clock.
	beat(1, "metatest", caughtUp)
	a := e.topic("a")
	e.produce(e.pipeline(produce.Config{}), e.batch(a, 1))
	v := e.db.View()
	stalled, err := v.NextToApply()
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	beat(2, "stalled", stalled)
	r := fetch.NewReader(e.store, fetch.NewCache(0))
	plan := e.db.View() // the stalled agent's view
	defer plan.Close()

	e.propose(meta.DeleteTopic{Name: "a"})
	c := e.collector(1, nil)
	for range 3 {
		// From level 5 the log's grace rules, not the collector's flag.
		e.advance(time.Duration(meta.DefaultGCGrace) * time.Millisecond)
		beat(1, "metatest", caughtUp)
		beat(2, "stalled", stalled)
		if st := e.step(c); st.Deleted != 0 {
			t.Fatalf("deleted %d objects that an agent still at position %d plans reads from", st.Deleted, stalled)
		}
	}
	if res, err := r.Read(testCtx(t), plan, a, 0, 0, 1<<20); err != nil || len(res.Records) == 0 {
		t.Fatalf("the stalled agent's read failed: %v (%d bytes)", err, len(res.Records))
	}
	beat(2, "stalled", caughtUp)
	if st := e.step(c); st.Deleted != 1 {
		t.Fatalf("deleted %d objects once every agent applied the death, want 1", st.Deleted)
	}
}

// From level 5 a dead object waits the delete delay (a minute, Kafka's
// log.segment.delete.delay.ms), not the grace, once every live agent
// applied its death; the cluster-wide strand.gc.delete.delay.ms moves
// it, and a value below the floor counts as unset. Below level 5 it is
// the grace (TestTopicDeletionFreesObjectsAfterGrace).
func TestDeleteDelay(t *testing.T) {
	delay := time.Duration(meta.DefaultDeleteDelayMs) * time.Millisecond
	if delay >= time.Duration(meta.DefaultGCGrace)*time.Millisecond {
		t.Fatalf("the default delete delay %v is not below the default grace", delay)
	}
	for _, tt := range []struct {
		name string
		set  string // strand.gc.delete.delay.ms, "" for none
		want time.Duration
	}{
		{"default", "", delay},
		{"set", "90000", 90 * time.Second},
		{"below the floor", "1", delay},
		{"above the grace", strconv.FormatInt(2*meta.DefaultGCGrace, 10), time.Duration(meta.DefaultGCGrace) * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvAt(t, meta.MetadataLevel5)
			beat := func() {
				t.Helper()
				e.propose(meta.AgentHeartbeat{NodeID: 1, AgentID: "metatest", Host: "h", Port: 1,
					LeaseMs: time.Hour.Milliseconds(), Applied: 1 << 62})
			}
			beat()
			if tt.set != "" {
				e.propose(meta.AlterBrokerConfigs{Set: map[string]string{meta.DeleteDelayConfig: tt.set}})
			}
			a := e.topic("a")
			e.produce(e.pipeline(produce.Config{}), e.batch(a, 1))
			c := e.collector(1, nil)
			m := gc.NewMetrics(e.db)
			if got := gather(t, m, "strand_gc_delete_delay_seconds"); got != tt.want.Seconds() {
				t.Errorf("strand_gc_delete_delay_seconds = %v, want %v", got, tt.want.Seconds())
			}
			e.propose(meta.DeleteTopic{Name: "a"})
			e.advance(tt.want - time.Millisecond)
			beat()
			if got := gather(t, m, "strand_gc_lag_seconds"); got != 0 {
				t.Errorf("strand_gc_lag_seconds = %v before the delay passed", got)
			}
			if st := e.step(c); st.Deleted != 0 {
				t.Fatalf("deleted %d objects a millisecond before %v", st.Deleted, tt.want)
			}
			e.advance(time.Millisecond)
			beat()
			if st := e.step(c); st.Deleted != 1 {
				t.Fatalf("deleted %d objects %v after the death, want 1", st.Deleted, tt.want)
			}
			if got := e.keys(); len(got) != 0 {
				t.Fatalf("the store still holds %v", got)
			}
		})
	}
}
