package replica

// Snapshot garbage collection: keep the newest snapshots, delete the
// older manifests, then the files no remaining manifest names.
//
// Files are content-addressed and shared between snapshots, and Snapshot
// skips uploading a file the store already holds. That is the hazard: a
// GC that decided a file is garbage must not delete it after a snapshot
// in progress found it in the store and chose to name it. The object
// store offers no transaction, so the two sides announce themselves with
// marker objects and each looks for the other's after writing its own
// (Dekker's protocol; the stores Strand supports list what was written
// before, so of two writers at least one sees the other):
//
//   - Snapshot writes <prefix>pending/<writer>.json before it lists what
//     the store holds, then lists <prefix>gc/ and waits while a live GC
//     is there; it deletes its marker once the manifest is written.
//   - CollectSnapshots writes <prefix>gc/<writer>.json, then lists
//     <prefix>pending/: while a live snapshot is there it deletes no file
//     this round (old manifests still go). Otherwise it lists the
//     manifests (after the markers, so a snapshot that finished since is
//     seen) and deletes the files none of them names.
//
// A marker whose writer died stays behind; it is ignored (and deleted)
// once stale by the reader's clock, and a writer replaces or ignores its
// own, since Snapshot and CollectSnapshots of one replica never run at
// once. Each side gives up before its own marker could be thought dead
// (the max*RunTime bounds), so clocks may disagree by up to the
// difference between the two bounds of a side.
//
// Order makes a crash harmless: old manifests are deleted oldest first
// and before any file, so a GC killed at any point leaves whole
// snapshots and unnamed files, which the next GC deletes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/objstore"
)

// Marker directories under a snapshot prefix.
const (
	pendingDir = "pending/" // snapshots in progress
	gcDir      = "gc/"      // collections in progress
)

const (
	// maxSnapshotRunTime bounds a snapshot's uploads from the moment its
	// marker is written: past it, the snapshot fails rather than write a
	// manifest naming files a GC may since have taken for garbage. It is
	// above the agent's snapshot timeout, so a healthy run never meets
	// it. A stale snapshot marker only defers file deletion, so the
	// margin for clocks is generous.
	maxSnapshotRunTime = 15 * time.Minute
	snapshotStaleAfter = 2 * maxSnapshotRunTime
	// maxGCRunTime bounds a GC's deletes from the moment its marker is
	// written; the next GC goes on. A GC deletes at most the files of a
	// few snapshots, seconds of requests. A stale GC marker holds every
	// other agent's snapshots back, so it goes sooner: an agent killed
	// mid-GC delays the others' snapshots by at most gcStaleAfter.
	maxGCRunTime = time.Minute
	gcStaleAfter = 5 * time.Minute
	// gcPollInterval is how often a snapshot waiting for a GC looks
	// again: a GC deletes at most a few hundred files, seconds of work.
	gcPollInterval = 250 * time.Millisecond
	// maxMarkerBytes bounds what reading a marker allocates.
	maxMarkerBytes = 4 << 10
)

// ErrRunTooLong: a snapshot or GC ran past its bound and stopped before
// trusting a marker others may already have taken for dead.
var ErrRunTooLong = errors.New("replica: snapshot or GC ran too long")

// GCResult is what one CollectSnapshots call did.
type GCResult struct {
	// ManifestsDeleted counts the old manifests deleted.
	ManifestsDeleted int
	// FilesDeleted and BytesDeleted count the files deleted because no
	// manifest names them any more.
	FilesDeleted int
	BytesDeleted int64
	// Deferred: a snapshot was in progress, so no file was deleted this
	// time; the next call deletes them.
	Deferred bool
}

// CollectSnapshots keeps the newest keep snapshots under prefix and
// deletes the rest: first the older manifests, oldest first, then every
// file that no manifest still in the store and no snapshot in progress
// may name. Markers of runs that died go too.
// keep must be at least 1: the newest snapshot is what a wiped agent
// restores and what the log is trimmed to.
//
// It may run on any replica, concurrently with snapshots and
// collections of other replicas; see the comment at the top of this
// file. Calls on one replica are serialized with its Snapshot calls.
func (r *Replica) CollectSnapshots(ctx context.Context, store objstore.Store, prefix string, keep int) (res GCResult, err error) {
	if keep < 1 {
		return GCResult{}, fmt.Errorf("replica: snapshot GC: keep %d, want at least 1", keep)
	}
	prefix = normalizePrefix(prefix)
	r.snapMu.Lock()
	defer r.snapMu.Unlock()

	manifests, err := listManifests(ctx, store, prefix)
	if err != nil {
		return res, err
	}
	for i := 0; i < len(manifests)-keep; i++ {
		if err := store.Delete(ctx, manifests[i]); err != nil {
			return res, fmt.Errorf("replica: snapshot GC: delete manifest %s: %w", manifests[i], err)
		}
		res.ManifestsDeleted++
	}

	start := r.cfg.Clock.Now()
	marker := markerKey(prefix, gcDir, r.cfg.WriterID)
	if err := writeMarker(ctx, store, prefix, gcDir, r.cfg.WriterID, start); err != nil {
		return res, err
	}
	// Left behind on failure, the marker holds snapshots back until it
	// is stale; try to remove it whatever happened.
	defer func() {
		if derr := deleteMarker(ctx, store, marker); derr != nil && err == nil {
			err = fmt.Errorf("replica: snapshot GC: delete marker: %w", derr)
		}
	}()
	busy, err := r.liveMarkers(ctx, store, prefix, pendingDir, snapshotStaleAfter)
	if err != nil {
		return res, err
	}
	if busy {
		res.Deferred = true
		return res, nil
	}
	named, err := namedFiles(ctx, store, prefix)
	if err != nil {
		return res, err
	}
	for _, d := range []string{sstDir, auxDir} {
		objs, err := store.List(ctx, prefix+d)
		if err != nil {
			return res, fmt.Errorf("replica: snapshot GC: list: %w", err)
		}
		for _, o := range objs {
			if named[o.Key] {
				continue
			}
			if clock.Since(r.cfg.Clock, start) > maxGCRunTime {
				return res, fmt.Errorf("%w: GC stopped after %d files", ErrRunTooLong, res.FilesDeleted)
			}
			if err := store.Delete(ctx, o.Key); err != nil {
				return res, fmt.Errorf("replica: snapshot GC: delete %s: %w", o.Key, err)
			}
			res.FilesDeleted++
			res.BytesDeleted += o.Size
		}
	}
	return res, nil
}

// listManifests returns the manifest keys under prefix, oldest first.
func listManifests(ctx context.Context, store objstore.Store, prefix string) ([]string, error) {
	objs, err := store.List(ctx, prefix+snapDir)
	if err != nil {
		return nil, fmt.Errorf("replica: list snapshots: %w", err)
	}
	var keys []string
	for _, o := range objs {
		// List sorts by key, and the zero-padded position sorts
		// numerically.
		if _, ok := parseManifestKey(prefix, o.Key); ok {
			keys = append(keys, o.Key)
		}
	}
	return keys, nil
}

// namedFiles returns the object keys of the files every manifest in the
// store names. A manifest deleted since the listing names nothing any
// more; one that does not decode fails the GC rather than let its files
// go.
func namedFiles(ctx context.Context, store objstore.Store, prefix string) (map[string]bool, error) {
	keys, err := listManifests(ctx, store, prefix)
	if err != nil {
		return nil, err
	}
	named := make(map[string]bool)
	for _, key := range keys {
		m, err := readManifest(ctx, store, key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("replica: snapshot GC: %w", err)
		}
		for _, f := range m.Files {
			named[prefix+f.Key] = true
		}
	}
	return named, nil
}

// runMarker is the JSON object at <prefix>pending/<writer>.json and
// <prefix>gc/<writer>.json.
type runMarker struct {
	WriterID  string    `json:"writer_id"`
	StartedAt time.Time `json:"started_at"`
}

func markerKey(prefix, dir, writer string) string {
	return prefix + dir + url.PathEscape(writer) + ".json"
}

// writeMarker announces a run of writer started at at.
func writeMarker(ctx context.Context, store objstore.Store, prefix, dir, writer string, at time.Time) error {
	data, err := json.Marshal(runMarker{WriterID: writer, StartedAt: at.UTC()})
	if err != nil {
		return err
	}
	// Put, not PutIfAbsent: a marker of this writer is its own dead
	// run's, and this run replaces it.
	if err := store.Put(ctx, markerKey(prefix, dir, writer), data); err != nil {
		return fmt.Errorf("replica: write %s marker: %w", strings.TrimSuffix(dir, "/"), err)
	}
	return nil
}

// liveMarkers reports whether another writer has a run in progress under
// dir. It deletes markers of runs that died (older than staleAfter); this replica's own are
// ignored, as its runs are serialized and so never concurrent with the
// caller. A marker that does not decode counts as live until stale, so
// it errs towards keeping files.
func (r *Replica) liveMarkers(ctx context.Context, store objstore.Store, prefix, dir string, staleAfter time.Duration) (bool, error) {
	objs, err := store.List(ctx, prefix+dir)
	if err != nil {
		return false, fmt.Errorf("replica: list %s markers: %w", strings.TrimSuffix(dir, "/"), err)
	}
	own := markerKey(prefix, dir, r.cfg.WriterID)
	live := false
	for _, o := range objs {
		if o.Key == own {
			continue
		}
		data, err := store.Get(ctx, o.Key, 0, maxMarkerBytes)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // the run finished
		}
		if err != nil {
			return false, fmt.Errorf("replica: read marker %s: %w", o.Key, err)
		}
		var m runMarker
		if json.Unmarshal(data, &m) != nil || clock.Since(r.cfg.Clock, m.StartedAt) < staleAfter {
			live = true
			continue
		}
		r.logger.Warn("deleting the marker of a snapshot or GC run that died", "key", o.Key, "started_at", m.StartedAt)
		if err := store.Delete(ctx, o.Key); err != nil {
			return false, fmt.Errorf("replica: delete stale marker %s: %w", o.Key, err)
		}
	}
	return live, nil
}

// markerDeleteTimeout bounds removing a marker once its run is over,
// also after the run's context ended: a marker left behind holds others
// back until it is stale.
const markerDeleteTimeout = 30 * time.Second

func deleteMarker(ctx context.Context, store objstore.Store, key string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markerDeleteTimeout)
	defer cancel()
	return store.Delete(ctx, key)
}

// waitForGC writes this writer's pending marker and returns once no other
// writer's GC is in progress, so that what the store holds from then on
// stays while the marker does. The caller deletes the marker
// (markerKey(prefix, pendingDir, WriterID)) when done.
func (r *Replica) waitForGC(ctx context.Context, store objstore.Store, prefix string, start time.Time) error {
	if err := writeMarker(ctx, store, prefix, pendingDir, r.cfg.WriterID, start); err != nil {
		return err
	}
	for {
		busy, err := r.liveMarkers(ctx, store, prefix, gcDir, gcStaleAfter)
		if err != nil || !busy {
			return err
		}
		// The wall clock, not the replica's: this waits on another
		// process, which a test's fake clock does not drive.
		t := time.NewTimer(gcPollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("replica: snapshot: waiting for a snapshot GC in progress: %w", ctx.Err())
		case <-t.C:
		}
	}
}
