package s3log

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/strandkafka/strand/internal/objstore/objurl"
	"github.com/strandkafka/strand/internal/objstore/s3obj"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

// FirstSegment is the path, below a VirtualLog's prefix, of its first
// segment.
const FirstSegment = "seg-00000000"

// parseURL parses an s3:// URL the way the object store's --objstore
// flag does (objurl): s3://bucket/prefix?endpoint=URL&region=R&path-style=true.
// The prefix ends in '/' unless empty.
func parseURL(rawURL string) (s3obj.Config, error) {
	t, err := objurl.Parse(rawURL)
	if err != nil {
		return s3obj.Config{}, err
	}
	if t.Kind != objurl.KindS3 {
		return s3obj.Config{}, fmt.Errorf("%w %q: want s3://bucket/prefix", objurl.ErrBadURL, rawURL)
	}
	return t.S3, nil
}

// OpenURL opens a handle on the loglet under the prefix an s3:// URL
// names.
func OpenURL(ctx context.Context, rawURL string, opts Options) (*slotlog.Loglet, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg, opts)
}

// OpenMetaStoreURL returns the MetaStore of the VirtualLog an s3:// URL
// names: the object chain.json under its prefix.
func OpenMetaStoreURL(rawURL string) (*MetaStore, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	// Loading the AWS configuration reads the environment and files, not
	// the network, so it needs no caller's context.
	return NewMetaStore(context.Background(), cfg)
}

// FirstSegmentURL names the first segment of the VirtualLog an s3:// URL
// names: prefix/seg-00000000, reached the same way. Later segments follow
// sharedlog.DefaultNextURL, which renumbers that last path element.
func FirstSegmentURL(rawURL string) (string, error) {
	if _, err := parseURL(rawURL); err != nil {
		return "", err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + FirstSegment
	u.RawPath = ""
	return u.String(), nil
}
