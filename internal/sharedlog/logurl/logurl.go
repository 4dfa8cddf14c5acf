// Package logurl names Strand's shared logs and loglets by URL: it opens
// the loglet a segment URL in a VirtualLog's chain names, and sets up a
// whole VirtualLog (MetaStore plus first segment) from the one URL an
// operator gives with --log.
//
// Loglet URLs:
//
//	mem://name/path    an in-memory loglet shared by the whole process:
//	                   every Open of one URL gets a handle on the same
//	                   entries (tests and simulations; gone at exit)
//	file:///abs/dir    a filelog in dir, created if missing; one handle
//	                   at a time, since filelog locks its directory
//	file:rel/dir       a filelog in rel/dir under the Opener's base
//	                   directory, so a data directory can be moved
//
// VirtualLog URLs (OpenVirtual):
//
//	file:///abs/dir    the chain in dir/chain.json (a FileMetaStore), the
//	                   first segment at file:seg-00000000, relative to dir
//	mem://name         a process-wide MemMetaStore for name, the first
//	                   segment at mem://name/seg-00000000
//
// Backends on other services (postgres, etcd, dynamodb, s3) add their
// schemes through the remotes table: postgres and etcd in remote.go,
// dynamodb and s3 in remote_aws.go.
package logurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// ErrBadURL: the URL names no loglet or log this package can open.
var ErrBadURL = errors.New("logurl: bad log URL")

const (
	// chainFile is the MetaStore file of a file:// VirtualLog.
	chainFile = "chain.json"
	// firstSegment names the first segment of a VirtualLog.
	firstSegment = "seg-00000000"
)

// Options tune the loglets this package opens. The zero value gives every
// backend's defaults.
type Options struct {
	// File is for file: loglets.
	File filelog.Options
	// Password is put into postgres:// loglet URLs that name a user but
	// carry no password, as the chain keeps them (secrets.go). Empty:
	// the --log URL's own password, else pgx's PGPASSWORD or password
	// file.
	Password string
	// Count, if set, is told of every operation the loglets and the
	// MetaStore opened through these Options send their backend, with
	// the backend's URL scheme (see sharedlog.Counted). It must be safe
	// for concurrent use and must not block.
	Count func(backend, op string)
}

// counted wraps ll in o.Count's counter for the scheme of rawURL.
func (o Options) counted(rawURL string, ll sharedlog.Loglet) sharedlog.Loglet {
	if o.Count == nil {
		return ll
	}
	backend := scheme(rawURL)
	return sharedlog.Counted(ll, func(op string) { o.Count(backend, op) })
}

// countedMetaStore wraps ms as counted wraps a loglet.
func (o Options) countedMetaStore(rawURL string, ms sharedlog.MetaStore) sharedlog.MetaStore {
	if o.Count == nil {
		return ms
	}
	backend := scheme(rawURL)
	return sharedlog.CountedMetaStore(ms, func(op string) { o.Count(backend, op) })
}

// scheme is rawURL's scheme in lower case, or "unknown".
func scheme(rawURL string) string {
	s, _, ok := strings.Cut(rawURL, ":")
	if !ok || s == "" {
		return "unknown"
	}
	return strings.ToLower(s)
}

// Open opens the loglet rawURL names. Relative file: URLs need Opener.
func Open(ctx context.Context, rawURL string) (sharedlog.Loglet, error) {
	return Opener("")(ctx, rawURL)
}

// Opener returns a sharedlog.Opener that resolves relative file: URLs
// against baseDir (and refuses them when baseDir is empty).
func Opener(baseDir string) sharedlog.Opener { return OpenerWith(baseDir, Options{}) }

// OpenerWith is Opener with loglets tuned by o.
func OpenerWith(baseDir string, o Options) sharedlog.Opener {
	return func(ctx context.Context, rawURL string) (sharedlog.Loglet, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ll, err := o.open(ctx, baseDir, rawURL)
		if err != nil {
			return nil, err
		}
		return o.counted(rawURL, ll), nil
	}
}

func (o Options) open(ctx context.Context, baseDir, rawURL string) (sharedlog.Loglet, error) {
	if r, ok := remoteFor(rawURL); ok {
		return r.open(ctx, withPassword(rawURL, o.Password))
	}
	u, err := parse(rawURL)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "mem":
		name, err := memName(u)
		if err != nil {
			return nil, err
		}
		return mem.open(name), nil
	case "file":
		dir, err := fileDir(u, baseDir)
		if err != nil {
			return nil, err
		}
		l, err := filelog.Open(dir, o.File)
		if err != nil {
			return nil, fmt.Errorf("logurl: open %s: %w", rawURL, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: unknown scheme in %q", ErrBadURL, rawURL)
}

// OpenVirtual opens the VirtualLog rawURL names, creating it if it is
// new. opts.InitialURL defaults to the first segment described in the
// package doc; opts.NextURL defaults to sharedlog.DefaultNextURL, which
// names the segments it adds seg-<chain version> beside the first.
func OpenVirtual(ctx context.Context, rawURL string, opts sharedlog.VirtualOptions) (*sharedlog.VirtualLog, error) {
	return OpenVirtualWith(ctx, rawURL, opts, Options{})
}

// OpenVirtualWith is OpenVirtual with the loglets of every segment tuned
// by o.
func OpenVirtualWith(ctx context.Context, rawURL string, opts sharedlog.VirtualOptions, o Options) (*sharedlog.VirtualLog, error) {
	if r, ok := remoteFor(rawURL); ok {
		return openRemoteVirtual(ctx, r, rawURL, opts, o)
	}
	u, err := parse(rawURL)
	if err != nil {
		return nil, err
	}
	var (
		ms      sharedlog.MetaStore
		open    sharedlog.Opener
		initial string
	)
	switch u.Scheme {
	case "mem":
		name, err := memName(u)
		if err != nil {
			return nil, err
		}
		ms, open, initial = mem.metaStore(name), OpenerWith("", o), "mem://"+name+"/"+firstSegment
	case "file":
		dir, err := fileDir(u, "")
		if err != nil {
			return nil, err
		}
		fms, err := sharedlog.OpenFileMetaStore(filepath.Join(dir, chainFile))
		if err != nil {
			return nil, err
		}
		ms, open, initial = fms, OpenerWith(dir, o), "file:"+firstSegment
	default:
		return nil, fmt.Errorf("%w: unknown scheme in %q", ErrBadURL, rawURL)
	}
	if opts.InitialURL == "" {
		opts.InitialURL = initial
	}
	if opts.NextURL == nil {
		opts.NextURL = NextURL // the log may move to a remote backend
	}
	return sharedlog.OpenVirtual(ctx, o.countedMetaStore(rawURL, ms), open, opts)
}

func parse(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%w: %q has options this scheme does not take", ErrBadURL, rawURL)
	}
	return u, nil
}

// memName returns the registry name of a mem:// URL: host and path.
func memName(u *url.URL) (string, error) {
	if u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%w: %q: want mem://name", ErrBadURL, u.String())
	}
	return u.Host + strings.TrimSuffix(u.Path, "/"), nil
}

// fileDir returns the directory a file: URL names.
func fileDir(u *url.URL, baseDir string) (string, error) {
	if u.Opaque != "" {
		rel, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		if baseDir == "" {
			return "", fmt.Errorf("%w: relative %q with no base directory", ErrBadURL, u.String())
		}
		rel = filepath.FromSlash(rel)
		if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
			return "", fmt.Errorf("%w: %q leaves its base directory", ErrBadURL, u.String())
		}
		return filepath.Join(baseDir, rel), nil
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("%w: %q names another host", ErrBadURL, u.String())
	}
	if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
		return "", fmt.Errorf("%w: %q: want file:///absolute/dir", ErrBadURL, u.String())
	}
	return filepath.Clean(filepath.FromSlash(u.Path)), nil
}

// mem is the process-wide registry behind mem:// URLs.
var mem = memRegistry{logs: map[string]*memlog.Loglet{}, stores: map[string]*sharedlog.MemMetaStore{}}

type memRegistry struct {
	mu     sync.Mutex
	logs   map[string]*memlog.Loglet
	stores map[string]*sharedlog.MemMetaStore
}

func (r *memRegistry) open(name string) sharedlog.Loglet {
	r.mu.Lock()
	l, ok := r.logs[name]
	if !ok {
		l = memlog.New()
		r.logs[name] = l
	}
	r.mu.Unlock()
	h := &memHandle{l: l}
	h.done, h.close = context.WithCancel(context.Background())
	return h
}

func (r *memRegistry) metaStore(name string) *sharedlog.MemMetaStore {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms, ok := r.stores[name]
	if !ok {
		ms = sharedlog.NewMemMetaStore()
		r.stores[name] = ms
	}
	return ms
}

// DeleteMem forgets the mem:// loglets and log under name: the loglet
// mem://name, every mem://name/..., and the chain of the VirtualLog
// mem://name. Open handles keep working on what they had. Tests call it
// from t.Cleanup so the process does not keep their entries.
func DeleteMem(name string) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	for n := range mem.logs {
		if n == name || strings.HasPrefix(n, name+"/") {
			delete(mem.logs, n)
		}
	}
	delete(mem.stores, name)
}

// memHandle is one handle on a shared memlog. Closing it closes only the
// handle, as closing one agent's filelog leaves the files to the next.
type memHandle struct {
	l     *memlog.Loglet
	done  context.Context // canceled by Close
	close context.CancelFunc
}

var (
	_ sharedlog.Loglet     = (*memHandle)(nil)
	_ sharedlog.TailWaiter = (*memHandle)(nil)
)

func (h *memHandle) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	if h.done.Err() != nil {
		return 0, sharedlog.ErrClosed
	}
	return h.l.Append(ctx, entry)
}

func (h *memHandle) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if h.done.Err() != nil {
		return 0, false, sharedlog.ErrClosed
	}
	return h.l.CheckTail(ctx)
}

func (h *memHandle) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	if h.done.Err() != nil {
		return nil, sharedlog.ErrClosed
	}
	return h.l.ReadNext(ctx, from, max)
}

func (h *memHandle) Seal(ctx context.Context) error {
	if h.done.Err() != nil {
		return sharedlog.ErrClosed
	}
	return h.l.Seal(ctx)
}

func (h *memHandle) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	if h.done.Err() != nil {
		return sharedlog.ErrClosed
	}
	return h.l.PrefixTrim(ctx, before)
}

func (h *memHandle) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	if h.done.Err() != nil {
		return 0, sharedlog.ErrClosed
	}
	// Close must wake the wait, though the memlog stays open.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(h.done, cancel)
	defer stop()
	tail, err := h.l.WaitTail(ctx, after)
	if h.done.Err() != nil {
		return tail, sharedlog.ErrClosed
	}
	return tail, err
}

func (h *memHandle) Close() error {
	h.close()
	return nil
}
