package etcdlog

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	// dialTimeout bounds the first connection of a client made from a
	// URL.
	dialTimeout = 5 * time.Second
	// firstSegment names a VirtualLog's first segment, under the log.
	firstSegment = "seg-00000000"
)

// Target is what an etcd:// URL names.
type Target struct {
	Endpoints []string
	Path      string
}

// ParseURL splits a URL of the form etcd://host:port[,host:port...]/path.
// The path names a loglet, or a VirtualLog whose segments are loglets
// under it.
func ParseURL(rawURL string) (Target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	if u.Scheme != "etcd" {
		return Target{}, fmt.Errorf("%w: %q is not an etcd:// URL", ErrBadOptions, rawURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Target{}, fmt.Errorf("%w: %q: want etcd://host:port[,host:port]/path and nothing else", ErrBadOptions, rawURL)
	}
	var tg Target
	for h := range strings.SplitSeq(u.Host, ",") {
		if h == "" || !strings.Contains(h, ":") {
			return Target{}, fmt.Errorf("%w: %q: endpoint %q needs host:port", ErrBadOptions, rawURL, h)
		}
		tg.Endpoints = append(tg.Endpoints, h)
	}
	tg.Path = u.Path
	if err := checkPath(tg.Path); err != nil {
		return Target{}, err
	}
	return tg, nil
}

// NewClient returns a client for endpoints, quiet (no zap logging).
func NewClient(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdlog: client for %v: %w", endpoints, err)
	}
	return cli, nil
}

// OpenURL opens the loglet an etcd:// URL names with a client of its own,
// which Close closes.
func OpenURL(ctx context.Context, rawURL string, opts Options) (*Loglet, error) {
	tg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cli, err := NewClient(tg.Endpoints)
	if err != nil {
		return nil, err
	}
	l, err := open(ctx, cli, true, tg.Path, opts)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return l, nil
}

// FirstSegmentURL returns the URL of the first segment of the VirtualLog
// rawURL names: <path>/seg-00000000 on the same cluster.
// sharedlog.DefaultNextURL names the segments after it.
func FirstSegmentURL(rawURL string) (string, error) {
	if _, err := ParseURL(rawURL); err != nil {
		return "", err
	}
	return strings.TrimSuffix(rawURL, "/") + "/" + firstSegment, nil
}
