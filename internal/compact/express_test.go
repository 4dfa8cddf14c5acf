package compact_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/segment"
)

// The low-latency tier's life cycle: flushes land in two of three zone
// buckets and are read from there; compaction moves them into the main
// store within ExpressMaxLag; the gc then deletes every zone copy, a
// hedge's extra copy and an orphan (uploaded to two zones, never
// committed: an agent killed between upload and commit) included, so
// the buckets end empty (listing each one).
func TestExpressCopiesMovedAndDeleted(t *testing.T) {
	e := &env{t: t, clk: clock.NewFake(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)), mem: memobj.New()}
	e.db = metatest.New(e.clk.Now)
	e.propose(meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4}}})
	zones := []*memobj.Store{memobj.New(), memobj.New(), memobj.New()}
	var xz []express.Zone
	for i, z := range zones {
		xz = append(xz, express.Zone{Name: string(rune('a' + i)), Store: z})
	}
	tier, err := express.New(express.Config{Main: e.mem, Zones: xz, Local: 0})
	if err != nil {
		t.Fatal(err)
	}
	e.store = objstore.WithCounters(tier)
	keyTime := func() int64 { return e.clk.Now().UnixMilli() }
	e.p, err = produce.New(produce.Config{Store: tier, Express: tier, Replica: e.db, AgentID: "agent-1-1", Logger: quiet(), KeyTime: keyTime})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.p.Close(context.Background()) })

	a := e.topic("a", 2)
	parts := []tp{{a, 0}, {a, 1}}
	for i := range 9 {
		e.produce(uint64(i), 1+i%3, parts...)
	}
	before := map[tp][]byte{}
	for _, p := range parts {
		before[p] = e.read(nil, p, 0)
		for _, en := range e.entries(p) {
			if !express.IsKey(en.ObjectKey) {
				t.Fatalf("entry in %s, not a tier object", en.ObjectKey)
			}
		}
	}
	listZones := func() [][]string {
		var out [][]string
		for _, z := range zones {
			infos, err := z.List(testCtx(t), "data/")
			if err != nil {
				t.Fatal(err)
			}
			var ks []string
			for _, i := range infos {
				ks = append(ks, i.Key)
			}
			out = append(out, ks)
		}
		return out
	}
	for i, ks := range listZones() {
		if len(ks) != 6 {
			t.Fatalf("zone %d holds %d objects, want 6 (two thirds of 9 flushes)", i, len(ks))
		}
	}
	if infos, _ := e.mem.List(testCtx(t), "data/"); len(infos) != 0 {
		t.Fatalf("the main store holds %d data objects before compaction", len(infos))
	}
	// A hedge's copy in the third zone of a committed object.
	committed := e.entries(parts[0])[0].ObjectKey
	bk, _ := express.BucketKey(committed)
	planted := 0
	for _, z := range zones {
		if _, err := z.Get(testCtx(t), bk, 0, -1); err == nil {
			continue
		}
		planted++
		if err := z.Put(testCtx(t), bk, []byte("late copy")); err != nil {
			t.Fatal(err)
		}
	}
	if planted != 1 {
		t.Fatalf("planted %d late copies, want 1 (the zone not holding %s)", planted, committed)
	}
	// An orphan: written to two zones, never committed.
	res, err := tier.PutExpress(testCtx(t), segment.ObjectKey("agent-2-1", 1, keyTime()), []byte("orphan"), express.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-res.Settled

	c := e.compactor(compact.Config{Store: tier, MinAge: time.Hour, MaxLag: time.Hour})
	if st := e.pass(c); st.Swaps != 0 {
		t.Fatalf("compacted %d runs younger than ExpressMaxLag", st.Swaps)
	}
	e.advance(compact.DefaultExpressMaxLag)
	if st := e.pass(c); st.Swaps != len(parts) {
		t.Fatalf("pass: %+v; want the %d partitions' tier entries moved although MinAge and MaxLag are an hour", st, len(parts))
	}
	for _, p := range parts {
		if l0, l1 := e.levels(p); l0 != 0 || l1 != 1 {
			t.Fatalf("%v: %d level-0 and %d compacted entries, want 0 and 1", p, l0, l1)
		}
		mustEqual(t, "read after compaction", e.read(nil, p, 0), before[p])
	}

	col, err := gc.New(gc.Config{Store: tier, Meta: e.db, Grace: 10 * time.Second, Logger: quiet(), Placement: placement.Ring{Self: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e.advance(time.Hour)
	deleted, orphans := 0, 0
	for range 4 {
		st, err := col.Step(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		deleted += st.Deleted
		orphans += st.Orphans
	}
	if deleted != 9 || orphans != 1 {
		t.Errorf("gc deleted %d dead objects and %d orphans, want 9 and 1", deleted, orphans)
	}
	for i, ks := range listZones() {
		if len(ks) != 0 {
			t.Errorf("zone %d still holds %v", i, ks)
		}
	}
	infos, err := e.mem.List(testCtx(t), "data/")
	if err != nil {
		t.Fatal(err)
	}
	var main []string
	for _, i := range infos {
		main = append(main, i.Key)
	}
	var want []string
	for _, p := range parts {
		want = append(want, e.entries(p)[0].ObjectKey)
	}
	slices.Sort(want)
	if !slices.Equal(main, want) {
		t.Errorf("main store holds %v, want the compacted objects %v", main, want)
	}
	for _, p := range parts {
		mustEqual(t, "read after the gc", e.read(nil, p, 0), before[p])
	}
}
