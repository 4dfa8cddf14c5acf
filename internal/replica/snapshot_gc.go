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
//   - Snapshot writes <prefix>pending/<writer>/<run>.json before it lists
//     what the store holds, then lists <prefix>gc/ and waits while a
//     live GC is there; it deletes its marker once the manifest is
//     written.
//   - CollectSnapshots writes <prefix>gc/<writer>/<run>.json, then lists
//     <prefix>pending/: while a live snapshot is there it deletes no file
//     this round (old manifests still go). Otherwise it lists the
//     manifests (after the markers, so a snapshot that finished since is
//     seen) and deletes the files none of them names.
//
// # Dead markers, without comparing clocks
//
// A marker whose writer died stays behind, and must stop holding the
// other side back some time. Its age is never judged by the time written
// in it: that compares the writer's clock with the reader's, and agents'
// clocks disagree by minutes (a snapshotter 6 minutes ahead took a
// running GC for dead and wrote a manifest naming files the GC then
// deleted). Instead a reader remembers when, on its own clock, it first
// listed each marker, and takes a marker for dead once it has listed the
// same key for staleAfter. Every run writes a new key (<run> is random),
// so a key that stays is one run that has lasted at least that long in
// real time, measured on one clock (monotonic, for package time), which
// only a different rate can get wrong. Each side gives up well before
// the other could take it for dead: a snapshot writes no manifest
// maxSnapshotRunTime after it began, a GC deletes nothing maxGCRunTime
// after, both on the writer's own clock, from before its marker was
// written. The margins, 15 minutes for a snapshot and 4 for a GC,
// absorb a slow last request and clock rates, never clock readings.
//
// The price: a reader that restarts forgets what it saw, so a dead
// marker holds it back for staleAfter again. A key is never reused, so
// deleting a dead marker cannot delete a later run's. A writer ending a
// run deletes its marker and any it left from earlier runs, since one
// writer's Snapshot and CollectSnapshots never run at once. Markers of
// the earlier layout, <dir><writer>.json, are judged the same way, and
// agents of that layout read started_at from the new ones, so old and
// new agents see each other's during a rolling upgrade.
//
// Order makes a crash harmless: old manifests are deleted oldest first
// and before any file, so a GC killed at any point leaves whole
// snapshots and unnamed files, which the next GC deletes.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	// it. A GC takes a snapshot's marker for dead once it has seen it for
	// snapshotStaleAfter; a stale snapshot marker only defers file
	// deletion, so the margin is generous.
	maxSnapshotRunTime = 15 * time.Minute
	snapshotStaleAfter = 2 * maxSnapshotRunTime
	// maxGCRunTime bounds a GC's deletes from the moment its marker is
	// written; the next GC goes on. A GC deletes at most the files of a
	// few snapshots, seconds of requests. A stale GC marker holds every
	// other agent's snapshots back, so it goes sooner: an agent killed
	// mid-GC delays another's snapshots by at most gcStaleAfter after
	// that agent first sees the marker.
	maxGCRunTime = time.Minute
	gcStaleAfter = 5 * time.Minute
	// gcPollInterval is how often a snapshot waiting for a GC looks
	// again: a GC deletes at most a few hundred files, seconds of work.
	gcPollInterval = 250 * time.Millisecond
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
	marker := newMarker(prefix, gcDir, r.cfg.WriterID, start)
	if err := marker.write(ctx, store); err != nil {
		return res, err
	}
	// Left behind on failure, the marker holds snapshots back until it
	// is stale; try to remove it whatever happened.
	defer func() {
		if derr := deleteMarker(ctx, store, prefix, gcDir, marker); derr != nil && err == nil {
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

// runMarker is the JSON object at <prefix>pending/<writer>/<run>.json
// and <prefix>gc/<writer>/<run>.json. Readers judge a marker by its key
// alone; what it holds is for people looking at the store, and for
// agents of the earlier layout, which read started_at.
type runMarker struct {
	WriterID  string    `json:"writer_id"`
	Run       string    `json:"run"`
	StartedAt time.Time `json:"started_at"`
}

// marker is one run's marker and where it goes.
type marker struct {
	key string
	runMarker
}

// newMarker names a marker for a run of writer started at start, under
// a key no other run uses.
func newMarker(prefix, dir, writer string, start time.Time) marker {
	var b [8]byte
	rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	return marker{
		key:       writerMarkerPrefix(prefix, dir, writer) + run + ".json",
		runMarker: runMarker{WriterID: writer, Run: run, StartedAt: start.UTC()},
	}
}

// writerMarkerPrefix is where the markers of writer's runs go under dir.
func writerMarkerPrefix(prefix, dir, writer string) string {
	return prefix + dir + url.PathEscape(writer) + "/"
}

func (m marker) write(ctx context.Context, store objstore.Store) error {
	data, err := json.Marshal(m.runMarker)
	if err != nil {
		return err
	}
	// The key is this run's alone, so Put: a retried PutIfAbsent could
	// find its own first attempt.
	if err := store.Put(ctx, m.key, data); err != nil {
		return fmt.Errorf("replica: write marker %s: %w", m.key, err)
	}
	return nil
}

// liveMarkers reports whether another writer has a run in progress under
// dir: whether a marker there is one this replica has not yet seen for
// staleAfter of its own clock. It deletes the others, of runs that
// died. This writer's own are of its earlier runs, since its runs are
// serialized, so they are passed over (deleteMarker removes them).
// The caller holds snapMu.
func (r *Replica) liveMarkers(ctx context.Context, store objstore.Store, prefix, dir string, staleAfter time.Duration) (bool, error) {
	objs, err := store.List(ctx, prefix+dir)
	if err != nil {
		return false, fmt.Errorf("replica: list %s markers: %w", strings.TrimSuffix(dir, "/"), err)
	}
	now := r.cfg.Clock.Now()
	own := writerMarkerPrefix(prefix, dir, r.cfg.WriterID)
	ownLegacy := prefix + dir + url.PathEscape(r.cfg.WriterID) + ".json"
	if r.markerSeen == nil {
		r.markerSeen = make(map[string]time.Time)
	}
	listed := make(map[string]bool, len(objs))
	live := false
	for _, o := range objs {
		if strings.HasPrefix(o.Key, own) || o.Key == ownLegacy {
			continue
		}
		listed[o.Key] = true
		seen, ok := r.markerSeen[o.Key]
		if !ok {
			r.markerSeen[o.Key] = now
			live = true
			continue
		}
		if now.Sub(seen) < staleAfter {
			live = true
			continue
		}
		r.logger.Warn("deleting the marker of a snapshot or GC run that died", "key", o.Key, "seen_for", now.Sub(seen))
		if err := store.Delete(ctx, o.Key); err != nil {
			return false, fmt.Errorf("replica: delete stale marker %s: %w", o.Key, err)
		}
		delete(r.markerSeen, o.Key)
	}
	// Forget the markers gone from dir: their runs ended, and the map
	// stays as small as the runs in progress.
	for key := range r.markerSeen {
		if strings.HasPrefix(key, prefix+dir) && !listed[key] {
			delete(r.markerSeen, key)
		}
	}
	return live, nil
}

// markerDeleteTimeout bounds removing a marker once its run is over,
// also after the run's context ended: a marker left behind holds others
// back until it is stale.
const markerDeleteTimeout = 30 * time.Second

// deleteMarker removes m once its run is over, then any marker of the
// same writer under the same directory: those are of its earlier runs
// that could not remove theirs (runs of one writer are serialized), in
// the layout of now or of before.
func deleteMarker(ctx context.Context, store objstore.Store, prefix, dir string, m marker) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markerDeleteTimeout)
	defer cancel()
	if err := store.Delete(ctx, m.key); err != nil {
		return err
	}
	own := writerMarkerPrefix(prefix, dir, m.WriterID)
	legacy := strings.TrimSuffix(own, "/") + ".json"
	objs, err := store.List(ctx, strings.TrimSuffix(own, "/"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		if strings.HasPrefix(o.Key, own) || o.Key == legacy {
			if err := store.Delete(ctx, o.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitForGC writes the snapshot's pending marker m and returns once no
// other writer's GC is in progress, so that what the store holds from
// then on stays while the marker does. The caller deletes the marker
// when done, also if waitForGC fails.
func (r *Replica) waitForGC(ctx context.Context, store objstore.Store, prefix string, m marker) error {
	if err := m.write(ctx, store); err != nil {
		return err
	}
	for {
		busy, err := r.liveMarkers(ctx, store, prefix, gcDir, gcStaleAfter)
		if err != nil || !busy {
			return err
		}
		// The wall clock, not the replica's: this waits on another
		// process, which a test's fake clock does not drive. Whether
		// the GC's marker is stale is judged on the replica's clock.
		t := time.NewTimer(gcPollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("replica: snapshot: waiting for a snapshot GC in progress: %w", ctx.Err())
		case <-t.C:
		}
	}
}
