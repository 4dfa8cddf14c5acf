package objurl_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/objstore/objurl"
	"github.com/strandkafka/strand/internal/objstore/s3obj"
)

func TestParse(t *testing.T) {
	tests := []struct {
		url  string
		want objurl.Target
	}{
		{"mem://", objurl.Target{Kind: objurl.KindMem}},
		{"mem:", objurl.Target{Kind: objurl.KindMem}},
		{"file:///var/lib/strand/objects", objurl.Target{Kind: objurl.KindFile, Dir: "/var/lib/strand/objects"}},
		{"file://localhost/srv/objects", objurl.Target{Kind: objurl.KindFile, Dir: "/srv/objects"}},
		{"FILE:///x", objurl.Target{Kind: objurl.KindFile, Dir: "/x"}},
		{"./strand-data/objects", objurl.Target{Kind: objurl.KindFile, Dir: "./strand-data/objects"}},
		{"strand-data", objurl.Target{Kind: objurl.KindFile, Dir: "strand-data"}},
		{"/abs/dir", objurl.Target{Kind: objurl.KindFile, Dir: "/abs/dir"}},
		{"s3://bucket", objurl.Target{Kind: objurl.KindS3, S3: s3obj.Config{Bucket: "bucket"}}},
		{"s3://bucket/", objurl.Target{Kind: objurl.KindS3, S3: s3obj.Config{Bucket: "bucket"}}},
		{"s3://bucket/prefix", objurl.Target{Kind: objurl.KindS3, S3: s3obj.Config{Bucket: "bucket", Prefix: "prefix/"}}},
		{"s3://bucket/a/b/", objurl.Target{Kind: objurl.KindS3, S3: s3obj.Config{Bucket: "bucket", Prefix: "a/b/"}}},
		{
			"s3://bucket/prefix?endpoint=http://127.0.0.1:8333&region=eu-west-1&path-style=true",
			objurl.Target{Kind: objurl.KindS3, S3: s3obj.Config{
				Bucket: "bucket", Prefix: "prefix/", Endpoint: "http://127.0.0.1:8333", Region: "eu-west-1", PathStyle: true,
			}},
		},
		{"s3://b?path-style=0", objurl.Target{Kind: objurl.KindS3, S3: s3obj.Config{Bucket: "b"}}},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			got, err := objurl.Parse(tc.url)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Parse = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, u := range []string{
		"",
		"gs://bucket/prefix",
		"http://example.invalid/x",
		"mem://name",
		"mem://?x=1",
		"file://relative/dir",
		"file://",
		"file:///dir?sync=false",
		"s3://",
		"s3:///prefix-without-bucket",
		"s3://bucket?endpoint=127.0.0.1:8333",
		"s3://bucket?endpoint=ftp://host",
		"s3://bucket?path-style=maybe",
		"s3://bucket?regoin=us-east-1",
		"s3://bucket?region=a&region=b",
		"s3://key:secret@bucket/prefix",
	} {
		t.Run(u, func(t *testing.T) {
			got, err := objurl.Parse(u)
			if !errors.Is(err, objurl.ErrBadURL) {
				t.Fatalf("Parse = %+v, %v; want ErrBadURL", got, err)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("objurl-test"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	home := t.TempDir()
	// Credentials come from the environment through the default chain;
	// keep the chain away from this machine's own AWS files and from
	// instance metadata.
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	dir := t.TempDir()

	tests := []struct {
		url   string
		check func(t *testing.T, s any)
	}{
		{"mem://", func(t *testing.T, s any) {
			if _, ok := s.(*memobj.Store); !ok {
				t.Fatalf("got %T", s)
			}
		}},
		{"file://" + filepath.Join(dir, "a"), func(t *testing.T, s any) {
			if fs, ok := s.(*fileobj.Store); !ok || fs.Dir() != filepath.Join(dir, "a") {
				t.Fatalf("got %T %+v", s, s)
			}
		}},
		{filepath.Join(dir, "bare"), func(t *testing.T, s any) {
			if fs, ok := s.(*fileobj.Store); !ok || fs.Dir() != filepath.Join(dir, "bare") {
				t.Fatalf("got %T %+v", s, s)
			}
		}},
		{"s3://objurl-test/some/prefix?path-style=true&region=us-east-1&endpoint=" + srv.URL, func(t *testing.T, s any) {
			if _, ok := s.(*s3obj.Store); !ok {
				t.Fatalf("got %T", s)
			}
		}},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			s, err := objurl.Open(ctx, tc.url)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			tc.check(t, s)
			if err := s.Put(ctx, "k/v", []byte("hello")); err != nil {
				t.Fatalf("Put: %v", err)
			}
			got, err := s.Get(ctx, "k/v", 1, 3)
			if err != nil || string(got) != "ell" {
				t.Fatalf("Get = %q, %v", got, err)
			}
		})
	}
	// The s3 store wrote under its prefix.
	obj, err := backend.HeadObject("objurl-test", "some/prefix/k/v")
	if err != nil || obj.Size != 5 {
		t.Fatalf("object under the URL's prefix: %+v, %v", obj, err)
	}
	if _, err := objurl.Open(ctx, "nope://x"); !errors.Is(err, objurl.ErrBadURL) {
		t.Fatalf("Open of an unknown scheme: %v, want ErrBadURL", err)
	}
}
