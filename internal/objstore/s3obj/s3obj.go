// Package s3obj owns the objstore.Store over S3 and S3-compatible services
// (MinIO, SeaweedFS, R2, gofakes3 in tests), built on aws-sdk-go-v2.
//
// Mapping of the contract onto S3:
//
//   - Put is PutObject, atomic and durable on return by S3's own guarantee.
//   - PutIfAbsent is PutObject with If-None-Match: "*". 412 means the key
//     exists; 409 (ConditionalRequestConflict, a racing conditional write
//     still in progress) is retried a bounded number of times.
//   - Get is GetObject with a Range header. S3 answers 416 for a range
//     starting at the object's size, which the contract says is an empty
//     read; a HEAD tells that case apart from offset > size.
//   - List is ListObjectsV2, followed through every continuation token.
//
// Keys are stored under Config.Prefix, which List strips again.
package s3obj

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/retry"
)

const (
	// maxIdleConnsPerHost is the connections kept open to the service
	// between requests. The SDK keeps 10: fetch read-ahead has up to
	// --fetch-max-parallel-gets GETs at once (64 by default), besides
	// uploads, and every request past the idle ones would open (and
	// then close) a TLS connection of its own.
	maxIdleConnsPerHost = 256
	defaultRegion       = "us-east-1"
	// defaultPutIfAbsentAttempts bounds PutIfAbsent's own retry loop (409
	// conflicts and ambiguous failures), SDK retries being off for it.
	defaultPutIfAbsentAttempts = 5
	// putIfAbsentBackoffBase is the first retry's wait; it doubles.
	putIfAbsentBackoffBase = 20 * time.Millisecond
	putIfAbsentBackoffMax  = putIfAbsentBackoffBase << 6
	// maxGetRaceRetries bounds how often Get re-reads after a 416 whose
	// HEAD shows the object has since grown (it was replaced mid-read).
	maxGetRaceRetries = 3
)

// Config says where a Store keeps its objects and how it reaches them.
type Config struct {
	// Bucket must exist; the Store does not create it.
	Bucket string
	// Prefix is prepended verbatim to every key; end it with '/' to get a
	// folder.
	Prefix string
	// Endpoint overrides the service URL, e.g. "http://127.0.0.1:8333"
	// for a local S3-compatible server. Empty: AWS.
	Endpoint string
	// Region; empty means the default chain's region, else us-east-1.
	Region string
	// PathStyle addresses buckets as endpoint/bucket/key rather than
	// bucket.endpoint/key; most self-hosted services need it.
	PathStyle bool
	// AccessKeyID and SecretAccessKey (and optional SessionToken) are
	// static credentials. Empty: the SDK's default chain (environment,
	// shared config files, instance roles).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// HTTPClient replaces the SDK's HTTP client (tests inject faults here).
	HTTPClient *http.Client
	// MaxKeysPerList caps one ListObjectsV2 page; 0 is the service default
	// (1000). Tests set it low to exercise continuation.
	MaxKeysPerList int32
	// PutIfAbsentAttempts bounds PutIfAbsent's attempts; 0 means 5.
	PutIfAbsentAttempts int
}

// Store is an objstore.Store over one bucket and prefix. Safe for
// concurrent use.
type Store struct {
	client      *s3.Client
	bucket      string
	prefix      string
	maxKeys     int32
	piaAttempts int
}

var _ objstore.Store = (*Store)(nil)

// New builds a Store from cfg. It does not contact the service.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3obj: bucket is required")
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("s3obj: static credentials need both an access key id and a secret")
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
	} else {
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost = maxIdleConnsPerHost
		})))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3obj: loading AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	return NewFromClient(client, cfg), nil
}

// NewFromClient builds a Store around an existing client; cfg's bucket,
// prefix and limits apply, its connection fields are ignored.
func NewFromClient(client *s3.Client, cfg Config) *Store {
	attempts := cfg.PutIfAbsentAttempts
	if attempts <= 0 {
		attempts = defaultPutIfAbsentAttempts
	}
	return &Store{
		client:      client,
		bucket:      cfg.Bucket,
		prefix:      cfg.Prefix,
		maxKeys:     cfg.MaxKeysPerList,
		piaAttempts: attempts,
	}
}

func (s *Store) fullKey(key string) *string { return aws.String(s.prefix + key) }

// statusCode returns the HTTP status of a failed call, or 0.
func statusCode(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// wrap adds context to a non-sentinel error, leaving context errors
// recognisable by errors.Is.
func wrap(op, key string, err error) error {
	return fmt.Errorf("s3obj: %s %q: %w", op, key, err)
}

func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The SDK reads the body while it runs and retains nothing after, so
	// the caller's buffer is free again on return.
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           s.fullKey(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return wrap("put", key, err)
	}
	return nil
}

// PutIfAbsent runs its own retry loop with SDK retries off. An SDK retry
// of a conditional PUT whose first reply was lost would meet 412 on its
// own write and report ErrExists though the store changed. Here, once an
// attempt's outcome is unknown, a later 412 is checked by reading the
// object back: if it holds our bytes, the earlier attempt won (or another
// writer stored the very same bytes, which the contract's "retry with the
// same key and bytes" makes equivalent).
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ambiguous := false
	var lastErr error
	loop := retry.Policy{Attempts: s.piaAttempts, Min: putIfAbsentBackoffBase, Max: putIfAbsentBackoffMax}.Start(ctx, nil)
	for loop.Next() {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(s.bucket),
			Key:           s.fullKey(key),
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			IfNoneMatch:   aws.String("*"),
		}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return wrap("put-if-absent", key, err)
		}
		switch code := statusCode(err); {
		case code == http.StatusPreconditionFailed:
			if !ambiguous {
				return objstore.ErrExists
			}
			got, gerr := s.Get(ctx, key, 0, -1)
			if gerr != nil {
				return wrap("put-if-absent", key, fmt.Errorf("an earlier attempt may have written the object and reading it back failed: %w", gerr))
			}
			if bytes.Equal(got, data) {
				return nil
			}
			return objstore.ErrExists
		case code == http.StatusConflict:
			// A concurrent conditional write to the key is in flight; S3
			// did not apply ours. Retry and learn who won.
		case code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusRequestTimeout:
			// The request itself is wrong (auth, bucket): not applied,
			// and retrying will not help.
			return wrap("put-if-absent", key, err)
		default:
			// 5xx, throttling, network: it may have been applied.
			ambiguous = true
		}
		lastErr = err
	}
	if err := loop.Err(); !errors.Is(err, retry.ErrExhausted) {
		return err
	}
	return wrap("put-if-absent", key, fmt.Errorf("gave up after %d attempts: %w", s.piaAttempts, lastErr))
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, objstore.ErrInvalidRange
	}
	if length == 0 {
		// HTTP cannot ask for zero bytes; the size alone answers.
		size, err := s.size(ctx, key)
		if err != nil {
			return nil, err
		}
		if offset > size {
			return nil, objstore.ErrInvalidRange
		}
		return []byte{}, nil
	}
	for attempt := 0; ; attempt++ {
		in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: s.fullKey(key)}
		switch {
		case length > 0 && length <= math.MaxInt64-offset:
			in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
		case offset > 0:
			in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
		}
		var optFns []func(*s3.Options)
		if in.Range != nil {
			// A stored checksum covers the whole object, so a range cannot
			// be checked against it. S3 omits it on ranged replies; some
			// compatible servers (gofakes3) send it anyway, and the SDK
			// would then reject every ranged read.
			optFns = append(optFns, func(o *s3.Options) {
				o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			})
		}
		out, err := s.client.GetObject(ctx, in, optFns...)
		if err == nil {
			return readBody(key, out)
		}
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) || statusCode(err) == http.StatusNotFound {
			return nil, objstore.ErrNotFound
		}
		if statusCode(err) != http.StatusRequestedRangeNotSatisfiable {
			return nil, wrap("get", key, err)
		}
		// 416: the range starts at or past the end (S3 and gofakes3 both
		// refuse a range on an empty object too). Only offset > size is an
		// error for us.
		size, err := s.size(ctx, key)
		if err != nil {
			return nil, err
		}
		switch {
		case offset == size:
			return []byte{}, nil
		case offset > size:
			return nil, objstore.ErrInvalidRange
		case attempt >= maxGetRaceRetries:
			return nil, wrap("get", key, fmt.Errorf("range start %d refused though the object has %d bytes", offset, size))
		}
		// The object was replaced by a longer one between the two
		// requests; read again.
	}
}

func readBody(key string, out *s3.GetObjectOutput) ([]byte, error) {
	defer out.Body.Close()
	var buf bytes.Buffer
	if out.ContentLength != nil && *out.ContentLength > 0 {
		buf.Grow(int(*out.ContentLength))
	}
	if _, err := io.Copy(&buf, out.Body); err != nil {
		return nil, wrap("get", key, err)
	}
	if out.ContentLength != nil && int64(buf.Len()) != *out.ContentLength {
		return nil, wrap("get", key, fmt.Errorf("read %d bytes, response promised %d", buf.Len(), *out.ContentLength))
	}
	if buf.Len() == 0 {
		return []byte{}, nil
	}
	return buf.Bytes(), nil
}

// size returns the object's size via HEAD.
func (s *Store) size(ctx context.Context, key string) (int64, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: s.fullKey(key)})
	if err != nil {
		var nf *types.NotFound
		if errors.As(err, &nf) || statusCode(err) == http.StatusNotFound {
			return 0, objstore.ErrNotFound
		}
		return 0, wrap("head", key, err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: s.fullKey(key)})
	if err != nil && statusCode(err) != http.StatusNotFound {
		return wrap("delete", key, err)
	}
	return nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: s.fullKey(prefix)}
	if s.maxKeys > 0 {
		in.MaxKeys = aws.Int32(s.maxKeys)
	}
	var out []objstore.ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, wrap("list", prefix, err)
		}
		for _, obj := range page.Contents {
			k := aws.ToString(obj.Key)
			rel, ok := strings.CutPrefix(k, s.prefix)
			if !ok {
				return nil, wrap("list", prefix, fmt.Errorf("service returned key %q outside prefix %q", k, s.prefix))
			}
			if !strings.HasPrefix(rel, prefix) {
				// SeaweedFS 4.53 folds "//" in a list prefix, so
				// "a//" also lists "a/bc": S3 would not.
				continue
			}
			out = append(out, objstore.ObjectInfo{Key: rel, Size: aws.ToInt64(obj.Size)})
		}
	}
	// S3 already returns keys in byte order; S3-compatible services are
	// not all as careful.
	if !sort.SliceIsSorted(out, func(i, j int) bool { return out[i].Key < out[j].Key }) {
		sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	}
	return out, nil
}
