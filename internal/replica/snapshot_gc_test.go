package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/faultlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// storeKeys lists every object under the snapshot prefix.
func storeKeys(t *testing.T, store objstore.Store) []string {
	t.Helper()
	objs, err := store.List(testCtx(t), snapPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}

// wantOnlyKept checks that the store holds exactly the manifests at
// kept and the files they name: nothing else, no markers either.
func wantOnlyKept(t *testing.T, store objstore.Store, kept []SnapshotInfo) {
	t.Helper()
	var want []string
	for _, info := range kept {
		want = append(want, info.Key)
		for _, f := range mustManifest(t, store, info.Key).Files {
			want = append(want, snapPrefix+"/"+f.Key)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if got := storeKeys(t, store); !slices.Equal(got, want) {
		t.Fatalf("store holds %d objects:\n%s\nwant the %d of the kept snapshots:\n%s",
			len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}

// takeSnapshots commits, flushes now and then (so SSTs come and go, as
// they do under compaction) and snapshots, n times.
func takeSnapshots(t *testing.T, r *Replica, store objstore.Store, parts []partRef, n int, after func(i int, info SnapshotInfo)) []SnapshotInfo {
	t.Helper()
	var infos []SnapshotInfo
	for i := range n {
		for range 5 {
			mustOK(t, r, commitTo(2, parts[i%len(parts)]))
		}
		if i%3 == 0 {
			if err := r.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if i%7 == 6 {
			if err := r.db.Compact(testCtx(t), []byte{0}, localStart(), false); err != nil {
				t.Fatal(err)
			}
		}
		info, err := r.Snapshot(testCtx(t), store, snapPrefix)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
		if after != nil {
			after(i, info)
		}
	}
	return infos
}

// TestSnapshotGCKeepsNewest: after 20 snapshots with keep 3, the store
// holds the 3 newest manifests and only the files they name, and the
// newest still restores.
func TestSnapshotGCKeepsNewest(t *testing.T) {
	t.Run("memobj", func(t *testing.T) { testSnapshotGCKeepsNewest(t, newMemStore(t)) })
	t.Run("fileobj", func(t *testing.T) { testSnapshotGCKeepsNewest(t, newFileStore(t)) })
}

func testSnapshotGCKeepsNewest(t *testing.T, store objstore.Store) {
	ctx := testCtx(t)
	log := memlog.New()
	a := openReplica(t, log, "", "a")
	parts := setupTopic(t, a, "t", 4)
	var manifests, files int
	infos := takeSnapshots(t, a, store, parts, 20, func(i int, _ SnapshotInfo) {
		res, err := a.CollectSnapshots(ctx, store, snapPrefix, 3)
		if err != nil {
			t.Fatalf("GC after snapshot %d: %v", i, err)
		}
		manifests += res.ManifestsDeleted
		files += res.FilesDeleted
	})
	if manifests != 17 || files == 0 {
		t.Fatalf("GC deleted %d manifests and %d files, want 17 and some", manifests, files)
	}
	wantOnlyKept(t, store, infos[17:])

	if got := restoreAndCompare(t, store, log, a); got.Pos != infos[19].Pos {
		t.Fatalf("restored %d, want the newest at %d", got.Pos, infos[19].Pos)
	}
}

// restoreAndCompare restores the newest snapshot in store, opens a copy
// on it and checks that it catches up to the same state as a.
func restoreAndCompare(t *testing.T, store objstore.Store, log sharedlog.Log, a *Replica) SnapshotInfo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	got, err := Restore(testCtx(t), store, snapPrefix, dir)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	b := openReplica(t, log, dir, "restored")
	mustSync(t, a)
	mustSync(t, b)
	if da, db := mustDigest(t, a), mustDigest(t, b); da != db {
		t.Fatalf("restored copy %x, original %x", db, da)
	}
	return got
}

// TestSnapshotGCCrash: a GC that dies after any number of deletes (a
// fault-injecting store fails every delete from the k-th on) leaves
// every kept snapshot whole and only garbage behind, which the next GC
// removes.
func TestSnapshotGCCrash(t *testing.T) {
	ctx := testCtx(t)
	base := memobj.New()
	a := openReplica(t, memlog.New(), "", "a")
	parts := setupTopic(t, a, "t", 4)
	infos := takeSnapshots(t, a, base, parts, 8, nil)
	kept := infos[5:]

	// Count the deletes of an undisturbed GC, then crash at each one.
	count := objstore.WithCounters(copyStore(t, base))
	if _, err := a.CollectSnapshots(ctx, count, snapPrefix, 3); err != nil {
		t.Fatal(err)
	}
	deletes := int(count.Snapshot().Op(objstore.OpDelete).Requests)
	if deletes < 6 {
		t.Fatalf("GC made %d deletes, want the 5 old manifests, some files and its marker", deletes)
	}
	for k := range deletes {
		store := copyStore(t, base)
		var mu sync.Mutex
		n := 0
		faulty := objstore.WithFaults(store, objstore.FaultFunc(func(op objstore.Op, key string) objstore.FaultMode {
			if op != objstore.OpDelete {
				return objstore.NoFault
			}
			mu.Lock()
			defer mu.Unlock()
			if n++; n > k {
				return objstore.FaultBefore
			}
			return objstore.NoFault
		}))
		if _, err := a.CollectSnapshots(ctx, faulty, snapPrefix, 3); !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("crash at delete %d: GC returned %v, want the injected fault", k, err)
		}
		// Whatever the crash point, the newest manifests are whole.
		for _, info := range kept {
			m := mustManifest(t, store, info.Key)
			if err := checkReachable(ctx, store, snapPrefix+"/", info.Key, &m); err != nil {
				t.Fatalf("crash at delete %d: %v", k, err)
			}
		}
		if _, err := a.CollectSnapshots(ctx, store, snapPrefix, 3); err != nil {
			t.Fatalf("GC after the crash at delete %d: %v", k, err)
		}
		wantOnlyKept(t, store, kept)
	}
}

// copyStore copies every object of src into a new memory store.
func copyStore(t *testing.T, src objstore.Store) objstore.Store {
	t.Helper()
	ctx := testCtx(t)
	dst := memobj.New()
	objs, err := src.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		data, err := src.Get(ctx, o.Key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.Put(ctx, o.Key, data); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// hookStore calls before ahead of every operation it forwards.
type hookStore struct {
	objstore.Store
	before func(op objstore.Op, key string)
}

func (h *hookStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	h.before(objstore.OpGet, key)
	return h.Store.Get(ctx, key, off, n)
}

func (h *hookStore) Delete(ctx context.Context, key string) error {
	h.before(objstore.OpDelete, key)
	return h.Store.Delete(ctx, key)
}

func (h *hookStore) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	h.before(objstore.OpList, prefix)
	return h.Store.List(ctx, prefix)
}

func isSnapshotFile(key string) bool {
	return strings.Contains(key, "/"+sstDir) || strings.Contains(key, "/"+auxDir)
}

// TestSnapshotDuringGC: a GC has decided what is garbage and is about to
// delete it when another agent snapshots and finds those files in the
// store. The snapshot must not name a file the GC then deletes: it waits
// for the GC in progress and uploads what it deleted.
func TestSnapshotDuringGC(t *testing.T) {
	ctx := testCtx(t)
	store := memobj.New()
	log := memlog.New()
	a := openReplica(t, log, "", "a")
	setupTopic(t, a, "t", 2)
	b := openReplica(t, log, "", "b")
	mustSync(t, b)
	// A snapshot whose manifest is gone (a GC died after deleting it):
	// its files are garbage, and the same state snapshotted again is
	// made of the same files.
	old, err := a.Snapshot(ctx, store, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, old.Key); err != nil {
		t.Fatal(err)
	}

	gcBlocked, releaseGC := make(chan struct{}), make(chan struct{})
	snapWaiting := make(chan struct{})
	var once, waitOnce sync.Once
	gcStore := &hookStore{Store: store, before: func(op objstore.Op, key string) {
		if op == objstore.OpDelete && isSnapshotFile(key) {
			once.Do(func() { close(gcBlocked); <-releaseGC })
		}
	}}
	snapLists := 0
	snapStore := &hookStore{Store: store, before: func(op objstore.Op, key string) {
		if op == objstore.OpList && strings.HasSuffix(key, "/"+gcDir) {
			if snapLists++; snapLists == 2 { // polling: it saw the GC
				waitOnce.Do(func() { close(snapWaiting) })
			}
		}
	}}
	gcDone := make(chan error, 1)
	go func() {
		_, err := b.CollectSnapshots(ctx, gcStore, snapPrefix, 1)
		gcDone <- err
	}()
	recv(t, gcBlocked, "the GC's first file delete")
	snapDone := make(chan error, 1)
	var info SnapshotInfo
	go func() {
		var err error
		info, err = a.Snapshot(ctx, snapStore, snapPrefix)
		snapDone <- err
	}()
	select {
	case <-snapWaiting:
	case err := <-snapDone:
		snapDone <- err // finished beside the GC; the check below judges it
	}
	close(releaseGC)
	if err := <-gcDone; err != nil {
		t.Fatal(err)
	}
	if err := <-snapDone; err != nil {
		t.Fatal(err)
	}
	m := mustManifest(t, store, info.Key)
	if err := checkReachable(ctx, store, snapPrefix+"/", info.Key, &m); err != nil {
		t.Fatalf("snapshot taken during GC: %v", err)
	}
	if _, err := Restore(ctx, store, snapPrefix, t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestGCDefersToSnapshot: a GC that finds a snapshot in progress deletes
// old manifests but no files, since the snapshot may name any of them.
// A marker left by a snapshot that died holds it back until this
// replica has seen it for snapshotStaleAfter of its own clock, whatever
// time the marker holds.
func TestGCDefersToSnapshot(t *testing.T) {
	ctx := testCtx(t)
	store := memobj.New()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	a := openReplica(t, memlog.New(), "", "a", withClock(clk))
	parts := setupTopic(t, a, "t", 2)
	takeSnapshots(t, a, store, parts, 3, nil)
	// Its writer's clock was far behind: by that clock the run began
	// long before any staleness bound.
	dead := newMarker(snapPrefix+"/", pendingDir, "other", clk.Now().Add(-2*snapshotStaleAfter))
	if err := dead.write(ctx, store); err != nil {
		t.Fatal(err)
	}
	res, err := a.CollectSnapshots(ctx, store, snapPrefix, 1)
	if err != nil || res.ManifestsDeleted != 2 || res.FilesDeleted != 0 || !res.Deferred {
		t.Fatalf("GC beside a snapshot in progress: %+v, %v; want 2 manifests deleted, files deferred", res, err)
	}
	clk.Advance(snapshotStaleAfter - time.Second)
	res, err = a.CollectSnapshots(ctx, store, snapPrefix, 1)
	if err != nil || res.FilesDeleted != 0 || !res.Deferred {
		t.Fatalf("GC beside a marker seen for less than %v: %+v, %v; want files deferred", snapshotStaleAfter, res, err)
	}
	clk.Advance(time.Second)
	res, err = a.CollectSnapshots(ctx, store, snapPrefix, 1)
	if err != nil || res.FilesDeleted == 0 || res.Deferred {
		t.Fatalf("GC beside a dead snapshot's marker: %+v, %v; want files deleted", res, err)
	}
	latest, err := LatestSnapshot(ctx, store, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	wantOnlyKept(t, store, []SnapshotInfo{latest})
}

// TestRestoreLosesManifest: the manifest a restore is reading from is
// deleted by a GC midway (newer snapshots came meanwhile). The restore
// notices, starts over from the newest and never leaves half a copy.
func TestRestoreLosesManifest(t *testing.T) {
	ctx := testCtx(t)
	store := memobj.New()
	log := memlog.New()
	a := openReplica(t, log, "", "a")
	parts := setupTopic(t, a, "t", 2)
	first, err := a.Snapshot(ctx, store, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		mustOK(t, a, commitTo(1, parts...))
	}
	var once sync.Once
	var second SnapshotInfo
	hooked := &hookStore{Store: store, before: func(op objstore.Op, key string) {
		if op != objstore.OpGet || !isSnapshotFile(key) {
			return
		}
		once.Do(func() {
			var err error
			if second, err = a.Snapshot(ctx, store, snapPrefix); err != nil {
				t.Error(err)
			}
			if _, err := a.CollectSnapshots(ctx, store, snapPrefix, 1); err != nil {
				t.Error(err)
			}
		})
	}}
	if got := restoreAndCompare(t, hooked, log, a); got.Pos != second.Pos || got.Pos == first.Pos {
		t.Fatalf("restored %d, want the newest %d (the first was %d)", got.Pos, second.Pos, first.Pos)
	}
}

// TestSnapshotPastDeadGC: the marker of a GC whose agent died mid-run
// holds snapshots back only until the snapshotter has seen it for
// gcStaleAfter of its own clock, even if the marker says the GC began
// in its future; a replica's own marker (its previous run's) never
// holds it back, and its next GC removes it.
func TestSnapshotPastDeadGC(t *testing.T) {
	ctx := testCtx(t)
	store := memobj.New()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	a := openReplica(t, memlog.New(), "", "a", withClock(clk))
	setupTopic(t, a, "t", 1)
	dead := newMarker(snapPrefix+"/", gcDir, "dead", clk.Now().Add(time.Hour))
	own := newMarker(snapPrefix+"/", gcDir, "a", clk.Now())
	for _, m := range []marker{dead, own} {
		if err := m.write(ctx, store); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	lists := 0
	hooked := &hookStore{Store: store, before: func(op objstore.Op, key string) {
		if op != objstore.OpList || !strings.HasSuffix(key, "/"+gcDir) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		// The first look saw the dead GC; time passes before the next.
		if lists++; lists == 2 {
			clk.Advance(gcStaleAfter)
		}
	}}
	if _, err := a.Snapshot(ctx, hooked, snapPrefix); err != nil {
		t.Fatal(err)
	}
	if lists != 2 {
		t.Fatalf("the snapshot looked for GCs %d times, want 2: it waits for the dead GC until it is stale", lists)
	}
	if got := storeKeys(t, store); slices.Contains(got, dead.key) {
		t.Fatalf("the dead GC's marker is still there: %v", got)
	}
	// The replica's own goes when its next GC ends.
	if _, err := a.CollectSnapshots(ctx, store, snapPrefix, 1); err != nil {
		t.Fatal(err)
	}
	if got := storeKeys(t, store); slices.Contains(got, own.key) {
		t.Fatalf("the replica's marker of an earlier GC is still there: %v", got)
	}
}

// TestSnapshotGCConcurrent: a replica that keeps up snapshots and
// collects (keep 1) over and over, while one that fell behind snapshots
// its old state again and again: every GC deletes that old snapshot and
// the files only it names, which the lagging replica's next snapshot
// finds in the store or not, depending on the interleaving. Every
// manifest it writes must be whole, and a last GC leaves exactly the
// files of the kept snapshots. The two replicas' clocks disagree by up
// to 20 minutes either way, which must change nothing.
func TestSnapshotGCConcurrent(t *testing.T) {
	for _, skew := range []time.Duration{0, 6 * time.Minute, -6 * time.Minute, 20 * time.Minute, -20 * time.Minute} {
		t.Run(fmt.Sprintf("lagging%+v", skew), func(t *testing.T) { testSnapshotGCConcurrent(t, skew) })
	}
}

// testSnapshotGCConcurrent runs TestSnapshotGCConcurrent with the lagging
// replica's clock skew ahead of the collecting one's.
func testSnapshotGCConcurrent(t *testing.T, skew time.Duration) {
	ctx := testCtx(t)
	store := memobj.New()
	log := memlog.New()
	w := openReplica(t, log, "", "writer")
	parts := setupTopic(t, w, "t", 4)
	for range 10 {
		mustOK(t, w, commitTo(1, parts...))
	}
	base := time.Unix(1_700_000_000, 0)
	a := openReplica(t, log, "", "a", withClock(clock.NewFake(base)))
	bLog := faultlog.Paused(log)
	b := openReplica(t, bLog, "", "b", withClock(clock.NewFake(base.Add(skew))))
	t.Cleanup(bLog.Resume) // before b closes
	mustSync(t, b)
	bLog.Pause()

	const rounds = 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	wg.Go(func() {
		for range rounds {
			if err := a.Sync(ctx); err != nil {
				errs <- err
				return
			}
			if _, err := a.Snapshot(ctx, store, snapPrefix); err != nil {
				errs <- err
				return
			}
			if _, err := a.CollectSnapshots(ctx, store, snapPrefix, 1); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() {
		for range rounds {
			info, err := b.Snapshot(ctx, store, snapPrefix)
			if err != nil {
				errs <- err
				return
			}
			if err := checkWhole(ctx, store, info.Key); err != nil {
				errs <- err
				return
			}
		}
	})
	for i := range 3 * rounds {
		mustOK(t, w, commitTo(1, parts[i%len(parts)]))
		if i%4 == 0 {
			if err := w.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := a.CollectSnapshots(ctx, store, snapPrefix, 2); err != nil {
		t.Fatal(err)
	}
	// a's newest, and b's if it came after a's last GC.
	keys, err := listManifests(ctx, store, snapPrefix+"/")
	if err != nil || len(keys) == 0 || len(keys) > 2 {
		t.Fatalf("manifests %v, %v; want at most the 2 newest", keys, err)
	}
	var kept []SnapshotInfo
	for _, key := range keys {
		m := mustManifest(t, store, key)
		kept = append(kept, m.info(key))
	}
	wantOnlyKept(t, store, kept)
	if _, err := Restore(ctx, store, snapPrefix, t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// checkWhole checks that the manifest at key names only files in the
// store, unless a GC took the manifest meanwhile: GC deletes a manifest
// before its files, so files missing beside a manifest that is still
// there mean a broken snapshot.
func checkWhole(ctx context.Context, store objstore.Store, key string) error {
	m, err := readManifest(ctx, store, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = checkReachable(ctx, store, snapPrefix+"/", key, &m)
	if err == nil {
		return nil
	}
	if _, gerr := store.Get(ctx, key, 0, 1); errors.Is(gerr, objstore.ErrNotFound) {
		return nil
	}
	return err
}
