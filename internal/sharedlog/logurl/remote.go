package logurl

import (
	"context"
	"strings"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/etcdlog"
	"github.com/strandkafka/strand/internal/sharedlog/pglog"
)

// remote is a backend on another service, whose URLs carry what this
// package's own parse refuses (credentials, options in the query).
type remote struct {
	// open opens a loglet.
	open func(ctx context.Context, rawURL string) (sharedlog.Loglet, error)
	// metaStore returns the register of the VirtualLog rawURL names.
	metaStore func(rawURL string) (sharedlog.MetaStore, error)
	// firstSegment names a new VirtualLog's first segment.
	firstSegment func(rawURL string) (string, error)
	// nextURL names the segment after a chain whose active segment is on
	// this backend; nil means sharedlog.DefaultNextURL.
	nextURL func(c sharedlog.Chain) (string, error)
}

// remotes maps a URL scheme to its backend:
//
//	postgres://user@host:port/db?log=NAME[&table_prefix=P][&schema=S][&pgx options]
//	    loglet: the rows of log id NAME in the pglog tables
//	    VirtualLog: the chain in the chains row NAME, segments NAME/seg-NNNNNNNN
//	postgresql://...  the same
//	etcd://host:port[,host:port]/path
//	    loglet: the keys under path
//	    VirtualLog: the chain at path, segments path/seg-NNNNNNNN
var remotes = map[string]remote{
	"postgres":   pgRemote,
	"postgresql": pgRemote,
	"etcd": {
		open: func(ctx context.Context, rawURL string) (sharedlog.Loglet, error) {
			return etcdlog.OpenURL(ctx, rawURL, etcdlog.Options{})
		},
		metaStore: func(rawURL string) (sharedlog.MetaStore, error) {
			return etcdlog.OpenMetaStoreURL(rawURL)
		},
		firstSegment: etcdlog.FirstSegmentURL,
	},
}

var pgRemote = remote{
	open: func(ctx context.Context, rawURL string) (sharedlog.Loglet, error) {
		return pglog.OpenURL(ctx, rawURL, pglog.Options{})
	},
	metaStore: func(rawURL string) (sharedlog.MetaStore, error) {
		return pglog.OpenMetaStoreURL(rawURL)
	},
	firstSegment: pglog.FirstSegmentURL,
	nextURL:      pglog.NextURL,
}

// remoteFor returns the remote backend rawURL's scheme names, if any.
func remoteFor(rawURL string) (remote, bool) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return remote{}, false
	}
	r, ok := remotes[strings.ToLower(scheme)]
	return r, ok
}

// openRemoteVirtual is OpenVirtual for a remote backend: the chain and
// the segments both live on it.
func openRemoteVirtual(ctx context.Context, r remote, rawURL string, opts sharedlog.VirtualOptions) (*sharedlog.VirtualLog, error) {
	ms, err := r.metaStore(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.InitialURL == "" {
		if opts.InitialURL, err = r.firstSegment(rawURL); err != nil {
			return nil, err
		}
	}
	if opts.NextURL == nil {
		opts.NextURL = NextURL
	}
	return sharedlog.OpenVirtual(ctx, ms, Opener(""), opts)
}

// NextURL names the segment that follows chain c in the way of the
// backend c's active segment is on: sharedlog.DefaultNextURL for paths
// (mem, file, etcd), the log parameter for postgres. A VirtualLog that
// migrated between backends keeps naming its segments right.
func NextURL(c sharedlog.Chain) (string, error) {
	if !c.Empty() {
		if r, ok := remoteFor(c.Active().URL); ok && r.nextURL != nil {
			return r.nextURL(c)
		}
	}
	return sharedlog.DefaultNextURL(c)
}
