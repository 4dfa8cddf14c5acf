package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// TestSnapshotGCClockSkew: a snapshotter and a collector whose clocks
// disagree by 6 or 20 minutes, either one ahead, meet in the two races
// the markers exist for. Each time, every manifest left in the store
// must restore. Staleness judged by comparing a marker's timestamp with
// the reader's clock failed three of these: a snapshotter ahead took a
// running GC for dead, and a collector 20 minutes ahead took a snapshot
// 11 minutes into its uploads for dead.
func TestSnapshotGCClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{6 * time.Minute, -6 * time.Minute, 20 * time.Minute, -20 * time.Minute} {
		t.Run(fmt.Sprintf("snapshotter%+v", skew), func(t *testing.T) {
			t.Run("snapshot during GC", func(t *testing.T) { testSnapshotDuringSkewedGC(t, skew) })
			t.Run("GC during snapshot", func(t *testing.T) { testGCDuringSkewedSnapshot(t, skew) })
		})
	}
}

// skewedPair opens a snapshotter and a collector on one log, the
// snapshotter's clock skew ahead of the collector's, both at one state
// whose snapshot files are in the store without a manifest naming them
// (a GC died after deleting it): garbage that a snapshot of that state
// finds and names.
func skewedPair(t *testing.T, store objstore.Store, skew time.Duration) (snap, gc *Replica, snapClk, gcClk *clock.Fake) {
	t.Helper()
	ctx := testCtx(t)
	base := time.Unix(1_700_000_000, 0)
	gcClk, snapClk = clock.NewFake(base), clock.NewFake(base.Add(skew))
	log := memlog.New()
	snap = openReplica(t, log, "", "snapshotter", withClock(snapClk))
	parts := setupTopic(t, snap, "t", 2)
	for range 5 {
		mustOK(t, snap, commitTo(1, parts...))
	}
	gc = openReplica(t, log, "", "collector", withClock(gcClk))
	mustSync(t, gc)
	old, err := snap.Snapshot(ctx, store, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, old.Key); err != nil {
		t.Fatal(err)
	}
	return snap, gc, snapClk, gcClk
}

// testSnapshotDuringSkewedGC: the collector has decided what is garbage
// and is about to delete it when the snapshotter starts. The snapshotter
// must wait for it, however far ahead its clock is.
func testSnapshotDuringSkewedGC(t *testing.T, skew time.Duration) {
	ctx := testCtx(t)
	store := memobj.New()
	snap, gc, snapClk, gcClk := skewedPair(t, store, skew)

	gcBlocked, releaseGC := make(chan struct{}), make(chan struct{})
	var blockOnce sync.Once
	gcStore := &hookStore{Store: store, before: func(op objstore.Op, key string) {
		if op == objstore.OpDelete && isSnapshotFile(key) {
			blockOnce.Do(func() { close(gcBlocked); <-releaseGC })
		}
	}}
	snapWaiting := make(chan struct{})
	var waitOnce sync.Once
	var mu sync.Mutex
	gcLists := 0
	snapStore := &hookStore{Store: store, before: func(op objstore.Op, key string) {
		if op == objstore.OpList && strings.HasSuffix(key, "/"+gcDir) {
			mu.Lock()
			gcLists++
			n := gcLists
			mu.Unlock()
			if n == 2 { // polling: it saw the GC
				waitOnce.Do(func() { close(snapWaiting) })
			}
		}
	}}
	gcDone := make(chan error, 1)
	go func() {
		_, err := gc.CollectSnapshots(ctx, gcStore, snapPrefix, 1)
		gcDone <- err
	}()
	recv(t, gcBlocked, "the GC's first file delete")
	snapDone := make(chan error, 1)
	go func() {
		_, err := snap.Snapshot(ctx, snapStore, snapPrefix)
		snapDone <- err
	}()
	select {
	case <-snapWaiting:
		// Half a minute passes for both while the snapshot waits: less
		// than the GC may run, so both carry on.
		snapClk.Advance(30 * time.Second)
		gcClk.Advance(30 * time.Second)
	case err := <-snapDone:
		snapDone <- err // finished beside the GC; the checks below judge it
	}
	close(releaseGC)
	if err := <-gcDone; err != nil {
		t.Fatalf("GC: %v", err)
	}
	if err := <-snapDone; err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	wantEveryManifestRestores(t, store)
}

// testGCDuringSkewedSnapshot: the snapshotter has listed what the store
// holds and has been uploading for 11 minutes of its own clock, within
// its bound, when the collector runs.
func testGCDuringSkewedSnapshot(t *testing.T, skew time.Duration) {
	ctx := testCtx(t)
	store := memobj.New()
	snap, gc, snapClk, gcClk := skewedPair(t, store, skew)

	var once sync.Once
	var gcErr error
	snapStore := &hookStore{Store: store, before: func(op objstore.Op, key string) {
		// Its SSTs are listed; the GC comes before the other files are.
		if op != objstore.OpList || key != snapPrefix+"/"+auxDir {
			return
		}
		once.Do(func() {
			snapClk.Advance(11 * time.Minute)
			gcClk.Advance(11 * time.Minute)
			_, gcErr = gc.CollectSnapshots(ctx, store, snapPrefix, 1)
		})
	}}
	if _, err := snap.Snapshot(ctx, snapStore, snapPrefix); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if gcErr != nil {
		t.Fatalf("GC: %v", gcErr)
	}
	// The next GC, with nothing in progress, must not harm it either.
	if _, err := gc.CollectSnapshots(ctx, store, snapPrefix, 1); err != nil {
		t.Fatalf("GC after the snapshot: %v", err)
	}
	wantEveryManifestRestores(t, store)
}

// wantEveryManifestRestores checks every manifest in store, not only
// the newest: each must name only files in the store, and restore on
// its own (in a copy of the store holding no other manifest).
func wantEveryManifestRestores(t *testing.T, store objstore.Store) {
	t.Helper()
	ctx := testCtx(t)
	keys, err := listManifests(ctx, store, snapPrefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no manifest in the store")
	}
	for _, key := range keys {
		m := mustManifest(t, store, key)
		if err := checkReachable(ctx, store, snapPrefix+"/", key, &m); err != nil {
			t.Errorf("manifest %s: %v", key, err)
			continue
		}
		alone := copyStore(t, store)
		for _, other := range keys {
			if other != key {
				if err := alone.Delete(ctx, other); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := Restore(ctx, alone, snapPrefix, filepath.Join(t.TempDir(), "restored")); err != nil {
			t.Errorf("restore %s: %v", key, err)
		}
	}
}

// tailHookLog calls before ahead of every CheckTail it forwards.
type tailHookLog struct {
	sharedlog.Log
	before func()
}

func (l *tailHookLog) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	l.before()
	return l.Log.CheckTail(ctx)
}

// TestTrimRechecksAfterConcurrentGC: a file of the newest snapshot goes
// after TrimLog read its manifest, while it asks the log for its tail
// (as a GC that raced a snapshot would delete it). The log must not be
// trimmed to that snapshot.
func TestTrimRechecksAfterConcurrentGC(t *testing.T) {
	ctx := testCtx(t)
	store := memobj.New()
	log := memlog.New()
	a := openReplica(t, log, "", "a")
	setupTopic(t, a, "t", 1)
	info, err := a.Snapshot(ctx, store, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	f := mustManifest(t, store, info.Key).Files[0]
	hooked := &tailHookLog{Log: log, before: func() {
		if err := store.Delete(ctx, snapPrefix+"/"+f.Key); err != nil {
			t.Error(err)
		}
	}}
	if _, _, err := TrimLog(ctx, hooked, store, snapPrefix, NoTrimBound); !errors.Is(err, ErrSnapshotCorrupt) {
		t.Fatalf("TrimLog = %v, want ErrSnapshotCorrupt", err)
	}
	if _, err := log.ReadNext(ctx, 0, 1); err != nil {
		t.Fatalf("the log was trimmed to a damaged snapshot: %v", err)
	}
}
