package viewsnap

// A restored directory's origin: which uploaded objects its SSTs are.
//
// A restored directory gets a new writer id (writerID: its Pebble file
// numbers go on from another directory's), so without more its first
// snapshot would upload its whole state again. Restore therefore keeps,
// beside the restored state, the restored manifest's SSTs with their
// object keys (originFile). Pebble never rewrites a file nor reuses a
// file number within a database, and a restored database's next file
// number is above every file the checkpoint held, so a file of the
// restored directory with an origin name and the origin size is still
// that object's bytes: a snapshot names the origin's object in its
// manifest instead of uploading the file under its own writer (upload,
// originFiles). The origin stays for the directory's life: the files
// it names go only as compactions replace them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/strandkafka/strand/internal/objstore"
)

// originFile is the file in a restored view's directory naming the
// objects its SSTs were downloaded from.
const originFile = "snapshot-origin.json"

// origin is originFile's content.
type origin struct {
	// Manifest is the key the directory was restored from; informative.
	Manifest string `json:"manifest"`
	Files    []file `json:"files"`
}

// writeOrigin records in dir that its SSTs are m's.
func writeOrigin(dir, key string, m manifest) error {
	o := origin{Manifest: key}
	for _, f := range m.Files {
		if isSST(f.Name) && isSSTKey(f.Key, f.Name) {
			o.Files = append(o.Files, f)
		}
	}
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return writeFileSync(filepath.Join(dir, originFile), data)
}

// readOrigin returns the origin of the view directory dir by file
// name; none (nil) for a directory not restored or of an older build.
// An origin that does not validate is ignored: its files are uploaded
// as the directory's own, which costs bytes, not correctness.
func readOrigin(dir string) map[string]file {
	data, err := os.ReadFile(filepath.Join(dir, originFile))
	if err != nil || len(data) > maxManifestBytes {
		return nil
	}
	var o origin
	if json.Unmarshal(data, &o) != nil || len(o.Files) > maxFiles {
		return nil
	}
	out := make(map[string]file, len(o.Files))
	for _, f := range o.Files {
		if !validFileName(f.Name) || !isSST(f.Name) || !isSSTKey(f.Key, f.Name) || !isSHA256Hex(f.SHA256) || f.Size < 0 {
			return nil
		}
		out[f.Name] = f
	}
	return out
}

// isSSTKey reports whether key is sstKey(w, name) for some writer w.
func isSSTKey(key, name string) bool {
	rest, ok := strings.CutPrefix(key, sstDir)
	if !ok {
		return false
	}
	w, n, ok := strings.Cut(rest, "/")
	return ok && n == name && validWriter(w)
}

// originFiles returns the files of orig whose objects are in the store
// with their size, by file name. The caller holds a pending marker, so
// no GC deletes them until its manifest names them.
func originFiles(ctx context.Context, store objstore.Store, prefix string, orig map[string]file) (map[string]file, error) {
	if len(orig) == 0 {
		return nil, nil
	}
	sizes := map[string]int64{}
	listed := map[string]bool{}
	for _, f := range orig {
		dir := prefix + f.Key[:strings.LastIndexByte(f.Key, '/')+1]
		if listed[dir] {
			continue
		}
		listed[dir] = true
		objs, err := store.List(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("viewsnap: list %s: %w", dir, err)
		}
		for _, o := range objs {
			sizes[o.Key] = o.Size
		}
	}
	have := map[string]file{}
	for name, f := range orig {
		if size, ok := sizes[prefix+f.Key]; ok && size == f.Size {
			have[name] = f
		}
	}
	return have, nil
}
