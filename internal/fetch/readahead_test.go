package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

func TestCoalesce(t *testing.T) {
	at := func(key string, pos, length int64) meta.IndexEntry {
		return meta.IndexEntry{ObjectKey: key, Position: pos, Length: length}
	}
	marker := meta.IndexEntry{Control: true, Length: 78}
	const gap, maxSpan = 100, 1000
	for _, tc := range []struct {
		name    string
		entries []meta.IndexEntry
		want    []fetch.Span
	}{
		{"none", nil, nil},
		{"adjacent", []meta.IndexEntry{at("a", 0, 10), at("a", 10, 20), at("a", 30, 5)}, []fetch.Span{{"a", 0, 35}}},
		{"gap at the threshold", []meta.IndexEntry{at("a", 0, 10), at("a", 110, 10)}, []fetch.Span{{"a", 0, 120}}},
		{"gap past the threshold", []meta.IndexEntry{at("a", 0, 10), at("a", 111, 10)}, []fetch.Span{{"a", 0, 10}, {"a", 111, 121}}},
		{"other object", []meta.IndexEntry{at("a", 0, 10), at("b", 10, 10), at("a", 20, 10)},
			[]fetch.Span{{"a", 0, 10}, {"b", 10, 20}, {"a", 20, 30}}},
		{"going back", []meta.IndexEntry{at("a", 50, 10), at("a", 0, 10)}, []fetch.Span{{"a", 50, 60}, {"a", 0, 10}}},
		{"overlapping", []meta.IndexEntry{at("a", 0, 10), at("a", 5, 10)}, []fetch.Span{{"a", 0, 10}, {"a", 5, 15}}},
		{"a marker ends a span", []meta.IndexEntry{at("a", 0, 10), marker, at("a", 10, 10)}, []fetch.Span{{"a", 0, 10}, {"a", 10, 20}}},
		{"only markers", []meta.IndexEntry{marker, marker}, nil},
		{"span bound", []meta.IndexEntry{at("a", 0, 400), at("a", 400, 400), at("a", 800, 200), at("a", 1000, 1)},
			[]fetch.Span{{"a", 0, 1000}, {"a", 1000, 1001}}},
		{"entry larger than the bound", []meta.IndexEntry{at("a", 0, 10), at("a", 10, 5000), at("a", 5010, 10)},
			[]fetch.Span{{"a", 0, 10}, {"a", 10, 5010}, {"a", 5010, 5020}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fetch.Coalesce(tc.entries, gap, maxSpan); !slices.Equal(got, tc.want) {
				t.Fatalf("Coalesce = %v, want %v", got, tc.want)
			}
		})
	}
}

// produceMixed produces, in one call and so one object, perPartition
// batches for each of partitions 0 to n-1, interleaved as a level-0
// object holds them when many producers write at once.
func (e *env) produceMixed(t testing.TB, n int32, perPartition, records, valueBytes int, seed uint64) {
	t.Helper()
	var batches []produce.Batch
	for i := range perPartition {
		for p := range n {
			b, err := produce.BatchFrom(e.topic, p, build(t, records, valueBytes, seed+uint64(i)*uint64(n)+uint64(p)))
			if err != nil {
				t.Fatal(err)
			}
			batches = append(batches, b)
		}
	}
	e.produceBatches(t, batches)
}

// readAll reads partition from offset 0 to its high watermark with r in
// fetches of maxBytes, as a consumer catching up does, and returns the
// concatenated answers.
func readAll(t testing.TB, r *fetch.Reader, v *meta.View, topic meta.TopicID, partition int32, maxBytes int32) []byte {
	t.Helper()
	var out []byte
	for offset := int64(0); ; {
		res, err := r.Read(testCtx(t), v, topic, partition, offset, maxBytes)
		if err != nil || res.Err != 0 {
			t.Fatalf("Read from %d = %d, %v", offset, res.Err, err)
		}
		if len(res.Records) == 0 {
			return out
		}
		out = append(out, res.Records...)
		bs := parseBatches(t, res.Records)
		offset = bs[len(bs)-1].last + 1
	}
}

var testReadAhead = fetch.ReadAhead{Bytes: 1 << 20, MaxGets: 4}

// TestReadAheadFewerGets catches up on a partition whose batches lie in
// a few objects among another partition's, fetching a few KiB at a time:
// without read-ahead each fetch makes its own GET, with it each object's
// batches of the partition are one GET. The bytes are the same.
func TestReadAheadFewerGets(t *testing.T) {
	counting := objstore.WithCounters(memobj.New())
	e := newEnv(t, counting, 2, nil)
	const objects = 6
	for i := range objects {
		e.produceMixed(t, 2, 32, 4, 200, uint64(i)*100)
	}
	if keys := objectKeys(e.entries(t, 0)); len(keys) != objects {
		t.Fatalf("partition 0 lies in %d objects, want %d", len(keys), objects)
	}
	v := e.view(t)
	const fetchBytes = 4 << 10

	read := func(r *fetch.Reader) ([]byte, objstore.OpCounts) {
		before := counting.Snapshot()
		data := readAll(t, r, v, e.topic, 0, fetchBytes)
		return data, counting.Snapshot().Sub(before).Op(objstore.OpGet)
	}
	plain, plainGets := read(fetch.NewReader(counting, fetch.NewCache(64<<20)))
	ahead := fetch.NewReader(counting, fetch.NewCache(64<<20)).WithReadAhead(testReadAhead)
	got, aheadGets := read(ahead)
	if !bytes.Equal(got, plain) {
		t.Fatalf("read-ahead returned %d bytes unlike the %d without it", len(got), len(plain))
	}
	mb := float64(len(plain)) / 1e6
	t.Logf("%d bytes: %d GETs (%.0f/MB) without read-ahead, %d (%.0f/MB) with it",
		len(plain), plainGets.Requests, float64(plainGets.Requests)/mb, aheadGets.Requests, float64(aheadGets.Requests)/mb)
	if aheadGets.Requests > plainGets.Requests/3 || aheadGets.Requests < objects {
		t.Fatalf("%d GETs with read-ahead, %d without; want at least %d and at most a third", aheadGets.Requests, plainGets.Requests, objects)
	}
	if st := ahead.Cache().Stats(); st.ReadAheads == 0 {
		t.Fatalf("no read-ahead: %+v", st)
	}
}

func objectKeys(es []meta.IndexEntry) []string {
	var keys []string
	for _, e := range es {
		if !slices.Contains(keys, e.ObjectKey) {
			keys = append(keys, e.ObjectKey)
		}
	}
	return keys
}

// TestReadAheadNotForTail reads objects the reader's own agent wrote
// (its cache holds them): no read-ahead, no GET.
func TestReadAheadNotForTail(t *testing.T) {
	counting := objstore.WithCounters(memobj.New())
	cache := fetch.NewCache(64 << 20)
	e := newEnv(t, counting, 2, cache)
	for i := range 4 {
		e.produceMixed(t, 2, 8, 4, 200, uint64(i)*100)
	}
	v := e.view(t)
	r := fetch.NewReader(counting, cache).WithReadAhead(testReadAhead)
	before := counting.Snapshot()
	if len(readAll(t, r, v, e.topic, 0, 4<<10)) == 0 {
		t.Fatal("read nothing")
	}
	if gets := counting.Snapshot().Sub(before).Op(objstore.OpGet).Requests; gets != 0 {
		t.Fatalf("%d GETs reading what the cache holds", gets)
	}
	if st := cache.Stats(); st.ReadAheads != 0 {
		t.Fatalf("read ahead of a reader served from the cache: %+v", st)
	}
}

// newSpreadEnv writes partition 0 into 24 objects of one ~100 KB entry
// each.
func newSpreadEnv(t *testing.T) (*env, *memobj.Store) {
	t.Helper()
	mem := memobj.New()
	e := newEnv(t, mem, 1, nil)
	for i := range 24 {
		e.produce(t, 0, build(t, 10, 10_000, uint64(i)))
	}
	return e, mem
}

// TestReadAheadParallelBounded holds every GET of a cold read of a
// partition spread over many objects: the read has several GETs in
// flight at once, no more than MaxGets beyond its own, and no more bytes
// than a quarter of the cache; once they are let go it returns the bytes
// a reader without read-ahead returns.
func TestReadAheadParallelBounded(t *testing.T) {
	e, mem := newSpreadEnv(t)
	v := e.view(t)
	want := readAll(t, fetch.NewReader(mem, nil), v, e.topic, 0, 1<<20)

	for _, tc := range []struct {
		name       string
		cacheBytes int64
		cfg        fetch.ReadAhead
		wantGets   int // held at once
	}{
		// Each of 4 GET slots and the read's own first range.
		{"GET slots bound", 64 << 20, fetch.ReadAhead{Bytes: 8 << 20, MaxGets: 4}, 5},
		// A quarter of 4 MiB is ten ~100 KB entries.
		{"bytes bound", 4 << 20, fetch.ReadAhead{Bytes: 8 << 20, MaxGets: 64}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &heldGets{Store: mem, release: make(chan struct{})}
				r := fetch.NewReader(store, fetch.NewCache(tc.cacheBytes)).WithReadAhead(tc.cfg)
				var got []byte
				done := make(chan struct{})
				go func() {
					defer close(done)
					res, err := r.Read(context.Background(), v, e.topic, 0, 0, 1<<20)
					if err != nil || res.Err != 0 {
						t.Errorf("Read = %d, %v", res.Err, err)
					}
					got = res.Records
				}()
				synctest.Wait()
				gets, held := store.holding()
				if gets != tc.wantGets || held > tc.cacheBytes/4 {
					t.Errorf("%d GETs of %d bytes held at once; want %d, at most %d bytes", gets, held, tc.wantGets, tc.cacheBytes/4)
				}
				close(store.release)
				<-done
				if !bytes.HasPrefix(want, got) || len(got) == 0 {
					t.Fatalf("read %d bytes unlike a reader without read-ahead", len(got))
				}
				synctest.Wait()
			})
		})
	}
}

// TestReadAheadStopsWithConsumer ends a cold read's context while its
// read-ahead waits for GET slots: no GET starts afterwards.
func TestReadAheadStopsWithConsumer(t *testing.T) {
	e, mem := newSpreadEnv(t)
	v := e.view(t)
	synctest.Test(t, func(t *testing.T) {
		store := &heldGets{Store: mem, release: make(chan struct{})}
		r := fetch.NewReader(store, fetch.NewCache(64<<20)).WithReadAhead(fetch.ReadAhead{Bytes: 8 << 20, MaxGets: 2})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := r.Read(ctx, v, e.topic, 0, 0, 1<<20); !errors.Is(err, context.Canceled) {
				t.Errorf("Read of a gone consumer = %v, want context.Canceled", err)
			}
		}()
		synctest.Wait()
		started := store.gets.Load()
		cancel()
		<-done
		close(store.release)
		synctest.Wait()
		if n := store.gets.Load(); n != started || started != 3 {
			t.Fatalf("%d GETs started before the consumer went, %d in all; want 3 and no more", started, n)
		}
	})
}

// TestReadAheadChecked damages a batch of partition 0 in an object that
// only read-ahead reads: the damaged bytes are never cached or returned,
// the reads before the damage return the good bytes, and the read that
// reaches it fails with ErrCorrupt as without read-ahead.
func TestReadAheadChecked(t *testing.T) {
	mem := memobj.New()
	e := newEnv(t, mem, 2, nil)
	opts := func(seed uint64) batchtest.Options {
		return batchtest.Options{Records: 4, ValueBytes: 200, Seed: seed}
	}
	for i := range 4 {
		e.produceMixed(t, 2, 8, 4, 200, uint64(i)*100)
	}
	es := e.entries(t, 0)
	keys := objectKeys(es)
	// The first batch of partition 0 in the third object.
	var bad meta.IndexEntry
	for _, x := range es {
		if x.ObjectKey == keys[2] {
			bad = x
			break
		}
	}
	damage(t, mem, bad.ObjectKey, func(obj []byte) {
		// Seed of that batch in produceMixed: object 2, batch 0,
		// partition 0.
		flipInside(t, obj, bad.Position, batchtest.Value(opts(200), 1))
	})
	v := e.view(t)
	cache := fetch.NewCache(64 << 20)
	r := fetch.NewReader(mem, cache).WithReadAhead(testReadAhead)
	var got []byte
	offset := int64(0)
	for {
		res, err := r.Read(testCtx(t), v, e.topic, 0, offset, 4<<10)
		if err != nil {
			if !errors.Is(err, fetch.ErrCorrupt) || offset != bad.BaseOffset {
				t.Fatalf("Read from %d = %v; want ErrCorrupt from %d", offset, err, bad.BaseOffset)
			}
			break
		}
		if len(res.Records) == 0 {
			t.Fatalf("read to the end at %d past the damage at %d", offset, bad.BaseOffset)
		}
		got = append(got, res.Records...)
		bs := parseBatches(t, res.Records)
		offset = bs[len(bs)-1].last + 1
	}
	if cache.Covered(bad.ObjectKey, bad.Position, bad.Length) {
		t.Fatal("the cache holds the damaged batch")
	}
	if st := cache.Stats(); st.ReadAheads == 0 {
		t.Fatalf("no read-ahead: %+v", st)
	}
	plain := fetch.NewReader(mem, nil)
	res, err := plain.Read(testCtx(t), v, e.topic, 0, 0, int32(len(got)))
	if err != nil || !bytes.Equal(res.Records, got) {
		t.Fatalf("read-ahead returned %d bytes before the damage unlike the %d without it (%v)", len(got), len(res.Records), err)
	}
}

// TestCacheJoinsReadAhead: a miss inside a range being read ahead waits
// for that GET instead of making its own, and gets its part of the
// bytes; if the larger GET fails its check (the damage may lie outside
// the part wanted), the miss reads its part alone.
func TestCacheJoinsReadAhead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failWide bool
		wantGets int64
	}{
		{"joins", false, 1},
		{"reads alone after a failure", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				mem := memobj.New()
				obj := make([]byte, 4096)
				for i := range obj {
					obj[i] = byte(i)
				}
				if err := mem.Put(ctx, "k", obj); err != nil {
					t.Fatal(err)
				}
				store := &heldGets{Store: mem, release: make(chan struct{})}
				c := fetch.NewCache(1 << 20)
				errWide := errors.New("damage outside the part wanted")
				check := func(data []byte) error {
					if tc.failWide && len(data) == 4000 {
						return errWide
					}
					return nil
				}
				if !fetch.ReadAheadRange(ctx, c, store, "k", 0, 4000, check) {
					t.Fatal("read-ahead of an empty cache started no GET")
				}
				var got []byte
				var err error
				done := make(chan struct{})
				go func() {
					defer close(done)
					got, err = c.Get(ctx, store, "k", 1000, 500, check)
				}()
				synctest.Wait()
				if n := store.gets.Load(); n != 1 {
					t.Fatalf("%d GETs with a miss inside a read-ahead, want 1", n)
				}
				close(store.release)
				<-done
				if err != nil || !bytes.Equal(got, obj[1000:1500]) {
					t.Fatalf("Get = %d bytes, %v", len(got), err)
				}
				if n := store.gets.Load(); n != tc.wantGets {
					t.Fatalf("%d GETs, want %d", n, tc.wantGets)
				}
			})
		})
	}
}

// TestReadBytesOnce catches up on a partition fetching a batch and a half
// at a time, so each fetch plans two entries and returns one: the entry
// it planned but did not return is cached, and the next fetch does not
// read it from the store again, with or without read-ahead.
func TestReadBytesOnce(t *testing.T) {
	counting := objstore.WithCounters(memobj.New())
	e := newEnv(t, counting, 1, nil)
	var datas [][]byte
	for i := range 40 {
		datas = append(datas, build(t, 4, 1000, uint64(i)))
	}
	e.produce(t, 0, datas...)
	entries := e.entries(t, 0)
	if len(entries) != len(datas) || len(objectKeys(entries)) != 1 {
		t.Fatalf("%d entries in %d objects, want %d in one", len(entries), len(objectKeys(entries)), len(datas))
	}
	size := len(datas[0])
	v := e.view(t)
	for _, tc := range []struct {
		name string
		r    *fetch.Reader
	}{
		{"plain", fetch.NewReader(counting, fetch.NewCache(64<<20))},
		{"read-ahead", fetch.NewReader(counting, fetch.NewCache(64<<20)).WithReadAhead(testReadAhead)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counting.Snapshot()
			got := readAll(t, tc.r, v, e.topic, 0, int32(size*3/2))
			read := counting.Snapshot().Sub(before).Op(objstore.OpGet).Bytes
			if read != int64(len(got)) {
				t.Fatalf("read %d bytes from the store for %d bytes of records", read, len(got))
			}
		})
	}
}

// TestReadAheadWindowSteps catches up on a partition longer than the
// read-ahead window, fetching a little at a time: the window moves on in
// steps large enough that an object's entries of the partition are read
// together, not one GET per entry as the window's edge passes them.
func TestReadAheadWindowSteps(t *testing.T) {
	counting := objstore.WithCounters(memobj.New())
	e := newEnv(t, counting, 1, nil)
	const objects, perObject = 20, 8
	var datas [][]byte
	for i := range objects {
		datas = datas[:0]
		for j := range perObject {
			datas = append(datas, build(t, 4, 2500, uint64(i*perObject+j)))
		}
		e.produce(t, 0, datas...)
	}
	if keys := objectKeys(e.entries(t, 0)); len(keys) != objects {
		t.Fatalf("%d objects, want %d", len(keys), objects)
	}
	v := e.view(t)
	// About three objects' worth.
	r := fetch.NewReader(counting, fetch.NewCache(64<<20)).WithReadAhead(fetch.ReadAhead{Bytes: 256 << 10, MaxGets: 4})
	before := counting.Snapshot()
	if len(readAll(t, r, v, e.topic, 0, 16<<10)) == 0 {
		t.Fatal("read nothing")
	}
	gets := counting.Snapshot().Sub(before).Op(objstore.OpGet).Requests
	t.Logf("%d GETs for %d objects of %d entries", gets, objects, perObject)
	if gets > 2*objects {
		t.Fatalf("%d GETs for %d objects of %d entries of the partition; want at most %d", gets, objects, perObject, 2*objects)
	}
}

// TestReadAheadPassesHugeEntry puts an entry larger than read-ahead may
// have in flight before others: read-ahead leaves it to the read that
// needs it and reads the ones after it.
func TestReadAheadPassesHugeEntry(t *testing.T) {
	mem := memobj.New()
	e := newEnv(t, mem, 1, nil)
	e.produce(t, 0, build(t, 4, 1000, 0))
	e.produce(t, 0, build(t, 4, 500_000, 1)) // 2 MB: more than a quarter of 4 MiB
	for i := range 10 {
		e.produce(t, 0, build(t, 4, 1000, uint64(2+i)))
	}
	v := e.view(t)
	synctest.Test(t, func(t *testing.T) {
		store := &heldGets{Store: mem, release: make(chan struct{})}
		r := fetch.NewReader(store, fetch.NewCache(4<<20)).WithReadAhead(fetch.ReadAhead{Bytes: 8 << 20, MaxGets: 4})
		done := make(chan struct{})
		go func() {
			defer close(done)
			if res, err := r.Read(context.Background(), v, e.topic, 0, 0, 1<<20); err != nil || len(res.Records) == 0 {
				t.Errorf("Read = %d bytes, %v", len(res.Records), err)
			}
		}()
		synctest.Wait()
		// The read's own range, and four GET slots' worth after the
		// huge entry.
		if gets, held := store.holding(); gets != 5 || held > 1<<20 {
			t.Errorf("%d GETs of %d bytes held; want 5 of small entries", gets, held)
		}
		close(store.release)
		<-done
		synctest.Wait()
	})
}

// TestReadAheadShares has eight consumers catch up on eight partitions
// at once through a cache smaller than their windows together: what is
// read ahead stays cached until it is read, so nothing is read from the
// store twice.
func TestReadAheadShares(t *testing.T) {
	counting := objstore.WithCounters(memobj.New())
	e := newEnv(t, counting, 8, nil)
	for i := range 40 {
		e.produceMixed(t, 8, 4, 4, 4000, uint64(i)*100) // ~64 KB per partition per object
	}
	v := e.view(t)
	r := fetch.NewReader(counting, fetch.NewCache(8<<20)).WithReadAhead(fetch.ReadAhead{Bytes: 8 << 20, MaxGets: 8})
	before := counting.Snapshot()
	var total int64
	offsets := make([]int64, 8)
	// One connection per consumer, for as long as it reads.
	conns := make([]context.Context, 8)
	for p := range conns {
		conns[p] = testCtx(t)
	}
	for done := 0; done < 8; {
		done = 0
		for p := range int32(8) {
			res, err := r.Read(conns[p], v, e.topic, p, offsets[p], 32<<10)
			if err != nil || res.Err != 0 {
				t.Fatalf("Read(%d, %d) = %d, %v", p, offsets[p], res.Err, err)
			}
			if len(res.Records) == 0 {
				done++
				continue
			}
			total += int64(len(res.Records))
			bs := parseBatches(t, res.Records)
			offsets[p] = bs[len(bs)-1].last + 1
		}
	}
	got := counting.Snapshot().Sub(before).Op(objstore.OpGet)
	t.Logf("%d bytes of records, %d read from the store in %d GETs", total, got.Bytes, got.Requests)
	if got.Bytes > total+total/20 {
		t.Fatalf("read %d bytes from the store for %d bytes of records", got.Bytes, total)
	}
}
