// Package s3log owns Strand's shared log on S3 and S3-compatible stores
// with conditional writes (AWS S3 since 2024, SeaweedFS, MinIO; gofakes3
// in tests): a loglet under a key prefix, written one object per position
// with PutObject If-None-Match: "*", and the MetaStore that keeps a
// VirtualLog's chain in one object replaced with If-Match on its ETag.
// The ordering, ambiguity, seal and trim rules are slotlog's; this
// package maps slots onto objects.
//
// # Keys
//
// Under a loglet's prefix P (which ends in '/', or is empty):
//
//	P slots/<16 hex digits of ^pos>   one slot; the bitwise complement makes
//	                                  listing order newest first
//	P trim                            the trim point, in decimal
//
// and a VirtualLog's chain is the object chain.json under its prefix.
//
// Why newest first: ListObjectsV2 lists in ascending key order only, and
// from a key forward only. With positions complemented, one LIST of
// Window+1 keys returns the highest slots, which is all the tail search
// needs (slotlog.Config.TopOnly), however long the log: a reader that
// starts cold pays one LIST, not a walk through every slot since the trim
// point. Reads go by key, not by listing, so they do not care about the
// order; trimming lists the slots below the trim point with StartAfter.
// S3 Express directory buckets list in no order and are not supported.
//
// # Objects
//
// Every slot object starts with a header that repeats its position, so
// an object in the wrong key is caught when read:
//
//	0  "SLT1"        magic
//	4  kind          1 entry, 2 seal
//	5  0 0 0
//	8  pos           big-endian uint64
//	16 token         16 bytes
//	32 crc32c(data)  big-endian; entries only
//	36 len(data)     big-endian uint32; entries only
//	40 data
//
// A seal object is the first 32 bytes alone, so a listing tells a seal
// (32 bytes) from an entry (40 or more) by size.
//
// # Costs
//
// An append is one PUT when it wins its slot; a lost race adds a 412 and
// a ranged GET of the occupant's header. The tail is a LIST of Window+1
// keys plus a GET of the trim point. Reads are one GET per entry, several
// at once. S3 takes about 3,500 PUT/s per prefix and tens of ms per PUT.
package s3log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/objstore/s3obj"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
)

const (
	defaultRegion = "us-east-1"
	// Window is the format's slot window (slotlog.Config.Window): every
	// handle of a log must use it. S3's latency is tens of ms, so a
	// handle keeps more puts in flight than on DynamoDB; the tail search
	// lists Window+1 keys, well within one LIST page.
	Window = 32
	// DefaultMaxEntryBytes bounds an entry; S3 allows far more, but a
	// log entry is a batch of metadata commands.
	DefaultMaxEntryBytes = 16 << 20
	// MaxEntryBytesLimit bounds Options.MaxEntryBytes, and so what one
	// read may allocate for an entry whichever handle wrote it.
	MaxEntryBytesLimit = 64 << 20
	// maxReadEntries bounds one ReadNext (one GET each).
	maxReadEntries = 32
	// readConcurrency bounds the GETs one ReadNext runs at once.
	readConcurrency = 8
	// maxReadBytes stops a ReadNext from starting more GETs once it
	// holds this much.
	maxReadBytes = 8 << 20
)

// Options tune one loglet handle. The zero value is the default.
type Options struct {
	// InFlight bounds concurrent slot writes; at most Window. Default
	// Window.
	InFlight int
	// MaxEntryBytes is the largest entry. Default DefaultMaxEntryBytes.
	MaxEntryBytes int
	// PutAttempts and RetryBackoff: see slotlog.Config.
	PutAttempts  int
	RetryBackoff time.Duration
	// TrimGrace: see slotlog.Config. Every handle of a log must agree.
	TrimGrace time.Duration
	// Clock: see slotlog.Config. Default clock.Real.
	Clock clock.Clock
}

// newClient builds an S3 client from cfg's connection fields, as s3obj
// does for the object store.
func newClient(ctx context.Context, cfg s3obj.Config) (*s3.Client, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3log: bucket is required")
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("s3log: static credentials need both an access key id and a secret")
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3log: loading AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		if cfg.HTTPClient != nil {
			// Set on the client, not through LoadDefaultConfig, which
			// insists on a client it can add AWS_CA_BUNDLE to.
			o.HTTPClient = cfg.HTTPClient
		}
	}), nil
}

// Open opens a handle on the loglet under cfg.Bucket and cfg.Prefix (end
// it with '/' for a folder); a prefix never written is an empty loglet.
// The bucket must exist.
func Open(ctx context.Context, cfg s3obj.Config, opts Options) (*slotlog.Loglet, error) {
	client, err := newClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	maxEntry := opts.MaxEntryBytes
	switch {
	case maxEntry <= 0:
		maxEntry = DefaultMaxEntryBytes
	case maxEntry > MaxEntryBytesLimit:
		return nil, fmt.Errorf("s3log: MaxEntryBytes %d exceeds %d", maxEntry, MaxEntryBytesLimit)
	}
	listKeys := cfg.MaxKeysPerList
	if listKeys <= 0 {
		listKeys = 1000
	}
	return slotlog.New(slotlog.Config{
		Slots:          &store{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix, listKeys: listKeys},
		Name:           "s3://" + cfg.Bucket + "/" + cfg.Prefix,
		Window:         Window,
		InFlight:       opts.InFlight,
		TopOnly:        true,
		MaxEntryBytes:  maxEntry,
		MaxReadEntries: maxReadEntries,
		PutAttempts:    opts.PutAttempts,
		RetryBackoff:   opts.RetryBackoff,
		TrimGrace:      opts.TrimGrace,
		Clock:          opts.Clock,
	})
}

const (
	magic       = "SLT1"
	sealSize    = 32
	entryHeader = 40
)

// encodeSlot returns a slot's object body.
func encodeSlot(s slotlog.Slot) ([]byte, error) {
	switch s.Kind {
	case slotlog.KindSeal:
		if len(s.Data) > 0 {
			return nil, fmt.Errorf("s3log: seal with %d bytes of data", len(s.Data))
		}
	case slotlog.KindEntry:
	default:
		return nil, fmt.Errorf("s3log: slot %d of kind %v", s.Pos, s.Kind)
	}
	size := sealSize
	if s.Kind == slotlog.KindEntry {
		size = entryHeader + len(s.Data)
	}
	b := make([]byte, size)
	copy(b, magic)
	b[4] = byte(s.Kind)
	binary.BigEndian.PutUint64(b[8:], uint64(s.Pos))
	copy(b[16:32], s.Token[:])
	if s.Kind == slotlog.KindEntry {
		binary.BigEndian.PutUint32(b[32:], slotlog.Checksum(s.Data))
		binary.BigEndian.PutUint32(b[36:], uint32(len(s.Data)))
		copy(b[entryHeader:], s.Data)
	}
	return b, nil
}

// decodeSlot parses an object body read from slot p's key. With header
// only, b may be just the first entryHeader bytes (a ranged read) and
// the data is neither returned nor checked.
func decodeSlot(p sharedlog.Pos, b []byte, headerOnly bool) (slotlog.Slot, error) {
	bad := func(format string, args ...any) (slotlog.Slot, error) {
		return slotlog.Slot{}, fmt.Errorf("%w: slot %d: %s", slotlog.ErrCorrupt, p, fmt.Sprintf(format, args...))
	}
	if len(b) < sealSize || string(b[:4]) != magic {
		return bad("no header (%d bytes)", len(b))
	}
	if b[5]|b[6]|b[7] != 0 {
		return bad("reserved header bytes set")
	}
	s := slotlog.Slot{Pos: sharedlog.Pos(binary.BigEndian.Uint64(b[8:])), Kind: slotlog.Kind(b[4])}
	copy(s.Token[:], b[16:32])
	if s.Pos != p {
		return bad("object holds position %d", s.Pos)
	}
	switch s.Kind {
	case slotlog.KindSeal:
		if len(b) != sealSize {
			return bad("seal of %d bytes", len(b))
		}
		return s, nil
	case slotlog.KindEntry:
	default:
		return bad("kind %d", b[4])
	}
	if len(b) < entryHeader {
		return bad("entry header of %d bytes", len(b))
	}
	if headerOnly {
		return s, nil
	}
	n := binary.BigEndian.Uint32(b[36:])
	if int64(n) != int64(len(b)-entryHeader) {
		return bad("length %d, object holds %d bytes of data", n, len(b)-entryHeader)
	}
	s.Data = b[entryHeader:]
	if binary.BigEndian.Uint32(b[32:]) != slotlog.Checksum(s.Data) {
		return bad("checksum mismatch")
	}
	return s, nil
}

// statusCode returns the HTTP status of a failed call, or 0.
func statusCode(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// classify marks errors the service definitely did not apply and that
// repeating will not fix: a 4xx other than timeouts, throttling and the
// conditional-write statuses the callers handle.
func classify(op string, err error) error {
	switch code := statusCode(err); {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests,
		code == http.StatusConflict, code == http.StatusPreconditionFailed:
	case code >= 400 && code < 500:
		return fmt.Errorf("s3log: %s: %w: %w", op, slotlog.ErrRejected, err)
	}
	return fmt.Errorf("s3log: %s: %w", op, err)
}

func readAll(op string, body io.ReadCloser, limit int64) ([]byte, error) {
	defer body.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(body, limit+1)); err != nil {
		return nil, fmt.Errorf("s3log: %s: %w", op, err)
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("s3log: %s: object larger than %d bytes", op, limit)
	}
	return buf.Bytes(), nil
}
