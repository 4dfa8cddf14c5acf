package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/sharedlog"
)

var (
	// ErrNoSnapshot: the store holds no snapshot manifest under the
	// prefix.
	ErrNoSnapshot = errors.New("replica: no snapshot in the store")
	// ErrSnapshotCorrupt: a manifest does not decode or validate, or a
	// file it lists is missing or does not match its size, checksum or
	// the recorded state digest.
	ErrSnapshotCorrupt = errors.New("replica: snapshot is corrupt")
	// ErrSnapshotDeleted: the snapshot being restored was deleted by a
	// snapshot GC midway.
	ErrSnapshotDeleted = errors.New("replica: snapshot deleted while restoring it")
	// ErrRestoreDirNotEmpty: Restore only writes into a missing or empty
	// directory; it never merges into or replaces an existing copy.
	ErrRestoreDirNotEmpty = errors.New("replica: restore directory is not empty")
	// ErrDiverged: two copies hold different state at the same log
	// position. Apply is deterministic, so this is a bug or a corrupt
	// copy; nothing should build on either until someone looks.
	ErrDiverged = errors.New("replica: copies differ at the same log position")
)

// Bounds of snapshot transfers.
const (
	// maxTransferBytes bounds the file bytes held in memory by concurrent
	// uploads or downloads (the Store API moves whole objects). A file
	// larger than the bound still moves, alone.
	maxTransferBytes = 256 << 20
	// maxTransferFiles bounds concurrent uploads or downloads: enough to
	// hide a remote store's per-request latency.
	maxTransferFiles = 8
)

// SnapshotInfo describes a snapshot in the object store.
type SnapshotInfo struct {
	// Pos is the snapshot's applied position: it holds every log entry
	// below Pos and none above. A copy restored from it plays the log
	// from Pos, so the log must not be trimmed above Pos.
	Pos sharedlog.Pos
	// Digest is meta.View.Digest of the state at Pos.
	Digest [32]byte
	// Key is the manifest's object key.
	Key string
	// CreatedAt is the taking replica's clock; informative only.
	CreatedAt time.Time
	// Files and Bytes count the files of the snapshot and their size.
	Files int
	Bytes int64
	// UploadedFiles and UploadedBytes count the objects this Snapshot
	// call uploaded; the other files were in the store already or share
	// an object with an equal file.
	UploadedFiles int
	UploadedBytes int64
}

// Snapshot uploads a Pebble checkpoint of this copy to store under prefix
// and returns where it is. The snapshot's position is the applied
// position recorded inside the checkpoint, not the in-memory one: applies
// go on meanwhile, and the checkpoint holds whatever batch committed last
// before it.
//
// Files are content-addressed, so consecutive snapshots share unchanged
// SSTs and upload only what is new, and every object is immutable: two
// replicas snapshotting the same position concurrently cannot overwrite
// each other's files. The manifest is written last, with PutIfAbsent. If
// a snapshot at the same position is there already, Snapshot checks that
// it holds the same digest (ErrDiverged if not) and returns it.
//
// Since it names files it finds in the store without uploading them, it
// must not race a snapshot GC that took them for garbage: it writes an
// in-progress marker first and waits while another replica's GC runs
// (CollectSnapshots, snapshot_gc.go).
//
// The snapshot is made of SSTs, a MANIFEST and small files; its WAL is
// empty (see checkpointState).
//
// A prefix that is not empty and does not end in "/" gets one. Snapshot
// must return before Close is called. It stages the checkpoint in a
// temporary directory beside Config.Dir (hard links, so cheap) and
// removes it before returning.
func (r *Replica) Snapshot(ctx context.Context, store objstore.Store, prefix string) (SnapshotInfo, error) {
	prefix = normalizePrefix(prefix)
	r.mu.Lock()
	closed := r.mu.closed || r.ctx.Err() != nil
	r.mu.Unlock()
	if closed {
		return SnapshotInfo{}, ErrClosed
	}
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	tmp, err := os.MkdirTemp(filepath.Dir(r.cfg.Dir), filepath.Base(r.cfg.Dir)+".checkpoint-")
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: snapshot: %w", err)
	}
	defer os.RemoveAll(tmp)
	ck := filepath.Join(tmp, "db")
	// Flushing first puts the memtable into an SST of the live store,
	// which later snapshots share until a compaction rewrites it.
	// Otherwise checkpointState would flush it into a private SST,
	// uploaded anew by every snapshot.
	if err := r.db.Flush(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: snapshot: flush: %w", err)
	}
	// The replica commits without fsync; the flushed WAL makes every
	// batch committed since the flush part of the checkpoint.
	if err := r.db.Checkpoint(ck, pebble.WithFlushedWAL()); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: snapshot: checkpoint: %w", err)
	}
	pos, digest, err := checkpointState(ck, r.logger)
	if err != nil {
		return SnapshotInfo{}, err
	}
	names, err := checkpointFiles(ck)
	if err != nil {
		return SnapshotInfo{}, err
	}
	key := manifestKey(prefix, pos)
	if info, err := existingSnapshot(ctx, store, key, pos, digest); !errors.Is(err, objstore.ErrNotFound) {
		// Nothing applied since the last snapshot: skip the uploads.
		return info, err
	}
	// From here on the snapshot may name files it finds in the store,
	// which a snapshot GC must not delete under it (snapshot_gc.go).
	start := r.cfg.Clock.Now()
	marker := newMarker(prefix, pendingDir, r.cfg.WriterID, start)
	defer func() {
		// A marker left behind holds file GC back until it is stale,
		// or until this writer's next GC.
		deleteMarker(ctx, store, prefix, pendingDir, marker)
	}()
	if err := r.waitForGC(ctx, store, prefix, marker); err != nil {
		return SnapshotInfo{}, err
	}
	files, upFiles, upBytes, err := uploadFiles(ctx, store, prefix, ck, names)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if d := clock.Since(r.cfg.Clock, start); d > maxSnapshotRunTime {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot uploads took %v", ErrRunTooLong, d)
	}
	m := snapshotManifest{
		Format:    snapshotFormatV1,
		Pos:       uint64(pos),
		Digest:    hex.EncodeToString(digest[:]),
		CreatedAt: r.cfg.Clock.Now().UTC(),
		WriterID:  r.cfg.WriterID,
		Files:     files,
	}
	data, err := encodeManifest(&m)
	if err != nil {
		return SnapshotInfo{}, err
	}
	err = store.PutIfAbsent(ctx, key, data)
	if errors.Is(err, objstore.ErrExists) {
		// Another replica snapshotted the same position meanwhile.
		info, err := existingSnapshot(ctx, store, key, pos, digest)
		info.UploadedFiles, info.UploadedBytes = upFiles, upBytes
		return info, err
	}
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: snapshot: manifest: %w", err)
	}
	info := m.info(key)
	info.UploadedFiles, info.UploadedBytes = upFiles, upBytes
	return info, nil
}

// existingSnapshot returns the snapshot at key, or an error matching
// objstore.ErrNotFound if there is none. The state at a position is the
// same on every copy, so its digest must be ours (ErrDiverged if not).
func existingSnapshot(ctx context.Context, store objstore.Store, key string, pos sharedlog.Pos, digest [32]byte) (SnapshotInfo, error) {
	m, err := readManifest(ctx, store, key)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if ours := hex.EncodeToString(digest[:]); m.Digest != ours {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot %s holds digest %s, this copy %s at position %d",
			ErrDiverged, key, m.Digest, ours, pos)
	}
	return m.info(key), nil
}

// checkpointFiles lists the files of a checkpoint closed after
// checkpointState, sorted.
func checkpointFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("replica: snapshot: %w", err)
	}
	var names []string
	for _, de := range des {
		if !de.Type().IsRegular() {
			return nil, fmt.Errorf("replica: snapshot: unexpected %s in the checkpoint", de.Name())
		}
		if de.Name() != "LOCK" {
			names = append(names, de.Name())
		}
	}
	if len(names) > maxSnapshotFiles {
		return nil, fmt.Errorf("replica: snapshot: %d files, limit %d", len(names), maxSnapshotFiles)
	}
	return names, nil
}

// checkpointState opens a checkpoint and returns its applied position and
// digest.
//
// It opens read-write, which is fine for a private copy: opening flushes
// the checkpoint's WAL into an SST and deletes it. Pebble recycles WAL
// files, so a copied WAL is as large as the largest WAL it ever wrote
// (tens of MB) whatever little it holds; uploading SSTs instead keeps the
// snapshot small. No compaction may run, so the files do not change
// under the upload, and SSTs are never modified in place, so the hard
// links the checkpoint shares with the live store are safe.
func checkpointState(dir string, logger *slog.Logger) (sharedlog.Pos, [32]byte, error) {
	opts := pebbleOptions(logger)
	opts.DisableAutomaticCompactions = true
	opts.ErrorIfNotExists = true
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return 0, [32]byte{}, fmt.Errorf("replica: snapshot: open checkpoint: %w", err)
	}
	pos, digest, err := stateOf(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return pos, digest, err
}

// stateOf returns the applied position and digest of a store.
func stateOf(db *pebble.DB) (sharedlog.Pos, [32]byte, error) {
	v := meta.NewView(pebbleSnapshot{db.NewSnapshot()})
	defer v.Close()
	pos, err := v.NextToApply()
	if err != nil {
		return 0, [32]byte{}, err
	}
	digest, err := v.Digest()
	return sharedlog.Pos(pos), digest, err
}

// uploadFiles uploads the files that are not in the store yet and
// returns the manifest entries of all of them, in names order.
func uploadFiles(ctx context.Context, store objstore.Store, prefix, dir string, names []string) (files []snapshotFile, upFiles int, upBytes int64, err error) {
	have := make(map[string]int64)
	for _, d := range []string{sstDir, auxDir} {
		objs, err := store.List(ctx, prefix+d)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("replica: snapshot: list: %w", err)
		}
		for _, o := range objs {
			have[o.Key] = o.Size
		}
	}
	sizes := make([]int64, len(names))
	for i, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, 0, fmt.Errorf("replica: snapshot: %w", err)
		}
		sizes[i] = fi.Size()
	}
	files = make([]snapshotFile, len(names))
	uploaded := make([]bool, len(names))
	var claimMu sync.Mutex
	claims := make(map[string]bool)
	err = transferAll(ctx, sizes, func(ctx context.Context, i int) error {
		data, err := os.ReadFile(filepath.Join(dir, names[i]))
		if err != nil {
			return fmt.Errorf("replica: snapshot: %w", err)
		}
		sum := sha256.Sum256(data)
		f := snapshotFile{Name: names[i], Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
		f.Key = fileKey(f.Name, f.SHA256)
		files[i] = f
		if size, ok := have[prefix+f.Key]; ok && size == f.Size {
			return nil
		}
		// Files with equal content (Pebble's empty marker files) share
		// one object: upload it once.
		claimMu.Lock()
		claimed := claims[f.Key]
		claims[f.Key] = true
		claimMu.Unlock()
		if claimed {
			return nil
		}
		err = store.PutIfAbsent(ctx, prefix+f.Key, data)
		switch {
		case errors.Is(err, objstore.ErrExists):
			// Uploaded concurrently: the key names the content.
		case err != nil:
			return fmt.Errorf("replica: snapshot: upload %s: %w", f.Name, err)
		default:
			uploaded[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	for i, up := range uploaded {
		if up {
			upFiles++
			upBytes += files[i].Size
		}
	}
	return files, upFiles, upBytes, nil
}

// LatestSnapshot describes the newest snapshot under prefix, or fails with
// ErrNoSnapshot.
func LatestSnapshot(ctx context.Context, store objstore.Store, prefix string) (SnapshotInfo, error) {
	key, m, err := latestManifest(ctx, store, normalizePrefix(prefix))
	if err != nil {
		return SnapshotInfo{}, err
	}
	return m.info(key), nil
}

// Restore writes the newest snapshot under prefix into dir, which must be
// missing or empty (ErrRestoreDirNotEmpty otherwise), and returns it.
// Every file is checked against its size and SHA-256, keys local to the
// copy that took the snapshot are dropped, and the state must match the
// digest recorded in the manifest (ErrSnapshotCorrupt otherwise).
//
// The snapshot is staged in a temporary directory beside dir and renamed
// into place once complete, so dir never holds half a snapshot, even
// after a crash. Open on dir then plays the log from the snapshot's
// position; if the log is already trimmed above it, Open fails with an
// error matching sharedlog.ErrTrimmed.
//
// A snapshot GC may delete the snapshot while Restore reads it (newer ones
// came meanwhile). Restore then starts over from the newest, up to
// maxRestoreAttempts times, and fails with ErrSnapshotDeleted only if
// every attempt lost its snapshot.
func Restore(ctx context.Context, store objstore.Store, prefix, dir string) (SnapshotInfo, error) {
	prefix = normalizePrefix(prefix)
	dir = filepath.Clean(dir)
	for attempt := 1; ; attempt++ {
		info, err := restoreNewest(ctx, store, prefix, dir)
		if !errors.Is(err, ErrSnapshotDeleted) || attempt == maxRestoreAttempts {
			return info, err
		}
		slog.Default().Info("snapshot deleted while restoring it; restoring the newest", "err", err, "attempt", attempt)
	}
}

// maxRestoreAttempts bounds Restore's starts over: each needs the GC to
// delete the newest snapshot, so keep newer ones must come during a
// single download.
const maxRestoreAttempts = 5

// restoreNewest is one attempt of Restore.
func restoreNewest(ctx context.Context, store objstore.Store, prefix, dir string) (SnapshotInfo, error) {
	if err := checkEmptyDir(dir); err != nil {
		return SnapshotInfo{}, err
	}
	key, m, err := latestManifest(ctx, store, prefix)
	if err != nil {
		return SnapshotInfo{}, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: restore: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(dir)+".restore-")
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: restore: %w", err)
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	if err := downloadFiles(ctx, store, prefix, tmp, m.Files); err != nil {
		// A file is missing because the GC took the snapshot, or the
		// snapshot is damaged: the manifest tells which.
		if _, gerr := store.Get(ctx, key, 0, 1); errors.Is(err, ErrSnapshotCorrupt) && errors.Is(gerr, objstore.ErrNotFound) {
			return SnapshotInfo{}, fmt.Errorf("%w: %s: %v", ErrSnapshotDeleted, key, err)
		}
		return SnapshotInfo{}, err
	}
	if err := syncDir(tmp); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: restore: %w", err)
	}
	if err := finishRestore(tmp, key, &m); err != nil {
		return SnapshotInfo{}, err
	}
	// Remove refuses a directory that is not empty, so a writer that
	// raced into dir since the check keeps its files.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return SnapshotInfo{}, fmt.Errorf("replica: restore: replacing the empty directory: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: restore: %w", err)
	}
	tmp = ""
	if err := syncDir(parent); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replica: restore: %w", err)
	}
	return m.info(key), nil
}

// finishRestore opens the downloaded store, drops the keys local to the
// copy that took it, and checks its position and digest.
func finishRestore(dir, key string, m *snapshotManifest) error {
	opts := pebbleOptions(slog.Default())
	opts.ErrorIfNotExists = true
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return fmt.Errorf("%w: %s: open: %v", ErrSnapshotCorrupt, key, err)
	}
	err = dropLocalKeys(db)
	var pos sharedlog.Pos
	var digest [32]byte
	if err == nil {
		pos, digest, err = stateOf(db)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("replica: restore %s: %w", key, err)
	case uint64(pos) != m.Pos:
		return fmt.Errorf("%w: %s: state is at position %d", ErrSnapshotCorrupt, key, pos)
	case hex.EncodeToString(digest[:]) != m.Digest:
		return fmt.Errorf("%w: %s: state digest %x, manifest says %s", ErrSnapshotCorrupt, key, digest, m.Digest)
	}
	return nil
}

// dropLocalKeys deletes the keys that belong to the copy that took a
// snapshot, such as its writer's last incarnation: they describe that
// directory, not this one.
func dropLocalKeys(db *pebble.DB) error {
	start, end := meta.LocalSpan()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return err
	}
	b := db.NewBatch()
	defer b.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := b.Delete(it.Key(), nil); err != nil {
			it.Close()
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// downloadFiles fetches and checks every file into dir.
func downloadFiles(ctx context.Context, store objstore.Store, prefix, dir string, files []snapshotFile) error {
	sizes := make([]int64, len(files))
	for i, f := range files {
		sizes[i] = f.Size
	}
	return transferAll(ctx, sizes, func(ctx context.Context, i int) error {
		f := files[i]
		// One byte more than expected tells a longer object apart
		// without reading all of it.
		data, err := store.Get(ctx, prefix+f.Key, 0, f.Size+1)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			return fmt.Errorf("%w: file %s (object %s) is missing", ErrSnapshotCorrupt, f.Name, prefix+f.Key)
		case err != nil:
			return fmt.Errorf("replica: restore: download %s: %w", f.Name, err)
		case int64(len(data)) != f.Size:
			return fmt.Errorf("%w: file %s (object %s) is %d bytes, want %d", ErrSnapshotCorrupt, f.Name, prefix+f.Key, len(data), f.Size)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
			return fmt.Errorf("%w: file %s (object %s) has SHA-256 %x, want %s", ErrSnapshotCorrupt, f.Name, prefix+f.Key, sum, f.SHA256)
		}
		return writeFileSync(filepath.Join(dir, f.Name), data)
	})
}

func writeFileSync(path string, data []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("replica: restore: %w", err)
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("replica: restore: %w", err)
	}
	return nil
}

// checkEmptyDir accepts a missing or empty directory.
func checkEmptyDir(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replica: restore: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("%w: %s holds %s", ErrRestoreDirNotEmpty, dir, names[0])
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("replica: restore: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// NoTrimBound is TrimLog's bound when nothing but the snapshot limits the
// trim: no other agent is live.
const NoTrimBound = sharedlog.Pos(math.MaxUint64)

// TrimLog trims log below the lower of the newest snapshot under prefix
// and bound, after checking that every file of that snapshot is in the
// store. It returns the snapshot and the position it trimmed below; the
// log's trim point never moves back, so trimming below it does nothing.
//
// The snapshot caps the trim so that a copy restored from it can catch
// up; bound is where the caller knows a live copy still needs the log
// from, usually meta.View.LowestLiveApplied's Applied (NoTrimBound if none), so
// that no live agent is cut off: one left behind can only halt with
// sharedlog.ErrTrimmed and restore a snapshot. DESIGN.md also names
// retention as a bound; nothing keeps log entries for their own sake yet.
func TrimLog(ctx context.Context, log sharedlog.Log, store objstore.Store, prefix string, bound sharedlog.Pos) (SnapshotInfo, sharedlog.Pos, error) {
	prefix = normalizePrefix(prefix)
	key, m, err := latestManifest(ctx, store, prefix)
	if err != nil {
		return SnapshotInfo{}, 0, err
	}
	tail, _, err := log.CheckTail(ctx)
	if err != nil {
		return SnapshotInfo{}, 0, fmt.Errorf("replica: trim: %w", err)
	}
	if sharedlog.Pos(m.Pos) > tail {
		// PrefixTrim would trim everything: this is not a snapshot of
		// this log.
		return SnapshotInfo{}, 0, fmt.Errorf("replica: trim: snapshot %s is at position %d, past the log's tail %d", key, m.Pos, tail)
	}
	// Last before the trim, so that a snapshot a concurrent GC damaged
	// (any GC: the markers are what keeps one from it) never becomes the
	// trim point of a log that a wiped agent then cannot restore.
	if err := checkReachable(ctx, store, prefix, key, &m); err != nil {
		return SnapshotInfo{}, 0, err
	}
	before := min(sharedlog.Pos(m.Pos), bound)
	if err := log.PrefixTrim(ctx, before); err != nil {
		return SnapshotInfo{}, 0, fmt.Errorf("replica: trim: %w", err)
	}
	return m.info(key), before, nil
}

// checkReachable checks that every file of m is in the store with its
// size.
func checkReachable(ctx context.Context, store objstore.Store, prefix, key string, m *snapshotManifest) error {
	have := make(map[string]int64)
	for _, d := range []string{sstDir, auxDir} {
		objs, err := store.List(ctx, prefix+d)
		if err != nil {
			return fmt.Errorf("replica: list: %w", err)
		}
		for _, o := range objs {
			have[o.Key] = o.Size
		}
	}
	for _, f := range m.Files {
		if size, ok := have[prefix+f.Key]; !ok || size != f.Size {
			return fmt.Errorf("%w: %s: file %s (object %s) is missing or has the wrong size", ErrSnapshotCorrupt, key, f.Name, prefix+f.Key)
		}
	}
	return nil
}

// transferAll runs fn for every index, at most maxTransferFiles at once
// and, files of sizes permitting, at most maxTransferBytes in flight. It
// stops starting new calls at the first error and returns it.
func transferAll(ctx context.Context, sizes []int64, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lim transferLimiter
	lim.cond = sync.NewCond(&lim.mu)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var first error
	for i, size := range sizes {
		lim.acquire(size)
		if ctx.Err() != nil {
			lim.release(size)
			break
		}
		wg.Go(func() {
			defer lim.release(size)
			if err := fn(ctx, i); err != nil {
				errOnce.Do(func() {
					first = err
					cancel()
				})
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// transferLimiter admits transfers while they fit in the bounds; one
// transfer is always admitted, however large.
type transferLimiter struct {
	mu    sync.Mutex
	cond  *sync.Cond
	bytes int64
	files int
}

func (l *transferLimiter) acquire(size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.files > 0 && (l.files >= maxTransferFiles || l.bytes+size > maxTransferBytes) {
		l.cond.Wait()
	}
	l.files++
	l.bytes += size
}

func (l *transferLimiter) release(size int64) {
	l.mu.Lock()
	l.files--
	l.bytes -= size
	l.mu.Unlock()
	l.cond.Broadcast()
}
