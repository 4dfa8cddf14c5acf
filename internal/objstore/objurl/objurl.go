// Package objurl owns the mapping from an object store URL (the
// --objstore flag) to an objstore.Store:
//
//	mem://                         a fresh in-memory store (tests, demos)
//	file:///abs/dir                a local directory (fileobj)
//	file://localhost/abs/dir       the same
//	./relative/dir or /abs/dir     a bare path: a local directory
//	s3://bucket/prefix?endpoint=http://127.0.0.1:8333&region=us-east-1&path-style=true
//
// For s3, the path after the bucket is the key prefix (a '/' is added if
// missing), endpoint, region and path-style are optional, and credentials
// come from the AWS default chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY in the environment, shared config files, instance
// roles). Unknown schemes and unknown query parameters are errors, so a
// typo cannot silently select defaults.
package objurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/objstore/s3obj"
)

// ErrBadURL: the object store URL cannot be used.
var ErrBadURL = errors.New("objurl: bad object store URL")

// Kind is the backend a URL selects.
type Kind string

const (
	KindMem  Kind = "mem"
	KindFile Kind = "file"
	KindS3   Kind = "s3"
)

// Target is a parsed object store URL.
type Target struct {
	Kind Kind
	// Dir is the directory for KindFile, as written (may be relative).
	Dir string
	// S3 is the configuration for KindS3; credentials are left empty so
	// the default chain supplies them.
	S3 s3obj.Config
}

// Open parses rawURL and opens the store it names.
func Open(ctx context.Context, rawURL string) (objstore.Store, error) {
	t, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case KindMem:
		return memobj.New(), nil
	case KindFile:
		return fileobj.Open(t.Dir)
	case KindS3:
		return s3obj.New(ctx, t.S3)
	}
	return nil, fmt.Errorf("%w: unhandled kind %q", ErrBadURL, t.Kind)
}

// Parse turns rawURL into a Target without opening anything.
func Parse(rawURL string) (Target, error) {
	bad := func(format string, args ...any) (Target, error) {
		return Target{}, fmt.Errorf("%w %q: %s", ErrBadURL, rawURL, fmt.Sprintf(format, args...))
	}
	if rawURL == "" {
		return bad("empty")
	}
	if !strings.Contains(rawURL, "://") && !strings.HasPrefix(rawURL, "mem:") {
		return Target{Kind: KindFile, Dir: rawURL}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return bad("%v", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "mem":
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" || u.RawQuery != "" {
			return bad("mem:// takes no host, path or parameters")
		}
		return Target{Kind: KindMem}, nil
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("file URLs name a local path: use file:///abs/dir or a bare path, not host %q", u.Host)
		}
		if u.Path == "" || u.RawQuery != "" {
			return bad("want file:///abs/dir")
		}
		return Target{Kind: KindFile, Dir: u.Path}, nil
	case "s3":
		return parseS3(u, bad)
	}
	return bad("unknown scheme %q (want mem, file or s3)", u.Scheme)
}

func parseS3(u *url.URL, bad func(string, ...any) (Target, error)) (Target, error) {
	if u.Host == "" {
		return bad("s3 URLs need a bucket: s3://bucket/prefix")
	}
	if u.User != nil {
		return bad("credentials do not go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	cfg := s3obj.Config{Bucket: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return bad("parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "endpoint":
			eu, err := url.Parse(v)
			if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
				return bad("endpoint %q is not an http(s) URL", v)
			}
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "path-style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("path-style %q is not a boolean", v)
			}
			cfg.PathStyle = b
		default:
			return bad("unknown parameter %q (want endpoint, region, path-style)", name)
		}
	}
	return Target{Kind: KindS3, S3: cfg}, nil
}
