package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/s3obj"
	"github.com/strandkafka/strand/internal/objstore/storetest"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/metastoretest"
	"github.com/strandkafka/strand/internal/sharedlog/s3log"
)

// The SeaweedFS tests run Strand's S3 backends against a real
// S3-compatible server rather than in-process gofakes3. Building SeaweedFS
// takes minutes, so they are part of the long run only: scripts/long
// builds and starts `weed mini`, creates the bucket, and passes
//
//	STRAND_E2E_LONG=1
//	STRAND_S3_ENDPOINT  the server's URL, e.g. http://127.0.0.1:8333
//	STRAND_S3_BUCKET    an existing bucket (default strand-long)
//	AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION
//
// The same variables point them at any other S3-compatible service with
// conditional writes. Every test keeps its objects under a prefix of its
// own, so runs against one bucket do not meet.
const (
	envS3Endpoint = "STRAND_S3_ENDPOINT"
	envS3Bucket   = "STRAND_S3_BUCKET"
	defaultBucket = "strand-long"
	defaultRegion = "us-east-1"
)

// s3Target is the bucket the long run's tests share.
type s3Target struct {
	endpoint, bucket, region string
	// runPrefix is this test binary's own folder in the bucket.
	runPrefix string
}

var (
	s3RunPrefix = fmt.Sprintf("e2e-%d/", time.Now().UnixNano())
	// s3Prefixes numbers the prefixes handed out in this process.
	s3Prefixes atomic.Int64
)

// seaweedFS returns the S3 service scripts/long started, or skips the test
// when it is not a long run with an endpoint.
func seaweedFS(t *testing.T) s3Target {
	t.Helper()
	if testing.Short() || os.Getenv("STRAND_E2E_LONG") == "" {
		t.Skip("set STRAND_E2E_LONG=1 and " + envS3Endpoint + " to run (scripts/long does)")
	}
	endpoint := os.Getenv(envS3Endpoint)
	if endpoint == "" {
		t.Skip(envS3Endpoint + " is not set; scripts/long starts SeaweedFS and sets it")
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
		// The backends and the agents take credentials from the AWS
		// default chain; without them every request fails, later and
		// less clearly.
		t.Fatalf("%s is set but AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is not", envS3Endpoint)
	}
	tg := s3Target{endpoint: endpoint, bucket: defaultBucket, region: defaultRegion, runPrefix: s3RunPrefix}
	if b := os.Getenv(envS3Bucket); b != "" {
		tg.bucket = b
	}
	if r := os.Getenv("AWS_REGION"); r != "" {
		tg.region = r
	}
	return tg
}

// prefix returns a key prefix, ending in '/', that no other caller in this
// run gets.
func (tg s3Target) prefix(t testing.TB) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return fmt.Sprintf("%s%s-%d/", tg.runPrefix, name, s3Prefixes.Add(1))
}

// config is the s3obj configuration for prefix; credentials are left to
// the default chain, as an agent's are.
func (tg s3Target) config(prefix string) s3obj.Config {
	return s3obj.Config{
		Bucket:    tg.bucket,
		Prefix:    prefix,
		Endpoint:  tg.endpoint,
		Region:    tg.region,
		PathStyle: true,
	}
}

// url is the s3:// URL (as --objstore and --log take it) of prefix.
func (tg s3Target) url(prefix string) string {
	q := url.Values{"endpoint": {tg.endpoint}, "region": {tg.region}, "path-style": {"true"}}
	return (&url.URL{Scheme: "s3", Host: tg.bucket, Path: "/" + strings.TrimSuffix(prefix, "/"), RawQuery: q.Encode()}).String()
}

func s3Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestSeaweedFSObjstore runs the object store conformance suite over
// s3obj, once with the service's list pages and once with pages of two
// keys, so every List follows continuation tokens. (SeaweedFS 4.53 folds
// "//" in a list prefix; s3obj drops the keys outside the prefix asked
// for, which List/prefix="a//" checks.)
func TestSeaweedFSObjstore(t *testing.T) {
	tg := seaweedFS(t)
	tests := []struct {
		name           string
		maxKeysPerList int32
	}{
		{"DefaultPages", 0},
		{"SmallPages", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) objstore.Store {
				cfg := tg.config(tg.prefix(t))
				cfg.MaxKeysPerList = tc.maxKeysPerList
				s, err := s3obj.New(s3Ctx(t), cfg)
				if err != nil {
					t.Fatalf("s3obj.New: %v", err)
				}
				return s
			})
		})
	}
}

// TestSeaweedFSLoglet runs the loglet conformance suites (plain and
// reopen) over s3log, with and without the trim grace period, and the
// MetaStore suite over its chain object: If-None-Match per slot and
// If-Match on the chain, atomic on a real server.
func TestSeaweedFSLoglet(t *testing.T) {
	tg := seaweedFS(t)
	// The sizes of s3log's own conformance run against gofakes3.
	suite := loglettest.Options{Entries: 200, Appenders: 8, AppendsPerAppender: 50, MaxEntryBytes: 1 << 20}
	for _, tc := range []struct {
		name string
		opts s3log.Options
	}{
		{"NoGrace", s3log.Options{TrimGrace: -1}},
		{"Default", s3log.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			suite.Run(t, func(t *testing.T) sharedlog.Loglet {
				l, err := s3log.Open(s3Ctx(t), tg.config(tg.prefix(t)), tc.opts)
				if err != nil {
					t.Fatalf("s3log.Open: %v", err)
				}
				return l
			})
			// RunDurable reopens by dir; each case's temp dir maps to a
			// prefix of its own.
			durable := tg.prefix(t)
			suite.RunDurable(t, func(t *testing.T, dir string) sharedlog.Loglet {
				prefix := durable + strings.TrimPrefix(filepath.ToSlash(dir), "/") + "/"
				l, err := s3log.Open(s3Ctx(t), tg.config(prefix), tc.opts)
				if err != nil {
					t.Fatalf("s3log.Open: %v", err)
				}
				return l
			})
		})
	}
	t.Run("MetaStore", func(t *testing.T) {
		metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
			prefix := tg.prefix(t)
			return func(t *testing.T) sharedlog.MetaStore {
				ms, err := s3log.NewMetaStore(s3Ctx(t), tg.config(prefix))
				if err != nil {
					t.Fatalf("s3log.NewMetaStore: %v", err)
				}
				return ms
			}
		})
	})
}

// TestSeaweedFSCluster is the scale-out scenario of TestClusterPostgres
// with SeaweedFS under both halves: the agents' object store and their
// shared log (s3log, a VirtualLog whose chain and slots are objects).
func TestSeaweedFSCluster(t *testing.T) {
	tg := seaweedFS(t)
	run := tg.prefix(t)
	runClusterOn(t, tg.url(run+"log/"), tg.url(run+"data/"))
}
