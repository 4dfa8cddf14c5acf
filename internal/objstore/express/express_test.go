package express_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/objstore/storetest"
	"github.com/strandkafka/strand/internal/segment"
)

// tier is a Store over in-memory buckets, with counters on each.
type tier struct {
	x     *express.Store
	main  *memobj.Store
	zones []*memobj.Store
	count []*objstore.Counting
}

// newTier builds a tier of n zones; wrap, if set, wraps zone i's store
// (under its counter).
func newTier(t testing.TB, n, local int, wrap func(i int, s objstore.Store) objstore.Store) *tier {
	t.Helper()
	tr := &tier{main: memobj.New()}
	var zones []express.Zone
	for i := range n {
		m := memobj.New()
		var s objstore.Store = m
		if wrap != nil {
			s = wrap(i, s)
		}
		c := objstore.WithCounters(s)
		tr.zones = append(tr.zones, m)
		tr.count = append(tr.count, c)
		zones = append(zones, express.Zone{Name: fmt.Sprintf("z%d", i), Store: c})
	}
	x, err := express.New(express.Config{Main: tr.main, Zones: zones, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	tr.x = x
	return tr
}

// keys lists what each zone's bucket holds.
func (tr *tier) keys(t *testing.T, prefix string) [][]string {
	t.Helper()
	out := make([][]string, len(tr.zones))
	for i, z := range tr.zones {
		infos, err := z.List(context.Background(), prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			out[i] = append(out[i], info.Key)
		}
	}
	return out
}

func dataKey(seq uint64) string { return segment.ObjectKey("agent-1", seq, 1_700_000_000_000) }

// zonesOf returns the zones a committed key names.
func zonesOf(t *testing.T, key string) string {
	t.Helper()
	agent, _, _, err := segment.ParseObjectKey(key)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(agent, express.Tag)
	if i < 0 {
		t.Fatalf("%s is not a tier key", key)
	}
	return agent[i+len(express.Tag):]
}

// Keys that are not the tier's go to the main store, which must then
// behave as a Store.
func TestStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return newTier(t, 3, 0, nil).x })
}

func TestPutExpressRotatesPairs(t *testing.T) {
	ctx := context.Background()
	tr := newTier(t, 3, 0, nil)
	pairs := map[string]int{}
	for seq := range uint64(30) {
		obj := []byte(fmt.Sprintf("object %d", seq))
		res, err := tr.x.PutExpress(ctx, dataKey(seq+1), obj, express.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-res.Settled
		if !express.IsKey(res.Key) || res.Third {
			t.Fatalf("key %s third %v", res.Key, res.Third)
		}
		pairs[zonesOf(t, res.Key)]++
		got, err := tr.x.Get(ctx, res.Key, 0, -1)
		if err != nil || !bytes.Equal(got, obj) {
			t.Fatalf("Get(%s) = %q, %v", res.Key, got, err)
		}
	}
	if want := map[string]int{"01": 10, "12": 10, "02": 10}; !mapsEqual(pairs, want) {
		t.Errorf("pairs %v, want %v", pairs, want)
	}
	for i, c := range tr.count {
		if n := c.Snapshot().Op(objstore.OpPutIfAbsent).Requests; n != 20 {
			t.Errorf("zone %d took %d PUTs, want 20 (two thirds of 30)", i, n)
		}
	}
	if n := len(tr.keys(t, "")[0]); n != 20 {
		t.Errorf("zone 0 holds %d objects, want 20", n)
	}
	if infos, _ := tr.main.List(ctx, ""); len(infos) != 0 {
		t.Errorf("the main store holds %d objects, want none", len(infos))
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A zone that fails every write is covered by the third: every flush
// still lands in two zones, and no key names the failing one.
func TestPutExpressZoneFails(t *testing.T) {
	ctx := context.Background()
	faults := objstore.NewFaults(1).FailRandomly(1, objstore.FaultBefore, objstore.OpPutIfAbsent)
	tr := newTier(t, 3, 0, func(i int, s objstore.Store) objstore.Store {
		if i == 1 {
			return objstore.WithFaults(s, faults)
		}
		return s
	})
	thirds := 0
	for seq := range uint64(12) {
		res, err := tr.x.PutExpress(ctx, dataKey(seq+1), []byte("x"), express.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-res.Settled
		if z := zonesOf(t, res.Key); z != "02" {
			t.Errorf("flush %d committed in zones %s, want 02", seq, z)
		}
		if res.Third {
			thirds++
		}
	}
	if thirds != 8 {
		t.Errorf("%d flushes went to the third zone, want the 8 whose pair held zone 1", thirds)
	}
	if st := tr.x.Stats(); st.Puts[1] != 0 || st.Puts[0] != 12 || st.Puts[2] != 12 || st.Thirds != 8 {
		t.Errorf("stats %+v", st)
	}
}

func TestPutExpressFailsWithoutTwoZones(t *testing.T) {
	ctx := context.Background()
	faults := objstore.NewFaults(1).FailRandomly(1, objstore.FaultBefore, objstore.OpPutIfAbsent)
	tr := newTier(t, 3, 0, func(i int, s objstore.Store) objstore.Store {
		if i != 2 {
			return objstore.WithFaults(s, faults)
		}
		return s
	})
	res, err := tr.x.PutExpress(ctx, dataKey(1), []byte("x"), express.PutOptions{})
	if err == nil {
		t.Fatalf("PutExpress succeeded with one zone up: key %s", res.Key)
	}
	<-res.Settled
	// The third zone's write was cancelled once two acknowledgements
	// were out of reach; if it landed all the same, the copy is an
	// orphan the gc's reconciler finds by listing.
	infos, err := tr.x.List(ctx, segment.BucketPrefix(1_700_000_000_000))
	if err != nil || len(infos) > 1 || len(infos) == 1 && zonesOf(t, infos[0].Key) != "2" {
		t.Fatalf("List = %v, %v; want at most one copy, in zone 2", infos, err)
	}
}

// A lost reply: the write landed, the retry finds it there and counts it.
func TestPutExpressLostReply(t *testing.T) {
	ctx := context.Background()
	faults := objstore.NewFaults(1).FailNext(1, objstore.FaultAfter, objstore.OpPutIfAbsent)
	tr := newTier(t, 2, 0, func(i int, s objstore.Store) objstore.Store { return objstore.WithFaults(s, faults) })
	res, err := tr.x.PutExpress(ctx, dataKey(1), []byte("x"), express.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if zonesOf(t, res.Key) != "01" || faults.Injected() != 1 {
		t.Fatalf("key %s, %d faults injected", res.Key, faults.Injected())
	}
}

// blocking holds every write until release is closed.
type blocking struct {
	objstore.Store
	release chan struct{}
}

func (b blocking) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.Store.PutIfAbsent(ctx, key, data)
}

// A slow zone of the pair is hedged with the third; the committed key
// names the two that answered, and Delete removes every copy, the slow
// zone's too once it lands.
func TestPutExpressSlowZoneHedged(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	tr := newTier(t, 3, 0, func(i int, s objstore.Store) objstore.Store {
		if i == 0 {
			return blocking{Store: s, release: release}
		}
		return s
	})
	asked := 0
	res, err := tr.x.PutExpress(ctx, dataKey(1), []byte("x"), express.PutOptions{
		HedgeAfter: 1, MayHedge: func() bool { asked++; return true }})
	if err != nil {
		t.Fatal(err)
	}
	if z := zonesOf(t, res.Key); z != "12" || !res.Third || asked != 1 {
		t.Fatalf("key zones %s third %v asked %d; want 12, a hedge, one ask", z, res.Third, asked)
	}
	close(release)
	<-res.Settled
	// The cancelled write to zone 0 did not land; plant a late copy as
	// a request that landed after its caller gave up would.
	bk, _ := express.BucketKey(dataKey(1))
	if err := tr.zones[0].Put(ctx, bk, []byte("x")); err != nil {
		t.Fatal(err)
	}
	infos, err := tr.x.List(ctx, "")
	if err != nil || len(infos) != 1 || zonesOf(t, infos[0].Key) != "012" {
		t.Fatalf("List = %v, %v; want one object listed in zones 012", infos, err)
	}
	if !slices.Contains(tr.x.Aliases(infos[0].Key), res.Key) {
		t.Errorf("Aliases(%s) = %v lacks the committed key %s", infos[0].Key, tr.x.Aliases(infos[0].Key), res.Key)
	}
	if err := tr.x.Delete(ctx, res.Key); err != nil {
		t.Fatal(err)
	}
	for i, ks := range tr.keys(t, "") {
		if len(ks) != 0 {
			t.Errorf("zone %d still holds %v after Delete", i, ks)
		}
	}
}

// Reads go to the local zone when it holds the object, else to another
// holder, and to the next holder when one fails.
func TestGetReadsLocalZoneFirst(t *testing.T) {
	ctx := context.Background()
	faults := objstore.NewFaults(1)
	tr := newTier(t, 3, 2, func(i int, s objstore.Store) objstore.Store {
		if i == 2 {
			return objstore.WithFaults(s, faults)
		}
		return s
	})
	for _, zones := range [][]int{{1, 2}, {0, 1}} {
		bk, _ := express.BucketKey(dataKey(uint64(zones[0]) + 1))
		key, err := express.Key(bk, zones)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.x.Put(ctx, key, []byte("payload")); err != nil {
			t.Fatal(err)
		}
		before := gets(tr)
		if b, err := tr.x.Get(ctx, key, 3, 2); err != nil || string(b) != "lo" {
			t.Fatalf("Get(%s) = %q, %v", key, b, err)
		}
		d := diff(gets(tr), before)
		want := []int64{0, 0, 1} // zone 2 is local
		if zones[0] == 0 {
			want = []int64{1, 0, 0} // not held locally: the first holder
		}
		if !slices.Equal(d, want) {
			t.Errorf("zones %v: GETs per zone %v, want %v", zones, d, want)
		}
	}
	// The local zone fails: the other holder answers.
	faults.FailNext(1, objstore.FaultBefore, objstore.OpGet)
	bk, _ := express.BucketKey(dataKey(2))
	key, _ := express.Key(bk, []int{1, 2})
	before := gets(tr)
	if b, err := tr.x.Get(ctx, key, 0, -1); err != nil || string(b) != "payload" {
		t.Fatalf("Get with the local zone failing = %q, %v", b, err)
	}
	if d := diff(gets(tr), before); !slices.Equal(d, []int64{0, 1, 1}) {
		t.Errorf("GETs per zone %v, want [0 1 1]", d)
	}
	// Gone from every holder: ErrNotFound, as the fetch path expects.
	if err := tr.x.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.x.Get(ctx, key, 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get of a deleted object: %v, want ErrNotFound", err)
	}
}

func gets(tr *tier) []int64 {
	var out []int64
	for _, c := range tr.count {
		out = append(out, c.Snapshot().Op(objstore.OpGet).Requests)
	}
	return out
}

func diff(a, b []int64) []int64 {
	out := make([]int64, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

func TestKeys(t *testing.T) {
	bk, err := express.BucketKey(dataKey(7))
	if err != nil {
		t.Fatal(err)
	}
	if express.IsKey(bk) || express.IsKey(dataKey(7)) {
		t.Errorf("IsKey true for a bucket key or a plain data key")
	}
	k, err := express.Key(bk, []int{2, 0})
	if err != nil || !express.IsKey(k) || zonesOf(t, k) != "02" {
		t.Fatalf("Key = %s, %v", k, err)
	}
	if _, _, ms, err := segment.ParseObjectKey(k); err != nil || ms != 1_700_000_000_000 {
		t.Errorf("a tier key must stay a data object key with its time: %v", err)
	}
	tr := newTier(t, 3, -1, nil)
	if got := tr.x.Aliases(k); len(got) != 7 || !slices.Contains(got, k) {
		t.Errorf("Aliases = %v", got)
	}
}
