package dynamolog

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrBadURL: a dynamodb:// URL cannot be used.
var ErrBadURL = errors.New("dynamolog: bad URL")

// Target is a parsed dynamodb:// URL:
//
//	dynamodb://table/path?endpoint=http://127.0.0.1:8000&region=us-east-1
//
// The path names a loglet (its log id) or a VirtualLog (its chain's
// name); endpoint and region are optional. Credentials never go in the
// URL: they come from the AWS default chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, shared config files, instance roles).
type Target struct {
	Config Config
	// Path is the URL's path without its leading '/'.
	Path string
	// query is the connection part of the URL, kept to build sibling
	// URLs.
	query string
}

// ParseURL parses a dynamodb:// URL. Unknown parameters are errors, so a
// typo cannot silently select a default.
func ParseURL(rawURL string) (Target, error) {
	bad := func(format string, args ...any) (Target, error) {
		return Target{}, fmt.Errorf("%w %q: %s", ErrBadURL, rawURL, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return bad("%v", err)
	}
	switch {
	case u.Scheme != "dynamodb":
		return bad("want scheme dynamodb")
	case u.User != nil:
		return bad("credentials do not go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	case u.Host == "" || u.Opaque != "":
		return bad("want dynamodb://table/path")
	case u.Fragment != "":
		return bad("no fragment allowed")
	}
	t := Target{Config: Config{Table: u.Host}, Path: strings.Trim(u.Path, "/"), query: u.RawQuery}
	if t.Path == "" {
		return bad("no path: want dynamodb://table/path")
	}
	if len(t.Path) > MaxLogIDBytes {
		return bad("path longer than %d bytes", MaxLogIDBytes)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("%v", err)
	}
	for name, vals := range q {
		if len(vals) != 1 {
			return bad("parameter %q given %d times", name, len(vals))
		}
		switch v := vals[0]; name {
		case "endpoint":
			eu, err := url.Parse(v)
			if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
				return bad("endpoint %q is not an http(s) URL", v)
			}
			t.Config.Endpoint = v
		case "region":
			t.Config.Region = v
		default:
			return bad("unknown parameter %q (want endpoint, region)", name)
		}
	}
	return t, nil
}

// URL returns the URL of path in the same table, reached the same way.
func (t Target) URL(path string) string {
	u := url.URL{Scheme: "dynamodb", Host: t.Config.Table, Path: "/" + strings.TrimPrefix(path, "/"), RawQuery: t.query}
	return u.String()
}
