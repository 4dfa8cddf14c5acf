package logurl

import (
	"context"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/dynamolog"
	"github.com/strandkafka/strand/internal/sharedlog/s3log"
)

// The AWS backends, beside the remotes in remote.go:
//
//	dynamodb://table/path?endpoint=URL&region=R
//	    loglet: the items of log id path (dynamolog)
//	    VirtualLog: the chain item named path, segments path/seg-NNNNNNNN
//	s3://bucket/prefix?endpoint=URL&region=R&path-style=true
//	    loglet: the objects under prefix/ (s3log)
//	    VirtualLog: the chain in prefix/chain.json, segments prefix/seg-NNNNNNNN
//
// Credentials come from the AWS default chain. Segment names follow
// sharedlog.DefaultNextURL, which keeps the query.
func init() {
	remotes["dynamodb"] = remote{
		open: func(ctx context.Context, rawURL string) (sharedlog.Loglet, error) {
			return dynamolog.OpenURL(ctx, rawURL, dynamolog.Options{})
		},
		metaStore: func(rawURL string) (sharedlog.MetaStore, error) {
			return dynamolog.OpenMetaStoreURL(rawURL)
		},
		firstSegment: dynamolog.FirstSegmentURL,
	}
	remotes["s3"] = remote{
		open: func(ctx context.Context, rawURL string) (sharedlog.Loglet, error) {
			return s3log.OpenURL(ctx, rawURL, s3log.Options{})
		},
		metaStore: func(rawURL string) (sharedlog.MetaStore, error) {
			return s3log.OpenMetaStoreURL(rawURL)
		},
		firstSegment: s3log.FirstSegmentURL,
	}
}
