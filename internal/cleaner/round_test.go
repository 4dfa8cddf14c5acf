package cleaner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/segment"
	"github.com/strandkafka/strand/internal/topicconfig"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// roundEnv is one metadata copy in memory at level 4 whose log clock
// follows clk, a memory store, a produce pipeline and a Cleaner.
type roundEnv struct {
	t     *testing.T
	clk   *clock.Fake
	db    *metatest.DB
	p     *produce.Pipeline
	c     *Cleaner
	r     *fetch.Reader
	topic meta.Topic
}

func newRoundEnv(t *testing.T, configs map[string]string, tune func(*Config)) *roundEnv {
	return newRoundEnvWith(t, 1, nil, configs, tune)
}

// newRoundEnvWith is newRoundEnv with partitions, and with the cleaner's
// store faulted by inj (nil: none).
func newRoundEnvWith(t *testing.T, partitions int32, inj objstore.FaultInjector, configs map[string]string, tune func(*Config)) *roundEnv {
	e := &roundEnv{t: t, clk: clock.NewFake(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))}
	store := memobj.New()
	e.db = metatest.New(e.clk.Now)
	e.propose(meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4}}})
	e.propose(meta.CreateTopic{Name: "table", Partitions: partitions, Configs: configs})
	v := e.db.View()
	e.topic, _, _ = v.Topic("table")
	v.Close()
	logger := slog.New(slog.DiscardHandler)
	var err error
	e.p, err = produce.New(produce.Config{Store: store, Replica: e.db, AgentID: "agent-1-1", Logger: logger,
		KeyTime: func() int64 { return e.clk.Now().UnixMilli() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.p.Close(context.Background()) })
	var cleanerStore objstore.Store = store
	if inj != nil {
		cleanerStore = objstore.WithFaults(store, inj)
	}
	cfg := Config{Store: cleanerStore, Meta: e.db, AgentID: "agent-1-1", Clock: e.clk, Logger: logger, TargetBytes: 2 << 10}
	if tune != nil {
		tune(&cfg)
	}
	if e.c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	e.r = fetch.NewReader(store, nil)
	return e
}

func (e *roundEnv) propose(c meta.Command) meta.Result {
	e.t.Helper()
	return e.db.MustPropose(e.t, c)
}

// produce commits each batch (built with base offset 0) in its own
// flush, so each is an index entry of its own, and returns their
// offsets.
func (e *roundEnv) produce(batches ...[]byte) []int64 {
	e.t.Helper()
	return e.produceTo(0, batches...)
}

// produceTo is produce to partition p.
func (e *roundEnv) produceTo(p int32, batches ...[]byte) []int64 {
	e.t.Helper()
	var bases []int64
	for _, d := range batches {
		b, err := produce.BatchFrom(e.topic.ID, p, d)
		if err != nil {
			e.t.Fatal(err)
		}
		res, err := e.p.Produce(testCtx(e.t), []produce.Batch{b})
		if err != nil || res[0].Code != 0 {
			e.t.Fatalf("produce: %v %v", err, res)
		}
		bases = append(bases, res[0].BaseOffset)
	}
	return bases
}

// clean runs one round at the clock's time.
func (e *roundEnv) clean() (Plan, RoundStats) {
	e.t.Helper()
	var st RoundStats
	plan, err := e.c.Clean(testCtx(e.t), e.topic, 0, &st)
	if err != nil {
		e.t.Fatalf("Clean: %v", err)
	}
	return plan, st
}

// readAll fetches the partition from offset from to its end as a
// consumer would and returns the records.
func (e *roundEnv) readAll(from int64) []got {
	e.t.Helper()
	var out []got
	for off := from; ; {
		v := e.db.View()
		res, err := e.r.Read(testCtx(e.t), v, e.topic.ID, 0, off, 1<<10)
		v.Close()
		if err != nil || res.Err != 0 {
			e.t.Fatalf("Read at %d: %v %d", off, err, res.Err)
		}
		if off >= res.HighWatermark {
			return out
		}
		bs, err := recordbatch.Split(res.Records)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, b := range bs {
			rb, rs := batchtest.Decode(e.t, b)
			for _, r := range rs {
				o := rb.FirstOffset + int64(r.OffsetDelta)
				if o >= off {
					out = append(out, got{offset: o, key: string(r.Key), value: string(r.Value), tombstone: r.Value == nil})
				}
			}
			off = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		}
	}
}

// TestRoundEndToEnd: a compacted partition fed keys x updates with
// tombstones, one flush per batch, cleaned in rounds of several swaps;
// a read from the beginning through the fetch path returns exactly the
// newest record of every key (checked against a model), offsets rising
// with gaps, a read from inside a gap starts at the next record, and
// tombstones go once delete.retention.ms passed since the round that
// first kept them. The newest entry (the active one) is never cleaned.
func TestRoundEndToEnd(t *testing.T) {
	e := newRoundEnv(t, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "60000", "min.cleanable.dirty.ratio": "0.01"}, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	const keys, batches = 20, 60
	newest := map[string]got{}
	var in [][]byte
	for range batches {
		n := 1 + rng.IntN(4)
		s := spec{codec: recordbatch.Compression(rng.IntN(5))}
		for range n {
			k := fmt.Sprintf("key-%02d", rng.IntN(keys))
			r := rec{key: []byte(k), value: fmt.Appendf(nil, "v%d", rng.Uint32())}
			if rng.IntN(5) == 0 {
				r.value = nil
			}
			s.recs = append(s.recs, r)
		}
		in = append(in, build(t, s))
	}
	bases := e.produce(in...)
	for i, b := range in {
		_, recs := batchtest.Decode(t, b)
		for j, r := range recs {
			newest[string(r.Key)] = got{offset: bases[i] + int64(j), key: string(r.Key), value: string(r.Value), tombstone: r.Value == nil}
		}
	}
	// The active entry: never cleaned in this round.
	active := e.produce(build(t, spec{recs: []rec{{[]byte("key-00"), []byte("active")}}}))[0]

	plan, st := e.clean()
	if !plan.Due || plan.Ratio != 1 || plan.FirstUncleanable != active || st.Swaps < 2 || st.Lost != 0 {
		t.Fatalf("plan %+v stats %+v", plan, st)
	}
	recs := e.readAll(0)
	want := map[string]got{}
	for k, g := range newest {
		want[k] = g
	}
	prev := int64(-1)
	gaps := 0
	for _, r := range recs {
		if r.offset <= prev {
			t.Fatalf("offset %d after %d", r.offset, prev)
		}
		if r.offset > prev+1 {
			gaps++
		}
		prev = r.offset
		if r.offset == active {
			continue
		}
		if w := want[r.key]; w != r {
			t.Fatalf("read %+v, newest of its key is %+v", r, w)
		}
		delete(want, r.key)
	}
	if len(want) != 0 || prev != active || gaps == 0 {
		t.Fatalf("missing %v, last offset %d (active %d), %d gaps", want, prev, active, gaps)
	}
	// A read from inside a gap starts at the next record.
	for i := 1; i < len(recs); i++ {
		if recs[i].offset > recs[i-1].offset+1 {
			gap := recs[i-1].offset + 1
			if got := e.readAll(gap); len(got) == 0 || got[0] != recs[i] {
				t.Fatalf("read from the gap at %d: %+v, want %+v first", gap, got, recs[i])
			}
			break
		}
	}
	// Nothing dirty is cleanable: no round.
	if plan, _ := e.clean(); plan.Due || plan.DirtyBytes != 0 {
		t.Fatalf("second plan %+v", plan)
	}

	// Before the horizon, a new round keeps the tombstones; after it,
	// they go. New data makes the rounds due.
	e.clk.Advance(59 * time.Second)
	e.produce(build(t, spec{recs: []rec{{[]byte("key-new"), []byte("x")}}}))
	e.clean()
	tombs := func() int {
		n := 0
		for _, r := range e.readAll(0) {
			if r.tombstone {
				n++
			}
		}
		return n
	}
	wantTombs := 0
	for _, g := range newest {
		if g.tombstone {
			wantTombs++
		}
	}
	if wantTombs == 0 {
		t.Fatal("the model holds no tombstone")
	}
	if n := tombs(); n != wantTombs {
		t.Fatalf("before the horizon: %d tombstones, want %d", n, wantTombs)
	}
	e.clk.Advance(2 * time.Second)
	e.produce(build(t, spec{recs: []rec{{[]byte("key-newer"), []byte("y")}}}))
	_, st = e.clean()
	if n := tombs(); n != 0 || st.Filter.TombstonesDropped != int64(wantTombs) {
		t.Fatalf("after the horizon: %d tombstones left, %d dropped", n, st.Filter.TombstonesDropped)
	}
}

// A small offset map cleans in prefixes: each round ends at the last
// entry it mapped whole, and rounds until none is due reach the same
// result as one round with a big map.
func TestRoundSmallMap(t *testing.T) {
	in := smallMapInput(t)
	results := map[string][]got{}
	for _, mapBytes := range []int64{1 << 20, 5 * EntryBytes} {
		e := newRoundEnv(t, compactNow, func(c *Config) { c.MapBytes = mapBytes })
		rounds := e.roundsToClean(in)
		if mapBytes < 1<<20 && rounds < 3 {
			t.Fatalf("small map: %d rounds", rounds)
		}
		results[fmt.Sprint(mapBytes)] = e.readAll(0)
	}
	big, small := results[fmt.Sprint(1<<20)], results[fmt.Sprint(5*EntryBytes)]
	if fmt.Sprint(big) != fmt.Sprint(small) || len(big) != 7+5+1 {
		t.Fatalf("big map %v\nsmall map %v", big, small)
	}
}

// compactNow are the configs of a topic compacted at every round.
var compactNow = map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}

// smallMapInput is 40 batches of 2 records over 12 keys: more keys than
// a 5-entry map holds, so such a map cleans them in several rounds.
func smallMapInput(t *testing.T) [][]byte {
	var in [][]byte
	for i := range 40 {
		in = append(in, build(t, spec{recs: []rec{{fmt.Appendf(nil, "k%d", i%7), fmt.Appendf(nil, "v%d", i)}, {fmt.Appendf(nil, "j%d", i%5), fmt.Appendf(nil, "w%d", i)}}}))
	}
	return in
}

// roundsToClean produces in and one more batch, then runs rounds until
// none is due, and returns how many ran.
func (e *roundEnv) roundsToClean(in [][]byte) int {
	e.t.Helper()
	e.produce(in...)
	e.produce(build(e.t, spec{recs: []rec{{[]byte("end"), []byte("e")}}}))
	rounds := 0
	for {
		plan, _ := e.clean()
		if !plan.Due {
			return rounds
		}
		if rounds++; rounds > 100 {
			e.t.Fatal("rounds do not end")
		}
	}
}

// PlanOf: the ratio, the active entry, min and max compaction lag.
func TestPlanOf(t *testing.T) {
	cleaned := segment.ObjectKey("agent"+CleanTag, 1, 1000)
	dirty := segment.ObjectKey("agent", 1, 1000)
	if !Cleaned(cleaned) || Cleaned(dirty) {
		t.Fatalf("Cleaned(%q) %v, Cleaned(%q) %v", cleaned, Cleaned(cleaned), dirty, Cleaned(dirty))
	}
	entries := []meta.IndexEntry{
		{BaseOffset: 0, Records: 10, Length: 300, ObjectKey: cleaned, FirstTimestamp: 100, MaxTimestamp: 100},
		{BaseOffset: 10, Records: 1, Length: recordbatch.ControlBatchSize, Control: true},
		{BaseOffset: 11, Records: 5, Length: 100, ObjectKey: dirty, FirstTimestamp: 200, MaxTimestamp: 250},
		{BaseOffset: 16, Records: 5, Length: 100, ObjectKey: dirty, FirstTimestamp: 300, MaxTimestamp: 350},
		{BaseOffset: 21, Records: 5, Length: 100, ObjectKey: dirty, FirstTimestamp: 400, MaxTimestamp: 450},
	}
	seq := func(yield func(meta.IndexEntry) bool) {
		for _, e := range entries {
			if !yield(e) {
				return
			}
		}
	}
	cfg := topicconfig.Effective(map[string]string{"cleanup.policy": "compact"})
	p := PlanOf(seq, 0, 26, cfg, 1000)
	if p.FirstDirty != 11 || p.FirstUncleanable != 21 || p.CleanBytes != 300 || p.DirtyBytes != 200 || p.Ratio != 0.4 || p.Due {
		t.Fatalf("plan %+v", p)
	}
	cfg.MinCleanableDirtyRatio = 0.3
	if p := PlanOf(seq, 0, 26, cfg, 1000); !p.Due {
		t.Fatalf("ratio 0.4 over 0.3 not due: %+v", p)
	}
	cfg.MinCleanableDirtyRatio = 0.5
	cfg.MaxCompactionLagMs = 700 // the first dirty batch (200) is older than 1000-700
	if p := PlanOf(seq, 0, 26, cfg, 1000); !p.Due || !p.MaxLagDue {
		t.Fatalf("max lag: %+v", p)
	}
	cfg.MaxCompactionLagMs = 900
	if p := PlanOf(seq, 0, 26, cfg, 1000); p.Due || p.MaxLagDue {
		t.Fatalf("max lag not passed: %+v", p)
	}
	cfg.MinCompactionLagMs = 700 // entries newer than 300 wait: 16.. stays dirty
	if p := PlanOf(seq, 0, 26, cfg, 1000); p.FirstUncleanable != 16 || p.DirtyBytes != 100 {
		t.Fatalf("min lag: %+v", p)
	}
	cfg.MinCompactionLagMs = 0
	if p := PlanOf(seq, 0, 14, cfg, 1000); p.FirstUncleanable != 11 || p.DirtyBytes != 0 {
		t.Fatalf("an open transaction at 14: %+v", p)
	}
	// The newest entry is cleanable once its first record is older than
	// max.compaction.lag.ms (Kafka rolls such an active segment).
	cfg.MaxCompactionLagMs = 550
	if p := PlanOf(seq, 0, 26, cfg, 1000); p.FirstUncleanable != 26 || p.DirtyBytes != 300 || !p.Due {
		t.Fatalf("max lag passed for the newest entry: %+v", p)
	}
	cfg.MaxCompactionLagMs = 650
	if p := PlanOf(seq, 0, 26, cfg, 1000); p.FirstUncleanable != 21 || p.DirtyBytes != 200 || !p.Due {
		t.Fatalf("max lag passed for all but the newest entry: %+v", p)
	}
}

// racingMeta runs race before the n-th SwapIndex it is asked to
// propose, as if another agent's command applied first.
type racingMeta struct {
	*metatest.DB
	n, swaps int
	race     func()
}

func (m *racingMeta) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	if _, ok := c.(meta.SwapIndex); ok {
		if m.swaps++; m.swaps == m.n {
			m.race()
		}
	}
	return m.DB.Propose(ctx, c)
}

// A round racing DeleteRecords (which trims the index the round read)
// loses its swap and stops: nothing of the log is lost or doubled, what
// earlier swaps cleaned stays clean, and the next round finishes the
// work from the new log start.
func TestRoundLosesToDeleteRecords(t *testing.T) {
	var rm *racingMeta
	e := newRoundEnv(t, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}, func(c *Config) {
		rm = &racingMeta{DB: c.Meta.(*metatest.DB), n: 2}
		c.Meta = rm
		c.TargetBytes = 512 // chunks of 12 offsets
	})
	var in [][]byte
	for i := range 30 {
		in = append(in, build(t, spec{recs: []rec{
			{fmt.Appendf(nil, "k%d", i%6), fmt.Appendf(nil, "v%d", i)},
			{fmt.Appendf(nil, "u%d", i), fmt.Appendf(nil, "w%d", i)}, // unique: always kept
		}}))
	}
	e.produce(in...)
	e.produce(build(t, spec{recs: []rec{{[]byte("end"), []byte("e")}}}))
	const deleteBelow = 16 // inside the second chunk
	rm.race = func() {
		e.propose(meta.DeleteRecords{Partitions: []meta.DeleteRecordsPartition{{TopicID: e.topic.ID, Partition: 0, Offset: deleteBelow}}})
	}
	_, st := e.clean()
	if st.Lost != 1 || st.Swaps != 1 {
		t.Fatalf("stats %+v, want one swap done and one lost", st)
	}
	// Every unique key at or above the new log start is there once;
	// each k has at most its records, in offset order.
	check := func(exact bool) {
		t.Helper()
		recs := e.readAll(deleteBelow)
		seen := map[string]int{}
		prev := int64(-1)
		for _, r := range recs {
			if r.offset <= prev || r.offset < deleteBelow {
				t.Fatalf("offset %d after %d (log start %d)", r.offset, prev, deleteBelow)
			}
			prev = r.offset
			seen[r.key]++
		}
		for i := deleteBelow / 2; i < 30; i++ { // u<i> is at offset 2i+1
			if seen[fmt.Sprintf("u%d", i)] != 1 {
				t.Fatalf("u%d read %d times: %v", i, seen[fmt.Sprintf("u%d", i)], recs)
			}
		}
		for i := range 6 {
			if n := seen[fmt.Sprintf("k%d", i)]; n == 0 || exact && n != 1 {
				t.Fatalf("k%d read %d times", i, n)
			}
		}
	}
	check(false)
	rm.n = 0 // no more races
	e.clean()
	check(true)
}

// A partition whose round fails (here its objects cannot be read) is
// logged and passed over: the pass still cleans the others, and returns
// the failure.
func TestPassGoesOnAfterAFailedPartition(t *testing.T) {
	var bad sync.Map // object keys of partition 0
	inj := objstore.FaultFunc(func(op objstore.Op, key string) objstore.FaultMode {
		if _, ok := bad.Load(key); ok && op == objstore.OpGet {
			return objstore.FaultBefore
		}
		return objstore.NoFault
	})
	e := newRoundEnvWith(t, 2, inj, map[string]string{"cleanup.policy": "compact"}, nil)
	for p := range int32(2) {
		for i := range 3 {
			e.produceTo(p, build(t, spec{recs: []rec{{[]byte("k"), fmt.Appendf(nil, "v%d", i)}}}))
		}
	}
	v := e.db.View()
	it, err := v.Seek(e.topic.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		bad.Store(it.Entry().ObjectKey, true)
	}
	it.Close()
	v.Close()
	st, err := e.c.Pass(testCtx(t))
	if !errors.Is(err, objstore.ErrInjected) || st.Rounds != 1 || st.Swaps != 1 {
		t.Fatalf("pass: %+v %v, want partition 1 cleaned and partition 0's failure", st, err)
	}
	v = e.db.View()
	defer v.Close()
	for p, wantClean := range []bool{false, true} {
		plan, err := PlanPartition(v, e.topic, int32(p), 0)
		if err != nil || (plan.CleanBytes > 0) != wantClean {
			t.Fatalf("partition %d: %+v %v", p, plan, err)
		}
	}
}

// faultyMeta fails the n-th SwapIndex proposal: before it applies, or
// after (applied, but the reply lost), as a crash or a lost connection
// to the log would.
type faultyMeta struct {
	*metatest.DB
	n, swaps int
	after    bool
}

var errLostReply = errors.New("test: the log's reply was lost")

func (m *faultyMeta) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	if _, ok := c.(meta.SwapIndex); ok {
		if m.swaps++; m.swaps == m.n {
			if m.after {
				m.DB.Propose(ctx, c)
			}
			return meta.Result{}, errLostReply
		}
	}
	return m.DB.Propose(ctx, c)
}

// A round whose swap proposal fails, applied or not, ends with the
// error; the next round finishes from where the index stands, and the
// partition reads as one clean round would have left it.
func TestRoundSwapFails(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("applied=%v", after), func(t *testing.T) {
			var fm *faultyMeta
			e := newRoundEnv(t, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}, func(c *Config) {
				fm = &faultyMeta{DB: c.Meta.(*metatest.DB), n: 2, after: after}
				c.Meta = fm
				c.TargetBytes = 512
			})
			want := map[string]string{}
			for i := range 30 {
				k, v := fmt.Sprintf("k%d", i%7), fmt.Sprintf("v%d", i)
				e.produce(build(t, spec{recs: []rec{{[]byte(k), []byte(v)}}}))
				want[k] = v
			}
			e.produce(build(t, spec{recs: []rec{{[]byte("end"), []byte("e")}}}))
			var st RoundStats
			if _, err := e.c.Clean(testCtx(t), e.topic, 0, &st); !errors.Is(err, errLostReply) {
				t.Fatalf("first round: %v", err)
			}
			e.clean()
			got := map[string]string{}
			for _, r := range e.readAll(0) {
				if _, dup := got[r.key]; dup {
					t.Fatalf("key %s read twice", r.key)
				}
				got[r.key] = r.value
			}
			want["end"] = "e"
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %v, want %v", got, want)
			}
		})
	}
}

// The last batch of a still-active idempotent producer keeps its header
// when its records go, as Kafka's cleaner keeps it; its earlier batches
// go whole.
func TestRoundKeepsActiveProducersLastBatch(t *testing.T) {
	e := newRoundEnv(t, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}, nil)
	e.propose(meta.AllocateProducerID{ProducerID: -1}) // id 0, which spec takes for none
	pid := e.propose(meta.AllocateProducerID{ProducerID: -1}).ProducerID
	e.produce(
		build(t, spec{recs: []rec{{[]byte("k"), []byte("v1")}}, pid: pid, seq: 0}),
		build(t, spec{recs: []rec{{[]byte("k"), []byte("v2")}}, pid: pid, seq: 1}),
		build(t, spec{recs: []rec{{[]byte("k"), []byte("v3")}}}),
		build(t, spec{recs: []rec{{[]byte("end"), []byte("e")}}}),
	)
	e.clean()
	v := e.db.View()
	res, err := e.r.Read(testCtx(t), v, e.topic.ID, 0, 0, 1<<20)
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	bs, err := recordbatch.Split(res.Records)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		h, _ := recordbatch.ParseHeader(b)
		got = append(got, fmt.Sprintf("%d:%d/%d", h.BaseOffset, h.NumRecords, h.ProducerID))
	}
	if want := fmt.Sprintf("[1:0/%d 2:1/-1 3:1/-1]", pid); fmt.Sprint(got) != want {
		t.Fatalf("batches (base:records/producer) %v, want %s", got, want)
	}
}
