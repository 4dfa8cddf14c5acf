package viewsnap

// The manifest: its JSON format, its validation (everything Restore
// later trusts is checked here) and the object key layout under a
// view's prefix, drawn in the package doc.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/sql/source"
)

// ErrCorrupt: a manifest does not decode or validate, or a file it
// names is missing or does not match its size or checksum.
var ErrCorrupt = errors.New("viewsnap: snapshot is corrupt")

// formatV1 is the manifest format this build writes and reads.
const formatV1 = 1

// Bounds of a manifest: what it may make Restore read and write.
const (
	maxManifestBytes = 16 << 20
	maxFiles         = 1 << 16
	maxFileBytes     = 1 << 40
)

// Root is the object store prefix of every view's snapshots; data
// objects live under data/ and metadata snapshots under meta/, so none
// meet.
const Root = "views/"

// Object key layout under a view's prefix.
const (
	snapDir    = "snap/"
	sstDir     = "sst/"
	auxDir     = "aux/"
	pendingDir = "pending/"
	gcDir      = "gc/"
)

// ViewPrefix is where the snapshots of the view with relation id id
// live.
func ViewPrefix(id uint64) string { return Root + strconv.FormatUint(id, 10) + "/" }

// manifest is the JSON object at <view prefix>snap/<offsets>-<writer>.json.
type manifest struct {
	Format int    `json:"format"`
	View   uint64 `json:"view"`
	// Writer names the state directory the checkpoint was taken of (a
	// random id kept in it): its SSTs' names are unique within it.
	Writer string `json:"writer"`
	// Offsets is the sum of Inputs' offsets, the manifest's order.
	Offsets int64 `json:"offsets"`
	// Epoch is the writer's epoch number; informative.
	Epoch uint64 `json:"epoch"`
	// Inputs are the positions the state resumes from, as recorded in
	// the state itself; the restored task reads those, these are for
	// people and tests.
	Inputs    []map[int32]source.Position `json:"inputs"`
	CreatedAt time.Time                   `json:"created_at"` // the writer's clock; informative only
	Files     []file                      `json:"files"`
}

// file is one file of the checkpoint of the view's "state" database.
type file struct {
	Name string `json:"name"`
	// Key is the object key relative to the view's prefix.
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

// Bytes is the size of the manifest's files.
func (m *manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

func manifestKey(prefix string, offsets int64, writer string) string {
	return fmt.Sprintf("%s%s%020d-%s.json", prefix, snapDir, offsets, writer)
}

// isManifestKey reports whether key is a manifest's key under prefix.
func isManifestKey(prefix, key string) bool {
	rest, ok := strings.CutPrefix(key, prefix+snapDir)
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".json")
	digits, writer, ok2 := strings.Cut(rest, "-")
	return ok && ok2 && len(digits) == 20 && validWriter(writer)
}

// sstKey names an SST (or blob) file: Pebble never reuses a file number
// within one database and never rewrites a file, so the writer's id and
// the file's name name its content for good, and consecutive snapshots
// of one directory share their unchanged SSTs. The writer's id keeps two
// agents' (or a wiped and a restored directory's) equal file numbers
// apart.
func sstKey(writer, name string) string { return sstDir + writer + "/" + name }

// auxKey names the other files (MANIFEST-*, OPTIONS-*, markers), which
// a later checkpoint of the same name may hold other bytes in: one set
// per snapshot.
func auxKey(writer string, offsets int64, name string) string {
	return fmt.Sprintf("%s%s/%020d-%s", auxDir, writer, offsets, name)
}

func isSST(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

func encodeManifest(m *manifest) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(m, "", "\t")
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("viewsnap: manifest is %d bytes, limit %d", len(data), maxManifestBytes)
	}
	return data, nil
}

func decodeManifest(data []byte) (manifest, error) {
	var m manifest
	if len(data) > maxManifestBytes {
		return manifest{}, fmt.Errorf("%w: manifest of %d bytes, limit %d", ErrCorrupt, len(data), maxManifestBytes)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return manifest{}, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if err := m.validate(); err != nil {
		return manifest{}, err
	}
	return m, nil
}

func readManifest(ctx context.Context, store objstore.Store, key string) (manifest, error) {
	data, err := store.Get(ctx, key, 0, maxManifestBytes+1)
	if err != nil {
		return manifest{}, fmt.Errorf("viewsnap: read manifest %s: %w", key, err)
	}
	m, err := decodeManifest(data)
	if err != nil {
		return manifest{}, fmt.Errorf("%s: %w", key, err)
	}
	return m, nil
}

// validate checks what Restore trusts: file names it creates, keys it
// reads, sizes it allocates.
func (m *manifest) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Format != formatV1:
		return bad("format %d, this build reads %d", m.Format, formatV1)
	case !validWriter(m.Writer):
		return bad("writer %q", m.Writer)
	case m.Offsets < 0:
		return bad("offsets %d", m.Offsets)
	case len(m.Files) == 0 || len(m.Files) > maxFiles:
		return bad("%d files", len(m.Files))
	}
	names := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		// An SST is shared (sstKey) or the snapshot's own (auxKey,
		// sealCheckpoint); any other file is the snapshot's own.
		// A shared SST may be another writer's: the object a restored
		// directory's file was downloaded from (origin.go).
		aux := auxKey(m.Writer, m.Offsets, f.Name)
		want := aux
		if isSST(f.Name) && f.Key != aux {
			want = sstKey(m.Writer, f.Name)
			if isSSTKey(f.Key, f.Name) {
				want = f.Key
			}
		}
		switch {
		case !validFileName(f.Name):
			return bad("file name %q", f.Name)
		case names[f.Name]:
			return bad("file %q listed twice", f.Name)
		case f.Size < 0 || f.Size > maxFileBytes:
			return bad("file %q size %d", f.Name, f.Size)
		case !isSHA256Hex(f.SHA256):
			return bad("file %q checksum %q", f.Name, f.SHA256)
		case f.Key != want:
			return bad("file %q key %q, want %q", f.Name, f.Key, want)
		}
		names[f.Name] = true
	}
	return nil
}

// validFileName accepts the plain file names Pebble uses, nothing that
// could leave the restore directory or clash with its lock.
func validFileName(name string) bool {
	if name == "" || name == "." || name == ".." || name == "LOCK" || len(name) > 255 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x21 || c > 0x7e || c == '/' || c == '\\' || c == ':' {
			return false
		}
	}
	return true
}

// validWriter accepts the writer ids newWriterID makes: lower-case hex.
func validWriter(w string) bool {
	if len(w) != 2*writerIDBytes {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func isSHA256Hex(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
