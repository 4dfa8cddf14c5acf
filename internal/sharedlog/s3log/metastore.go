package s3log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strandkafka/strand/internal/objstore/s3obj"
	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
)

const (
	// ChainObject is the MetaStore's object under a VirtualLog's prefix.
	ChainObject = "chain.json"
	// casAttempts bounds a CAS against 409s and unknown outcomes.
	casAttempts = 4
)

// casRetry paces the tries of one CAS: after an unknown outcome the next
// read tells whether the earlier try won.
var casRetry = retry.Policy{Attempts: casAttempts, Min: 50 * time.Millisecond, Max: time.Second}

// MetaStore is a sharedlog.MetaStore in one object. CAS reads the object
// and replaces it with If-Match on the ETag it read (the first one with
// If-None-Match: "*"). Safe for concurrent use.
type MetaStore struct {
	client *s3.Client
	bucket string
	key    string
}

var _ sharedlog.MetaStore = (*MetaStore)(nil)

// NewMetaStore returns the register kept in cfg.Prefix + ChainObject. It
// does not contact the service; the bucket must exist.
func NewMetaStore(ctx context.Context, cfg s3obj.Config) (*MetaStore, error) {
	client, err := newClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &MetaStore{client: client, bucket: cfg.Bucket, key: cfg.Prefix + ChainObject}, nil
}

func (m *MetaStore) Get(ctx context.Context) (sharedlog.Chain, error) {
	if err := ctx.Err(); err != nil {
		return sharedlog.Chain{}, err
	}
	b, _, err := m.read(ctx)
	if err != nil || b == nil {
		return sharedlog.Chain{}, err
	}
	return sharedlog.DecodeChain(b)
}

// read returns the stored chain and its ETag; nil if there is none.
func (m *MetaStore) read(ctx context.Context) ([]byte, string, error) {
	out, err := m.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(m.key)})
	if err != nil {
		if isNotFound(err) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("s3log: read chain: %w", err)
	}
	b, err := readAll("read chain", out.Body, sharedlog.MaxChainBytes)
	if err != nil {
		return nil, "", err
	}
	return b, aws.ToString(out.ETag), nil
}

func (m *MetaStore) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sharedlog.CheckCAS(expect, next); err != nil {
		return err
	}
	b, err := sharedlog.EncodeChain(next)
	if err != nil {
		return err
	}
	conflict := fmt.Errorf("s3log: CAS expecting version %d: %w", expect, sharedlog.ErrConflict)
	ambiguous := false
	var lastErr error
	loop := casRetry.Start(ctx, nil)
	for loop.Next() {
		cur, etag, err := m.read(ctx)
		if err != nil {
			if ambiguous {
				return fmt.Errorf("s3log: CAS outcome unknown: %w", err)
			}
			return err
		}
		if ambiguous && bytes.Equal(cur, b) {
			return nil // an earlier try stored it
		}
		var curVersion uint64
		if cur != nil {
			c, err := sharedlog.DecodeChain(cur)
			if err != nil {
				return err
			}
			curVersion = c.Version
		}
		if curVersion != expect {
			return conflict
		}
		in := &s3.PutObjectInput{
			Bucket:        aws.String(m.bucket),
			Key:           aws.String(m.key),
			Body:          bytes.NewReader(b),
			ContentLength: aws.Int64(int64(len(b))),
			ContentType:   aws.String("application/json"),
		}
		if cur == nil {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(etag)
		}
		_, err = m.client.PutObject(ctx, in, noRetry)
		switch code := statusCode(err); {
		case err == nil:
			return nil
		case code == http.StatusPreconditionFailed:
			if ambiguous {
				continue // the next read tells whether an earlier try won
			}
			return conflict
		case code == http.StatusConflict:
			// A racing conditional write is in progress; ours was not
			// applied. Read again.
		case ctx.Err() != nil:
			return fmt.Errorf("s3log: CAS outcome unknown: %w", err)
		case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests && !ambiguous:
			return fmt.Errorf("s3log: CAS: %w", err) // not applied
		default:
			ambiguous = true
		}
		lastErr = err
	}
	if err := loop.Err(); !errors.Is(err, retry.ErrExhausted) {
		return fmt.Errorf("s3log: CAS outcome unknown: %w (after: %w)", err, lastErr)
	}
	return fmt.Errorf("s3log: CAS outcome unknown after %d attempts: %w", casAttempts, lastErr)
}
