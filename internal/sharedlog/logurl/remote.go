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
	// billed: the service bills every request (S3, DynamoDB), so an
	// agent spends as few as it can (BilledPerRequest).
	billed bool
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
		open:         openURL(etcdlog.OpenURL),
		metaStore:    metaStoreURL(etcdlog.OpenMetaStoreURL),
		firstSegment: etcdlog.FirstSegmentURL,
	},
}

var pgRemote = remote{
	open:         openURL(pglog.OpenURL),
	metaStore:    metaStoreURL(pglog.OpenMetaStoreURL),
	firstSegment: pglog.FirstSegmentURL,
	nextURL:      pglog.NextURL,
}

// openURL makes a remote's open of a backend's OpenURL, called with its
// default options. The backend returns its own pointer type; on error
// the result is a nil Loglet, not that type's nil pointer in the
// interface, which is not nil and whose Close would panic in whatever
// cleanup holds it.
func openURL[L sharedlog.Loglet, O any](open func(context.Context, string, O) (L, error)) func(context.Context, string) (sharedlog.Loglet, error) {
	return func(ctx context.Context, rawURL string) (sharedlog.Loglet, error) {
		var opts O
		l, err := open(ctx, rawURL, opts)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// metaStoreURL makes a remote's metaStore of a backend's
// OpenMetaStoreURL, with openURL's care for its nil pointer.
func metaStoreURL[S sharedlog.MetaStore](open func(string) (S, error)) func(string) (sharedlog.MetaStore, error) {
	return func(rawURL string) (sharedlog.MetaStore, error) {
		ms, err := open(rawURL)
		if err != nil {
			return nil, err
		}
		return ms, nil
	}
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

// BilledPerRequest reports whether the log rawURL names is on a service
// that bills every request (s3, dynamodb), where an idle agent's lease
// renewals are most of what it costs.
func BilledPerRequest(rawURL string) bool {
	r, ok := remoteFor(rawURL)
	return ok && r.billed
}

// openRemoteVirtual is OpenVirtual for a remote backend: the chain and
// the segments both live on it.
func openRemoteVirtual(ctx context.Context, r remote, rawURL string, opts sharedlog.VirtualOptions, o Options) (*sharedlog.VirtualLog, error) {
	ms, err := r.metaStore(rawURL)
	if err != nil {
		return nil, err
	}
	if o.Password == "" {
		o.Password = urlPassword(rawURL)
	}
	if opts.InitialURL == "" {
		if opts.InitialURL, err = r.firstSegment(rawURL); err != nil {
			return nil, err
		}
		// The chain stores it (secrets.go).
		opts.InitialURL = StripPassword(opts.InitialURL)
	}
	if opts.NextURL == nil {
		opts.NextURL = NextURL
	}
	return sharedlog.OpenVirtual(ctx, o.countedMetaStore(rawURL, ms), OpenerWith("", o), opts)
}

// NextURL names the segment that follows chain c in the way of the
// backend c's active segment is on: sharedlog.DefaultNextURL for paths
// (mem, file, etcd), the log parameter for postgres. A VirtualLog that
// migrated between backends keeps naming its segments right.
func NextURL(c sharedlog.Chain) (string, error) {
	if !c.Empty() {
		if r, ok := remoteFor(c.Active().URL); ok && r.nextURL != nil {
			// A chain written before passwords were kept out of it
			// may still hold one; the next segment does not.
			next, err := r.nextURL(c)
			return StripPassword(next), err
		}
	}
	return sharedlog.DefaultNextURL(c)
}
