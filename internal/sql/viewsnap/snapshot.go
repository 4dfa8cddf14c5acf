package viewsnap

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/sql/flow"
)

// Bounds of transfers: the Store API moves whole objects, so each
// transfer holds one file in memory. Pebble's files are at most tens of
// MB (its target file size grows to 64 MiB at the last level), so
// maxTransfers files in flight hold a few hundred MB at worst, and
// hide a remote store's per-request latency.
const maxTransfers = 4

// writerIDBytes is the size of a writer id (hex in keys).
const writerIDBytes = 8

// writerFile is the file in a view's directory holding its writer id:
// made at its first snapshot, absent from a wiped or restored directory,
// which so gets a new one (its Pebble file numbers start over or go on
// from another directory's).
const writerFile = "snapshot-writer"

// writerID returns the id of the state in viewDir, making one if it has
// none.
func writerID(viewDir string) (string, error) {
	path := filepath.Join(viewDir, writerFile)
	b, err := os.ReadFile(path)
	if err == nil && validWriter(strings.TrimSpace(string(b))) {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var raw [writerIDBytes]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	if err := writeFileSync(path, []byte(id+"\n")); err != nil {
		return "", err
	}
	return id, nil
}

// uploadResult is what one upload did.
type uploadResult struct {
	m             manifest
	uploadedFiles int
	uploadedBytes int64
	// existed: a manifest for the same writer and offsets was there
	// already (nothing consumed since): nothing was uploaded.
	existed bool
}

// upload puts the checkpoint in ck under prefix as the snapshot m
// describes (its Files filled here), files first and the manifest last:
// the snapshot exists once its manifest does. SSTs already in the store
// under this writer, named by one of its manifests and of the same size,
// are not uploaded again. The caller holds a pending marker (gc.go), so
// that no GC deletes what it reuses.
//
// beforeManifest is called once the files are up, before the manifest
// is written; its error fails the upload (a run that took too long).
//
// private names the SSTs of ck that are its own, not hard links of the
// live database's (made when the checkpoint was opened, sealCheckpoint):
// their file numbers are the live database's next ones, so they go under
// a key of this snapshot alone and are never reused.
//
// orig is the view directory's origin (origin.go): SSTs of it that are
// in the store are named where they are rather than uploaded.
func upload(ctx context.Context, store objstore.Store, prefix, ck string, m manifest, private map[string]bool, orig map[string]file, beforeManifest func() error) (uploadResult, error) {
	key := manifestKey(prefix, m.Offsets, m.Writer)
	if old, err := readManifest(ctx, store, key); err == nil {
		return uploadResult{m: old, existed: true}, nil
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return uploadResult{}, err
	}
	des, err := os.ReadDir(ck)
	if err != nil {
		return uploadResult{}, err
	}
	var names []string
	for _, de := range des {
		if !de.Type().IsRegular() {
			return uploadResult{}, fmt.Errorf("viewsnap: unexpected %s in the checkpoint", de.Name())
		}
		if de.Name() != "LOCK" {
			names = append(names, de.Name())
		}
	}
	if len(names) > maxFiles {
		return uploadResult{}, fmt.Errorf("viewsnap: checkpoint of %d files, limit %d", len(names), maxFiles)
	}
	have, err := ownFiles(ctx, store, prefix, m.Writer)
	if err != nil {
		return uploadResult{}, err
	}
	inherited, err := originFiles(ctx, store, prefix, orig)
	if err != nil {
		return uploadResult{}, err
	}
	m.Files = make([]file, len(names))
	uploaded := make([]bool, len(names))
	err = forEach(ctx, len(names), func(ctx context.Context, i int) error {
		name := names[i]
		path := filepath.Join(ck, name)
		shared := isSST(name) && !private[name]
		if shared {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			if f, ok := have[name]; ok && f.Size == fi.Size() {
				m.Files[i] = f
				return nil
			}
			if f, ok := inherited[name]; ok && f.Size == fi.Size() {
				m.Files[i] = f
				return nil
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		f := file{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
		f.Key = auxKey(m.Writer, m.Offsets, name)
		if shared {
			f.Key = sstKey(m.Writer, name)
		}
		// Put, not PutIfAbsent: an object of this key that no manifest
		// names is left from a failed attempt, and holds the same bytes
		// (SSTs) or bytes nothing will read (aux files).
		if err := store.Put(ctx, prefix+f.Key, data); err != nil {
			return fmt.Errorf("viewsnap: upload %s: %w", name, err)
		}
		m.Files[i], uploaded[i] = f, true
		return nil
	})
	if err != nil {
		return uploadResult{}, err
	}
	res := uploadResult{}
	for i, up := range uploaded {
		if up {
			res.uploadedFiles++
			res.uploadedBytes += m.Files[i].Size
		}
	}
	data, err := encodeManifest(&m)
	if err != nil {
		return uploadResult{}, err
	}
	if err := beforeManifest(); err != nil {
		return uploadResult{}, err
	}
	if err := store.PutIfAbsent(ctx, key, data); err != nil && !errors.Is(err, objstore.ErrExists) {
		return uploadResult{}, fmt.Errorf("viewsnap: manifest: %w", err)
	}
	res.m = m
	return res, nil
}

// ownFiles returns the SSTs writer's manifests name that are in the
// store with their size, by file name.
func ownFiles(ctx context.Context, store objstore.Store, prefix, writer string) (map[string]file, error) {
	keys, err := listManifests(ctx, store, prefix)
	if err != nil {
		return nil, err
	}
	named := map[string]file{}
	for _, k := range keys {
		if !strings.HasSuffix(k, "-"+writer+".json") {
			continue
		}
		m, err := readManifest(ctx, store, k)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // collected since the listing
		}
		if err != nil {
			return nil, err
		}
		for _, f := range m.Files {
			if isSST(f.Name) && f.Key == sstKey(writer, f.Name) {
				named[f.Name] = f
			}
		}
	}
	objs, err := store.List(ctx, prefix+sstDir+writer+"/")
	if err != nil {
		return nil, err
	}
	have := map[string]file{}
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, prefix+sstDir+writer+"/")
		if f, ok := named[name]; ok && f.Size == o.Size {
			have[name] = f
		}
	}
	return have, nil
}

// listManifests returns the manifest keys under prefix, oldest first
// (by the offsets their key starts with, zero-padded).
func listManifests(ctx context.Context, store objstore.Store, prefix string) ([]string, error) {
	objs, err := store.List(ctx, prefix+snapDir)
	if err != nil {
		return nil, fmt.Errorf("viewsnap: list manifests: %w", err)
	}
	var keys []string
	for _, o := range objs {
		if isManifestKey(prefix, o.Key) {
			keys = append(keys, o.Key)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// sealCheckpoint opens and closes the checkpoint in ck, which replays
// its WAL into an SST and deletes it: Pebble recycles WAL files, so a
// checkpoint's WAL is as large as the largest the database wrote (its
// memtable size) whatever little it holds, and would be uploaded with
// every snapshot. The checkpoint follows a flush, so that WAL is empty
// and usually no SST comes of it; any that does is returned as private.
// No compaction runs, so the hard-linked SSTs stay as they are.
func sealCheckpoint(ck string) (private map[string]bool, err error) {
	before, err := os.ReadDir(ck)
	if err != nil {
		return nil, err
	}
	had := map[string]bool{}
	for _, de := range before {
		had[de.Name()] = true
	}
	// With the view's merger (flow.OpenPebble): Pebble refuses another
	// merger name than the database recorded.
	db, _, err := flow.OpenPebble(ck, &pebble.Options{ErrorIfNotExists: true, DisableAutomaticCompactions: true, Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("viewsnap: open checkpoint: %w", err)
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	after, err := os.ReadDir(ck)
	if err != nil {
		return nil, err
	}
	private = map[string]bool{}
	for _, de := range after {
		if isSST(de.Name()) && !had[de.Name()] {
			private[de.Name()] = true
		}
	}
	return private, nil
}

// restoreOne downloads the snapshot m into a new directory under
// staging, checks every file's size and checksum, and that Pebble opens
// it, records that its SSTs are m's (writeOrigin), and returns that directory (the view's directory to be: its
// "state" database inside). The caller renames or removes it.
func restoreOne(ctx context.Context, store objstore.Store, prefix, staging, key string, m manifest) (string, error) {
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(staging, fmt.Sprintf("restore-%d-", m.View))
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	state := filepath.Join(tmp, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		return "", err
	}
	err = forEach(ctx, len(m.Files), func(ctx context.Context, i int) error {
		f := m.Files[i]
		// One byte more than expected tells a longer object apart
		// without reading all of it.
		data, err := store.Get(ctx, prefix+f.Key, 0, f.Size+1)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			return fmt.Errorf("%w: file %s (object %s) is missing", ErrCorrupt, f.Name, prefix+f.Key)
		case err != nil:
			return fmt.Errorf("viewsnap: download %s: %w", f.Name, err)
		case int64(len(data)) != f.Size:
			return fmt.Errorf("%w: file %s (object %s) is %d bytes, want %d", ErrCorrupt, f.Name, prefix+f.Key, len(data), f.Size)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
			return fmt.Errorf("%w: file %s (object %s) has SHA-256 %x, want %s", ErrCorrupt, f.Name, prefix+f.Key, sum, f.SHA256)
		}
		return writeFileSync(filepath.Join(state, f.Name), data)
	})
	if err != nil {
		return "", err
	}
	// No compaction: the check leaves the files as downloaded, so they
	// stay the origin's objects (origin.go) until the view compacts.
	db, _, err := flow.OpenPebble(state, &pebble.Options{ErrorIfNotExists: true, DisableAutomaticCompactions: true, Logger: quietLogger{}})
	if err != nil {
		return "", fmt.Errorf("%w: open: %v", ErrCorrupt, err)
	}
	if err := db.Close(); err != nil {
		return "", fmt.Errorf("%w: close: %v", ErrCorrupt, err)
	}
	if err := syncDir(state); err != nil {
		return "", err
	}
	if err := writeOrigin(tmp, key, m); err != nil {
		return "", err
	}
	ok = true
	return tmp, nil
}

// forEach runs fn for 0..n-1, at most maxTransfers at once, and returns
// the first error (starting no more calls after it).
func forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, maxTransfers)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() {
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

func writeFileSync(path string, data []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
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

// quietLogger keeps Pebble's routine messages out of the agent's log.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("viewsnap: "+format, args...))
}
