// Package fileobj owns the local-directory objstore.Store, Strand's
// embedded default: one file per object under a root directory.
//
// # Layout
//
// A key's segments (split at '/') become nested directories and the last
// segment the file name. Object stores let "a/b" and "a/b/c" both exist,
// while a file system cannot have "a/b" as both a file and a directory, so
// names are escaped to keep files and directories apart:
//
//	segment escaping   '%' -> "%25" (nothing else changes)
//	directory name     escape(segment) + "%2F"   (the escaped "segment/")
//	file name          escape(segment)
//	temporary file     "%tmp-" + random
//
// In an escaped segment every '%' is followed by "25", so no file name
// ends in "%2F" and none starts with "%tmp-": the three kinds never
// collide. Key "data/0001.obj" is stored as <root>/data%2F/0001.obj.
//
// # Durability and atomicity
//
// Put writes a temporary file in the object's directory, fsyncs it,
// renames it over the object and fsyncs the directory. Writes into one
// directory share its fsyncs (group commit): a write whose rename is done
// joins the next directory fsync to start, or starts one, and never
// relies on one that was already running, which may have begun before
// its rename. PutIfAbsent does
// the same but publishes with link(2), which fails if the name exists, so
// of several concurrent callers exactly one wins and a loser changes
// nothing. A reader holds an open file, and a file is never written after
// it is published, so readers see a whole old or a whole new object. A
// crash can leave temporary files behind but never a partial object; Open
// removes them.
//
// One process should own a directory: Open deletes every temporary file
// it finds, including one another process is still writing (whose Put then
// fails rather than publishing anything partial).
package fileobj

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/strandkafka/strand/internal/objstore"
)

// ErrInvalidKey: the key cannot name a file safely: empty, a leading '/',
// an empty, "." or ".." segment, a NUL byte, or a segment too long for a
// file name.
var ErrInvalidKey = errors.New("fileobj: invalid key")

const (
	tmpPrefix = "%tmp-"
	dirSuffix = "%2F"
	// maxNameBytes is NAME_MAX on Linux and most other systems.
	maxNameBytes = 255
	// maxDirRaceRetries bounds how often a write restarts because a
	// concurrent Delete removed the (then empty) directory it was about
	// to write into.
	maxDirRaceRetries = 8
)

// errDirVanished: a directory on the object's path was removed between
// creating it and using it. Internal; the write restarts.
var errDirVanished = errors.New("fileobj: directory removed concurrently")

// Store is an objstore.Store over a local directory. Safe for concurrent
// use.
type Store struct {
	root string
	// dirs holds the directory fsyncs running or about to start, by
	// directory; an entry lives only while one is.
	dirs struct {
		sync.Mutex
		m map[string]*dirSyncs
	}
	// syncDir is syncDir but in tests, which count and hold the fsyncs.
	syncDir func(dir string) error
}

// dirSyncs is the group commit of one directory's fsyncs: at most one
// running and one waiting to start, which every write whose rename ends
// meanwhile joins.
type dirSyncs struct {
	running, next *dirSync
}

// dirSync is one directory fsync; err is set before done is closed.
type dirSync struct {
	done chan struct{}
	err  error
}

var _ objstore.Store = (*Store)(nil)

// Open returns a Store rooted at dir, creating dir if needed, and removes
// temporary files left by a crashed writer.
func Open(dir string) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fileobj: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("fileobj: open: %w", err)
	}
	s, err := OpenShared(root)
	if err != nil {
		return nil, err
	}
	// The root may have just been created; make its entry durable.
	if err := syncDir(filepath.Dir(root)); err != nil {
		return nil, fmt.Errorf("fileobj: open: %w", err)
	}
	if err := s.removeTemps(); err != nil {
		return nil, fmt.Errorf("fileobj: open: removing temporary files: %w", err)
	}
	return s, nil
}

// OpenShared returns a Store over an existing dir without removing
// temporary files: for a process that reads a store another one writes
// (a benchmark listing a live agent's store), where temporaries are
// writes in flight, not a crash's leftovers.
func OpenShared(dir string) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fileobj: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("fileobj: open: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("fileobj: open %s: not a directory", root)
	}
	s := &Store{root: root, syncDir: syncDir}
	s.dirs.m = make(map[string]*dirSyncs)
	return s, nil
}

// Dir returns the absolute root directory.
func (s *Store) Dir() string { return s.root }

func (s *Store) removeTemps() error {
	return filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), tmpPrefix) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

// escape maps a key segment to its file name (see the package doc).
func escape(seg string) string { return strings.ReplaceAll(seg, "%", "%25") }

// unescape reverses escape, reporting false for names escape cannot
// produce (temporary files, directories, foreign files).
func unescape(name string) (string, bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == '%' && !strings.HasPrefix(name[i:], "%25") {
			return "", false
		}
	}
	return strings.ReplaceAll(name, "%25", "%"), true
}

func validSegment(seg string) string {
	switch {
	case seg == "":
		return "empty segment"
	case seg == "." || seg == "..":
		return fmt.Sprintf("%q segment", seg)
	case strings.IndexByte(seg, 0) >= 0:
		return "NUL byte"
	}
	return ""
}

// keyPath maps key to its directory (relative to the root) and file name.
func keyPath(key string) (dir, name string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why)
	}
	if key == "" {
		return bad("empty key")
	}
	if strings.HasPrefix(key, "/") {
		return bad("leading slash")
	}
	segs := strings.Split(key, "/")
	parts := make([]string, 0, len(segs))
	for i, seg := range segs {
		if why := validSegment(seg); why != "" {
			return bad(why)
		}
		p := escape(seg)
		if i < len(segs)-1 {
			p += dirSuffix
		}
		if len(p) > maxNameBytes {
			return bad("segment longer than a file name may be")
		}
		parts = append(parts, p)
	}
	return filepath.Join(parts[:len(parts)-1]...), parts[len(parts)-1], nil
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

func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return s.write(ctx, key, data, false)
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.write(ctx, key, data, true)
}

func (s *Store) write(ctx context.Context, key string, data []byte, exclusive bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rel, name, err := keyPath(key)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := s.writeOnce(ctx, rel, name, data, exclusive)
		if errors.Is(err, errDirVanished) && attempt < maxDirRaceRetries {
			continue
		}
		if err == nil || errors.Is(err, objstore.ErrExists) || err == ctx.Err() {
			return err
		}
		return fmt.Errorf("fileobj: write %q: %w", key, err)
	}
}

func (s *Store) writeOnce(ctx context.Context, rel, name string, data []byte, exclusive bool) error {
	dir := filepath.Join(s.root, rel)
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if errors.Is(err, fs.ErrNotExist) {
		// Directories are made on demand: a miss is the rare path.
		if err := s.mkdirs(rel); err != nil {
			return err
		}
		f, err = os.CreateTemp(dir, tmpPrefix+"*")
		if errors.Is(err, fs.ErrNotExist) {
			return errDirVanished
		}
	}
	if err != nil {
		return err
	}
	tmp := f.Name()
	published := false
	defer func() {
		if !published {
			_ = os.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Last point at which cancelling leaves the store unchanged.
	if err := ctx.Err(); err != nil {
		return err
	}
	final := filepath.Join(dir, name)
	if exclusive {
		err := os.Link(tmp, final)
		if errors.Is(err, fs.ErrExist) {
			return objstore.ErrExists
		}
		if err != nil {
			return err
		}
		// The temp name is removed before the directory sync so both
		// changes reach disk together; a crash in between leaves a temp
		// file, which Open removes.
		if err := os.Remove(tmp); err != nil {
			return err
		}
		published = true
	} else {
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
		published = true
	}
	return s.syncDirShared(dir)
}

// syncDirShared makes dir's entries durable as they are when it is
// called, sharing the fsync with concurrent callers (see the package
// doc). Several objects uploading at once into the same directory then
// cost one directory fsync, not one each queued behind the other.
func (s *Store) syncDirShared(dir string) error {
	s.dirs.Lock()
	st := s.dirs.m[dir]
	if st == nil {
		st = &dirSyncs{}
		s.dirs.m[dir] = st
	}
	if f := st.next; f != nil {
		// Not started yet, so it covers this caller's rename.
		s.dirs.Unlock()
		<-f.done
		return f.err
	}
	f := &dirSync{done: make(chan struct{})}
	if prev := st.running; prev != nil {
		// The running fsync may have started before this caller's
		// rename: lead the next one, which starts when it ends and
		// covers every caller that joins until then.
		st.next = f
		s.dirs.Unlock()
		<-prev.done
		s.dirs.Lock()
		st.next = nil
	}
	st.running = f
	s.dirs.Unlock()

	f.err = s.syncDir(dir)

	s.dirs.Lock()
	st.running = nil
	if st.next == nil {
		delete(s.dirs.m, dir)
	}
	s.dirs.Unlock()
	close(f.done)
	return f.err
}

// mkdirs creates the directories of rel one level at a time, syncing each
// parent whose entries changed so the new object's path survives a crash.
func (s *Store) mkdirs(rel string) error {
	if rel == "" {
		return fmt.Errorf("root directory %s: %w", s.root, fs.ErrNotExist)
	}
	cur := s.root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, part)
		err := os.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			if err := syncDir(parent); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return errDirVanished
				}
				return err
			}
		case errors.Is(err, fs.ErrExist):
		case errors.Is(err, fs.ErrNotExist):
			return errDirVanished
		default:
			return err
		}
	}
	return nil
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rel, name, err := keyPath(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.root, rel, name))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, objstore.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("fileobj: get %q: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fileobj: get %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, objstore.ErrNotFound
	}
	size := fi.Size()
	if offset < 0 || offset > size {
		return nil, objstore.ErrInvalidRange
	}
	n := size - offset
	if length >= 0 && length < n {
		n = length
	}
	buf := make([]byte, n)
	// Published files never change, so the size read above still holds.
	if _, err := f.ReadAt(buf, offset); err != nil && !(errors.Is(err, io.EOF) && offset+n == size) {
		return nil, fmt.Errorf("fileobj: get %q: %w", key, err)
	}
	return buf, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rel, name, err := keyPath(key)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.root, rel)
	err = os.Remove(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fileobj: delete %q: %w", key, err)
	}
	// Remove directories the delete emptied, so deleted prefixes do not
	// leave a trail of empty directories. rmdir fails on a non-empty
	// directory, which ends the walk; a concurrent writer that loses its
	// directory here retries (see maxDirRaceRetries).
	for dir != s.root && syscall.Rmdir(dir) == nil {
		dir = filepath.Dir(dir)
	}
	if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("fileobj: delete %q: %w", key, err)
	}
	return nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Descend straight to the directory of the prefix's complete
	// segments; only its last, partial segment needs matching by name.
	dir, keyDir, rest := s.root, "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		keyDir, rest = prefix[:i+1], prefix[i+1:]
		for _, seg := range strings.Split(prefix[:i], "/") {
			if validSegment(seg) != "" {
				return nil, nil // no valid key has this prefix
			}
			dir = filepath.Join(dir, escape(seg)+dirSuffix)
		}
	}
	var out []objstore.ObjectInfo
	if err := s.walk(ctx, dir, keyDir, rest, &out); err != nil {
		return nil, fmt.Errorf("fileobj: list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// walk appends the objects under dir, whose keys start with keyDir, and
// whose next segment starts with match.
func (s *Store) walk(ctx context.Context, dir, keyDir, match string, out *[]objstore.ObjectInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed by a concurrent Delete: nothing under it
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		if e.IsDir() {
			if !strings.HasSuffix(name, dirSuffix) {
				continue
			}
			seg, ok := unescape(strings.TrimSuffix(name, dirSuffix))
			if !ok || !strings.HasPrefix(seg, match) {
				continue
			}
			if err := s.walk(ctx, filepath.Join(dir, name), keyDir+seg+"/", "", out); err != nil {
				return err
			}
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		seg, ok := unescape(name)
		if !ok || !strings.HasPrefix(seg, match) {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		*out = append(*out, objstore.ObjectInfo{Key: keyDir + seg, Size: fi.Size()})
	}
	return nil
}
