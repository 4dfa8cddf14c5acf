package replica

// The snapshot manifest: its JSON format, its validation (everything
// Restore later trusts is checked here) and the object key layout under a
// snapshot prefix, drawn in the package doc.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// snapshotFormatV1 is the manifest format this build writes and reads.
const snapshotFormatV1 = 1

// Bounds of a manifest: what it may make Restore read and write.
const (
	maxManifestBytes = 16 << 20
	maxSnapshotFiles = 1 << 16
)

// Object key layout under a snapshot prefix.
const (
	snapDir = "snap/"
	// sstDir holds SST and blob files, which Pebble never rewrites:
	// consecutive snapshots share most of them.
	sstDir = "sst/"
	// auxDir holds the rest (MANIFEST, OPTIONS, WAL, marker files).
	auxDir = "aux/"
)

// snapshotManifest is the JSON object at <prefix>snap/<Pos>.json.
type snapshotManifest struct {
	Format    int            `json:"format"`
	Pos       uint64         `json:"pos"`
	Digest    string         `json:"digest"` // hex SHA-256, meta.View.Digest at Pos
	CreatedAt time.Time      `json:"created_at"`
	WriterID  string         `json:"writer_id"` // the replica that took it
	Files     []snapshotFile `json:"files"`
}

// snapshotFile is one file of the Pebble checkpoint.
type snapshotFile struct {
	Name string `json:"name"`
	// Key is the object key relative to the snapshot prefix, so a
	// snapshot tree can be copied under another prefix.
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

// latestManifest reads the manifest with the highest position.
func latestManifest(ctx context.Context, store objstore.Store, prefix string) (string, snapshotManifest, error) {
	objs, err := store.List(ctx, prefix+snapDir)
	if err != nil {
		return "", snapshotManifest{}, fmt.Errorf("replica: list snapshots: %w", err)
	}
	// List sorts by key, and the zero-padded position sorts numerically.
	for i := len(objs) - 1; i >= 0; i-- {
		pos, ok := parseManifestKey(prefix, objs[i].Key)
		if !ok {
			continue
		}
		m, err := readManifest(ctx, store, objs[i].Key)
		if err != nil {
			return "", snapshotManifest{}, err
		}
		if m.Pos != uint64(pos) {
			return "", snapshotManifest{}, fmt.Errorf("%w: %s holds position %d", ErrSnapshotCorrupt, objs[i].Key, m.Pos)
		}
		return objs[i].Key, m, nil
	}
	return "", snapshotManifest{}, fmt.Errorf("%w under %q", ErrNoSnapshot, prefix)
}

func readManifest(ctx context.Context, store objstore.Store, key string) (snapshotManifest, error) {
	data, err := store.Get(ctx, key, 0, maxManifestBytes+1)
	if err != nil {
		return snapshotManifest{}, fmt.Errorf("replica: read manifest %s: %w", key, err)
	}
	if len(data) > maxManifestBytes {
		return snapshotManifest{}, fmt.Errorf("%w: manifest %s exceeds %d bytes", ErrSnapshotCorrupt, key, maxManifestBytes)
	}
	m, err := decodeManifest(data)
	if err != nil {
		return snapshotManifest{}, fmt.Errorf("%s: %w", key, err)
	}
	return m, nil
}

func encodeManifest(m *snapshotManifest) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(m, "", "\t")
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("replica: snapshot manifest is %d bytes, limit %d", len(data), maxManifestBytes)
	}
	return data, nil
}

// decodeManifest decodes and validates a manifest. Everything Restore
// later trusts (file names it creates, sizes it reads) is checked here.
func decodeManifest(data []byte) (snapshotManifest, error) {
	var m snapshotManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return snapshotManifest{}, fmt.Errorf("%w: manifest: %v", ErrSnapshotCorrupt, err)
	}
	if err := m.validate(); err != nil {
		return snapshotManifest{}, err
	}
	return m, nil
}

func (m *snapshotManifest) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest: %s", ErrSnapshotCorrupt, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Format != snapshotFormatV1:
		return bad("format %d, this build reads %d", m.Format, snapshotFormatV1)
	case !isSHA256Hex(m.Digest):
		return bad("digest %q", m.Digest)
	case len(m.Files) == 0 || len(m.Files) > maxSnapshotFiles:
		return bad("%d files", len(m.Files))
	}
	names := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		switch {
		case !validFileName(f.Name):
			return bad("file name %q", f.Name)
		case names[f.Name]:
			return bad("file %q listed twice", f.Name)
		case f.Size < 0 || f.Size > 1<<40:
			return bad("file %q size %d", f.Name, f.Size)
		case !isSHA256Hex(f.SHA256):
			return bad("file %q checksum %q", f.Name, f.SHA256)
		case f.Key != fileKey(f.Name, f.SHA256):
			return bad("file %q key %q", f.Name, f.Key)
		}
		names[f.Name] = true
	}
	return nil
}

func (m *snapshotManifest) info(key string) SnapshotInfo {
	info := SnapshotInfo{Pos: sharedlog.Pos(m.Pos), Key: key, CreatedAt: m.CreatedAt, Files: len(m.Files)}
	hex.Decode(info.Digest[:], []byte(m.Digest)) // validated
	for _, f := range m.Files {
		info.Bytes += f.Size
	}
	return info
}

// validFileName accepts the plain file names Pebble uses, nothing that
// could leave the restore directory or clash with the lock.
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

// fileKey is a file's object key relative to the prefix.
func fileKey(name, sum string) string {
	if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
		return sstDir + sum
	}
	return auxDir + sum
}

// manifestKeyDigits fits any uint64 position.
const manifestKeyDigits = 20

func manifestKey(prefix string, pos sharedlog.Pos) string {
	return fmt.Sprintf("%s%s%0*d.json", prefix, snapDir, manifestKeyDigits, uint64(pos))
}

func parseManifestKey(prefix, key string) (sharedlog.Pos, bool) {
	rest, ok := strings.CutPrefix(key, prefix+snapDir)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ".json")
	if !ok || len(digits) != manifestKeyDigits {
		return 0, false
	}
	p, err := strconv.ParseUint(digits, 10, 64)
	return sharedlog.Pos(p), err == nil
}

func normalizePrefix(prefix string) string {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}
