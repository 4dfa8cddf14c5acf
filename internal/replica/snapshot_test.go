package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/faultlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

const snapPrefix = "cluster/meta"

func newMemStore(t *testing.T) objstore.Store { return memobj.New() }

func newFileStore(t *testing.T) objstore.Store {
	t.Helper()
	s, err := fileobj.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newMemLog(t *testing.T) sharedlog.Log { return memlog.New() }

func newFileLog(t *testing.T) sharedlog.Log {
	t.Helper()
	l, err := filelog.Open(t.TempDir(), filelog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// proposers commits to parts from several goroutines until stopped.
type proposers struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	acked atomic.Int64
	// reached is closed once `want` commits are acknowledged.
	reached chan struct{}
	want    int64
	errs    chan error
}

func startProposers(t *testing.T, r *Replica, parts []partRef, workers int, want int64) *proposers {
	t.Helper()
	p := &proposers{stop: make(chan struct{}), reached: make(chan struct{}), want: want, errs: make(chan error, workers)}
	ctx := testCtx(t)
	for w := range workers {
		p.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-p.stop:
					return
				default:
				}
				res, err := r.Propose(ctx, commitTo(int32(1+i%5), parts[(w+i)%len(parts)], parts[(w+2*i)%len(parts)]))
				if err == nil {
					err = res.Err()
				}
				if err != nil {
					p.errs <- err
					return
				}
				if p.acked.Add(1) == p.want {
					close(p.reached)
				}
			}
		})
	}
	t.Cleanup(p.halt)
	return p
}

// halt stops the proposers and fails the test if one failed.
func (p *proposers) halt() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	p.wg.Wait()
	close(p.errs)
}

func (p *proposers) stopAndCheck(t *testing.T) {
	t.Helper()
	p.halt()
	for err := range p.errs {
		t.Fatalf("proposer: %v", err)
	}
}

// setupTopic creates a topic and returns its partitions.
func setupTopic(t *testing.T, r *Replica, name string, partitions int32) []partRef {
	t.Helper()
	id := mustOK(t, r, meta.CreateTopic{Name: name, Partitions: partitions}).TopicID
	parts := make([]partRef, partitions)
	for p := range partitions {
		parts[p] = partRef{id, p}
	}
	return parts
}

// replayDigest applies the log's entries [0, pos) to a fresh store, as a
// replica replaying from position zero would, and returns its digest.
func replayDigest(t *testing.T, log sharedlog.Log, pos sharedlog.Pos) [32]byte {
	t.Helper()
	db, err := pebble.Open(t.TempDir(), pebbleOptions(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := testCtx(t)
	a := meta.NewApplier(nil)
	for from := sharedlog.Pos(0); from < pos; {
		es, err := log.ReadNext(ctx, from, min(pos, from+applyBatchEntries))
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d, %d): %d entries, %v", from, pos, len(es), err)
		}
		_, next, poison, err := applyEntries(db, a, es)
		if err != nil || poison != nil || next != from+sharedlog.Pos(len(es)) {
			t.Fatalf("apply [%d, %d): next %d, %v, %v", from, from+sharedlog.Pos(len(es)), next, poison, err)
		}
		from = next
	}
	applied, digest, err := stateOf(db)
	if err != nil || applied != pos {
		t.Fatalf("replayed store at %d, want %d (%v)", applied, pos, err)
	}
	return digest
}

// localKeys returns the 0xFF keys of a closed store directory.
func localKeys(t *testing.T, dir string) []string {
	t.Helper()
	db, err := pebble.Open(dir, pebbleOptions(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: localStart()})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, fmt.Sprintf("%q", it.Key()))
	}
	return keys
}

// TestSnapshotRestore is the acceptance test: a snapshot taken while
// proposers write, restored into an empty directory and caught up from
// the log, has the digest of a replica replayed from position zero; the
// digest in the manifest is the state at the snapshot's position; after
// the log is trimmed below the snapshot, replaying from zero fails with
// ErrTrimmed and restoring still works.
func TestSnapshotRestore(t *testing.T) {
	stores := []struct {
		name string
		new  func(*testing.T) objstore.Store
	}{{"memobj", newMemStore}, {"fileobj", newFileStore}}
	logs := []struct {
		name string
		new  func(*testing.T) sharedlog.Log
	}{{"memlog", newMemLog}, {"filelog", newFileLog}}
	for _, st := range stores {
		for _, lg := range logs {
			t.Run(st.name+"/"+lg.name, func(t *testing.T) {
				testSnapshotRestore(t, st.new(t), lg.new(t))
			})
		}
	}
}

func testSnapshotRestore(t *testing.T, store objstore.Store, log sharedlog.Log) {
	ctx := testCtx(t)
	a := openReplica(t, log, "", "a")
	parts := setupTopic(t, a, "t", 8)
	// Some state in SSTs and some only in the WAL, so the checkpoint
	// carries both.
	for range 20 {
		mustOK(t, a, commitTo(3, parts[0], parts[5]))
	}
	if err := a.db.Flush(); err != nil {
		t.Fatal(err)
	}

	p := startProposers(t, a, parts, 4, 50)
	recv(t, p.reached, "the first commits")
	info, err := a.Snapshot(ctx, store, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	p.stopAndCheck(t)
	keys := map[string]int64{}
	for _, f := range mustManifest(t, store, info.Key).Files {
		keys[f.Key] = f.Size
	}
	var keyBytes int64
	for _, size := range keys {
		keyBytes += size
	}
	if info.Pos == 0 || info.Files == 0 || info.Bytes == 0 || info.UploadedFiles != len(keys) || info.UploadedBytes != keyBytes {
		t.Fatalf("first snapshot: %+v; want one upload per distinct object (%d, %d bytes)", info, len(keys), keyBytes)
	}
	if want := fmt.Sprintf("%s/snap/%020d.json", snapPrefix, info.Pos); info.Key != want {
		t.Fatalf("manifest key %q, want %q", info.Key, want)
	}
	// The manifest's digest is the state at its position, computed
	// independently from the log.
	if want := replayDigest(t, log, info.Pos); info.Digest != want {
		t.Fatalf("snapshot digest %x, replay to %d %x", info.Digest, info.Pos, want)
	}
	if latest, err := LatestSnapshot(ctx, store, snapPrefix); err != nil || latest.Pos != info.Pos || latest.Digest != info.Digest {
		t.Fatalf("LatestSnapshot = %+v, %v; want %+v", latest, err, info)
	}
	// More writes after the snapshot, for the restored copy to catch up.
	for range 10 {
		mustOK(t, a, commitTo(2, parts[3]))
	}

	dir := filepath.Join(t.TempDir(), "restored")
	got, err := Restore(ctx, store, snapPrefix, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pos != info.Pos || got.Digest != info.Digest || got.Files != info.Files || got.Bytes != info.Bytes {
		t.Fatalf("Restore = %+v, snapshot %+v", got, info)
	}
	if ks := localKeys(t, dir); len(ks) != 0 {
		t.Fatalf("restored copy holds the local keys of the copy that took it: %v", ks)
	}
	b := openReplica(t, log, dir, "b")
	mustOK(t, b, commitTo(1, parts[7])) // the restored copy proposes too
	mustSync(t, a)
	mustSync(t, b)
	fresh := openReplica(t, log, "", "fresh")
	want := mustDigest(t, fresh)
	if gotA, gotB := mustDigest(t, a), mustDigest(t, b); gotA != want || gotB != want {
		t.Fatalf("digests at %d: a %x, restored %x, replayed from zero %x", fresh.NextToApply(), gotA, gotB, want)
	}

	trimmed, before, err := TrimLog(ctx, log, store, snapPrefix, NoTrimBound)
	if err != nil || trimmed.Pos != info.Pos || before != info.Pos {
		t.Fatalf("TrimLog = %+v, %d, %v; want the snapshot at %d, trimmed below it", trimmed, before, err, info.Pos)
	}
	_, err = tryOpen(t, log, "", "late")
	if !errors.Is(err, sharedlog.ErrTrimmed) || !errors.Is(err, ErrHalted) {
		t.Fatalf("Open from zero after trim: %v, want ErrTrimmed and ErrHalted", err)
	}
	dir2 := t.TempDir() // exists and is empty
	if _, err := Restore(ctx, store, snapPrefix, dir2); err != nil {
		t.Fatal(err)
	}
	c := openReplica(t, log, dir2, "c")
	mustSync(t, a)
	if got, want := mustDigest(t, c), mustDigest(t, a); got != want {
		t.Fatalf("copy restored after trim: %x, want %x", got, want)
	}
}

// TestRestoreBehindTrim: a copy restored from a snapshot the log has been
// trimmed past cannot catch up, and Open says so.
func TestRestoreBehindTrim(t *testing.T) {
	ctx := testCtx(t)
	log := memlog.New()
	store := memobj.New()
	a := openReplica(t, log, "", "a")
	parts := setupTopic(t, a, "t", 2)
	if _, err := a.Snapshot(ctx, store, snapPrefix); err != nil {
		t.Fatal(err)
	}
	mustOK(t, a, commitTo(1, parts[0]))
	mustSync(t, a)
	if err := log.PrefixTrim(ctx, a.NextToApply()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Restore(ctx, store, snapPrefix, dir); err != nil {
		t.Fatal(err)
	}
	_, err := tryOpen(t, log, dir, "b")
	if !errors.Is(err, sharedlog.ErrTrimmed) || !strings.Contains(err.Error(), "restore a newer snapshot") {
		t.Fatalf("Open = %v, want ErrTrimmed with advice", err)
	}
}

// keyRecorder records the keys written through it.
type keyRecorder struct {
	objstore.Store
	mu   sync.Mutex
	puts []string
}

func (k *keyRecorder) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k.mu.Lock()
	k.puts = append(k.puts, key)
	k.mu.Unlock()
	return k.Store.PutIfAbsent(ctx, key, data)
}

func (k *keyRecorder) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.puts
	k.puts = nil
	return p
}

func mustManifest(t *testing.T, store objstore.Store, key string) snapshotManifest {
	t.Helper()
	m, err := readManifest(testCtx(t), store, key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSnapshotReusesFiles: a second snapshot uploads only the files that
// changed; SSTs of the first are not sent again.
func TestSnapshotReusesFiles(t *testing.T) {
	ctx := testCtx(t)
	log := memlog.New()
	counting := objstore.WithCounters(memobj.New())
	rec := &keyRecorder{Store: counting}
	a := openReplica(t, log, "", "a")
	parts := setupTopic(t, a, "t", 4)
	for range 30 {
		mustOK(t, a, commitTo(2, parts...))
	}
	// Everything in the bottom level: the one flush the next snapshot
	// adds stays in L0, below Pebble's compaction threshold, so the
	// bottom SST is still there for the second snapshot to share.
	if err := a.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := a.db.Compact(ctx, []byte{0}, localStart(), false); err != nil {
		t.Fatal(err)
	}
	first, err := a.Snapshot(ctx, rec, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	rec.take()
	for range 30 {
		mustOK(t, a, commitTo(2, parts...))
	}
	before := counting.Snapshot()
	second, err := a.Snapshot(ctx, rec, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	puts := rec.take()
	delta := counting.Snapshot().Sub(before)

	if second.Pos <= first.Pos {
		t.Fatalf("second snapshot at %d, first at %d", second.Pos, first.Pos)
	}
	m1, m2 := mustManifest(t, counting, first.Key), mustManifest(t, counting, second.Key)
	inFirst := map[string]bool{}
	for _, f := range m1.Files {
		inFirst[f.Key] = true
	}
	var shared, newSST int
	for _, f := range m2.Files {
		switch {
		case inFirst[f.Key] && strings.HasPrefix(f.Key, sstDir):
			shared++
			if slices.Contains(puts, snapPrefix+"/"+f.Key) {
				t.Errorf("shared SST %s (%s) uploaded again", f.Name, f.Key)
			}
		case strings.HasPrefix(f.Key, sstDir):
			newSST++
		}
	}
	if shared == 0 || newSST == 0 {
		t.Fatalf("second snapshot: %d shared SSTs, %d new; want both (files %v)", shared, newSST, m2.Files)
	}
	if second.UploadedFiles >= second.Files {
		t.Fatalf("second snapshot uploaded %d of %d files", second.UploadedFiles, second.Files)
	}
	// One PutIfAbsent per uploaded file, plus the manifest.
	if got, want := delta.Op(objstore.OpPutIfAbsent).Requests, int64(second.UploadedFiles+1); got != want {
		t.Fatalf("%d PutIfAbsent requests, want %d (uploaded %d files)", got, want, second.UploadedFiles)
	}
	// The one Put is the in-progress marker (snapshot_gc.go): files and
	// manifests are never overwritten.
	if got := delta.Op(objstore.OpPut).Requests; got != 1 {
		t.Fatalf("%d Put requests, want the marker's alone: snapshots must never overwrite", got)
	}
	if got := storeKeys(t, counting); slices.ContainsFunc(got, func(k string) bool { return strings.Contains(k, "/"+pendingDir) }) {
		t.Fatalf("the in-progress marker outlived the snapshot: %v", got)
	}

	// Restore picks the newest.
	dir := t.TempDir()
	got, err := Restore(ctx, counting, snapPrefix, dir)
	if err != nil || got.Pos != second.Pos {
		t.Fatalf("Restore = %+v, %v; want position %d", got, err, second.Pos)
	}
}

// TestSnapshotSamePosition: a second snapshot at a position that has one
// returns it, unless the digests differ.
func TestSnapshotSamePosition(t *testing.T) {
	ctx := testCtx(t)
	log := memlog.New()
	store := memobj.New()
	a := openReplica(t, log, "", "a")
	b := openReplica(t, log, "", "b")
	setupTopic(t, a, "t", 3)
	mustSync(t, b)
	ia, err := a.Snapshot(ctx, store, snapPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.Snapshot(ctx, store, snapPrefix)
	if err != nil || ib.Pos != ia.Pos || ib.Digest != ia.Digest {
		t.Fatalf("b.Snapshot = %+v, %v; a's %+v", ib, err, ia)
	}
	m := mustManifest(t, store, ia.Key)
	m.Digest = strings.Repeat("ab", 32)
	data, err := encodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, ia.Key, data); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Snapshot(ctx, store, snapPrefix); !errors.Is(err, ErrDiverged) {
		t.Fatalf("Snapshot over a different digest: %v, want ErrDiverged", err)
	}
}

// TestRestoreCorrupt: every kind of damage to a snapshot fails Restore
// with a clear error and leaves the target directory as it was.
func TestRestoreCorrupt(t *testing.T) {
	log := memlog.New()
	a := openReplica(t, log, "", "a")
	parts := setupTopic(t, a, "t", 2)
	for range 20 {
		mustOK(t, a, commitTo(4, parts...))
	}
	if err := a.db.Flush(); err != nil {
		t.Fatal(err)
	}
	mustOK(t, a, commitTo(4, parts...)) // and some in the WAL

	// firstSST returns the key of one SST of the snapshot.
	firstSST := func(t *testing.T, store objstore.Store, m snapshotManifest) snapshotFile {
		t.Helper()
		for _, f := range m.Files {
			if strings.HasPrefix(f.Key, sstDir) {
				return f
			}
		}
		t.Fatalf("no SST in %v", m.Files)
		return snapshotFile{}
	}
	rewrite := func(t *testing.T, store objstore.Store, key string, edit func(*snapshotManifest)) {
		t.Helper()
		m := mustManifest(t, store, key)
		edit(&m)
		// Not encodeManifest: it refuses some of this damage.
		data, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(testCtx(t), key, data); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		damage  func(t *testing.T, store objstore.Store, info SnapshotInfo)
		want    error
		message string
	}{
		{"missing sst", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			f := firstSST(t, store, mustManifest(t, store, info.Key))
			if err := store.Delete(testCtx(t), snapPrefix+"/"+f.Key); err != nil {
				t.Fatal(err)
			}
		}, ErrSnapshotCorrupt, "is missing"},
		{"flipped byte", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			f := firstSST(t, store, mustManifest(t, store, info.Key))
			key := snapPrefix + "/" + f.Key
			data, err := store.Get(testCtx(t), key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 1
			if err := store.Put(testCtx(t), key, data); err != nil {
				t.Fatal(err)
			}
		}, ErrSnapshotCorrupt, "SHA-256"},
		{"truncated", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			f := firstSST(t, store, mustManifest(t, store, info.Key))
			key := snapPrefix + "/" + f.Key
			data, err := store.Get(testCtx(t), key, 0, f.Size-1)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Put(testCtx(t), key, data); err != nil {
				t.Fatal(err)
			}
		}, ErrSnapshotCorrupt, "bytes, want"},
		{"manifest not json", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			if err := store.Put(testCtx(t), info.Key, []byte(`{"format": 1, "files": [`)); err != nil {
				t.Fatal(err)
			}
		}, ErrSnapshotCorrupt, "manifest"},
		{"manifest digest", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			rewrite(t, store, info.Key, func(m *snapshotManifest) { m.Digest = strings.Repeat("0", 64) })
		}, ErrSnapshotCorrupt, "state digest"},
		{"manifest position", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			rewrite(t, store, info.Key, func(m *snapshotManifest) { m.Pos++ })
		}, ErrSnapshotCorrupt, "holds position"},
		{"manifest path escape", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			rewrite(t, store, info.Key, func(m *snapshotManifest) { m.Files[0].Name = "../escape" })
		}, ErrSnapshotCorrupt, "file name"},
		{"manifest format", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			rewrite(t, store, info.Key, func(m *snapshotManifest) { m.Format = 2 })
		}, ErrSnapshotCorrupt, "format 2"},
		{"manifest missing file", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			// Without its MANIFEST, the copy does not open as the state
			// the manifest describes.
			rewrite(t, store, info.Key, func(m *snapshotManifest) {
				m.Files = slices.DeleteFunc(m.Files, func(f snapshotFile) bool { return strings.HasPrefix(f.Name, "MANIFEST-") })
			})
		}, ErrSnapshotCorrupt, ""},
		{"no snapshot", func(t *testing.T, store objstore.Store, info SnapshotInfo) {
			if err := store.Delete(testCtx(t), info.Key); err != nil {
				t.Fatal(err)
			}
		}, ErrNoSnapshot, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			store := memobj.New()
			info, err := a.Snapshot(ctx, store, snapPrefix)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, store, info)
			parent := t.TempDir()
			dir := filepath.Join(parent, "restored")
			_, err = Restore(ctx, store, snapPrefix, dir)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("Restore = %v, want %v mentioning %q", err, tc.want, tc.message)

			}
			if des, err := os.ReadDir(parent); err != nil || len(des) != 0 {
				t.Fatalf("failed restore left %v behind (%v)", des, err)
			}
		})
	}

	t.Run("trim refuses an incomplete snapshot", func(t *testing.T) {
		ctx := testCtx(t)
		store := memobj.New()
		info, err := a.Snapshot(ctx, store, snapPrefix)
		if err != nil {
			t.Fatal(err)
		}
		f := firstSST(t, store, mustManifest(t, store, info.Key))
		if err := store.Delete(ctx, snapPrefix+"/"+f.Key); err != nil {
			t.Fatal(err)
		}
		if _, _, err := TrimLog(ctx, log, store, snapPrefix, NoTrimBound); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Fatalf("TrimLog = %v, want ErrSnapshotCorrupt", err)
		}
		if _, err := log.ReadNext(ctx, 0, 1); err != nil {
			t.Fatalf("the log was trimmed anyway: %v", err)
		}
	})
}

// TestRestoreDir: Restore refuses a directory that holds anything, and
// leaves it alone.
func TestRestoreDir(t *testing.T) {
	ctx := testCtx(t)
	store := memobj.New()
	a := openReplica(t, memlog.New(), "", "a")
	setupTopic(t, a, "t", 1)
	if _, err := a.Snapshot(ctx, store, snapPrefix); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stray := filepath.Join(dir, "stray")
	if err := os.WriteFile(stray, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, store, snapPrefix, dir); !errors.Is(err, ErrRestoreDirNotEmpty) {
		t.Fatalf("Restore into a non-empty dir: %v, want ErrRestoreDirNotEmpty", err)
	}
	if data, err := os.ReadFile(stray); err != nil || string(data) != "keep me" {
		t.Fatalf("stray file: %q, %v", data, err)
	}
	if _, err := Restore(ctx, store, snapPrefix, a.cfg.Dir); !errors.Is(err, ErrRestoreDirNotEmpty) {
		t.Fatalf("Restore over a live copy: %v, want ErrRestoreDirNotEmpty", err)
	}
}

// TestSnapshotClosed: a closed replica refuses to snapshot.
func TestSnapshotClosed(t *testing.T) {
	a := openReplica(t, memlog.New(), "", "a")
	a.Close()
	if _, err := a.Snapshot(testCtx(t), memobj.New(), snapPrefix); !errors.Is(err, ErrClosed) {
		t.Fatalf("Snapshot after Close: %v, want ErrClosed", err)
	}
}

func TestManifestKey(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		pos    sharedlog.Pos
	}{{"", 0}, {"a/", 7}, {"a/b/", 1<<64 - 1}} {
		key := manifestKey(tc.prefix, tc.pos)
		got, ok := parseManifestKey(tc.prefix, key)
		if !ok || got != tc.pos {
			t.Errorf("parseManifestKey(%q) = %d, %v; want %d", key, got, ok, tc.pos)
		}
	}
	if manifestKey("", 9) >= manifestKey("", 10) {
		t.Error("manifest keys do not sort by position")
	}
	for _, key := range []string{"snap/1.json", "snap/0000000000000000000x.json", "snap/00000000000000000001.jsonx", "other/00000000000000000001.json"} {
		if _, ok := parseManifestKey("", key); ok {
			t.Errorf("parseManifestKey(%q) accepted", key)
		}
	}
}

// validManifest is a seed for the fuzzer.
func validManifest() snapshotManifest {
	sum := strings.Repeat("0123456789abcdef", 4)
	return snapshotManifest{
		Format: snapshotFormatV1, Pos: 42, Digest: sum,
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), WriterID: "w",
		Files: []snapshotFile{
			{Name: "000005.sst", Key: fileKey("000005.sst", sum), Size: 10, SHA256: sum},
			{Name: "MANIFEST-000001", Key: fileKey("MANIFEST-000001", sum), Size: 0, SHA256: sum},
		},
	}
}

// FuzzDecodeManifest: decoding never panics, a decoded manifest holds
// only names Restore may create, and it re-encodes to bytes that decode
// to the same manifest.
func FuzzDecodeManifest(f *testing.F) {
	m := validManifest()
	seed, err := encodeManifest(&m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":1,"pos":1,"digest":"` + strings.Repeat("a", 64) + `","files":[{"name":"..","key":"aux/` + strings.Repeat("a", 64) + `","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`))
	f.Add(bytes.Replace(seed, []byte("000005.sst"), []byte("sub/05.sst"), 1))
	f.Add(bytes.Replace(seed, []byte(`"size": 10`), []byte(`"size": -1`), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest(data)
		if err != nil {
			if !errors.Is(err, ErrSnapshotCorrupt) {
				t.Fatalf("error %v does not match ErrSnapshotCorrupt", err)
			}
			return
		}
		for _, f := range m.Files {
			if filepath.Base(f.Name) != f.Name || f.Name == ".." || strings.ContainsAny(f.Name, `/\`) {
				t.Fatalf("accepted file name %q", f.Name)
			}
		}
		enc, err := encodeManifest(&m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		m2, err := decodeManifest(enc)
		if err != nil {
			t.Fatalf("decode of re-encoding: %v", err)
		}
		enc2, err := encodeManifest(&m2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip differs:\n%s\n%s", enc, enc2)
		}
	})
}

// TestTrimSparesLiveAgent: replica a snapshots and trims repeatedly while
// replica b, another live agent, applies nothing. Bounded by
// LowestLiveApplied, the trims stay at b's reported position, and b then
// catches up. Once b's lease runs out by the log clock, a trims up to its
// snapshot, and b, if it comes back, finds itself trimmed out.
func TestTrimSparesLiveAgent(t *testing.T) {
	ctx := testCtx(t)
	log := memlog.New()
	store := memobj.New()
	clk := clock.NewFake(time.UnixMilli(1_000_000))
	const leaseMs = 10_000
	a := openReplica(t, log, "", "a", withClock(clk))
	bLog := faultlog.Paused(log)
	b := openReplica(t, bLog, "", "b", withClock(clk))
	// heartbeat renews r's lease with its applied position, as an agent's
	// membership loop does, and returns that position.
	heartbeat := func(r *Replica, node int32) sharedlog.Pos {
		t.Helper()
		applied := r.NextToApply()
		mustOK(t, r, meta.AgentHeartbeat{NodeID: node, AgentID: r.WriterID(), LeaseMs: leaseMs, Applied: uint64(applied)})
		return applied
	}
	// trim is the agent's snapshot-and-trim: snapshot, then trim below
	// it and below every other live agent.
	trim := func() (SnapshotInfo, sharedlog.Pos, meta.AgentInfo, bool) {
		t.Helper()
		info, err := a.Snapshot(ctx, store, snapPrefix)
		if err != nil {
			t.Fatal(err)
		}
		mustSync(t, a)
		low, held, err := viewOf(t, a).LowestLiveApplied(a.WriterID())
		if err != nil {
			t.Fatal(err)
		}
		bound := NoTrimBound
		if held {
			bound = sharedlog.Pos(low.Applied)
		}
		got, before, err := TrimLog(ctx, log, store, snapPrefix, bound)
		if err != nil || got.Pos != info.Pos {
			t.Fatalf("TrimLog = %+v, %v; want the snapshot at %d", got, err, info.Pos)
		}
		return info, before, low, held
	}

	parts := setupTopic(t, a, "t", 2)
	heartbeat(a, 1)
	mustSync(t, b)
	bAt := heartbeat(b, 2)
	if bAt == 0 {
		t.Fatal("b reports applied position 0 after a sync")
	}
	bLog.Pause()
	for i := range 3 {
		clk.Advance(time.Second) // within b's lease
		mustOK(t, a, commitTo(1, parts[i%2]))
		heartbeat(a, 1)
		info, before, low, held := trim()
		if !held || low.NodeID != 2 || sharedlog.Pos(low.Applied) != bAt {
			t.Fatalf("round %d: trim held by %+v (%v), want node 2 at %d", i, low, held, bAt)
		}
		if before != bAt || info.Pos <= bAt {
			t.Fatalf("round %d: snapshot at %d, trimmed below %d; want below b's applied %d", i, info.Pos, before, bAt)
		}
		if b.NextToApply() >= info.Pos {
			t.Fatalf("round %d: b applied up to %d, past the snapshot at %d: it was not paused", i, b.NextToApply(), info.Pos)
		}
	}
	bLog.Resume()
	mustSync(t, b)
	mustSync(t, a)
	if err := b.Err(); err != nil {
		t.Fatalf("b after catching up: %v", err)
	}
	if mustDigest(t, a) != mustDigest(t, b) {
		t.Fatal("b caught up to different state")
	}

	// b stops again and stops renewing; a's entries move the log clock
	// past the end of b's lease.
	bAt = b.NextToApply()
	bLog.Pause()
	clk.Advance(time.Duration(leaseMs) * time.Millisecond)
	mustOK(t, a, commitTo(1, parts[0]))
	heartbeat(a, 1)
	info, before, low, held := trim()
	if held || before != info.Pos || info.Pos <= bAt {
		t.Fatalf("after b's lease: held by %+v (%v), trimmed below %d; want below the snapshot at %d, past b's %d",
			low, held, before, info.Pos, bAt)
	}
	bLog.Resume()
	if err := b.Sync(ctx); !errors.Is(err, sharedlog.ErrTrimmed) || !errors.Is(err, ErrHalted) {
		t.Fatalf("b resuming below the trim point: %v, want ErrTrimmed and ErrHalted", err)
	}
}
