package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// MetaStore holds the VirtualLog's chain: one versioned register with
// compare-and-swap. It is written only when the log is reconfigured or
// trimmed, and read when a client opens the log or finds its active
// loglet sealed, so it may be slow; it must never lose a write it
// acknowledged, and concurrent CASes of one version must have exactly one
// winner, across processes and machines. Safe for concurrent use.
//
// Backends: memory and a local file here; others (a PostgreSQL row, an
// etcd key, a DynamoDB item, an S3 object with If-Match) live beside
// their loglets. Every backend passes metastoretest.Run.
type MetaStore interface {
	// Get returns the stored chain, or the empty chain (Version 0, no
	// segments) if none was ever stored. The caller owns the result.
	Get(ctx context.Context) (Chain, error)

	// CAS stores next if and only if the stored version is expect. next
	// must be valid and have Version expect+1, else CAS returns
	// ErrInvalidChain and writes nothing; so after a successful CAS the
	// stored version is exactly expect+1. A stored version other than
	// expect is ErrConflict, and nothing was written. Any other error is
	// ambiguous: next may or may not be stored; Get tells.
	CAS(ctx context.Context, expect uint64, next Chain) error
}

// CheckCAS is the argument check every MetaStore.CAS makes before it
// writes: next is valid, not empty, and has Version expect+1.
func CheckCAS(expect uint64, next Chain) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if next.Empty() {
		return fmt.Errorf("%w: CAS of an empty chain", ErrInvalidChain)
	}
	if next.Version != expect+1 {
		return fmt.Errorf("%w: CAS expecting version %d must store version %d, not %d",
			ErrInvalidChain, expect, expect+1, next.Version)
	}
	return nil
}

// MemMetaStore is a MetaStore in memory, for tests and single-process
// simulations. It keeps the encoded chain, as a remote store would, so
// callers share nothing with it.
type MemMetaStore struct {
	mu struct {
		sync.Mutex
		stored []byte // nil until the first CAS
	}
}

var _ MetaStore = (*MemMetaStore)(nil)

// NewMemMetaStore returns an empty store.
func NewMemMetaStore() *MemMetaStore { return &MemMetaStore{} }

func (m *MemMetaStore) Get(ctx context.Context) (Chain, error) {
	if err := ctx.Err(); err != nil {
		return Chain{}, err
	}
	m.mu.Lock()
	b := m.mu.stored
	m.mu.Unlock()
	if b == nil {
		return Chain{}, nil
	}
	return DecodeChain(b)
}

func (m *MemMetaStore) CAS(ctx context.Context, expect uint64, next Chain) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckCAS(expect, next); err != nil {
		return err
	}
	b, err := EncodeChain(next)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur uint64
	if m.mu.stored != nil {
		c, err := DecodeChain(m.mu.stored)
		if err != nil {
			return err
		}
		cur = c.Version
	}
	if cur != expect {
		return fmt.Errorf("CAS expecting version %d, stored %d: %w", expect, cur, ErrConflict)
	}
	m.mu.stored = b
	return nil
}

// FileMetaStore is a MetaStore in one local file, for the embedded
// single-machine deployment. A CAS writes the new chain to a temporary
// file, fsyncs it, renames it over the old one and fsyncs the directory,
// so a crash leaves either the old chain or the new one, never a torn
// file. An exclusive flock on a sibling ".lock" file (the chain file
// itself is replaced by every CAS, so it cannot carry the lock) makes
// CASes atomic across processes on one machine; a mutex keeps this
// handle's goroutines from queueing inside flock.
//
// It offers nothing across machines: a shared network filesystem's flock
// and rename are not to be trusted.
type FileMetaStore struct {
	path string
	// casMu serializes this handle's CASes; flock serializes handles.
	casMu sync.Mutex
}

var _ MetaStore = (*FileMetaStore)(nil)

const tmpInfix = ".tmp-"

// OpenFileMetaStore opens the store kept at path, creating its directory
// if needed. The file itself is created by the first CAS. Temporary files
// left by a crashed CAS are removed. A file that exists but does not
// decode is an error: the log's configuration is damaged, and guessing
// would fork it.
func OpenFileMetaStore(path string) (*FileMetaStore, error) {
	if path == "" {
		return nil, errors.New("sharedlog: file MetaStore needs a path")
	}
	s := &FileMetaStore{path: filepath.Clean(path)}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return nil, fmt.Errorf("sharedlog: file MetaStore: %w", err)
	}
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.removeTempFiles(); err != nil {
		return nil, err
	}
	if _, err := s.read(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the chain file's path.
func (s *FileMetaStore) Path() string { return s.path }

func (s *FileMetaStore) Get(ctx context.Context) (Chain, error) {
	if err := ctx.Err(); err != nil {
		return Chain{}, err
	}
	// No lock: rename is atomic, so a reader sees one whole chain.
	return s.read()
}

func (s *FileMetaStore) CAS(ctx context.Context, expect uint64, next Chain) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckCAS(expect, next); err != nil {
		return err
	}
	b, err := EncodeChain(next)
	if err != nil {
		return err
	}
	s.casMu.Lock()
	defer s.casMu.Unlock()
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := s.read()
	if err != nil {
		return err
	}
	if cur.Version != expect {
		return fmt.Errorf("CAS expecting version %d, stored %d: %w", expect, cur.Version, ErrConflict)
	}
	return s.replace(b)
}

// lock takes the cross-process lock. The lock file is opened anew each
// time: flock locks belong to an open file description, so two handles
// in one process exclude each other just as two processes do.
func (s *FileMetaStore) lock() (unlock func(), err error) {
	f, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sharedlog: file MetaStore lock: %w", err)
	}
	if err := flockExclusive(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("sharedlog: file MetaStore lock %s: %w", f.Name(), err)
	}
	// Closing the file releases the flock.
	return func() { f.Close() }, nil
}

func (s *FileMetaStore) read() (Chain, error) {
	f, err := os.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Chain{}, nil
	}
	if err != nil {
		return Chain{}, fmt.Errorf("sharedlog: file MetaStore: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxChainBytes+1))
	if err != nil {
		return Chain{}, fmt.Errorf("sharedlog: file MetaStore: %w", err)
	}
	c, err := DecodeChain(b)
	if err != nil {
		return Chain{}, fmt.Errorf("file MetaStore %s: %w", s.path, err)
	}
	return c, nil
}

// replace makes b the file's content atomically and durably.
func (s *FileMetaStore) replace(b []byte) (err error) {
	dir, base := filepath.Dir(s.path), filepath.Base(s.path)
	f, err := os.CreateTemp(dir, base+tmpInfix+"*")
	if err != nil {
		return fmt.Errorf("sharedlog: file MetaStore: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sharedlog: file MetaStore write: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("sharedlog: file MetaStore rename: %w", err)
	}
	// Past the rename the new chain may be visible: a failure from here on
	// is ambiguous, as the MetaStore contract allows.
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("sharedlog: file MetaStore sync dir: %w", err)
	}
	return nil
}

func (s *FileMetaStore) removeTempFiles() error {
	dir, base := filepath.Dir(s.path), filepath.Base(s.path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("sharedlog: file MetaStore: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), base+tmpInfix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("sharedlog: file MetaStore: %w", err)
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
