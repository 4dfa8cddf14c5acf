package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
)

func TestReadOffsets(t *testing.T) {
	e := newEnv(t, memobj.New(), 2, nil)
	// Offsets 0-2, then one Batch of two record batches at 3-4 and 5-8.
	e.produce(t, 0, build(t, 3, 10, 1))
	second := append(build(t, 2, 10, 2), build(t, 4, 10, 3)...)
	e.produce(t, 0, second)
	v := e.view(t)
	r := fetch.NewReader(e.store, nil)

	for _, tc := range []struct {
		name      string
		partition int32
		offset    int64
		maxBytes  int32
		wantErr   int16
		wantBases []int64
	}{
		{"from the start", 0, 0, 1 << 20, 0, []int64{0, 3, 5}},
		{"inside the first batch", 0, 2, 1 << 20, 0, []int64{0, 3, 5}},
		{"second batch of an entry", 0, 5, 1 << 20, 0, []int64{5}},
		{"inside the last batch", 0, 8, 1 << 20, 0, []int64{5}},
		{"at the high watermark", 0, 9, 1 << 20, 0, nil},
		{"above the high watermark", 0, 10, 1 << 20, kerr.OffsetOutOfRange.Code, nil},
		{"below the log start", 0, -1, 1 << 20, kerr.OffsetOutOfRange.Code, nil},
		{"empty partition", 1, 0, 1 << 20, 0, nil},
		{"above an empty partition", 1, 1, 1 << 20, kerr.OffsetOutOfRange.Code, nil},
		{"no such partition", 2, 0, 1 << 20, kerr.UnknownTopicOrPartition.Code, nil},
		{"zero maxBytes", 0, 0, 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Read(testCtx(t), v, e.topic, tc.partition, tc.offset, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if res.Err != tc.wantErr {
				t.Fatalf("Err = %d, want %d", res.Err, tc.wantErr)
			}
			bases, _ := batchOffsets(t, res.Records)
			if !slices.Equal(bases, tc.wantBases) {
				t.Fatalf("batches at %v, want %v", bases, tc.wantBases)
			}
			wantHWM, wantLSO := int64(9), int64(0)
			switch {
			case tc.wantErr == kerr.UnknownTopicOrPartition.Code:
				wantHWM, wantLSO = -1, -1
			case tc.partition == 1:
				wantHWM = 0
			}
			if res.HighWatermark != wantHWM || res.LogStartOffset != wantLSO {
				t.Fatalf("HighWatermark %d, LogStartOffset %d; want %d, %d", res.HighWatermark, res.LogStartOffset, wantHWM, wantLSO)
			}
		})
	}
}

func TestReadMaxBytes(t *testing.T) {
	e := newEnv(t, memobj.New(), 1, nil)
	var size int
	for i := range 10 {
		d := build(t, 2, 500, uint64(i))
		size = len(d)
		e.produce(t, 0, d) // one index entry, one object each
	}
	v := e.view(t)
	r := fetch.NewReader(e.store, fetch.NewCache(1<<20))
	for _, tc := range []struct {
		name     string
		offset   int64
		maxBytes int32
		want     int // batches
	}{
		{"smaller than one batch", 0, 1, 1},
		{"smaller than one batch, mid-log", 7, 10, 1},
		{"exactly one batch", 0, int32(size), 1},
		{"two and a half batches", 0, int32(size * 5 / 2), 2},
		{"exactly three batches", 4, int32(3 * size), 3},
		{"everything", 0, 1 << 20, 10},
		{"the tail", 16, 1 << 20, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Read(testCtx(t), v, e.topic, 0, tc.offset, tc.maxBytes)
			if err != nil || res.Err != 0 {
				t.Fatalf("Read = %d, %v", res.Err, err)
			}
			bases, _ := batchOffsets(t, res.Records)
			if len(bases) != tc.want {
				t.Fatalf("%d batches (%d bytes), want %d", len(bases), len(res.Records), tc.want)
			}
			if first := bases[0]; first > tc.offset || first+2 <= tc.offset {
				t.Fatalf("first batch at %d does not hold offset %d", first, tc.offset)
			}
			if len(bases) > 1 && len(res.Records) > int(tc.maxBytes) {
				t.Fatalf("%d bytes for maxBytes %d", len(res.Records), tc.maxBytes)
			}
		})
	}
}

// TestReadColdCache reads objects one agent wrote through a second reader
// whose cache starts empty: the bytes match, and a second read is served
// from the cache.
func TestReadColdCache(t *testing.T) {
	counting := objstore.WithCounters(memobj.New())
	warmCache := fetch.NewCache(64 << 20)
	e := newEnv(t, counting, 3, warmCache)
	for i := range 30 {
		e.produce(t, int32(i%3), build(t, 4, 200, uint64(i)))
	}
	v := e.view(t)
	warm := fetch.NewReader(counting, warmCache)
	cold := fetch.NewReader(counting, fetch.NewCache(64<<20))

	before := counting.Snapshot()
	var warmData [3][]byte
	for p := range int32(3) {
		res, err := warm.Read(testCtx(t), v, e.topic, p, 0, 1<<20)
		if err != nil || res.Err != 0 || len(res.Records) == 0 {
			t.Fatalf("warm Read(%d) = %d bytes, %d, %v", p, len(res.Records), res.Err, err)
		}
		warmData[p] = res.Records
	}
	if gets := counting.Snapshot().Sub(before).Op(objstore.OpGet).Requests; gets != 0 {
		t.Fatalf("reading objects this agent wrote took %d GETs", gets)
	}

	for pass := range 2 {
		before := counting.Snapshot()
		for p := range int32(3) {
			res, err := cold.Read(testCtx(t), v, e.topic, p, 0, 1<<20)
			if err != nil || res.Err != 0 {
				t.Fatalf("cold Read(%d) = %d, %v", p, res.Err, err)
			}
			if !bytes.Equal(res.Records, warmData[p]) {
				t.Fatalf("partition %d: cold read differs from warm read", p)
			}
		}
		gets := counting.Snapshot().Sub(before).Op(objstore.OpGet).Requests
		if pass == 0 && gets == 0 || pass == 1 && gets != 0 {
			t.Fatalf("pass %d: %d GETs", pass, gets)
		}
	}
	if st := cold.Cache().Stats(); st.Misses == 0 || st.Hits == 0 {
		t.Fatalf("cold cache stats %+v", st)
	}
}

// TestReadChecksIndex commits index entries that disagree with the
// object's bytes: Read refuses them rather than hand out wrong offsets.
func TestReadChecksIndex(t *testing.T) {
	e := newEnv(t, memobj.New(), 4, nil)
	e.produce(t, 0, build(t, 3, 10, 1))
	v := e.replica.View()
	it, err := v.Seek(e.topic, 0, 0)
	if err != nil || !it.Next() {
		t.Fatalf("Seek: %v", err)
	}
	good := it.Entry()
	it.Close()
	v.Close()

	for i, tc := range []struct {
		name string
		edit func(cb *meta.CommitBatch)
		want error
	}{
		{"records", func(cb *meta.CommitBatch) { cb.Records = 5 }, fetch.ErrCorrupt},
		{"batch count", func(cb *meta.CommitBatch) { cb.BatchCount = 2 }, fetch.ErrCorrupt},
		{"range inside a batch", func(cb *meta.CommitBatch) { cb.Position += 8 }, fetch.ErrCorrupt},
		{"range past the object", func(cb *meta.CommitBatch) { cb.Position += 1 << 20 }, objstore.ErrInvalidRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			part := int32(i%3 + 1)
			cb := meta.CommitBatch{
				TopicID: e.topic, Partition: part, Position: good.Position, Length: good.Length,
				Records: good.Records, BatchCount: good.BatchCount, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			}
			tc.edit(&cb)
			res, err := e.replica.Propose(testCtx(t), meta.CommitObject{ObjectKey: good.ObjectKey + "-" + tc.name, ObjectSize: 4 << 20, Batches: []meta.CommitBatch{cb}})
			if err != nil || res.Batches[0].Code != 0 {
				t.Fatalf("CommitObject = %v, %v", res.Err(), err)
			}
			// The same bytes under a second key, so the index points at a
			// real object.
			data, err := e.store.Get(testCtx(t), good.ObjectKey, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.store.Put(testCtx(t), good.ObjectKey+"-"+tc.name, data); err != nil {
				t.Fatal(err)
			}
			v := e.view(t)
			_, err = fetch.NewReader(e.store, nil).Read(testCtx(t), v, e.topic, part, res.Batches[0].BaseOffset, 1<<20)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCache(t *testing.T) {
	ctx := testCtx(t)
	store := objstore.WithCounters(memobj.New())
	obj := make([]byte, 1000)
	for i := range obj {
		obj[i] = byte(i)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := store.Put(ctx, k, obj); err != nil {
			t.Fatal(err)
		}
	}
	get := func(t *testing.T, c *fetch.Cache, key string, pos, n int64) {
		t.Helper()
		got, err := c.Get(ctx, store, key, pos, n, nil)
		if err != nil || !bytes.Equal(got, obj[pos:pos+n]) {
			t.Fatalf("Get(%s, %d, %d) = %v, %v", key, pos, n, got, err)
		}
	}
	gets := func() int64 { return store.Snapshot().Op(objstore.OpGet).Requests }

	t.Run("range hit", func(t *testing.T) {
		c := fetch.NewCache(10_000)
		before := gets()
		get(t, c, "a", 100, 200)
		get(t, c, "a", 100, 200)
		get(t, c, "a", 150, 50)  // inside the cached range
		get(t, c, "a", 250, 100) // overlaps only
		if n := gets() - before; n != 2 {
			t.Fatalf("%d GETs, want 2", n)
		}
		if st := c.Stats(); st.Hits != 2 || st.Misses != 2 || st.Bytes != 300 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("whole object covers ranges", func(t *testing.T) {
		c := fetch.NewCache(10_000)
		get(t, c, "a", 0, 10)
		c.PutObject("a", bytes.Clone(obj))
		before := gets()
		get(t, c, "a", 500, 500)
		get(t, c, "a", 0, 10)
		if n := gets() - before; n != 0 {
			t.Fatalf("%d GETs, want 0", n)
		}
		if st := c.Stats(); st.Bytes != 1000 || st.Entries != 1 {
			t.Fatalf("the whole object did not replace the range it covers: %+v", st)
		}
	})
	t.Run("bound", func(t *testing.T) {
		c := fetch.NewCache(2500)
		for _, k := range []string{"a", "b", "c", "a"} {
			get(t, c, k, 0, 1000)
			if st := c.Stats(); st.Bytes > 2500 {
				t.Fatalf("cache holds %d bytes, bound 2500", st.Bytes)
			}
		}
		st := c.Stats()
		if st.Evictions != 2 || st.Entries != 2 || st.Misses != 4 {
			t.Fatalf("stats %+v, want a evicted by c, then b by a", st)
		}
		before := gets()
		get(t, c, "c", 0, 1000) // still cached
		if gets() != before {
			t.Fatal("the most recent entry was evicted")
		}
	})
	t.Run("larger than the cache", func(t *testing.T) {
		c := fetch.NewCache(100)
		get(t, c, "a", 0, 1000)
		c.PutObject("b", bytes.Clone(obj))
		if st := c.Stats(); st.Bytes != 0 {
			t.Fatalf("cache of 100 bytes holds %d", st.Bytes)
		}
	})
	t.Run("errors", func(t *testing.T) {
		c := fetch.NewCache(10_000)
		if _, err := c.Get(ctx, store, "missing", 0, 10, nil); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("missing object: %v", err)
		}
		if _, err := c.Get(ctx, store, "a", 990, 20, nil); !errors.Is(err, fetch.ErrCorrupt) {
			t.Fatalf("short range: %v", err)
		}
		if st := c.Stats(); st.Entries != 0 {
			t.Fatalf("failed reads were cached: %+v", st)
		}
	})
}

// heldGets holds every Get until release is closed, keeping count of
// the GETs and bytes it holds.
type heldGets struct {
	objstore.Store
	release chan struct{}
	gets    atomic.Int64
	mu      sync.Mutex
	held    int
	bytes   int64
}

func (h *heldGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	h.gets.Add(1)
	h.mu.Lock()
	h.held++
	h.bytes += n
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.held--
		h.bytes -= n
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Store.Get(ctx, key, off, n)
}

func (h *heldGets) holding() (gets int, bytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.bytes
}

func TestCacheCoalescesMisses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memobj.New()
		obj := bytes.Repeat([]byte("x"), 4096)
		if err := mem.Put(ctx, "k", obj); err != nil {
			t.Fatal(err)
		}
		store := &heldGets{Store: mem, release: make(chan struct{})}
		c := fetch.NewCache(1 << 20)

		const readers = 8
		var wg sync.WaitGroup
		results := make([][]byte, readers)
		for i := range readers {
			wg.Go(func() {
				data, err := c.Get(ctx, store, "k", 100, 1000, nil)
				if err != nil {
					t.Error(err)
				}
				results[i] = data
			})
		}
		// A reader that gives up does not fail the others.
		quitter, cancel := context.WithCancel(ctx)
		wg.Go(func() {
			if _, err := c.Get(quitter, store, "k", 100, 1000, nil); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Get = %v", err)
			}
		})
		synctest.Wait() // every reader waits on the one GET
		cancel()
		synctest.Wait()
		if n := store.gets.Load(); n != 1 {
			t.Fatalf("%d concurrent misses made %d GETs, want 1", readers+1, n)
		}
		close(store.release)
		wg.Wait()
		for i, r := range results {
			if !bytes.Equal(r, obj[100:1100]) {
				t.Fatalf("reader %d got %d bytes", i, len(r))
			}
		}
		if st := c.Stats(); st.Misses != 1 || st.Coalesced != readers {
			t.Fatalf("stats %+v, want 1 miss and %d coalesced", st, readers)
		}
	})
}

// Compile-time check that the produce path can fill a fetch cache.
var _ interface{ PutObject(string, []byte) } = (*fetch.Cache)(nil)
