package viewsnap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/views"
)

// fakeViews is Views over plain Pebble databases, one per view, whose
// "offsets" the test sets.
type fakeViews struct {
	dir string
	mu  sync.Mutex
	dbs map[uint64]*pebble.DB
	// offsets and epochs per view, as a runner's checkpoint reports.
	offsets map[uint64]int64
	epochs  map[uint64]uint64
	// noCompactions: the databases compact nothing, so a test knows
	// which files outlive an epoch.
	noCompactions bool
}

func newFakeViews(t *testing.T) *fakeViews {
	t.Helper()
	f := &fakeViews{dir: t.TempDir(), dbs: map[uint64]*pebble.DB{}, offsets: map[uint64]int64{}, epochs: map[uint64]uint64{}}
	t.Cleanup(func() {
		for _, db := range f.dbs {
			db.Close()
		}
	})
	return f
}

func (f *fakeViews) Dir(id uint64) string { return filepath.Join(f.dir, fmt.Sprint(id)) }

func (f *fakeViews) db(t *testing.T, id uint64) *pebble.DB {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if db, ok := f.dbs[id]; ok {
		return db
	}
	db, err := pebble.Open(filepath.Join(f.Dir(id), "state"), &pebble.Options{Logger: quietLogger{}, DisableAutomaticCompactions: f.noCompactions})
	if err != nil {
		t.Fatal(err)
	}
	f.dbs[id] = db
	return db
}

// write commits n keys from key start on as one "epoch", moving the
// view's offsets by n.
func (f *fakeViews) write(t *testing.T, id uint64, start, n int) {
	t.Helper()
	db := f.db(t, id)
	b := db.NewBatch()
	for i := start; i < start+n; i++ {
		b.Set(fmt.Appendf(nil, "k%08d", i), fmt.Appendf(nil, "value %d %s", i, strings.Repeat("x", 100)), nil)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.offsets[id] += int64(n)
	f.epochs[id]++
	f.mu.Unlock()
}

func (f *fakeViews) Maintained() []meta.Relation {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []meta.Relation
	for id := range f.dbs {
		out = append(out, meta.Relation{ID: id, Name: fmt.Sprintf("v%d", id), Kind: meta.RelationView})
	}
	return out
}

func (f *fakeViews) Written(id uint64) (uint64, uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	db, ok := f.dbs[id]
	if !ok {
		return 0, 0, false
	}
	return db.Metrics().WAL.BytesIn, f.epochs[id], true
}

func (f *fakeViews) Checkpoint(id uint64, dir string) (views.CheckpointInfo, error) {
	f.mu.Lock()
	db, off, ep := f.dbs[id], f.offsets[id], f.epochs[id]
	f.mu.Unlock()
	if err := db.Flush(); err != nil {
		return views.CheckpointInfo{}, err
	}
	if err := db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return views.CheckpointInfo{}, err
	}
	return views.CheckpointInfo{Epoch: ep, Offsets: off, Inputs: []map[int32]source.Position{{0: {Offset: off}}}}, nil
}

// contents reads every key and value of the Pebble database in dir.
func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{ErrorIfNotExists: true, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return dbContents(t, db)
}

func dbContents(t *testing.T, db *pebble.DB) map[string]string {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	return out
}

type nopMeta struct{}

func (nopMeta) View() *meta.View { panic("not in these tests") }

func newTestSnapshotter(t *testing.T, store objstore.Store, vs Views, agent string) *Snapshotter {
	t.Helper()
	s, err := New(Config{Store: store, Meta: nopMeta{}, Views: vs, AgentID: agent, Staging: filepath.Join(t.TempDir(), "staging")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func storeKeys(t *testing.T, store objstore.Store, prefix string) []string {
	t.Helper()
	objs, err := store.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// TestSnapshotRestore: a snapshot restores to what the state held when
// it was taken; a later one uploads only the SSTs the earlier lacked;
// two are kept, and no object outlives the manifests naming it.
func TestSnapshotRestore(t *testing.T) {
	for _, backend := range []struct {
		name string
		new  func(t *testing.T) objstore.Store
	}{
		{"mem", func(*testing.T) objstore.Store { return memobj.New() }},
		{"file", func(t *testing.T) objstore.Store {
			s, err := fileobj.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(backend.name, func(t *testing.T) { testSnapshotRestore(t, backend.new(t)) })
	}
}

func testSnapshotRestore(t *testing.T, store objstore.Store) {
	ctx := context.Background()
	vs := newFakeViews(t)
	s := newTestSnapshotter(t, store, vs, "agent-a")
	rel := meta.Relation{ID: 7, Name: "v7", Kind: meta.RelationView}
	var wants []map[string]string
	var results []Result
	for i := range 4 {
		vs.write(t, 7, i*2000, 2000)
		wants = append(wants, dbContents(t, vs.db(t, 7)))
		r, err := s.Snapshot(ctx, rel)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
		if r.Existed || r.Offsets != int64((i+1)*2000) {
			t.Fatalf("snapshot %d: %+v", i, r)
		}
		if i > 0 && r.UploadedFiles >= r.Files {
			t.Errorf("snapshot %d uploaded %d of its %d files: the earlier SSTs should be reused", i, r.UploadedFiles, r.Files)
		}
	}
	// Nothing committed since: the same snapshot.
	if r, err := s.Snapshot(ctx, rel); err != nil || !r.Existed {
		t.Fatalf("snapshot without changes: %+v, %v", r, err)
	}
	manifests := storeKeys(t, store, ViewPrefix(7)+snapDir)
	if want := []string{results[2].Key, results[3].Key}; !slices.Equal(manifests, want) {
		t.Fatalf("manifests %v, want the newest two %v", manifests, want)
	}
	// Every sst/ and aux/ object is named by a kept manifest.
	named := map[string]bool{}
	for _, k := range manifests {
		m, err := readManifest(ctx, store, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Files {
			named[ViewPrefix(7)+f.Key] = true
			// sealCheckpoint replays the checkpoint's WAL: a recycled
			// one is as large as a memtable, uploaded every time. What
			// is left is the empty one the seal's open made.
			if strings.HasSuffix(f.Name, ".log") && f.Size > 4<<10 {
				t.Errorf("%s names a WAL, %s (%d bytes)", k, f.Name, f.Size)
			}
		}
	}
	for _, d := range []string{sstDir, auxDir} {
		for _, k := range storeKeys(t, store, ViewPrefix(7)+d) {
			if !named[k] {
				t.Errorf("object %s is named by no kept manifest", k)
			}
		}
	}
	for _, d := range []string{pendingDir, gcDir} {
		if k := storeKeys(t, store, ViewPrefix(7)+d); len(k) > 0 {
			t.Errorf("markers left: %v", k)
		}
	}

	dir := filepath.Join(t.TempDir(), "views", "7")
	s.Restore(ctx, rel, dir)
	if got := contents(t, filepath.Join(dir, "state")); !equalMaps(got, wants[3]) {
		t.Fatalf("restored %d keys, want %d", len(got), len(wants[3]))
	}
	if n := counterValue(t, s.cfg.Metrics.restores.WithLabelValues("v7", "restored")); n != 1 {
		t.Errorf("restores{restored} = %v", n)
	}
}

func equalMaps(a, b map[string]string) bool {
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

// corruptStore damages the objects whose key has a given part.
type corruptStore struct {
	objstore.Store
	bad []string
}

func (c *corruptStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	data, err := c.Store.Get(ctx, key, off, n)
	for _, b := range c.bad {
		if err == nil && strings.Contains(key, b) && len(data) > 0 {
			data[len(data)/2] ^= 0xff
		}
	}
	return data, err
}

// TestRestoreFallsBack: a damaged newest snapshot restores the one
// before; with both damaged (or none) the directory stays missing, for
// the view to be rebuilt from its inputs, and the failure is counted.
func TestRestoreFallsBack(t *testing.T) {
	ctx := context.Background()
	mem := memobj.New()
	vs := newFakeViews(t)
	s := newTestSnapshotter(t, mem, vs, "agent-a")
	rel := meta.Relation{ID: 3, Name: "v3", Kind: meta.RelationView}
	vs.write(t, 3, 0, 1000)
	older := dbContents(t, vs.db(t, 3))
	if _, err := s.Snapshot(ctx, rel); err != nil {
		t.Fatal(err)
	}
	vs.write(t, 3, 1000, 1000)
	r, err := s.Snapshot(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	newest, err := readManifest(ctx, mem, r.Key)
	if err != nil {
		t.Fatal(err)
	}
	// An SST only the newest names.
	var only string
	for _, f := range newest.Files {
		if isSST(f.Name) && f.Key != "" {
			only = f.Key
		}
	}
	cs := &corruptStore{Store: mem, bad: []string{only}}
	rs := newTestSnapshotter(t, cs, vs, "agent-b")
	dir := filepath.Join(t.TempDir(), "3")
	rs.Restore(ctx, rel, dir)
	if got := contents(t, filepath.Join(dir, "state")); !equalMaps(got, older) {
		t.Fatalf("restored %d keys, want the older snapshot's %d", len(got), len(older))
	}

	cs.bad = []string{"/sst/"}
	dir2 := filepath.Join(t.TempDir(), "3")
	rs.Restore(ctx, rel, dir2)
	if _, err := os.Stat(dir2); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed restore left %s: %v", dir2, err)
	}
	if n := counterValue(t, rs.cfg.Metrics.restores.WithLabelValues("v3", "failed")); n != 1 {
		t.Errorf("restores{failed} = %v", n)
	}
	ents, _ := os.ReadDir(rs.cfg.Staging)
	if len(ents) != 0 {
		t.Errorf("staging holds %d entries after the restores", len(ents))
	}
	rs.Restore(ctx, meta.Relation{ID: 99, Name: "v99"}, filepath.Join(t.TempDir(), "99"))
	if n := counterValue(t, rs.cfg.Metrics.restores.WithLabelValues("v99", "none")); n != 1 {
		t.Errorf("restores{none} = %v", n)
	}
}

// TestTwoWriters: two agents snapshot one view from states of their own
// (as two owners do while they disagree on who is live): their Pebble
// file numbers are equal, their objects never meet, the GC of either
// keeps what the kept manifests name, and the newest restores.
func TestTwoWriters(t *testing.T) {
	ctx := context.Background()
	mem := memobj.New()
	va, vb := newFakeViews(t), newFakeViews(t)
	sa, sb := newTestSnapshotter(t, mem, va, "agent-a"), newTestSnapshotter(t, mem, vb, "agent-b")
	rel := meta.Relation{ID: 5, Name: "v5", Kind: meta.RelationView}
	// Same file numbers, different bytes.
	va.write(t, 5, 0, 500)
	vb.write(t, 5, 100000, 700)
	ra, err := sa.Snapshot(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := sb.Snapshot(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	if ra.Key == rb.Key {
		t.Fatal("two writers wrote one manifest key")
	}
	for _, k := range []string{ra.Key, rb.Key} {
		m, err := readManifest(ctx, mem, k)
		if err != nil {
			t.Fatal(err)
		}
		// Every file of both is still there and whole.
		if _, err := restoreOne(ctx, mem, ViewPrefix(5), t.TempDir(), k, m); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	// b's state is further into the inputs: its snapshot is the newest.
	dir := filepath.Join(t.TempDir(), "5")
	sa.Restore(ctx, rel, dir)
	if got, want := contents(t, filepath.Join(dir, "state")), dbContents(t, vb.db(t, 5)); !equalMaps(got, want) {
		t.Fatalf("restored %d keys, want b's %d", len(got), len(want))
	}
}

// TestGCDefersToSnapshotInProgress: another agent's pending marker
// keeps the GC from deleting files (the snapshot may be naming them),
// until this GC has seen it for snapshotStaleAfter.
func TestGCDefersToSnapshotInProgress(t *testing.T) {
	ctx := context.Background()
	mem := memobj.New()
	vs := newFakeViews(t)
	s := newTestSnapshotter(t, mem, vs, "agent-a")
	rel := meta.Relation{ID: 4, Name: "v4", Kind: meta.RelationView}
	for i := range 2 {
		vs.write(t, 4, i*1000, 1000)
		if _, err := s.Snapshot(ctx, rel); err != nil {
			t.Fatal(err)
		}
	}
	other := newMarker(ViewPrefix(4), pendingDir, "agent-b", s.cfg.Clock.Now())
	if err := other.write(ctx, mem); err != nil {
		t.Fatal(err)
	}
	// A third snapshot drops the first manifest; its files must stay.
	vs.write(t, 4, 5000, 1000)
	before := len(storeKeys(t, mem, ViewPrefix(4)+sstDir))
	r, err := s.Snapshot(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	if !r.GC.Deferred || r.GC.Files != 0 || r.GC.Manifests != 1 {
		t.Fatalf("GC with a snapshot in progress: %+v", r.GC)
	}
	if after := len(storeKeys(t, mem, ViewPrefix(4)+sstDir)); after < before {
		t.Fatalf("SSTs went from %d to %d while a snapshot was in progress", before, after)
	}
	if err := deleteMarker(ctx, mem, ViewPrefix(4), pendingDir, other); err != nil {
		t.Fatal(err)
	}
	res, err := s.collect(ctx, ViewPrefix(4), 2)
	if err != nil || res.Deferred {
		t.Fatalf("GC after the snapshot ended: %+v, %v", res, err)
	}
}

// TestDeadMarker: a pending marker left by a snapshot that died holds
// file deletion back until this GC has listed it for
// snapshotStaleAfter on its own clock, whatever time the marker says;
// then it is deleted and the files go.
func TestDeadMarker(t *testing.T) {
	ctx := context.Background()
	mem := memobj.New()
	vs := newFakeViews(t)
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s, err := New(Config{Store: mem, Meta: nopMeta{}, Views: vs, AgentID: "agent-a", Staging: filepath.Join(t.TempDir(), "staging"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rel := meta.Relation{ID: 8, Name: "v8", Kind: meta.RelationView}
	// Dated long ago by a clock far behind: its content is not read.
	dead := newMarker(ViewPrefix(8), pendingDir, "agent-b", time.Unix(0, 0))
	if err := dead.write(ctx, mem); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		vs.write(t, 8, i*1000, 1000)
		r, err := s.Snapshot(ctx, rel)
		if err != nil {
			t.Fatal(err)
		}
		if !r.GC.Deferred {
			t.Fatalf("snapshot %d: GC not deferred by a marker seen for %v", i, clk.Now().Sub(time.Unix(1_800_000_000, 0)))
		}
		clk.Advance(snapshotStaleAfter / 3)
	}
	clk.Advance(time.Second)
	res, err := s.collect(ctx, ViewPrefix(8), 2)
	if err != nil || res.Deferred || res.Files == 0 {
		t.Fatalf("GC once the marker is stale: %+v, %v", res, err)
	}
	if k := storeKeys(t, mem, ViewPrefix(8)+pendingDir); len(k) != 0 {
		t.Fatalf("dead marker left: %v", k)
	}
}

func TestDecodeManifest(t *testing.T) {
	good := manifest{Format: formatV1, View: 1, Writer: "0123456789abcdef", Offsets: 10,
		Files: []file{{Name: "000005.sst", Key: sstKey("0123456789abcdef", "000005.sst"), Size: 3, SHA256: strings.Repeat("a", 64)},
			{Name: "MANIFEST-000001", Key: auxKey("0123456789abcdef", 10, "MANIFEST-000001"), Size: 3, SHA256: strings.Repeat("b", 64)}}}
	data, err := encodeManifest(&good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeManifest(data); err != nil {
		t.Fatal(err)
	}
	// An SST may be another writer's object (a restored directory's,
	// origin.go).
	inherited := good
	inherited.Files = slices.Clone(good.Files)
	inherited.Files[0].Key = sstKey("fedcba9876543210", "000005.sst")
	if err := inherited.validate(); err != nil {
		t.Fatalf("another writer's SST: %v", err)
	}
	for name, mut := range map[string]func(m *manifest){
		"escaping name":      func(m *manifest) { m.Files[0].Name = "../x.sst"; m.Files[0].Key = sstKey(m.Writer, "../x.sst") },
		"other file's key":   func(m *manifest) { m.Files[0].Key = sstKey(m.Writer, "000006.sst") },
		"bad writer in key":  func(m *manifest) { m.Files[0].Key = sstKey("../a", "000005.sst") },
		"aux file as shared": func(m *manifest) { m.Files[1].Key = sstKey("fedcba9876543210", "MANIFEST-000001") },
		"bad writer":         func(m *manifest) { m.Writer = "../a" },
		"no files":           func(m *manifest) { m.Files = nil },
		"format":             func(m *manifest) { m.Format = 2 },
		"size":               func(m *manifest) { m.Files[1].Size = -1 },
	} {
		m := good
		m.Files = slices.Clone(good.Files)
		mut(&m)
		if err := m.validate(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeManifest(f *testing.F) {
	good := manifest{Format: formatV1, View: 1, Writer: "0123456789abcdef", Offsets: 10,
		Files: []file{{Name: "000005.sst", Key: sstKey("0123456789abcdef", "000005.sst"), Size: 3, SHA256: strings.Repeat("a", 64)}}}
	data, _ := encodeManifest(&good)
	f.Add(data)
	f.Add([]byte(`{"format":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest(data)
		if err != nil {
			return
		}
		// What decodes round-trips and stays valid.
		again, err := encodeManifest(&m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeManifest(again); err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Files {
			if strings.Contains(f.Name, "/") || f.Name == ".." {
				t.Fatalf("accepted file name %q", f.Name)
			}
		}
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRestoredReusesObjects: a directory restored on another agent
// (so with a new writer id) names the restored snapshot's objects for
// its unchanged SSTs: its first snapshot uploads only what it wrote
// since, and restores whole; so does a directory restored from that
// one (the objects of the first writer, named by the second's
// manifest).
func TestRestoredReusesObjects(t *testing.T) {
	ctx := context.Background()
	mem := memobj.New()
	rel := meta.Relation{ID: 9, Name: "v9", Kind: meta.RelationView}
	va := newFakeViews(t)
	sa := newTestSnapshotter(t, mem, va, "agent-a")
	for i := range 3 {
		va.write(t, 9, i*2000, 2000)
		if _, err := sa.Snapshot(ctx, rel); err != nil {
			t.Fatal(err)
		}
	}
	prev, err := sa.Snapshot(ctx, rel) // the newest, as it stands
	if err != nil {
		t.Fatal(err)
	}
	key := prev.Key
	for _, agent := range []string{"agent-b", "agent-c"} {
		vs := newFakeViews(t)
		vs.noCompactions = true
		s := newTestSnapshotter(t, mem, vs, agent)
		s.Restore(ctx, rel, vs.Dir(9))
		vs.offsets[9] = prev.Offsets
		vs.write(t, 9, 100000+len(agent), 50)
		r, err := s.Snapshot(ctx, rel)
		if err != nil {
			t.Fatal(err)
		}
		if r.Key == key || r.Existed {
			t.Fatalf("%s: snapshot %+v, want a new one", agent, r)
		}
		// What it wrote since is one small SST (and the aux files),
		// far less than the restored state.
		if r.UploadedBytes*4 > prev.Bytes {
			t.Errorf("%s: uploaded %d of %d bytes (%d of %d files) after a restore of %d bytes: the restored SSTs were uploaded again",
				agent, r.UploadedBytes, r.Bytes, r.UploadedFiles, r.Files, prev.Bytes)
		}
		m, err := readManifest(ctx, mem, r.Key)
		if err != nil {
			t.Fatal(err)
		}
		old, err := readManifest(ctx, mem, key)
		if err != nil {
			t.Fatal(err)
		}
		inherited := 0
		for _, f := range m.Files {
			for _, o := range old.Files {
				if isSST(f.Name) && f.Name == o.Name && f.Key == o.Key {
					inherited++
				}
			}
		}
		if inherited == 0 {
			t.Errorf("%s: its manifest names none of the restored snapshot's SST objects", agent)
		}
		// Restores whole, to what this directory holds.
		dir := filepath.Join(t.TempDir(), "9")
		newTestSnapshotter(t, mem, newFakeViews(t), "agent-z").Restore(ctx, rel, dir)
		if got, want := contents(t, filepath.Join(dir, "state")), dbContents(t, vs.db(t, 9)); !equalMaps(got, want) {
			t.Fatalf("%s: restored %d keys, want %d", agent, len(got), len(want))
		}
		prev, key = r, r.Key
	}
}

// TestKeyPlacesSnapshots: Config.Key, not the views' key, decides
// whether this agent snapshots a relation (a sink is snapshotted by
// its owner, placed by its own key).
func TestKeyPlacesSnapshots(t *testing.T) {
	ring := placement.Ring{Self: 1, Live: func() []int32 { return []int32{1, 2, 3} }}
	other := func(id uint64) string { return fmt.Sprintf("other:%d", id) }
	// An id the two keys place on different agents.
	var id uint64
	for id = 1; ring.Owns(Key(id)) == ring.Owns(other(id)); id++ {
		if id > 1000 {
			t.Fatal("no id the two keys place apart")
		}
	}
	vs := newFakeViews(t)
	vs.write(t, id, 0, 10)
	for _, key := range []func(uint64) string{nil, other} {
		s, err := New(Config{Store: memobj.New(), Meta: nopMeta{}, Views: vs, AgentID: "a", Staging: filepath.Join(t.TempDir(), "staging"),
			Placement: ring, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		want := ring.Owns(Key(id))
		if key != nil {
			want = ring.Owns(key(id))
		}
		if got := s.due(id); got != want {
			t.Errorf("key %v: due %v, want %v", key != nil, got, want)
		}
	}
}
