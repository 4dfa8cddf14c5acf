package fetch_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// entries returns a partition's index entries from offset 0.
func (e *env) entries(t testing.TB, partition int32) []meta.IndexEntry {
	t.Helper()
	v := e.replica.View()
	defer v.Close()
	it, err := v.Seek(e.topic, partition, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var es []meta.IndexEntry
	for it.Next() {
		es = append(es, it.Entry())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return es
}

// damage rewrites object key in store with edit applied to a copy of its
// bytes and returns the original bytes.
func damage(t testing.TB, store objstore.Store, key string, edit func(obj []byte)) []byte {
	t.Helper()
	orig, err := store.Get(testCtx(t), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(orig)
	edit(bad)
	if err := store.Put(testCtx(t), key, bad); err != nil {
		t.Fatal(err)
	}
	return orig
}

// flipInside flips one byte of needle's first occurrence in obj at or
// after from.
func flipInside(t testing.TB, obj []byte, from int64, needle []byte) {
	t.Helper()
	i := bytes.Index(obj[from:], needle)
	if i < 0 {
		t.Fatalf("%q not in the object after byte %d", needle, from)
	}
	obj[from+int64(i)+int64(len(needle))/2] ^= 0x01
}

// TestReadVerifiesCRC flips one value byte of a stored batch, as a disk
// or a store might: a reader whose cache starts empty never returns the
// altered bytes, only ErrCorrupt, and returns the good batches read
// before the damaged one.
func TestReadVerifiesCRC(t *testing.T) {
	e := newEnv(t, memobj.New(), 1, nil)
	opts := func(seed uint64) batchtest.Options {
		return batchtest.Options{Records: 4, ValueBytes: 100, Seed: seed}
	}
	// Offsets 0-3 and 4-7, one object each.
	e.produce(t, 0, batchtest.Build(t, opts(1)))
	e.produce(t, 0, batchtest.Build(t, opts(2)))
	es := e.entries(t, 0)
	if len(es) != 2 || es[0].ObjectKey == es[1].ObjectKey {
		t.Fatalf("entries %+v, want two in two objects", es)
	}
	damage(t, e.store, es[1].ObjectKey, func(obj []byte) {
		flipInside(t, obj, es[1].Position, batchtest.Value(opts(2), 2))
	})
	v := e.view(t)
	r := fetch.NewReader(e.store, fetch.NewCache(1<<20))

	res, err := r.Read(testCtx(t), v, e.topic, 0, 0, 1<<20)
	if err != nil {
		t.Fatalf("Read from 0: %v", err)
	}
	if bases, _ := batchOffsets(t, res.Records); !slices.Equal(bases, []int64{0}) {
		t.Fatalf("Read from 0: batches at %v, want only the undamaged one at 0", bases)
	}
	for _, from := range []int64{4, 6} {
		res, err := r.Read(testCtx(t), v, e.topic, 0, from, 1<<20)
		if !errors.Is(err, fetch.ErrCorrupt) {
			t.Fatalf("Read from %d = %d bytes, %v; want ErrCorrupt", from, len(res.Records), err)
		}
	}
}

// TestDamagedBytesNotCached damages a batch's length field: the read
// fails, and once the object is repaired the next read through the same
// cache returns the good bytes, because the cache kept nothing of the
// damaged ones.
func TestDamagedBytesNotCached(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(obj []byte, at int64)
	}{
		{"length", func(obj []byte, at int64) {
			// batchLength is bytes 8-11 of a batch; its low byte.
			obj[at+11] ^= 0x40
		}},
		{"value", func(obj []byte, at int64) {
			obj[at+recordBatchHeaderSize+20] ^= 0x01
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, memobj.New(), 1, nil)
			e.produce(t, 0, build(t, 4, 100, 1))
			es := e.entries(t, 0)
			orig := damage(t, e.store, es[0].ObjectKey, func(obj []byte) { tc.edit(obj, es[0].Position) })
			v := e.view(t)
			cache := fetch.NewCache(1 << 20)
			r := fetch.NewReader(e.store, cache)
			if res, err := r.Read(testCtx(t), v, e.topic, 0, 0, 1<<20); !errors.Is(err, fetch.ErrCorrupt) {
				t.Fatalf("Read of the damaged batch = %d bytes, %v; want ErrCorrupt", len(res.Records), err)
			}
			if st := cache.Stats(); st.Entries != 0 || st.Bytes != 0 {
				t.Fatalf("the cache kept damaged bytes: %+v", st)
			}
			if err := e.store.Put(testCtx(t), es[0].ObjectKey, orig); err != nil {
				t.Fatal(err)
			}
			res, err := r.Read(testCtx(t), v, e.topic, 0, 0, 1<<20)
			if err != nil {
				t.Fatalf("Read after the repair: %v", err)
			}
			if bases, _ := batchOffsets(t, res.Records); !slices.Equal(bases, []int64{0}) {
				t.Fatalf("Read after the repair: batches at %v", bases)
			}
		})
	}
}

// recordBatchHeaderSize is the v2 batch header before the records.
const recordBatchHeaderSize = 61

// TestCoalescedGapVerified puts partition 1's batch between two of
// partition 0's in one object and damages it. A read of partition 0
// coalesces its two entries into one GET that spans the damaged batch:
// it still returns both of its own batches, and partition 1's damaged
// bytes are never served, from the store or from the cache.
func TestCoalescedGapVerified(t *testing.T) {
	store := objstore.WithCounters(memobj.New())
	e := newEnv(t, store, 2, nil)
	gapOpts := batchtest.Options{Records: 2, ValueBytes: 100, Seed: 9}
	var batches []produce.Batch
	for i, d := range []struct {
		partition int32
		data      []byte
	}{
		{0, build(t, 2, 100, 1)},
		{1, batchtest.Build(t, gapOpts)},
		{0, build(t, 2, 100, 2)},
	} {
		b, err := produce.BatchFrom(e.topic, d.partition, d.data)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		batches = append(batches, b)
	}
	if _, err := e.p.Produce(testCtx(t), batches); err != nil {
		t.Fatal(err)
	}
	p0, p1 := e.entries(t, 0), e.entries(t, 1)
	if len(p0) != 2 || len(p1) != 1 || p0[0].ObjectKey != p1[0].ObjectKey || p0[1].Position <= p1[0].Position {
		t.Fatalf("entries %+v and %+v, want partition 1's between partition 0's in one object", p0, p1)
	}
	damage(t, store, p1[0].ObjectKey, func(obj []byte) {
		flipInside(t, obj, p1[0].Position, batchtest.Value(gapOpts, 1))
	})
	v := e.view(t)
	cache := fetch.NewCache(1 << 20)
	r := fetch.NewReader(store, cache)

	res, err := r.Read(testCtx(t), v, e.topic, 0, 0, 1<<20)
	if err != nil {
		t.Fatalf("Read partition 0: %v", err)
	}
	if bases, _ := batchOffsets(t, res.Records); !slices.Equal(bases, []int64{0, 2}) {
		t.Fatalf("Read partition 0: batches at %v, want 0 and 2", bases)
	}
	for range 2 {
		res, err = r.Read(testCtx(t), v, e.topic, 1, 0, 1<<20)
		if !errors.Is(err, fetch.ErrCorrupt) {
			t.Fatalf("Read partition 1 = %d bytes, %v; want ErrCorrupt", len(res.Records), err)
		}
	}
}

// TestCacheCheck: Get caches and returns only bytes that pass check.
func TestCacheCheck(t *testing.T) {
	ctx := testCtx(t)
	store := memobj.New()
	if err := store.Put(ctx, "a", bytes.Repeat([]byte{7}, 100)); err != nil {
		t.Fatal(err)
	}
	c := fetch.NewCache(1 << 20)
	errBad := errors.New("bad bytes")
	var calls int
	bad := func(data []byte) error {
		calls++
		return errBad
	}
	for range 2 {
		if _, err := c.Get(ctx, store, "a", 10, 20, bad); !errors.Is(err, errBad) {
			t.Fatalf("Get = %v, want the check's error", err)
		}
	}
	if st := c.Stats(); st.Entries != 0 || calls != 2 {
		t.Fatalf("after two failed checks: %+v, %d checks", st, calls)
	}
	good := func(data []byte) error {
		if len(data) != 20 || binary.BigEndian.Uint16(data) != 0x0707 {
			return errBad
		}
		return nil
	}
	for range 2 {
		if _, err := c.Get(ctx, store, "a", 10, 20, good); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Entries != 1 || st.Misses != 3 || st.Hits != 1 {
		t.Fatalf("stats %+v, want the checked range cached once", st)
	}
}

// logCounter is a slog handler counting records by message.
type logCounter struct {
	mu    sync.Mutex
	n     map[string]int
	attrs []map[string]string
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = make(map[string]int)
	}
	h.n[r.Message]++
	attrs := make(map[string]string)
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	h.attrs = append(h.attrs, attrs)
	return nil
}
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }

func (h *logCounter) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.attrs)
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestMissingObject deletes an object the index points at: every read
// of its partition fails with ErrMissing (not a hang, not a store error
// that looks transient); the damage log logs it once and counts every
// failed read; retries within a second cost no GET; and once the object
// is back, reads are served again without a restart.
func TestMissingObject(t *testing.T) {
	store := objstore.WithCounters(memobj.New())
	e := newEnv(t, store, 1, nil)
	e.produce(t, 0, build(t, 4, 100, 1))
	es := e.entries(t, 0)
	orig, err := store.Get(testCtx(t), es[0].ObjectKey, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(testCtx(t), es[0].ObjectKey); err != nil {
		t.Fatal(err)
	}
	logs := new(logCounter)
	damage := fetch.NewDamageLog(slog.New(logs))
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	fetch.SetDamageClock(damage, clock.Now)
	r := fetch.NewReader(store, fetch.NewCache(1<<20)).WithDamageLog(damage)
	v := e.view(t)
	gets := func() int64 { return store.Snapshot().Op(objstore.OpGet).Requests }

	read := func() error {
		t.Helper()
		_, err := r.Read(testCtx(t), v, e.topic, 0, 0, 1<<20)
		return err
	}
	before := gets()
	const reads = 100
	for range reads {
		if err := read(); !errors.Is(err, fetch.ErrMissing) {
			t.Fatalf("Read = %v, want ErrMissing", err)
		}
	}
	if n := gets() - before; n != 1 {
		t.Fatalf("%d reads within a second made %d GETs, want 1", reads, n)
	}
	// Retries every 250 ms, faster than the recheck interval, still
	// reach the store once a second.
	for range 8 {
		clock.advance(250 * time.Millisecond)
		if err := read(); !errors.Is(err, fetch.ErrMissing) {
			t.Fatalf("Read = %v, want ErrMissing", err)
		}
	}
	if n := gets() - before; n != 3 {
		t.Fatalf("reads over 2 seconds made %d GETs in all, want 3", n)
	}
	st := damage.Stats()
	if st.Objects[fetch.DamageMissing] != 1 || st.Reads[fetch.DamageMissing] != reads+8 || st.Objects[fetch.DamageCorrupt] != 0 {
		t.Fatalf("stats %+v, want 1 missing object and %d failed reads", st, reads+8)
	}
	if n := logs.total(); n != 1 || logs.attrs[0]["object"] != es[0].ObjectKey {
		t.Fatalf("%d log lines (%v), want 1 naming %s", n, logs.attrs, es[0].ObjectKey)
	}

	clock.advance(11 * time.Minute)
	read()
	if n := logs.total(); n != 2 {
		t.Fatalf("%d log lines after the relog interval, want 2", n)
	}

	if err := store.Put(testCtx(t), es[0].ObjectKey, orig); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Second)
	if err := read(); err != nil {
		t.Fatalf("Read after the object was restored: %v", err)
	}
}

// TestDamageLogBounds: the remembered objects and the lines per minute
// stay bounded however many objects are damaged, and a line says how
// many were left out before it.
func TestDamageLogBounds(t *testing.T) {
	logs := new(logCounter)
	d := fetch.NewDamageLog(slog.New(logs))
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	fetch.SetDamageClock(d, clock.Now)
	missing := fmt.Errorf("%w: test", fetch.ErrMissing)
	const objects = 3000
	for i := range objects {
		d.Report(fmt.Sprintf("obj-%d", i), meta.TopicID{}, 0, 0, missing)
	}
	if n := fetch.RememberedObjects(d); n > 1024 {
		t.Fatalf("%d objects remembered", n)
	}
	if n := logs.total(); n != 60 {
		t.Fatalf("%d lines in a minute, want the cap of 60", n)
	}
	clock.advance(time.Minute)
	d.Report("one-more", meta.TopicID{}, 0, 0, fmt.Errorf("%w: test", fetch.ErrCorrupt))
	if n := logs.total(); n != 61 || logs.attrs[60]["lines_suppressed"] != fmt.Sprint(objects-60) {
		t.Fatalf("line after the cap: %v", logs.attrs[len(logs.attrs)-1])
	}
	st := d.Stats()
	if st.Objects[fetch.DamageMissing] != objects || st.Objects[fetch.DamageCorrupt] != 1 {
		t.Fatalf("stats %+v", st)
	}
	d.Report("not-damage", meta.TopicID{}, 0, 0, errors.New("store unreachable"))
	if st := d.Stats(); st.Reads[fetch.DamageMissing]+st.Reads[fetch.DamageCorrupt] != objects+1 {
		t.Fatalf("a store error was counted as damage: %+v", st)
	}
}
