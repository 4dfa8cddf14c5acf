package viewsnap

// Collecting a view's snapshots: keep the newest ones, delete the older
// manifests, then the files no remaining manifest names; and delete a
// dropped view's whole prefix.
//
// SSTs are shared between a writer's snapshots, and a snapshot skips
// uploading an SST its writer's manifests already name. That is the
// hazard: a GC must not delete a file after a snapshot in progress chose
// to name it. The store has no transactions, so both sides announce
// themselves with marker objects and each looks for the other's after
// writing its own, as the metadata snapshots' GC does
// (internal/replica/snapshot_gc.go, which explains the protocol at
// length):
//
//   - a snapshot writes <view>pending/<writer>/<run>.json before it
//     reads what the store holds, then waits while another's live GC
//     marker is under <view>gc/; it deletes its marker once its
//     manifest is written;
//   - a GC writes <view>gc/<agent>/<run>.json, then looks under
//     <view>pending/: while another's live snapshot is there, it deletes
//     no file this round (old manifests still go, oldest first, before
//     any file, so a GC killed midway leaves whole snapshots).
//
// A marker's age is never read from the time written in it, which would
// compare two agents' clocks: a reader remembers when, on its own clock,
// it first listed each marker key, and takes the marker for dead once it
// has listed the same key for a stale time (every run writes a new key).
// Each side gives up well before the other could take it for dead: a
// snapshot writes no manifest maxSnapshotRunTime after its marker, a GC
// deletes nothing maxGCRunTime after its, on its own clock. Only clock
// rates, never readings, can get that wrong.
//
// A dropped view's prefix is deleted whole by the agent placement gives
// the view's key, once its copy of the catalog says the view was dropped
// (its id is below the catalog's next id and names no relation): a
// decision of the log, not of any clock. An agent that has not applied
// the DROP yet may still write a snapshot there; the next sweep deletes
// it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
)

const (
	// maxSnapshotRunTime bounds a snapshot's uploads from its marker to
	// its manifest; a GC takes a pending marker for dead after seeing it
	// for snapshotStaleAfter, twice that.
	maxSnapshotRunTime = 15 * time.Minute
	snapshotStaleAfter = 2 * maxSnapshotRunTime
	// maxGCRunTime bounds a GC's deletes from its marker; a snapshot
	// waits for a GC marker until it has seen it for gcStaleAfter.
	maxGCRunTime = time.Minute
	gcStaleAfter = 5 * time.Minute
	// gcPollInterval is how often a snapshot waiting for a GC looks
	// again.
	gcPollInterval = 250 * time.Millisecond
	// markerDeleteTimeout bounds removing a marker once its run is
	// over, also after the run's context ended.
	markerDeleteTimeout = 30 * time.Second
)

// marker is one run's marker object.
type marker struct {
	key    string
	Writer string    `json:"writer"`
	Run    string    `json:"run"`
	Start  time.Time `json:"started_at"` // informative: never compared with another clock
}

func newMarker(prefix, dir, writer string, start time.Time) marker {
	var b [8]byte
	rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	return marker{key: prefix + dir + writer + "/" + run + ".json", Writer: writer, Run: run, Start: start.UTC()}
}

func (m marker) write(ctx context.Context, store objstore.Store) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := store.Put(ctx, m.key, data); err != nil {
		return fmt.Errorf("viewsnap: write marker %s: %w", m.key, err)
	}
	return nil
}

// deleteMarker removes m and any other marker of its writer under dir
// (left by earlier runs, which are serialized with this one).
func deleteMarker(ctx context.Context, store objstore.Store, prefix, dir string, m marker) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markerDeleteTimeout)
	defer cancel()
	if err := store.Delete(ctx, m.key); err != nil {
		return err
	}
	objs, err := store.List(ctx, prefix+dir+m.Writer+"/")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := store.Delete(ctx, o.Key); err != nil {
			return err
		}
	}
	return nil
}

// liveMarkers reports whether a writer other than self has a run in
// progress under prefix+dir: a marker this snapshotter has not yet
// listed for staleAfter of its own clock. It deletes the stale ones.
func (s *Snapshotter) liveMarkers(ctx context.Context, prefix, dir, self string, staleAfter time.Duration) (bool, error) {
	objs, err := s.cfg.Store.List(ctx, prefix+dir)
	if err != nil {
		return false, fmt.Errorf("viewsnap: list markers: %w", err)
	}
	now := s.cfg.Clock.Now()
	own := prefix + dir + self + "/"
	listed := map[string]bool{}
	live := false
	for _, o := range objs {
		if strings.HasPrefix(o.Key, own) {
			continue
		}
		listed[o.Key] = true
		seen, ok := s.seen[o.Key]
		if !ok {
			s.seen[o.Key] = now
			live = true
			continue
		}
		if now.Sub(seen) < staleAfter {
			live = true
			continue
		}
		s.cfg.Logger.Warn("deleting the marker of a view snapshot or GC that died", "key", o.Key, "seen_for", now.Sub(seen))
		if err := s.cfg.Store.Delete(ctx, o.Key); err != nil {
			return false, err
		}
		delete(s.seen, o.Key)
	}
	for key := range s.seen {
		if strings.HasPrefix(key, prefix+dir) && !listed[key] {
			delete(s.seen, key)
		}
	}
	return live, nil
}

// waitForGC writes the snapshot's pending marker m and returns once no
// other agent's GC of the view is in progress. The caller deletes m.
func (s *Snapshotter) waitForGC(ctx context.Context, prefix string, m marker) error {
	if err := m.write(ctx, s.cfg.Store); err != nil {
		return err
	}
	for {
		busy, err := s.liveMarkers(ctx, prefix, gcDir, s.cfg.AgentID, gcStaleAfter)
		if err != nil || !busy {
			return err
		}
		// The wall clock: this waits on another process, which a
		// test's fake clock does not drive.
		t := time.NewTimer(gcPollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// GCResult is what one collection of a view's snapshots did.
type GCResult struct {
	// Manifests and Files count what it deleted, Bytes the files' size.
	Manifests, Files int
	Bytes            int64
	// Deferred: another agent's snapshot was in progress, so no file
	// was deleted; the next collection deletes them.
	Deferred bool
}

// collect keeps the newest keep manifests under prefix, deletes the
// older ones (oldest first), then every sst/ and aux/ object no
// remaining manifest names, unless another agent's snapshot is in
// progress.
func (s *Snapshotter) collect(ctx context.Context, prefix string, keep int) (res GCResult, err error) {
	store := s.cfg.Store
	keys, err := listManifests(ctx, store, prefix)
	if err != nil {
		return res, err
	}
	for i := 0; i < len(keys)-keep; i++ {
		if err := store.Delete(ctx, keys[i]); err != nil {
			return res, err
		}
		res.Manifests++
	}
	start := s.cfg.Clock.Now()
	m := newMarker(prefix, gcDir, s.cfg.AgentID, start)
	if err := m.write(ctx, store); err != nil {
		return res, err
	}
	defer func() {
		if derr := deleteMarker(ctx, store, prefix, gcDir, m); derr != nil && err == nil {
			err = derr
		}
	}()
	busy, err := s.liveMarkers(ctx, prefix, pendingDir, s.cfg.AgentID, snapshotStaleAfter)
	if err != nil {
		return res, err
	}
	if busy {
		res.Deferred = true
		return res, nil
	}
	// Listed after the markers, so a snapshot that finished since is
	// seen.
	keys, err = listManifests(ctx, store, prefix)
	if err != nil {
		return res, err
	}
	named := map[string]bool{}
	for _, k := range keys {
		man, err := readManifest(ctx, store, k)
		if err != nil {
			// One that does not decode fails the GC rather than let
			// its files go; one deleted since names nothing.
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return res, err
		}
		for _, f := range man.Files {
			named[prefix+f.Key] = true
		}
	}
	for _, d := range []string{sstDir, auxDir} {
		objs, err := store.List(ctx, prefix+d)
		if err != nil {
			return res, err
		}
		for _, o := range objs {
			if named[o.Key] {
				continue
			}
			if s.cfg.Clock.Now().Sub(start) > maxGCRunTime {
				return res, fmt.Errorf("viewsnap: GC of %s ran past %v; the next one goes on", prefix, maxGCRunTime)
			}
			if err := store.Delete(ctx, o.Key); err != nil {
				return res, err
			}
			res.Files++
			res.Bytes += o.Size
		}
	}
	return res, nil
}

// deletePrefix deletes every object under prefix (a dropped view's).
func deletePrefix(ctx context.Context, store objstore.Store, prefix string) (int, error) {
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	// Manifests first: a half-deleted prefix then holds no snapshot that
	// names a missing file.
	n := 0
	for _, pass := range []bool{true, false} {
		for _, o := range objs {
			if isManifestKey(prefix, o.Key) != pass {
				continue
			}
			if err := store.Delete(ctx, o.Key); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
